"""Read a checkpoint's quantization_config (GPTQ, AWQ, FP8, bitsandbytes, compressed-tensors)."""

from __future__ import annotations

from typing import Any

from gpuwise.catalog.arch import Quantization, QuantMethod
from gpuwise.errors import DataError
from gpuwise.i18n import Text

_METHODS: dict[str, QuantMethod] = {
    "gptq": "gptq", "awq": "awq", "fp8": "fp8", "bitsandbytes": "bitsandbytes",
    "compressed-tensors": "compressed-tensors", "compressed_tensors": "compressed-tensors",
    "gptq_marlin": "gptq", "awq_marlin": "awq", "fbgemm_fp8": "fp8",
}


def _bad(name: str, what: str) -> DataError:
    return DataError(Text(f"quantization_config of '{name}': {what}.",
                          f"“{name}”的 quantization_config：{what}。"))


def _num(q: dict[str, Any], name: str, *keys: str, default: float) -> float:
    for key in keys:
        value = q.get(key)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not -1 <= value <= 1 << 16:
            raise _bad(name, f"'{key}' should be a number, got {value!r:.40}")
        return float(value)
    return default


def _skipped(q: dict[str, Any]) -> tuple[str, ...]:
    for key in ("modules_to_not_convert", "ignored_layers", "ignore", "llm_int8_skip_modules"):
        value = q.get(key)
        if isinstance(value, list):
            return tuple(str(v) for v in value)
    return ()


def _compressed_tensors(q: dict[str, Any], name: str) -> Quantization:
    """compressed-tensors: the first config group's weight scheme (num_bits, group_size, type)."""
    groups = q.get("config_groups") or {}
    weights: dict[str, Any] = {}
    if isinstance(groups, dict):
        for group in groups.values():
            if isinstance(group, dict) and isinstance(group.get("weights"), dict):
                weights = group["weights"]
                break
    bits = _num(weights, name, "num_bits", default=8)
    group = int(_num(weights, name, "group_size", default=0) or 0)
    method: QuantMethod = "fp8" if weights.get("type") == "float" and bits == 8 else "compressed-tensors"
    return Quantization(method=method, bits=bits, group_size=group, skipped_modules=_skipped(q))


def quant_from_config(q: Any, name: str) -> Quantization | None:
    """The checkpoint's own quantization, or None for a plain 16/32-bit checkpoint."""
    if q is None or q == {}:
        return None
    if not isinstance(q, dict):
        raise _bad(name, "not a JSON object")
    raw = str(q.get("quant_method", "")).lower()
    method = _METHODS.get(raw, "other")
    if method == "compressed-tensors":
        return _compressed_tensors(q, name)
    if method == "bitsandbytes":
        four = bool(q.get("load_in_4bit") or q.get("_load_in_4bit"))
        return Quantization(method="bitsandbytes", bits=4 if four else 8, group_size=64 if four else 0,
                            double_quant=bool(q.get("bnb_4bit_use_double_quant")),
                            skipped_modules=_skipped(q))
    if method == "fp8":
        block = q.get("weight_block_size") or [0, 0]
        if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) for b in block)):
            raise _bad(name, f"weight_block_size should be two integers, got {block!r:.40}")
        return Quantization(method="fp8", bits=8, block=(block[0], block[1]), skipped_modules=_skipped(q))
    bits = _num(q, name, "bits", "w_bit", "num_bits", "weight_bits", default=4)
    group = int(_num(q, name, "group_size", "q_group_size", default=128))
    if not 1 <= bits <= 16:
        raise _bad(name, f"bits must be between 1 and 16, got {bits:g}")
    return Quantization(method=method, bits=bits, group_size=group, skipped_modules=_skipped(q))
