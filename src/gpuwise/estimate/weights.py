"""Bytes of the weights in a chosen precision, from the exact parameter breakdown.

Weight-only formats quantize the linear layers; embeddings, the LM head, norms, routers and
the vision tower stay 16-bit, as GPTQ/AWQ/FP8 checkpoints and vLLM's online FP8 keep them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.params import ParamBreakdown, _attention_of_layer, _mlp, count_params
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Text

# Bits per linear weight, scales and zero points included.
_LINEAR_BITS: dict[str, float] = {
    "fp32": 32.0,
    "bf16": 16.0,
    "fp16": 16.0,
    # FP8 e4m3 with one fp32 scale per output channel: +32 bits per row, negligible.
    "fp8": 8.0,
    # INT8 W8A8/W8A16 with per-channel scales: same.
    "int8": 8.0,
    # GPTQ/AWQ int4, group 128: 4 bits + fp16 scale and 4-bit zero point per group of 128
    # (AutoGPTQ/AutoAWQ packing): 4 + (16 + 4) / 128 = 4.156 bits.
    "int4": 4.0 + 20.0 / 128,
    # bitsandbytes NF4 with double quantization: 8-bit absmax per 64-block plus an fp32 constant
    # per 256 blocks = 8/64 + 32/(64*256) = 0.127 extra bits (QLoRA paper, Dettmers et al. 2023, s.3).
    "nf4": 4.0 + 8.0 / 64 + 32.0 / (64 * 256),
}
WEIGHT_FORMATS = (*_LINEAR_BITS, "gguf:<TYPE>", "auto")
_DTYPE_FORMAT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8"}


@dataclass(frozen=True)
class WeightBytes:
    """Bytes by part; `linear` is what quantization shrinks and what TP shards."""

    fmt: str
    linear: float
    other: float  # embeddings, head, norms, routers, vision tower
    exact: bool  # summed from the checkpoint's tensor headers

    @property
    def total(self) -> float:
        return self.linear + self.other


def _gguf_bits(fmt: str) -> float:
    from gpuwise.catalog.gguf_reader import GGUF_BITS_PER_WEIGHT

    name = fmt.split(":", 1)[1].upper()
    if name not in GGUF_BITS_PER_WEIGHT:
        raise unknown_name(Text("GGUF type", "GGUF 量化类型"), name, GGUF_BITS_PER_WEIGHT,
                           "gpuwise estimate --help")
    return GGUF_BITS_PER_WEIGHT[name]


def checkpoint_format(model: ModelArch) -> str:
    """The format a checkpoint ships in: its quantization, else its torch_dtype."""
    q = model.quant
    if q is None:
        return _DTYPE_FORMAT.get(model.dtype, "bf16")
    if q.method == "fp8":
        return "fp8"
    if q.method == "bitsandbytes":
        return "nf4" if q.bits == 4 else "int8"
    if q.method == "gguf":
        return "gguf"
    return "int4" if q.bits <= 4 else "int8"


def pending_format(native: str, fmt: str) -> str | None:
    """The format a checkpoint stored as `native` must still be put in to serve as `fmt` weights,
    None when it already is (a 16-bit checkpoint serves bf16 or fp16; GGUF files carry their own)."""
    if fmt in (native, "auto") or fmt.startswith("gguf") \
            or (fmt in ("bf16", "fp16") and native in ("bf16", "fp16", "fp32")):
        return None
    return fmt


def _pattern(text: str) -> re.Pattern[str]:
    """A quantization_config module name as a regex over dotted module paths: 're:<regex>' as
    vLLM/compressed-tensors read it, else the name (globs '*' allowed) matched on whole dotted
    segments, so 'self_attn' and 'model.layers.*.self_attn' both name every layer's attention."""
    if text.startswith("re:"):
        return re.compile(text[3:])
    body = re.escape(text.replace("model.language_model.", "model.")).replace(r"\*", r"[^.]+")
    return re.compile(rf"(^|\.){body}$")


def _layer_modules(model: ModelArch, index: int) -> list[tuple[str, int]]:
    """(dotted path, linear parameters) of one layer's quantizable modules, as HF names them."""
    kind = model.kinds[index]
    attn = "linear_attn" if kind == "linear" and model.linear is not None else "self_attn"
    h = model.hidden_size
    out = [(f"model.layers.{index}.{attn}", _attention_of_layer(model, kind))]
    moe = model.moe
    if moe is None or not model.is_moe_layer(index):
        out.append((f"model.layers.{index}.mlp", _mlp(h, model.intermediate_size, model.gated_mlp, model.mlp_bias)))
        return out
    out.append((f"model.layers.{index}.mlp.experts",
                moe.num_experts * _mlp(h, moe.expert_intermediate_size, model.gated_mlp, False)))
    if moe.num_shared_experts:
        out.append((f"model.layers.{index}.mlp.shared_expert",
                    moe.num_shared_experts * _mlp(h, moe.shared_intermediate_size, model.gated_mlp, False)))
    return out


@functools.lru_cache(maxsize=256)
def unconverted_linear_params(model: ModelArch) -> int:
    """Linear parameters the checkpoint keeps in 16-bit (quantization_config modules_to_not_convert /
    ignore): a module counts when a pattern names it or a module above it (a whole layer); patterns
    naming single projections inside a module are not counted (their share is small)."""
    if model.quant is None or not model.quant.skipped_modules:
        return 0
    patterns = [_pattern(p) for p in model.quant.skipped_modules]
    kept = 0
    for index in range(model.num_layers):
        for path, n in _layer_modules(model, index):
            parts = path.split(".")
            scopes = [".".join(parts[:k]) for k in range(3, len(parts) + 1)]  # model.layers.i, ...
            if any(p.search(scope) for p in patterns for scope in scopes):
                kept += n
    return kept


@functools.lru_cache(maxsize=4096)
def weight_bytes(model: ModelArch, fmt: str = "auto") -> WeightBytes:
    """Weight bytes of `model` stored as `fmt` (auto: as the checkpoint ships)."""
    params: ParamBreakdown = count_params(model)
    if fmt == "auto":
        fmt = checkpoint_format(model)
        if model.checkpoint_bytes:
            share = params.linear / max(params.total, 1)
            return WeightBytes(fmt, model.checkpoint_bytes * share, model.checkpoint_bytes * (1 - share), True)
        if fmt == "gguf" and model.quant is not None:
            return WeightBytes(fmt, params.linear * model.quant.bits / 8, params.kept_16bit * 2.0, False)
    if fmt.startswith("gguf:"):
        # llama.cpp quantizes the embeddings and head too (mixed types inside one file type)
        bits = _gguf_bits(fmt)
        return WeightBytes(fmt, params.linear * bits / 8, params.kept_16bit * bits / 8, False)
    if fmt not in _LINEAR_BITS:
        raise InputError(Text(f"Unknown --weights '{fmt}': use {', '.join(WEIGHT_FORMATS)}.",
                              f"未知的 --weights“{fmt}”：可用 {', '.join(WEIGHT_FORMATS)}。"))
    other_bits = 32.0 if fmt == "fp32" else 16.0
    # a quantized checkpoint asked as shipped keeps its unconverted modules in 16-bit
    kept = unconverted_linear_params(model) if model.quant is not None and fmt == checkpoint_format(model) else 0
    linear = (params.linear - kept) * _LINEAR_BITS[fmt] / 8 + kept * 2.0
    return WeightBytes(fmt, linear, params.kept_16bit * other_bits / 8, False)
