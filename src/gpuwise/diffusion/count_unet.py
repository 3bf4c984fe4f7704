"""Parameters of convolutional diffusers components, counted from their config.json.

Layouts follow diffusers' modules: UNet2DConditionModel (unets/unet_2d_condition.py,
unet_2d_blocks.py), ResnetBlock2D (resnet.py), Transformer2DModel / BasicTransformerBlock
(transformers/transformer_2d.py, attention.py: GEGLU feed-forward of 4x width), AutoencoderKL
(autoencoders/vae.py Encoder/Decoder). A weight matrix a x b with bias counts a*b + b.
"""

from __future__ import annotations

from typing import Any

from gpuwise.diffusion.cfg import cfg_int, cfg_ints


def _conv(cin: int, cout: int, k: int = 3, bias: bool = True) -> int:
    return cin * cout * k * k + (cout if bias else 0)


def _lin(cin: int, cout: int, bias: bool = True) -> int:
    return cin * cout + (cout if bias else 0)


def resnet2d(cin: int, cout: int, temb: int, kernel_volume: int = 9) -> int:
    """ResnetBlock2D: GroupNorm, conv 3x3, time projection, GroupNorm, conv 3x3, 1x1 shortcut."""
    n = 2 * cin + cin * cout * kernel_volume + cout + 2 * cout + cout * cout * kernel_volume + cout
    if temb:
        n += _lin(temb, cout)
    if cin != cout:
        n += _lin(cin, cout)  # conv_shortcut 1x1
    return n


def transformer2d(c: int, layers: int, cross: int) -> int:
    """Transformer2DModel with inner dim c: GroupNorm, proj_in, blocks, proj_out."""
    block = (2 * c + 3 * c * c + _lin(c, c)  # norm1, attn1 q k v (no bias), out
             + 2 * c + c * c + 2 * cross * c + _lin(c, c)  # norm2, attn2 q from c, k v from text
             + 2 * c + _lin(c, 8 * c) + _lin(4 * c, c))  # norm3, GEGLU (2 x 4c), out
    return 2 * c + _lin(c, c) + layers * block + _lin(c, c)


def _per_block(cfg: dict[str, Any], key: str, blocks: int, default: int) -> list[int]:
    value = cfg.get(key, default)
    return [int(value)] * blocks if isinstance(value, int) else cfg_ints(cfg, key)


def unet2d_condition(cfg: dict[str, Any]) -> int:
    ch = cfg_ints(cfg, "block_out_channels")
    down, up = list(cfg["down_block_types"]), list(cfg["up_block_types"])
    per = cfg_int(cfg, "layers_per_block", 2)
    cross = cfg_int(cfg, "cross_attention_dim", 768)
    tl = _per_block(cfg, "transformer_layers_per_block", len(ch), 1)
    c0, temb = ch[0], 4 * ch[0]  # time_embed_dim = block_out_channels[0] * 4
    n = _conv(cfg_int(cfg, "in_channels", 4), c0, cfg_int(cfg, "conv_in_kernel", 3))
    n += _lin(c0, temb) + _lin(temb, temb)  # time_embedding
    if cfg.get("addition_embed_type") == "text_time":  # SDXL: pooled text + size conditioning
        n += _lin(cfg_int(cfg, "projection_class_embeddings_input_dim", 0), temb) + _lin(temb, temb)
    prev = c0
    for i, kind in enumerate(down):
        out = ch[i]
        for j in range(per):
            n += resnet2d(prev if j == 0 else out, out, temb)
            if "CrossAttn" in kind:
                n += transformer2d(out, tl[i], cross)
        if i < len(ch) - 1:
            n += _conv(out, out)  # Downsample2D
        prev = out
    n += 2 * resnet2d(ch[-1], ch[-1], temb) + transformer2d(ch[-1], tl[-1], cross)  # mid block
    rch, rtl = list(reversed(ch)), list(reversed(tl))
    prev_out = rch[0]
    for i, kind in enumerate(up):
        out, inp = rch[i], rch[min(i + 1, len(ch) - 1)]
        for j in range(per + 1):
            skip = inp if j == per else out
            n += resnet2d((prev_out if j == 0 else out) + skip, out, temb)
            if "CrossAttn" in kind:
                n += transformer2d(out, rtl[i], cross)
        if i < len(ch) - 1:
            n += _conv(out, out)  # Upsample2D
        prev_out = out
    return n + 2 * c0 + _conv(c0, cfg_int(cfg, "out_channels", 4))  # conv_norm_out, conv_out


def _vae_mid(c: int, kv: int) -> int:
    """UNetMidBlock2D of a VAE: resnet, one attention (GroupNorm, q k v out with bias), resnet."""
    return 2 * resnet2d(c, c, 0, kv) + 2 * c + 4 * _lin(c, c)


def autoencoder_kl(cfg: dict[str, Any], kernel_volume: int = 9) -> int:
    """AutoencoderKL; kernel_volume 27 approximates the causal 3D video VAEs built the same way."""
    ch = cfg_ints(cfg, "block_out_channels")
    per = cfg_int(cfg, "layers_per_block", 2)
    lat = cfg_int(cfg, "latent_channels", 4)
    cin, cout = cfg_int(cfg, "in_channels", 3), cfg_int(cfg, "out_channels", 3)
    kv = kernel_volume
    enc = cin * ch[0] * kv + ch[0]
    prev = ch[0]
    for i, out in enumerate(ch):
        enc += sum(resnet2d(prev if j == 0 else out, out, 0, kv) for j in range(per))
        enc += out * out * kv + out if i < len(ch) - 1 else 0
        prev = out
    enc += _vae_mid(ch[-1], kv) + 2 * ch[-1] + ch[-1] * 2 * lat * kv + 2 * lat
    dec = lat * ch[-1] * kv + ch[-1] + _vae_mid(ch[-1], kv)
    rch = list(reversed(ch))
    prev = rch[0]
    for i, out in enumerate(rch):
        dec += sum(resnet2d(prev if j == 0 else out, out, 0, kv) for j in range(per + 1))
        dec += out * out * kv + out if i < len(ch) - 1 else 0
        prev = out
    dec += 2 * ch[0] + ch[0] * cout * kv + cout
    quant = 0
    if cfg.get("use_quant_conv", True):
        quant += _lin(2 * lat, 2 * lat)
    if cfg.get("use_post_quant_conv", True):
        quant += _lin(lat, lat)
    return enc + dec + quant


def unet2d_flops(cfg: dict[str, Any], lat_h: int, lat_w: int, text_tokens: int) -> float:
    """FLOPs of one UNet call on one sample: 2 x weights x cells at each level (a conv or linear
    weight meets every latent cell of its level), plus attention: 4 x cells^2 x c per
    self-attention and 4 x cells x text x c per cross-attention (QK^T and PV)."""
    ch = cfg_ints(cfg, "block_out_channels")
    per = cfg_int(cfg, "layers_per_block", 2)
    cross = cfg_int(cfg, "cross_attention_dim", 768)
    tl = _per_block(cfg, "transformer_layers_per_block", len(ch), 1)
    temb = 4 * ch[0]
    down, up = list(cfg["down_block_types"]), list(cfg["up_block_types"])

    def attn(c: int, layers: int, cells: int) -> float:
        return 2.0 * transformer2d(c, layers, cross) * cells + layers * (4.0 * cells * cells * c
                                                                          + 4.0 * cells * text_tokens * c)

    cells = [(lat_h >> i) * (lat_w >> i) for i in range(len(ch))]
    f = 2.0 * cells[0] * (_conv(cfg_int(cfg, "in_channels", 4), ch[0]) + _conv(ch[0], cfg_int(cfg, "out_channels", 4)))
    prev = ch[0]
    for i, kind in enumerate(down):
        for j in range(per):
            f += 2.0 * resnet2d(prev if j == 0 else ch[i], ch[i], temb) * cells[i]
            f += attn(ch[i], tl[i], cells[i]) if "CrossAttn" in kind else 0.0
        prev = ch[i]
    f += 2.0 * 2 * resnet2d(ch[-1], ch[-1], temb) * cells[-1] + attn(ch[-1], tl[-1], cells[-1])
    rch, rtl, rcells = list(reversed(ch)), list(reversed(tl)), list(reversed(cells))
    prev_out = rch[0]
    for i, kind in enumerate(up):
        out, inp = rch[i], rch[min(i + 1, len(ch) - 1)]
        for j in range(per + 1):
            f += 2.0 * resnet2d((prev_out if j == 0 else out) + (inp if j == per else out), out, temb) * rcells[i]
            f += attn(out, rtl[i], rcells[i]) if "CrossAttn" in kind else 0.0
        prev_out = out
    return f


def vae_decode_flops(channels: list[int], per: int, pixels: int, kernel_volume: int = 9) -> float:
    """FLOPs of a KL decoder: its resnets' convolutions at each level's resolution (the widest
    level at 1/8 of the pixels per side, doubling each level up), 2 x weights x cells."""
    f = 0.0
    rch = list(reversed(channels))
    prev = rch[0]
    for i, out in enumerate(rch):
        cells = pixels // (4 ** (len(rch) - 1 - i))
        f += 2.0 * cells * sum(resnet2d(prev if j == 0 else out, out, 0, kernel_volume) for j in range(per + 1))
        if i < len(rch) - 1:
            f += 2.0 * cells * 4 * out * out * kernel_volume  # upsample conv at the next resolution
        prev = out
    return f
