"""Read safetensors headers with the standard library: exact stored bytes, never the weights.

Format (https://huggingface.co/docs/safetensors, safetensors/src/tensor.rs): an 8-byte
little-endian header length N, N bytes of JSON mapping each tensor name to
{dtype, shape, data_offsets: [begin, end]} (offsets into the data that follows), plus an
optional "__metadata__" map. Every defect becomes a DataError that names the file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuwise.catalog._datafile import read_json_object
from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.params import count_params
from gpuwise.errors import DataError
from gpuwise.i18n import Text, os_reason

MAX_HEADER_BYTES = 100 * 2**20  # the safetensors library's own limit (MAX_HEADER_SIZE) is 100 MB
MAX_INDEX_BYTES = 64 * 2**20  # a 1,000-shard index is a few MiB
_MAX_RANK = 16
# Bits per element of each safetensors dtype (safetensors/src/tensor.rs, Dtype::bitsize).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
# Tensor-name endings of packed or auxiliary quantization tensors: their elements are not
# parameters (AutoGPTQ/AutoAWQ qweight/qzeros/scales/g_idx, compressed-tensors weight_packed,
# bitsandbytes absmax/quant_map/quant_state, FP8 scales).
_QUANT_SUFFIXES = (".qweight", ".qzeros", ".scales", ".g_idx", ".weight_packed", ".weight_shape",
                   ".weight_scale", ".weight_zero_point", ".weight_scale_inv", ".input_scale",
                   ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map", ".SCB",
                   ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4")
_PACKED_SUFFIXES = (".qweight", ".qzeros", ".weight_packed")


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class CheckpointHeader:
    """All tensors of one checkpoint (one file or every shard of an index)."""

    files: tuple[str, ...]
    tensors: tuple[TensorEntry, ...]

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def total_elements(self) -> int:
        return sum(t.elements for t in self.tensors)

    @property
    def packed(self) -> bool:
        """True when some tensors hold packed low-bit weights (GPTQ/AWQ int4 in I32, ...)."""
        return any(t.name.endswith(_PACKED_SUFFIXES) for t in self.tensors)

    def bytes_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.nbytes
        return out


def _bad(origin: str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{origin} is not a valid safetensors file: {en}.",
                          f"{origin} 不是有效的 safetensors 文件：{zh}。"))


def _int_list(value: Any, length: int | None = None) -> list[int] | None:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return None
    return value


def tensor_entry(name: str, info: Any, origin: str) -> tuple[TensorEntry, int, int]:
    """One checked tensor description and its [begin, end) data offsets."""
    if not isinstance(info, Mapping):
        raise _bad(origin, f"the entry of '{name}' is not an object", f"“{name}”的条目不是对象")
    dtype = info.get("dtype")
    if dtype not in DTYPE_BITS:
        raise _bad(origin, f"tensor '{name}' has unknown dtype {dtype!r:.30}",
                   f"张量“{name}”的 dtype {dtype!r:.30} 未知")
    shape = _int_list(info.get("shape"))
    offsets = _int_list(info.get("data_offsets"), 2)
    if shape is None or len(shape) > _MAX_RANK:
        raise _bad(origin, f"tensor '{name}' has a bad shape", f"张量“{name}”的 shape 无效")
    if offsets is None or offsets[0] > offsets[1]:
        raise _bad(origin, f"tensor '{name}' has bad data_offsets {info.get('data_offsets')!r:.60}",
                   f"张量“{name}”的 data_offsets 无效：{info.get('data_offsets')!r:.60}")
    entry = TensorEntry(name, str(dtype), tuple(shape), 0)
    bits = entry.elements * DTYPE_BITS[entry.dtype]
    if bits % 8 or bits // 8 != offsets[1] - offsets[0]:
        raise _bad(origin, f"tensor '{name}' is {offsets[1] - offsets[0]} bytes, "
                           f"but {dtype} {shape} needs {bits / 8:g}",
                   f"张量“{name}”占 {offsets[1] - offsets[0]} 字节，但 {dtype} {shape} 需要 {bits / 8:g}")
    return replace(entry, nbytes=bits // 8), offsets[0], offsets[1]


def tensors_from_header(header: Any, origin: str, data_size: int | None = None) -> tuple[TensorEntry, ...]:
    """Check a decoded header; with `data_size`, the offsets must tile the data exactly."""
    if not isinstance(header, dict):
        raise _bad(origin, "the header is not a JSON object", "头部不是 JSON 对象")
    spans: list[tuple[int, int, str]] = []
    entries: list[TensorEntry] = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        entry, begin, end = tensor_entry(name, info, origin)
        entries.append(entry)
        spans.append((begin, end, name))
    spans.sort()
    position = 0
    for begin, end, name in spans:
        if begin != position:
            raise _bad(origin, f"tensor '{name}' starts at byte {begin}, expected {position} (overlap or gap)",
                       f"张量“{name}”起始于第 {begin} 字节，应为 {position}（重叠或空洞）")
        position = end
    if data_size is not None and position != data_size:
        what = "truncated" if position > data_size else "has trailing bytes"
        raise _bad(origin, f"tensors need {position} data bytes, the file holds {data_size} ({what})",
                   f"张量需要 {position} 字节数据，文件只有 {data_size} 字节")
    return tuple(entries)


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The decoded JSON header of one .safetensors file and the size of the data after it.

    Only the header is read."""
    from gpuwise.safefile import loads_json, open_regular

    with open_regular(path) as fh:  # a FIFO, device or folder is refused, never waited on
        try:
            size = os.fstat(fh.fileno()).st_size  # a regular file's own size: the data after the header
            prefix = fh.read(8)
        except OSError as exc:
            raise DataError(Text(f"Cannot read {path}: {exc.strerror or exc}.",
                                 f"无法读取 {path}：{os_reason(exc).zh}。")) from exc
        if len(prefix) < 8:
            raise _bad(str(path), "shorter than the 8-byte header length", "短于 8 字节的头部长度")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise _bad(str(path), f"header length {length} is absurd (limit {MAX_HEADER_BYTES})",
                       f"头部长度 {length} 不合理（上限 {MAX_HEADER_BYTES}）")
        if 8 + length > size:
            raise _bad(str(path), f"header of {length} bytes runs past the end of the {size}-byte file",
                       f"{length} 字节的头部超出了 {size} 字节的文件末尾")
        try:
            raw = fh.read(length)  # at most MAX_HEADER_BYTES, checked above
        except OSError as exc:
            raise DataError(Text(f"Cannot read {path}: {exc.strerror or exc}.",
                                 f"无法读取 {path}：{os_reason(exc).zh}。")) from exc
        if len(raw) < length:
            raise _bad(str(path), "truncated inside the header", "头部被截断")
    try:
        header = loads_json(raw, "header")  # bounded depth and number length; NaN refused
    except DataError as exc:
        raise _bad(str(path), f"the header is not UTF-8 JSON ({exc.message.en})",
                   f"头部不是 UTF-8 JSON（{exc.message.zh}）") from exc
    if not isinstance(header, dict):
        raise _bad(str(path), "the header is not a JSON object", "头部不是 JSON 对象")
    return header, size - 8 - length


def read_safetensors(path: Path) -> CheckpointHeader:
    """Every tensor of one .safetensors file, with its exact byte size."""
    header, data_size = read_header(path)
    return CheckpointHeader((path.name,), tensors_from_header(header, str(path), data_size))


def _weight_map(index_path: Path) -> dict[str, str]:
    index = read_json_object(index_path, MAX_INDEX_BYTES, "safetensors index")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise DataError(Text(f"{index_path} has no weight_map of tensor -> file name.",
                             f"{index_path} 缺少“张量 -> 文件名”的 weight_map。"))
    return weight_map


def read_index(index_path: Path) -> CheckpointHeader:
    """A sharded checkpoint: the shards named by model.safetensors.index.json, each read once."""
    folder = index_path.parent
    weight_map = _weight_map(index_path)
    tensors: list[TensorEntry] = []
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        shard_path = folder / shard
        if Path(shard).is_absolute() or ".." in Path(shard).parts:
            raise DataError(Text(f"{index_path} names a shard outside its folder: '{shard}'.",
                                 f"{index_path} 引用了文件夹之外的分片：“{shard}”。"))
        if not shard_path.is_file():
            raise DataError(Text(f"{index_path} lists shard '{shard}', which is not in {folder}.",
                                 f"{index_path} 列出的分片“{shard}”不在 {folder} 中。"),
                            hint=Text("Download the missing shard, or pass the config.json alone.",
                                      "请下载缺失的分片，或只传入 config.json。"))
        part = read_safetensors(shard_path)
        names = {t.name for t in part.tensors}
        absent = [t for t, f in weight_map.items() if f == shard and t not in names]
        if absent:
            raise DataError(Text(f"{index_path} places '{absent[0]}' in {shard}, but that shard has no such tensor.",
                                 f"{index_path} 说“{absent[0]}”在 {shard} 中，但该分片没有这个张量。"))
        tensors.extend(part.tensors)
    return CheckpointHeader(tuple(shards), tuple(tensors))


def read_checkpoint(folder: Path) -> CheckpointHeader | None:
    """The safetensors checkpoint in a model folder: its index, else model.safetensors, else
    every .safetensors file; None when there is none."""
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        indexes = sorted(folder.glob("*.safetensors.index.json"))
        index = indexes[0] if len(indexes) == 1 else index
    if index.is_file():
        return read_index(index)
    single = folder / "model.safetensors"
    files = [single] if single.is_file() else sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    parts = [read_safetensors(f) for f in files]
    return CheckpointHeader(tuple(f.name for f in files), tuple(t for p in parts for t in p.tensors))


def with_checkpoint(arch: ModelArch, ckpt: CheckpointHeader) -> ModelArch:
    """`arch` with the checkpoint's exact stored bytes and its parameter count.

    Packed checkpoints (GPTQ/AWQ int4 in I32, compressed-tensors, bitsandbytes) hold fewer
    elements than parameters, plus scales and zero points: their parameter count comes from
    the architecture (count_params), their bytes stay exactly as stored.
    """
    counted = count_params(arch).total
    stored = ckpt.total_bytes
    if arch.quant is not None or ckpt.packed:
        aux = sum(t.elements for t in ckpt.tensors if t.name.endswith(_QUANT_SUFFIXES))
        note = Text(f"The checkpoint stores quantized weights ({stored:,} bytes in {len(ckpt.tensors)} tensors, "
                    f"{aux:,} elements packed or scales): the parameter count {counted:,} comes from the "
                    "architecture, not from the tensor headers.",
                    f"检查点存的是量化权重（{len(ckpt.tensors)} 个张量共 {stored:,} 字节，"
                    f"其中 {aux:,} 个元素为打包值或缩放因子）："
                    f"参数量 {counted:,} 按结构计算，而非取自张量头部。")
        return replace(arch, checkpoint_bytes=stored, checkpoint_params=counted, notes=arch.notes + (note,))
    elements = ckpt.total_elements
    notes = arch.notes
    if counted and abs(elements - counted) > 0.02 * counted:  # 2%: more than biases or buffers
        notes += (Text(f"The checkpoint holds {elements:,} elements but the architecture counts "
                       f"{counted:,} parameters: the checkpoint's figure is used for the weights.",
                       f"检查点有 {elements:,} 个元素，而按结构计算为 {counted:,} 个参数：权重以检查点为准。"),)
    return replace(arch, checkpoint_bytes=stored, checkpoint_params=elements, notes=notes)
