"""Approximate size of a VLM's vision tower from its vision_config.

A ViT: patch embedding, position table, `depth` blocks of attention (q, k, v, o with biases)
and MLP (gated for Qwen2.5-VL's SwiGLU blocks), two norms per block, and a projector into
the language model's hidden size. Layouts vary by family (SigLIP, Qwen2.5-VL, Llama 3.2),
so the count is flagged approximate; a safetensors header, when at hand, replaces it.
"""

from __future__ import annotations

from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text

_MAX = 1 << 20


def _get(cfg: dict[str, Any], name: str, *keys: str, default: int) -> int:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX:
            raise DataError(Text(
                f"vision_config of '{name}': '{key}' should be an integer, got {value!r:.40}.",
                f"“{name}”的 vision_config：“{key}”应为整数，实际为 {value!r:.40}。"))
        return value
    return default


def vision_params(cfg: Any, text_hidden: int, name: str) -> int:
    """Parameters of the vision tower and projector; 0 when there is none."""
    if not isinstance(cfg, dict) or not cfg:
        return 0
    h = _get(cfg, name, "hidden_size", "embed_dim", "width", default=0)
    depth = _get(cfg, name, "depth", "num_hidden_layers", "num_layers", default=0)
    depth += _get(cfg, name, "num_global_layers", default=0)  # Mllama's gated global encoder
    if not h or not depth:
        return 0
    inter = _get(cfg, name, "intermediate_size", "mlp_dim", default=4 * h)
    patch = _get(cfg, name, "patch_size", default=14)
    channels = _get(cfg, name, "num_channels", "in_channels", "in_chans", default=3)
    temporal = _get(cfg, name, "temporal_patch_size", default=1)
    image = _get(cfg, name, "image_size", default=0)
    gated = str(cfg.get("hidden_act", "")).lower() in ("silu", "swiglu")
    attention = 4 * h * h + 4 * h  # q, k, v, o with biases
    mlp = (3 if gated else 2) * h * inter + inter * (2 if gated else 1) + h
    norms = 2 * 2 * h  # two LayerNorms (weight + bias)
    patch_embed = channels * temporal * patch * patch * h
    positions = (image // patch) ** 2 * h if image and patch else 0
    out_hidden = _get(cfg, name, "out_hidden_size", "projection_dim", default=text_hidden)
    proj_in = _get(cfg, name, "vision_output_dim", default=h)  # Mllama concatenates 5 layers' outputs
    projector = proj_in * out_hidden + out_hidden  # one linear into the text model (families vary)
    return depth * (attention + mlp + norms) + patch_embed + positions + 2 * h + projector
