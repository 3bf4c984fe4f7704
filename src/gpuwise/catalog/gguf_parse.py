"""A bounded reader of GGUF headers (metadata and tensor infos), never the tensor data.

Why not `gguf.GGUFReader`: it trusts the counts in the file, so an array claiming 2**40
elements makes it loop for hours, and it builds one numpy object per vocabulary token.
This reader walks a read-only memory map with `struct`, checks every count against the
bytes that are left, keeps only short values, and turns every defect into a DataError
that names the file. The layout follows the GGUF specification (ggml docs/gguf.md,
versions 2 and 3); the ggml type sizes come from the `gguf` package (GGML_QUANT_SIZES).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text, os_reason
from gpuwise.textsafe import clean_text

GGUF_MAGIC = b"GGUF"
_VERSIONS = (2, 3)  # v1 (2023) used 32-bit counts; llama.cpp dropped it
_DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT in ggml/include/gguf.h
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_KEY_BYTES = 65_535  # the spec limits keys to 65535 bytes
_KEEP_STRING_BYTES = 1 << 20  # longer strings (chat templates are ~10 KiB) are skipped, not read
_KEEP_ARRAY_ITEMS = 4096  # per-layer arrays are kept; token lists are only counted
_MAX_DEPTH = 3  # arrays of arrays of arrays is already more than any real file has
# GGUF value types (gguf.md): id -> (struct code, size); 8 = string, 9 = array
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4),
    6: ("f", 4), 7: ("?", 1), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8),
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFArray:
    """An array value: its length always, its items only when short enough to keep."""

    count: int
    items: tuple[Any, ...] | None


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    type_id: int
    shape: tuple[int, ...]  # ggml order: shape[0] is the contiguous (row) dimension
    n_elements: int
    n_bytes: int


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    fields: dict[str, Any]
    tensors: tuple[GGUFTensor, ...]


def _shown(text: str) -> str:
    """A key or tensor name as an error message shows it: one printable line (no terminal escapes)."""
    return clean_text(text, 80)


def _bad(path: Path, what_en: str, what_zh: str) -> DataError:
    return DataError(Text(f"{path} is not a readable GGUF file: {what_en}.",
                          f"{path} 不是可读的 GGUF 文件：{what_zh}。"))


class _Cursor:
    """Checked little- or big-endian reads from a buffer; every read stays inside it."""

    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf = buf
        self.path = path
        self.pos = 0
        self.order = "<"

    @property
    def left(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.left:
            raise _bad(self.path, f"truncated while reading {what} at byte {self.pos}",
                       f"读取第 {self.pos} 字节处的 {what} 时文件已截断")

    def unpack(self, code: str, size: int, what: str) -> Any:
        self.need(size, what)
        value = struct.unpack_from(self.order + code, self.buf, self.pos)[0]
        self.pos += size
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("I", 4, what))

    def u64(self, what: str) -> int:
        return int(self.unpack("Q", 8, what))

    def string(self, what: str, limit: int | None = None) -> str | None:
        """A GGUF string; None (skipped, not read) when longer than `limit`."""
        length = self.u64(what)
        self.need(length, what)
        start, self.pos = self.pos, self.pos + length
        if limit is not None and length > limit:
            return None
        return bytes(self.buf[start:self.pos]).decode("utf-8", errors="replace")

    def count(self, what: str, min_item_bytes: int) -> int:
        """A u64 count, rejected when the items could not fit in the bytes that are left."""
        n = self.u64(what)
        if n > self.left // max(min_item_bytes, 1):
            raise _bad(self.path, f"{what} claims {n} entries, more than the file can hold",
                       f"{what} 声称有 {n} 项，超出文件所能容纳")
        return n


def _array(cur: _Cursor, depth: int) -> GGUFArray:
    item_type = cur.u32("array type")
    if item_type in _SCALARS:
        code, size = _SCALARS[item_type]
        n = cur.count("array length", size)
        cur.need(n * size, "array items")
        items = None
        if n <= _KEEP_ARRAY_ITEMS:
            items = struct.unpack_from(f"{cur.order}{n}{code}", cur.buf, cur.pos)
        cur.pos += n * size
        return GGUFArray(n, items)
    if item_type not in (_STRING, _ARRAY):
        raise _bad(cur.path, f"unknown array item type {item_type}", f"未知的数组元素类型 {item_type}")
    n = cur.count("array length", 8 if item_type == _STRING else 12)
    if n > _KEEP_ARRAY_ITEMS and item_type == _STRING:  # a token list: count it, skip the text
        for _ in range(n):  # bounded: each item consumes at least 8 bytes of the file
            length = cur.u64("string length")
            cur.need(length, "string")
            cur.pos += length
        return GGUFArray(n, None)
    kept: list[Any] = []
    for _ in range(n):
        item = _value(cur, item_type, depth + 1, limit=4096)
        if n <= _KEEP_ARRAY_ITEMS:
            kept.append(item)
    return GGUFArray(n, tuple(kept) if n <= _KEEP_ARRAY_ITEMS else None)


def _value(cur: _Cursor, vtype: int, depth: int, limit: int = _KEEP_STRING_BYTES) -> Any:
    if vtype in _SCALARS:
        code, size = _SCALARS[vtype]
        return cur.unpack(code, size, "value")
    if vtype == _STRING:
        return cur.string("string value", limit)
    if vtype == _ARRAY:
        if depth >= _MAX_DEPTH:
            raise _bad(cur.path, "arrays nested too deeply", "数组嵌套过深")
        return _array(cur, depth)
    raise _bad(cur.path, f"unknown value type {vtype}", f"未知的值类型 {vtype}")


def _start(cur: _Cursor) -> tuple[int, int, int]:
    cur.need(4, "magic")
    if bytes(cur.buf[0:4]) != GGUF_MAGIC:
        raise _bad(cur.path, "it does not start with the magic bytes 'GGUF'", "文件开头不是魔数“GGUF”")
    cur.pos = 4
    version = cur.u32("version")
    if version & 0xFFFF == 0:  # written on a big-endian machine (gguf.md: byte order by version)
        cur.order = ">"
        version = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in _VERSIONS:
        raise _bad(cur.path, f"GGUF version {version} is not supported (2 and 3 are)",
                   f"不支持 GGUF 版本 {version}（支持 2 和 3）")
    tensors = cur.count("tensor count", 24)  # a tensor info takes at least 24 bytes
    kvs = cur.count("metadata count", 13)  # a key/value pair takes at least 13 bytes
    return version, tensors, kvs


def _fields(cur: _Cursor, n: int) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for _ in range(n):
        key = cur.string("metadata key", _MAX_KEY_BYTES)
        if key is None:
            raise _bad(cur.path, "a metadata key is longer than 65535 bytes", "元数据键超过 65535 字节")
        if key in fields:
            shown = _shown(key)
            raise _bad(cur.path, f"metadata key '{shown}' appears twice", f"元数据键“{shown}”出现两次")
        fields[key] = _value(cur, cur.u32("value type"), 0)
    return fields


def _tensor_infos(cur: _Cursor, n: int, sizes: dict[int, tuple[int, int]]) -> list[tuple[GGUFTensor, int]]:
    infos: list[tuple[GGUFTensor, int]] = []
    for _ in range(n):
        name = cur.string("tensor name", _MAX_KEY_BYTES) or "?"
        shown = _shown(name)
        n_dims = cur.u32("tensor rank")
        if not 1 <= n_dims <= _MAX_DIMS:
            raise _bad(cur.path, f"tensor '{shown}' has {n_dims} dimensions", f"张量“{shown}”有 {n_dims} 维")
        shape = tuple(cur.u64("tensor shape") for _ in range(n_dims))
        type_id = cur.u32("tensor type")
        offset = cur.u64("tensor offset")
        if type_id not in sizes:
            raise _bad(cur.path, f"tensor '{shown}' has unknown ggml type {type_id}",
                       f"张量“{shown}”的 ggml 类型 {type_id} 未知")
        block, type_bytes = sizes[type_id]
        if shape[0] % block:
            raise _bad(cur.path, f"tensor '{shown}' row of {shape[0]} is not a multiple of its block {block}",
                       f"张量“{shown}”的行长 {shape[0]} 不是块大小 {block} 的整数倍")
        elements = 1
        for dim in shape:
            elements *= dim
        infos.append((GGUFTensor(name, type_id, shape, elements, elements // block * type_bytes), offset))
    return infos


def _alignment(cur: _Cursor, fields: dict[str, Any]) -> int:
    value = fields.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or value & (value - 1):
        raise _bad(cur.path, f"general.alignment {value!r} is not a power of two",
                   f"general.alignment {value!r} 不是 2 的幂")
    return value


def read_gguf_header(path: Path, sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    """Metadata and tensor infos of the GGUF file at `path`; `sizes`: ggml type id -> (block, bytes)."""
    from gpuwise.safefile import open_regular

    try:
        with open_regular(path) as fh:  # a FIFO, device or folder is refused, never waited on
            if os.fstat(fh.fileno()).st_size < 24:
                raise _bad(path, "it is shorter than a GGUF header (24 bytes)", "文件短于 GGUF 头部（24 字节）")
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(_Cursor(buf, path), sizes)
    except OSError as exc:
        raise DataError(Text(f"Cannot read {path}: {exc.strerror or exc}.",
                             f"无法读取 {path}：{os_reason(exc).zh}。")) from exc


def _parse(cur: _Cursor, sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    version, n_tensors, n_kvs = _start(cur)
    fields = _fields(cur, n_kvs)
    infos = _tensor_infos(cur, n_tensors, sizes)
    align = _alignment(cur, fields)
    data_start = -(-cur.pos // align) * align
    seen: set[str] = set()
    for tensor, offset in infos:
        shown = _shown(tensor.name)
        if tensor.name in seen:
            raise _bad(cur.path, f"tensor '{shown}' appears twice", f"张量“{shown}”出现两次")
        seen.add(tensor.name)
        if data_start + offset + tensor.n_bytes > len(cur.buf):
            raise _bad(cur.path, f"tensor '{shown}' ends past the end of the file (truncated download?)",
                       f"张量“{shown}”超出文件末尾（下载不完整？）")
    return GGUFHeader(cur.path, version, fields, tuple(t for t, _ in infos))
