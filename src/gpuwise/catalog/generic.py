"""A generic dense decoder for a bare size such as `7b`: always flagged approximate.

Shapes follow the Llama 3 family (GQA with 8 KV heads, head_dim 128, SwiGLU with an
intermediate of 3.5 x hidden, 128,256-token vocabulary, untied head; Llama 3 paper,
Table 3): the template nearest in size is chosen, then its layer count is scaled so the
total matches the size asked for.
"""

from __future__ import annotations

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.params import count_params
from gpuwise.errors import InputError
from gpuwise.i18n import Text

# (hidden, layers, heads) of Llama 3.2 1B / 3B, 3.1 8B / 70B / 405B and a 14B/32B-class shape.
_TEMPLATES = ((2048, 16, 32), (3072, 28, 24), (4096, 32, 32), (5120, 40, 40), (6144, 56, 48),
              (8192, 80, 64), (16384, 126, 128))
_SCALE = {"m": 1e6, "b": 1e9, "t": 1e12}
_VOCAB = 128_256


def _arch(name: str, hidden: int, layers: int, heads: int) -> ModelArch:
    inter = round(hidden * 3.5 / 256) * 256
    return ModelArch(
        name=name, model_type="generic", hidden_size=hidden, num_layers=layers, num_heads=heads,
        num_kv_heads=min(8, heads), head_dim=hidden // heads, intermediate_size=inter,
        vocab_size=_VOCAB, max_context=131_072, approximate=True, source="generic",
        notes=(Text(f"'{name}' is a bare size: a generic Llama-style architecture is assumed; "
                    "give a preset, config.json or hub id for exact figures.",
                    f"“{name}”只是一个参数量：按通用 Llama 式结构估算；"
                    "给出预设、config.json 或模型 ID 可得精确结果。"),))


def generic_arch(amount: float, unit: str) -> ModelArch:
    target = amount * _SCALE[unit]
    if not 1e7 <= target <= 1e13:
        raise InputError(Text(f"Model size {amount:g}{unit.upper()} is out of range (10M to 10T).",
                              f"模型大小 {amount:g}{unit.upper()} 超出范围（10M 到 10T）。"))
    name = f"{amount:g}{unit.upper()}"
    hidden, layers, heads = min(_TEMPLATES, key=lambda t: abs(count_params(_arch(name, *t)).total - target))
    base = _arch(name, hidden, 1, heads)
    per_layer = count_params(_arch(name, hidden, 2, heads)).total - count_params(base).total
    fixed = count_params(base).total - per_layer
    layers = max(1, round((target - fixed) / per_layer))
    return _arch(name, hidden, layers, heads)
