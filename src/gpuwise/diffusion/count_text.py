"""Parameters of the text encoders diffusion pipelines use, counted from their config.json.

CLIPTextModel(WithProjection) (transformers models/clip/modeling_clip.py), T5EncoderModel and
UMT5EncoderModel (models/t5, models/umt5: umT5 keeps a relative-position bias in every layer,
T5 only in the first), LlamaModel without its head (HunyuanVideo's text encoder).
"""

from __future__ import annotations

from typing import Any

from gpuwise.diffusion.cfg import cfg_int


def clip_text(cfg: dict[str, Any], with_projection: bool) -> int:
    h = cfg_int(cfg, "hidden_size")
    inter = cfg_int(cfg, "intermediate_size")
    layer = 2 * h + 4 * (h * h + h) + 2 * h + h * inter + inter + inter * h + h  # ln, q k v o, ln, fc1, fc2
    n = cfg_int(cfg, "vocab_size") * h + cfg_int(cfg, "max_position_embeddings", 77) * h
    n += cfg_int(cfg, "num_hidden_layers") * layer + 2 * h  # final_layer_norm
    return n + (h * cfg_int(cfg, "projection_dim", h) if with_projection else 0)  # text_projection, no bias


def t5_encoder(cfg: dict[str, Any], bias_every_layer: bool) -> int:
    d = cfg_int(cfg, "d_model")
    heads = cfg_int(cfg, "num_heads")
    inner = heads * cfg_int(cfg, "d_kv", d // max(1, heads))
    d_ff = cfg_int(cfg, "d_ff")
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    layers = cfg_int(cfg, "num_layers")
    buckets = cfg_int(cfg, "relative_attention_num_buckets", 32) * heads
    layer = 4 * d * inner + d + (3 if gated else 2) * d * d_ff + d  # q k v o, norm, wi(_0, _1), wo, norm
    n = cfg_int(cfg, "vocab_size") * d + layers * layer + d  # shared embedding, final_layer_norm
    return n + buckets * (layers if bias_every_layer else 1)


def llama_model(cfg: dict[str, Any]) -> int:
    h = cfg_int(cfg, "hidden_size")
    heads = cfg_int(cfg, "num_attention_heads")
    kv = cfg_int(cfg, "num_key_value_heads", heads)
    hd = cfg_int(cfg, "head_dim", h // heads)
    layer = h * heads * hd * 2 + 2 * h * kv * hd + 3 * h * cfg_int(cfg, "intermediate_size") + 2 * h
    return cfg_int(cfg, "vocab_size") * h + cfg_int(cfg, "num_hidden_layers") * layer + h
