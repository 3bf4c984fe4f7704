"""Parameters of diffusion transformers, counted from their config.json.

Each layout follows the diffusers module named beside it (src/diffusers/models/transformers/):
a linear a -> b with bias is a*b + b; AdaLayerNormZero is one linear d -> 6d, the single-stream
variant d -> 3d, AdaLayerNormContinuous d -> 2d; RMS qk-norms carry one weight per channel;
LayerNorms without affine parameters carry none.
"""

from __future__ import annotations

from typing import Any

from gpuwise.diffusion.cfg import cfg_int, cfg_ints


def _lin(cin: int, cout: int, bias: bool = True) -> int:
    return cin * cout + (cout if bias else 0)


def _ff(d: int, inner: int) -> int:
    """FeedForward d -> inner -> d, both with bias."""
    return _lin(d, inner) + _lin(inner, d)


def _timestep(freq: int, d: int) -> int:
    """TimestepEmbedding: linear freq -> d, SiLU, linear d -> d."""
    return _lin(freq, d) + _lin(d, d)


def _dims(cfg: dict[str, Any]) -> tuple[int, int]:
    """(model width, head dim)."""
    hd = cfg_int(cfg, "attention_head_dim")
    return cfg_int(cfg, "num_attention_heads") * hd, hd


def _double_block(d: int, hd: int, mlp: int) -> int:
    """Flux / HunyuanVideo dual-stream block: two AdaLN-Zero, joint attention with separate
    image and text projections and qk RMS norms, two feed-forwards."""
    return 2 * _lin(d, 6 * d) + 8 * _lin(d, d) + 4 * hd + 2 * _ff(d, mlp)


def _single_block(d: int, hd: int, mlp: int) -> int:
    """Flux / HunyuanVideo single-stream block: AdaLN-Zero-Single, q k v, parallel MLP, fused out."""
    return _lin(d, 3 * d) + 3 * _lin(d, d) + 2 * hd + _lin(d, mlp) + _lin(d + mlp, d)


def flux(cfg: dict[str, Any]) -> int:
    """FluxTransformer2DModel (transformer_flux.py)."""
    d, hd = _dims(cfg)
    cin = cfg_int(cfg, "in_channels", 64)
    out = cfg_int(cfg, "out_channels", cin)
    p = cfg_int(cfg, "patch_size", 1)
    n = _timestep(256, d) + _lin(cfg_int(cfg, "pooled_projection_dim", 768), d) + _lin(d, d)
    if cfg.get("guidance_embeds", False):
        n += _timestep(256, d)
    n += _lin(cfg_int(cfg, "joint_attention_dim", 4096), d) + _lin(cin, d)  # context_embedder, x_embedder
    n += cfg_int(cfg, "num_layers") * _double_block(d, hd, 4 * d)
    n += cfg_int(cfg, "num_single_layers") * _single_block(d, hd, 4 * d)
    return n + _lin(d, 2 * d) + _lin(d, p * p * out)  # norm_out, proj_out


def sd3(cfg: dict[str, Any]) -> int:
    """SD3Transformer2DModel (transformer_sd3.py), with SD 3.5's dual-attention (MMDiT-X) layers."""
    d, hd = _dims(cfg)
    p, cin = cfg_int(cfg, "patch_size", 2), cfg_int(cfg, "in_channels", 16)
    out = cfg_int(cfg, "out_channels", cin)
    layers = cfg_int(cfg, "num_layers")
    dual = set(cfg.get("dual_attention_layers") or ())
    qk = 4 * hd if cfg.get("qk_norm") else 0
    n = cin * p * p * d + d + cfg_int(cfg, "pos_embed_max_size", 0) ** 2 * d  # patch conv, stored pos table
    n += _timestep(256, d) + _lin(cfg_int(cfg, "pooled_projection_dim"), d) + _lin(d, d)
    n += _lin(cfg_int(cfg, "joint_attention_dim"), cfg_int(cfg, "caption_projection_dim", d))
    for i in range(layers):
        last = i == layers - 1  # context_pre_only: no text output path
        n += _lin(d, (9 if i in dual else 6) * d) + (_lin(d, 2 * d) if last else _lin(d, 6 * d))
        n += (7 if last else 8) * _lin(d, d) + qk + _ff(d, 4 * d) + (0 if last else _ff(d, 4 * d))
        if i in dual:
            n += 4 * _lin(d, d) + (2 * hd if cfg.get("qk_norm") else 0)  # attn2
    return n + _lin(d, 2 * d) + _lin(d, p * p * out)


def wan(cfg: dict[str, Any]) -> int:
    """WanTransformer3DModel (transformer_wan.py)."""
    d, _ = _dims(cfg)
    patch = cfg_ints(cfg, "patch_size")
    vol = patch[0] * patch[1] * patch[2]
    cin, ffn = cfg_int(cfg, "in_channels"), cfg_int(cfg, "ffn_dim")
    out = cfg_int(cfg, "out_channels", cin)
    n = cin * vol * d + d
    n += _timestep(cfg_int(cfg, "freq_dim", 256), d) + _lin(d, 6 * d)  # time embedding, time_proj
    n += _lin(cfg_int(cfg, "text_dim"), d) + _lin(d, d)  # text_embedder
    image = cfg_int(cfg, "image_dim", 0)
    if image:  # I2V: CLIP image tokens projected in, extra k/v in cross-attention
        n += 2 * image + _lin(image, image) + _lin(image, d) + 2 * d
    per = 2 * (4 * _lin(d, d) + 2 * d) + _ff(d, ffn) + 6 * d  # self + cross attention, ffn, scale_shift
    per += 2 * d if cfg.get("cross_attn_norm", True) else 0
    per += (2 * _lin(d, d) + d) if cfg_int(cfg, "added_kv_proj_dim", 0) else 0
    return n + cfg_int(cfg, "num_layers") * per + _lin(d, out * vol) + 2 * d


def hunyuan_video(cfg: dict[str, Any]) -> int:
    """HunyuanVideoTransformer3DModel (transformer_hunyuan_video.py)."""
    d, hd = _dims(cfg)
    pt, p = cfg_int(cfg, "patch_size_t", 1), cfg_int(cfg, "patch_size", 2)
    cin = cfg_int(cfg, "in_channels", 16)
    out = cfg_int(cfg, "out_channels", cin)
    text = cfg_int(cfg, "text_embed_dim", 4096)
    mlp = int(d * float(cfg.get("mlp_ratio", 4.0)))
    n = cin * pt * p * p * d + d
    refiner_block = 2 * d + 4 * _lin(d, d) + 2 * d + _ff(d, 4 * d) + _lin(d, 2 * d)
    n += _timestep(256, d) + _lin(text, d) + _lin(d, d) + _lin(text, d)  # refiner's embedders, proj_in
    n += cfg_int(cfg, "num_refiner_layers", 2) * refiner_block
    n += _timestep(256, d) + _lin(cfg_int(cfg, "pooled_projection_dim", 768), d) + _lin(d, d)
    if cfg.get("guidance_embeds", True):
        n += _timestep(256, d)
    n += cfg_int(cfg, "num_layers") * _double_block(d, hd, mlp)
    n += cfg_int(cfg, "num_single_layers") * _single_block(d, hd, mlp)
    return n + _lin(d, 2 * d) + _lin(d, pt * p * p * out)


def cogvideox(cfg: dict[str, Any]) -> int:
    """CogVideoXTransformer3DModel (cogvideox_transformer_3d.py)."""
    d, hd = _dims(cfg)
    t = cfg_int(cfg, "time_embed_dim", 512)
    p, cin = cfg_int(cfg, "patch_size", 2), cfg_int(cfg, "in_channels", 16)
    out = cfg_int(cfg, "out_channels", cin)
    n = cin * p * p * d + d + _lin(cfg_int(cfg, "text_embed_dim", 4096), d)  # patch conv, text_proj
    n += _lin(d, t) + _lin(t, t)  # time_embedding
    norm_zero = _lin(t, 6 * d) + 2 * d  # CogVideoXLayerNormZero: linear + affine LayerNorm
    per = 2 * norm_zero + 4 * _lin(d, d) + 4 * hd + _ff(d, 4 * d)  # q k v out, LayerNorm qk-norms
    return n + cfg_int(cfg, "num_layers") * per + 2 * d + _lin(t, 2 * d) + 2 * d + _lin(d, p * p * out)


def layerwise_kept(class_name: str, cfg: dict[str, Any]) -> int:
    """Parameters diffusers' FP8 layerwise casting leaves in the compute dtype: every module whose name
    matches a skip pattern (hooks/layerwise_casting.py DEFAULT_SKIP_MODULES_PATTERN = ("pos_embed",
    "patch_embed", "norm", "^proj_in$", "^proj_out$") plus the model's _skip_layerwise_casting_patterns).
    "norm" catches the AdaLN modulation linears (norm1.linear, norm1_context.linear, norm.linear,
    norm_out.linear), which in FLUX.1 hold 3.2B of the 11.9B parameters."""
    if class_name not in _KEPT:
        return 0
    return _KEPT[class_name](cfg)


def _flux_kept(cfg: dict[str, Any]) -> int:
    d, hd = _dims(cfg)
    double = 2 * _lin(d, 6 * d) + 4 * hd  # norm1.linear, norm1_context.linear, attn.norm_q/k (+ _added)
    single = _lin(d, 3 * d) + 2 * hd
    return cfg_int(cfg, "num_layers") * double + cfg_int(cfg, "num_single_layers") * single + _lin(d, 2 * d)


def _sd3_kept(cfg: dict[str, Any]) -> int:
    d, hd = _dims(cfg)
    p, cin = cfg_int(cfg, "patch_size", 2), cfg_int(cfg, "in_channels", 16)
    layers, dual = cfg_int(cfg, "num_layers"), set(cfg.get("dual_attention_layers") or ())
    qk = 4 * hd if cfg.get("qk_norm") else 0
    n = cin * p * p * d + d + cfg_int(cfg, "pos_embed_max_size", 0) ** 2 * d  # pos_embed (patch conv + table)
    for i in range(layers):
        last = i == layers - 1
        n += _lin(d, (9 if i in dual else 6) * d) + (_lin(d, 2 * d) if last else _lin(d, 6 * d)) + qk
    return n + _lin(d, 2 * d)  # norm_out


def _hunyuan_kept(cfg: dict[str, Any]) -> int:
    d, hd = _dims(cfg)
    pt, p = cfg_int(cfg, "patch_size_t", 1), cfg_int(cfg, "patch_size", 2)
    cin, text = cfg_int(cfg, "in_channels", 16), cfg_int(cfg, "text_embed_dim", 4096)
    refiner_block = 2 * d + 4 * _lin(d, d) + 2 * d + _ff(d, 4 * d) + _lin(d, 2 * d)
    context = _timestep(256, d) + _lin(text, d) + _lin(d, d) + _lin(text, d)
    context += cfg_int(cfg, "num_refiner_layers", 2) * refiner_block  # context_embedder: the token refiner
    n = cin * pt * p * p * d + d + context  # x_embedder
    n += cfg_int(cfg, "num_layers") * (2 * _lin(d, 6 * d) + 4 * hd)
    n += cfg_int(cfg, "num_single_layers") * (_lin(d, 3 * d) + 2 * hd)
    return n + _lin(d, 2 * d)


def _wan_kept(cfg: dict[str, Any]) -> int:
    d, _ = _dims(cfg)
    patch = cfg_ints(cfg, "patch_size")
    n = cfg_int(cfg, "in_channels") * patch[0] * patch[1] * patch[2] * d + d  # patch_embedding
    n += _timestep(cfg_int(cfg, "freq_dim", 256), d) + _lin(d, 6 * d)  # condition_embedder: time, time_proj
    n += _lin(cfg_int(cfg, "text_dim"), d) + _lin(d, d)  # condition_embedder: text
    per = 2 * 2 * d + (2 * d if cfg.get("cross_attn_norm", True) else 0)  # norm_q/norm_k x 2 attentions, norm2
    return n + cfg_int(cfg, "num_layers") * per


def _cogvideox_kept(cfg: dict[str, Any]) -> int:
    d, hd = _dims(cfg)
    t = cfg_int(cfg, "time_embed_dim", 512)
    p, cin = cfg_int(cfg, "patch_size", 2), cfg_int(cfg, "in_channels", 16)
    n = cin * p * p * d + d + _lin(cfg_int(cfg, "text_embed_dim", 4096), d)  # patch_embed
    per = 2 * (_lin(t, 6 * d) + 2 * d) + 4 * hd  # norm1, norm2 (CogVideoXLayerNormZero), qk norms
    return n + cfg_int(cfg, "num_layers") * per + 2 * d + _lin(t, 2 * d) + 2 * d  # norm_final, norm_out


_KEPT = {"FluxTransformer2DModel": _flux_kept, "SD3Transformer2DModel": _sd3_kept,
         "HunyuanVideoTransformer3DModel": _hunyuan_kept, "WanTransformer3DModel": _wan_kept,
         "CogVideoXTransformer3DModel": _cogvideox_kept}
