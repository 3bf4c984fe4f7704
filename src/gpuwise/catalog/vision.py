"""Size of a VLM's vision tower and projector from its vision_config.

Three layouts are counted module by module, as their modeling code builds them:
- Qwen2.5-VL (transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py): a Conv3d patch embedding
  without bias, `depth` blocks of RMSNorm + qkv/proj with biases + a SwiGLU MLP with biases, and
  the patch merger (RMSNorm, Linear(h*m^2, h*m^2), GELU, Linear(h*m^2, out_hidden_size)).
- Qwen2-VL (models/qwen2_vl/modeling_qwen2_vl.py): the same with LayerNorms, an fc1/fc2 MLP of
  embed_dim x mlp_ratio, and a LayerNorm merger into `hidden_size` (Qwen2-VL's name for the
  language model's width).
- Qwen3-VL / Qwen3.5 (models/qwen3_vl/modeling_qwen3_vl.py): a Conv3d patch embedding with bias,
  learned positions (num_position_embeddings), LayerNorm blocks with a GELU fc1/fc2 MLP, the merger
  (LayerNorm, Linear(h*m^2, h*m^2), GELU, Linear(h*m^2, out_hidden_size)) and one post-shuffle-norm
  merger per deepstack_visual_indexes entry.
- InternViT (OpenGVLab modeling_intern_vit.py, model_type intern_vit_6b): a class token, a Conv2d
  patch embedding with bias, learned positions for (image_size/patch)^2 + 1 tokens, blocks with
  qkv/proj/fc1/fc2 biases, two norms and two layer-scale vectors (ls1, ls2); plus InternVL's
  projector mlp1 (LayerNorm(h*4), Linear(h*4, llm_hidden), GELU, Linear(llm_hidden, llm_hidden)).
Other towers (SigLIP, Llama 3.2's Mllama) are counted by the generic ViT layout below, flagged
approximate; a safetensors header, when at hand, replaces any count.
"""

from __future__ import annotations

from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text

_MAX = 1 << 20
# InternVL's pixel shuffle: every InternVL 1.5-3 config sets downsample_ratio 0.5 (2x2 patches
# into one token, so the projector reads 4 x the ViT width), e.g. OpenGVLab/InternVL3-1B config.json.
INTERNVL_DOWNSAMPLE = 0.5


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


def family(cfg: dict[str, Any]) -> str:
    """'qwen3-vl', 'qwen2.5-vl', 'qwen2-vl', 'internvit' or 'vit' (the generic layout)."""
    if cfg.get("model_type") in ("intern_vit_6b", "intern_vit"):
        return "internvit"
    if cfg.get("spatial_merge_size") and cfg.get("num_position_embeddings"):
        return "qwen3-vl"
    if cfg.get("spatial_merge_size"):
        return "qwen2-vl" if cfg.get("embed_dim") else "qwen2.5-vl"
    return "vit"


def _qwen_vl(cfg: dict[str, Any], name: str, v25: bool) -> int:
    h = _get(cfg, name, "embed_dim" if not v25 else "hidden_size", default=0)
    depth = _get(cfg, name, "depth", default=0)
    patch = _get(cfg, name, "patch_size", "spatial_patch_size", default=14)
    temporal = _get(cfg, name, "temporal_patch_size", default=2)
    channels = _get(cfg, name, "in_chans", "in_channels", default=3)
    merge = _get(cfg, name, "spatial_merge_size", default=2)
    out = _get(cfg, name, "out_hidden_size" if v25 else "hidden_size", default=h)
    norm = h if v25 else 2 * h  # RMSNorm weight, or LayerNorm weight + bias
    attention = (h * 3 * h + 3 * h) + (h * h + h)  # qkv and proj, both with biases
    if v25:
        inter = _get(cfg, name, "intermediate_size", default=4 * h)
        mlp = 2 * (h * inter + inter) + inter * h + h  # gate_proj, up_proj, down_proj with biases
    else:
        inter = h * _get(cfg, name, "mlp_ratio", default=4)
        mlp = (h * inter + inter) + (inter * h + h)  # fc1, fc2
    merged = h * merge * merge
    merger = norm + (merged * merged + merged) + (merged * out + out)
    return depth * (2 * norm + attention + mlp) + channels * temporal * patch * patch * h + merger


def _qwen3_vl(cfg: dict[str, Any], name: str) -> int:
    h = _get(cfg, name, "hidden_size", default=0)
    depth = _get(cfg, name, "depth", default=0)
    inter = _get(cfg, name, "intermediate_size", default=4 * h)
    patch = _get(cfg, name, "patch_size", default=16)
    temporal = _get(cfg, name, "temporal_patch_size", default=2)
    channels = _get(cfg, name, "in_channels", "in_chans", default=3)
    merge = _get(cfg, name, "spatial_merge_size", default=2)
    out = _get(cfg, name, "out_hidden_size", default=h)
    positions = _get(cfg, name, "num_position_embeddings", default=0) * h
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    merged = h * merge * merge
    mlp = (merged * merged + merged) + (merged * out + out)
    deepstack = len(cfg.get("deepstack_visual_indexes") or ()) * (2 * merged + mlp)  # post-shuffle LayerNorm
    return depth * block + channels * temporal * patch * patch * h + h + positions + 2 * h + mlp + deepstack


def _internvit(cfg: dict[str, Any], name: str, text_hidden: int) -> int:
    h = _get(cfg, name, "hidden_size", default=0)
    depth = _get(cfg, name, "num_hidden_layers", default=0)
    inter = _get(cfg, name, "intermediate_size", default=4 * h)
    patch = _get(cfg, name, "patch_size", default=14)
    image = _get(cfg, name, "image_size", default=448)
    channels = _get(cfg, name, "num_channels", default=3)
    bias = 3 * h if cfg.get("qkv_bias", True) else 0
    norm = h if cfg.get("norm_type") == "rms_norm" else 2 * h
    qk_norm = 2 * h if cfg.get("qk_normalization") else 0  # q_norm, k_norm (RMSNorm)
    block = (h * 3 * h + bias) + (h * h + h) + qk_norm + (h * inter + inter) + (inter * h + h) + 2 * norm + 2 * h
    positions = ((image // patch) ** 2 + 1) * h  # + the class token's position
    embeddings = h + channels * patch * patch * h + h + positions  # class token, conv weight + bias
    shuffled = h * round(1 / INTERNVL_DOWNSAMPLE) ** 2
    mlp1 = 2 * shuffled + (shuffled * text_hidden + text_hidden) + (text_hidden * text_hidden + text_hidden)
    return depth * block + embeddings + mlp1


def _generic_vit(cfg: dict[str, Any], name: str, text_hidden: int) -> int:
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


def vision_params(cfg: Any, text_hidden: int, name: str) -> int:
    """Parameters of the vision tower and projector; 0 when there is none."""
    if not isinstance(cfg, dict) or not cfg:
        return 0
    kind = family(cfg)
    if kind == "qwen3-vl":
        return _qwen3_vl(cfg, name)
    if kind in ("qwen2.5-vl", "qwen2-vl"):
        return _qwen_vl(cfg, name, kind == "qwen2.5-vl")
    if kind == "internvit":
        return _internvit(cfg, name, text_hidden)
    return _generic_vit(cfg, name, text_hidden)


def vision_is_exact(cfg: Any) -> bool:
    """True where the count follows the family's modeling code module by module."""
    return isinstance(cfg, dict) and family(cfg) != "vit"
