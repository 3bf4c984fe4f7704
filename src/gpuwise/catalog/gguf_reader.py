"""A ModelArch from a GGUF file (llama.cpp, Ollama blobs), and GGUF bits per weight.

The header's `{arch}.*` keys are translated into the config.json keys that
`arch_from_config` already checks, so one code path validates every source; the tensor
infos give the exact stored bytes and element count. Only the header is read.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwise.catalog.arch import ModelArch, Quantization
from gpuwise.catalog.gguf_parse import GGUFArray, GGUFHeader, GGUFTensor, read_gguf_header
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.errors import DataError, GpuwiseError
from gpuwise.i18n import Text
from gpuwise.textsafe import clean_text
from gpuwise.tomlcache import load_toml

_TABLE = Path(__file__).resolve().parent.parent / "data" / "gguf_types.toml"
_SPLIT = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
# `{arch}.<key>` in GGUF -> config.json key (llama.cpp src/llama-arch.cpp LLM_KV_NAMES)
_KEYS = {
    "embedding_length": "hidden_size", "block_count": "num_hidden_layers",
    "attention.head_count": "num_attention_heads", "attention.head_count_kv": "num_key_value_heads",
    "feed_forward_length": "intermediate_size", "context_length": "max_position_embeddings",
    "expert_count": "num_local_experts", "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
    "expert_shared_feed_forward_length": "shared_expert_intermediate_size",
    "expert_shared_count": "n_shared_experts", "leading_dense_block_count": "first_k_dense_replace",
    "attention.sliding_window": "sliding_window", "attention.kv_lora_rank": "kv_lora_rank",
    "attention.q_lora_rank": "q_lora_rank",
}
_DTYPES = {"ALL_F32": "float32", "MOSTLY_F16": "float16", "MOSTLY_BF16": "bfloat16"}


def _load_table() -> tuple[dict[str, float], dict[str, str]]:
    doc = load_toml(_TABLE)
    bits: dict[str, float] = {}
    for row in doc["type"]:
        if not row.get("sources") or not float(row["bits_per_weight"]) > 0:
            raise DataError(Text(f"{_TABLE}: GGUF type {row.get('name')!r} needs bits_per_weight and sources.",
                                 f"{_TABLE}：GGUF 类型 {row.get('name')!r} 需要 bits_per_weight 和 sources。"))
        bits[str(row["name"]).upper()] = float(row["bits_per_weight"])
    for alias, target in doc.get("aliases", {}).items():
        bits[alias.upper()] = bits[target.upper()]
    return bits, {str(k): str(v) for k, v in doc.get("architectures", {}).items()}


# Average bits per weight of each llama-quantize type, for `--weights gguf:<TYPE>` estimates.
GGUF_BITS_PER_WEIGHT, _ARCH_TO_MODEL_TYPE = _load_table()


def _ggml_tables() -> tuple[dict[int, tuple[int, int]], dict[int, str]]:
    """ggml type id -> (weights per block, bytes per block), and file type id -> name."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, LlamaFileType
    except ImportError as exc:
        raise GpuwiseError(Text("Reading GGUF files needs the optional 'gguf' package.",
                                "读取 GGUF 文件需要可选依赖包 gguf。"),
                           hint=Text("pip install 'gpuwise[gguf]'", "pip install 'gpuwise[gguf]'")) from exc
    sizes = {int(t): (int(b), int(s)) for t, (b, s) in GGML_QUANT_SIZES.items()}
    return sizes, {int(f): f.name for f in LlamaFileType}


def _scalar(value: Any) -> tuple[Any, bool]:
    """A usable scalar; per-layer arrays give their largest non-zero entry (flagged True)."""
    if isinstance(value, GGUFArray):
        numbers = [v for v in value.items or () if isinstance(v, int | float) and not isinstance(v, bool)]
        nonzero = [v for v in numbers if v]
        return (max(nonzero) if nonzero else None), True
    return value, False


def _split_siblings(header: GGUFHeader) -> list[Path]:
    """The other files of a `name-00001-of-00003.gguf` split (llama.cpp gguf-split), in order."""
    count = header.fields.get("split.count", 1)
    match = _SPLIT.match(header.path.name)
    if not isinstance(count, int) or count <= 1 or match is None:
        return []
    prefix = match.group("prefix")
    paths = [header.path.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise DataError(Text(f"{header.path} is part {match.group('no')} of a {count}-part GGUF, but "
                             f"{', '.join(missing[:3])} is missing next to it.",
                             f"{header.path} 是 {count} 个分片中的第 {match.group('no')} 个，但旁边缺少 "
                             f"{', '.join(missing[:3])}。"))
    return [p for p in paths if p != header.path]


def _mla_keys(get: Any, cfg: dict[str, Any]) -> None:
    """DeepSeek MLA head sizes: key_length = nope + rope dims (the *_mla keys when llama.cpp wrote them)."""
    rope, _ = get("rope.dimension_count")
    key, _ = get("attention.key_length_mla")
    if key is None:
        key, _ = get("attention.key_length")
    value, _ = get("attention.value_length_mla")
    if value is None:
        value, _ = get("attention.value_length")
    if isinstance(rope, int) and isinstance(key, int):
        cfg.update(qk_rope_head_dim=rope, qk_nope_head_dim=key - rope, v_head_dim=value)


def _config(header: GGUFHeader, tensors: list[GGUFTensor]) -> tuple[dict[str, Any], list[Text]]:
    """config.json-style keys from the GGUF metadata and tensor names."""
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise DataError(Text(f"{header.path} has no general.architecture key: not a model GGUF.",
                             f"{header.path} 缺少 general.architecture：不是模型 GGUF 文件。"))

    def get(key: str) -> tuple[Any, bool]:
        return _scalar(fields.get(f"{arch}.{key}"))

    cfg: dict[str, Any] = {"model_type": _ARCH_TO_MODEL_TYPE.get(arch, arch)}
    per_layer = False
    for gguf_key, hf_key in _KEYS.items():
        value, flagged = get(gguf_key)
        if value is not None:
            cfg[hf_key], per_layer = value, per_layer or flagged
    if "kv_lora_rank" in cfg:
        _mla_keys(get, cfg)
    else:
        cfg["head_dim"], _ = get("attention.key_length")
    _layer_pattern(arch, fields.get(f"{arch}.attention.sliding_window_pattern"), cfg)
    names = {t.name for t in tensors}
    by_name = {t.name: t for t in tensors}
    embed = by_name.get("token_embd.weight")
    tokens = fields.get("tokenizer.ggml.tokens")
    cfg["vocab_size"] = (embed.shape[1] if embed is not None and len(embed.shape) > 1
                         else tokens.count if isinstance(tokens, GGUFArray) else get("vocab_size")[0])
    cfg["tie_word_embeddings"] = "output.weight" not in names
    cfg["attention_bias"] = bool({"blk.0.attn_q.bias", "blk.0.attn_qkv.bias"} & names)
    if any(n.endswith("exp_probs_b.bias") for n in names):
        cfg["topk_method"] = "noaux_tc"  # DeepSeek-V3 router correction bias
    notes = [Text("Some GGUF values are per layer; the largest was used.",
                  "部分 GGUF 参数按层给出，取了最大值。")] if per_layer else []
    return {k: v for k, v in cfg.items() if v is not None}, notes


def _layer_pattern(arch: str, pattern: Any, cfg: dict[str, Any]) -> None:
    """Which layers slide: a per-layer bool array when written, else Gemma 3's fixed 5:1 pattern."""
    if isinstance(pattern, GGUFArray) and pattern.items and all(isinstance(p, bool) for p in pattern.items):
        cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern.items]
    elif arch == "gemma3" and cfg.get("sliding_window"):
        cfg["sliding_window_pattern"] = 6  # llama.cpp llama-model.cpp: gemma3 set_swa_pattern(6)


def _file_type(header: GGUFHeader, names: dict[int, str]) -> str:
    ftype = header.fields.get("general.file_type")
    if not isinstance(ftype, int) or isinstance(ftype, bool):
        return ""
    return names.get(ftype, f"type {ftype}")


def _first_split(path: Path, sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    """The header of `path`, or of part 1 when `path` is a later part of a split GGUF."""
    header = read_gguf_header(path, sizes)
    match = _SPLIT.match(path.name)
    if header.fields.get("split.no", 0) and match is not None:
        first = path.with_name(f"{match.group('prefix')}-00001-of-{match.group('count')}.gguf")
        if first.is_file():
            return read_gguf_header(first, sizes)
    return header


def _model_name(header: GGUFHeader) -> str:
    """`general.name`, cleaned to one printable line (whoever wrote the file chose it), else the
    file name; the name ends up in comments and scripts that gpuwise exports."""
    general_name = header.fields.get("general.name")
    name = clean_text(general_name) if isinstance(general_name, str) else ""
    return name or clean_text(header.path.stem) or "gguf-model"


def arch_from_gguf(path: Path) -> ModelArch:
    """The architecture, exact stored bytes and average bits per weight of a GGUF model file."""
    sizes, ftype_names = _ggml_tables()
    header = _first_split(Path(path), sizes)
    tensors = list(header.tensors)
    for part in _split_siblings(header):
        tensors += read_gguf_header(part, sizes).tensors
    config, notes = _config(header, tensors)
    name = _model_name(header)
    try:
        arch = arch_from_config(config, name, source=str(header.path))
    except DataError as exc:
        raise DataError(Text(f"{header.path}: the GGUF metadata does not describe a model gpuwise can "
                             f"count ({exc.message.en})",
                             f"{header.path}：GGUF 元数据无法用于计数（{exc.message.zh}）")) from exc
    stored = sum(t.n_bytes for t in tensors)
    elements = sum(t.n_elements for t in tensors)
    bits = 8 * stored / elements if elements else 0.0
    ftype = _file_type(header, ftype_names)
    label = ftype.removeprefix("MOSTLY_").removeprefix("ALL_") or "unknown"
    notes.append(Text(f"GGUF file type {label}: {bits:.2f} bits per weight on average over "
                      f"{len(tensors)} tensors ({stored:,} bytes).",
                      f"GGUF 文件类型 {label}：{len(tensors)} 个张量平均每权重 {bits:.2f} 位（{stored:,} 字节）。"))
    return replace(arch, quant=Quantization(method="gguf", bits=round(bits, 4)),
                   dtype=_DTYPES.get(ftype, arch.dtype), checkpoint_bytes=stored,
                   checkpoint_params=elements, notes=arch.notes + tuple(notes))
