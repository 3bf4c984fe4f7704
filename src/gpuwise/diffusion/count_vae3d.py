"""Parameters of the causal 3D video VAEs, module by module as diffusers builds them.

AutoencoderKLWan (src/diffusers/models/autoencoders/autoencoder_kl_wan.py): WanCausalConv3d is a
Conv3d (weight + bias), WanRMS_norm one gamma per channel, WanResidualBlock norm1 conv1(3^3) norm2
conv2(3^3) and a 1^3 shortcut when the width changes; WanResample's spatial convs are Conv2d 3x3,
the temporal ones (3, 1, 1) convs; WanAttentionBlock an RMS norm and 1x1 to_qkv / proj Conv2d.
Wan 2.1's decoder halves the width entering every up block after the first (its upsamplers output
dim // 2); Wan 2.2's residual layout (is_residual) keeps it and adds parameter-free shortcuts.
"""

from __future__ import annotations

import itertools
from typing import Any

from gpuwise.diffusion.cfg import cfg_int, cfg_ints


def _conv(cin: int, cout: int, kernel: int) -> int:
    return cin * cout * kernel + cout


def _res(cin: int, cout: int) -> int:
    """WanResidualBlock."""
    return cin + _conv(cin, cout, 27) + cout + _conv(cout, cout, 27) + (_conv(cin, cout, 1) if cin != cout else 0)


def _attn(d: int) -> int:
    return d + _conv(d, 3 * d, 1) + _conv(d, d, 1)


def _mid(d: int) -> int:
    return 2 * _res(d, d) + _attn(d)


def _resample(d: int, mode: str, up_out: int) -> int:
    if mode == "upsample2d":
        return _conv(d, up_out, 9)
    if mode == "upsample3d":
        return _conv(d, up_out, 9) + _conv(d, 2 * d, 3)
    if mode == "downsample2d":
        return _conv(d, d, 9)
    return _conv(d, d, 9) + _conv(d, d, 3)  # downsample3d


def wan_vae(cfg: dict[str, Any]) -> int:
    base = cfg_int(cfg, "base_dim", 96)
    dec_base = cfg_int(cfg, "decoder_base_dim", base) if cfg.get("decoder_base_dim") else base
    z = cfg_int(cfg, "z_dim", 16)
    mult = cfg_ints(cfg, "dim_mult") if cfg.get("dim_mult") else [1, 2, 4, 4]
    per = cfg_int(cfg, "num_res_blocks", 2)
    down = [bool(x) for x in (cfg.get("temperal_downsample") or [False, True, True])]
    residual = bool(cfg.get("is_residual", False))
    cin = cfg_int(cfg, "in_channels", 3)  # already channels x patch^2 where the config patchifies (Wan 2.2: 12)
    cout = cfg_int(cfg, "out_channels", 3)
    n = 0
    # encoder
    dims = [base * m for m in [1, *mult]]
    n += _conv(cin, dims[0], 27)
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        last = i == len(mult) - 1
        for _ in range(per):
            n += _res(a, b)
            a = b
        if not last:
            n += _resample(b, "downsample3d" if down[i] else "downsample2d", b)
    n += _mid(dims[-1]) + dims[-1] + _conv(dims[-1], 2 * z, 27)
    n += _conv(2 * z, 2 * z, 1) + _conv(z, z, 1)  # quant_conv, post_quant_conv
    # decoder
    up = down[::-1]
    ddims = [dec_base * m for m in [mult[-1], *mult[::-1]]]
    n += _conv(z, ddims[0], 27) + _mid(ddims[0])
    for i, (a, b) in enumerate(itertools.pairwise(ddims)):
        if i > 0 and not residual:
            a //= 2  # Wan 2.1: the previous upsampler gave dim // 2
        flag = i != len(mult) - 1
        cur = a
        for _ in range(per + 1):
            n += _res(cur, b)
            cur = b
        if flag:
            mode = "upsample3d" if up[i] else "upsample2d"
            n += _resample(b, mode, b if residual else b // 2)
    return n + ddims[-1] + _conv(ddims[-1], cout, 27)


def _cog_res(cin: int, cout: int, zq: int) -> int:
    """CogVideoXResnetBlock3D: GroupNorm (or CogVideoXSpatialNorm3D: GroupNorm + two 1^3 convs from
    the latent when zq > 0), 3^3 causal convs, a 1^3 shortcut when the width changes; no temb."""
    def norm(c: int) -> int:
        return 2 * c + (2 * _conv(zq, c, 1) if zq else 0)
    return norm(cin) + _conv(cin, cout, 27) + norm(cout) + _conv(cout, cout, 27) + (
        _conv(cin, cout, 1) if cin != cout else 0)


def cogvideox_vae(cfg: dict[str, Any]) -> int:
    """AutoencoderKLCogVideoX (autoencoder_kl_cogvideox.py; CogVideoXDown/Upsample3D are Conv2d 3x3)."""
    ch = cfg_ints(cfg, "block_out_channels")
    per = cfg_int(cfg, "layers_per_block", 3)
    lat = cfg_int(cfg, "latent_channels", 16)
    cin, cout = cfg_int(cfg, "in_channels", 3), cfg_int(cfg, "out_channels", 3)
    n = _conv(cin, ch[0], 27)
    prev = ch[0]
    for i, c in enumerate(ch):
        for j in range(per):
            n += _cog_res(prev if j == 0 else c, c, 0)
        prev = c
        if i < len(ch) - 1:
            n += _conv(c, c, 9)
    n += 2 * _cog_res(ch[-1], ch[-1], 0) + 2 * ch[-1] + _conv(ch[-1], 2 * lat, 27)  # mid, norm_out, conv_out
    rch = list(reversed(ch))
    n += _conv(lat, rch[0], 27) + 2 * _cog_res(rch[0], rch[0], lat)
    prev = rch[0]
    for i, c in enumerate(rch):
        for j in range(per + 1):
            n += _cog_res(prev if j == 0 else c, c, lat)
        prev = c
        if i < len(ch) - 1:
            n += _conv(c, c, 9)
    n += 2 * rch[-1] + 2 * _conv(lat, rch[-1], 1) + _conv(rch[-1], cout, 27)  # norm_out (spatial), conv_out
    if cfg.get("use_quant_conv", False):
        n += _conv(2 * lat, 2 * lat, 1)
    if cfg.get("use_post_quant_conv", False):
        n += _conv(lat, lat, 1)
    return n
