"""Seconds per image or video: steps x denoiser calls x forward FLOPs at achievable compute,
plus the text encoders, the VAE decode and the offload transfers.

Rates come from estimate.links.card_rates: the dense BF16 tensor peak of the card times the
family's `prefill` fraction (data/efficiency.toml: the share of peak a compute-bound transformer
forward reaches, GEMMs + attention + glue). Weight-only quantized layers are slowed by the
precision's measured `speed_factor` (data/models/diffusion/constants.toml).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog.cards import Card
from gpuwise.diffusion.count_unet import unet2d_flops, vae_decode_flops
from gpuwise.diffusion.job import ImageJob, cfg_passes, constants, geometry
from gpuwise.diffusion.memory import _JOINT, DiffusionMemory, precision_of, weight_bytes
from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.errors import InputError
from gpuwise.estimate.links import card_rates
from gpuwise.i18n import Text

_CONV_SHARE = 0.5  # convolutions with large activations reach about half the GEMM share (assumed)


@dataclass(frozen=True)
class DiffusionSpeed:
    call_flops: float  # one denoiser call
    step_s: float  # one sampling step (all its calls), compute and streaming
    denoise_s: float
    text_s: float
    vae_s: float
    transfer_s: float  # model offload moves, outside the steps
    total_s: float  # one generation (the whole batch)
    per_output_s: float  # per image or per video
    achieved_tflops: float  # the rate assumed for the denoiser, TFLOP/s


def denoiser_call_flops(model: DiffusionModel, job: ImageJob) -> tuple[float, float]:
    """(linear, attention) FLOPs of one denoiser call on one sample."""
    geo = geometry(model, job)
    den = model.denoiser
    if den.class_name == "UNet2DConditionModel":
        return unet2d_flops(den.config, geo.latent_h, geo.latent_w, geo.text_tokens), 0.0
    d, c = den.width, den.config
    layers = int(c.get("num_layers", 0)) + int(c.get("num_single_layers") or 0)
    joint = den.class_name in _JOINT
    seq = geo.image_tokens + (geo.text_tokens if joint else 0)
    linear = 2.0 * den.params * seq  # every weight meets every token once (the embedders are negligible)
    attention = layers * 4.0 * seq * seq * d  # QK^T and PV
    if not joint:  # Wan: cross-attention to the text tokens
        attention += layers * 4.0 * seq * geo.text_tokens * d
        linear += layers * 4.0 * geo.text_tokens * d * d  # the text tokens' k and v projections
    return linear, attention


def _fractions(card: Card, prefill: float) -> tuple[float, float]:
    eff = constants()["efficiency"]
    linear = float(eff["linear"].get(card.family, prefill))
    return linear, float(eff["attention"].get(card.family, eff["default_attention"]))


def _vae_flops(model: DiffusionModel, job: ImageJob) -> float:
    vae = model.vae
    cfg = vae.config
    if vae.class_name == "AutoencoderKLWan":
        base = int(cfg.get("decoder_base_dim") or cfg.get("base_dim", 96))
        chans = [base * int(m) for m in cfg.get("dim_mult", [1, 2, 4, 4])]
        per = int(cfg.get("num_res_blocks", 2))
    else:
        chans = [int(x) for x in cfg["block_out_channels"]]
        per = int(cfg.get("layers_per_block", 2))
    video = model.kind == "video"
    return job.batch * job.frames * vae_decode_flops(chans, per, job.pixels, 27 if video else 9) / (
        4 if video else 1)  # a causal 3D decoder runs its deepest levels on the latent frames (1/4)


def estimate_speed(model: DiffusionModel, job: ImageJob, card: Card, mem: DiffusionMemory,
                   calibration: object = None) -> DiffusionSpeed:
    peak = card.dense_tflops("bf16")
    if not peak:
        raise InputError(Text(f"{card.name} has no BF16 tensor rate in the catalog: the speed cannot be estimated.",
                              f"目录中 {card.name} 没有 BF16 张量算力：无法估算速度。"))
    rates = card_rates(card, calibration)
    lin_frac, attn_frac = _fractions(card, rates.prefill)
    if model.denoiser.class_name == "UNet2DConditionModel":
        share = constants()["efficiency"]["unet_gemm_share"]
        lin_frac = rates.gemm * float(share.get(card.family, share["default"]))  # convolutions + attention
    rate = peak * 1e12 * lin_frac
    factor = float(constants()["precision"][precision_of(model, model.denoiser, job)]["speed_factor"])
    samples, calls = cfg_passes(model, job)
    linear, attention = denoiser_call_flops(model, job)
    call_flops = (linear + attention) * samples
    call_s = samples * (linear / rate * factor + attention / (peak * 1e12 * attn_frac))
    stream_s = mem.streamed_per_call / rates.pcie_h2d
    if job.offload == "group":  # prefetch on a side stream: transfer hides behind compute
        call_s = max(call_s, stream_s)
    elif job.offload == "lowvram":
        call_s += stream_s / float(constants()["runtime"]["lowvram_stream_efficiency"])
    elif job.offload == "sequential":
        call_s += stream_s / float(constants()["runtime"]["sequential_transfer_efficiency"])
    step_s = call_s * calls
    text_tokens = {n: t for n, t in model.text_tokens.items()}
    prompts = 2 if calls * samples > job.batch else 1  # negative prompt too
    te_rate = rate if not job.te_cpu else 1e12  # a CPU runs the encoder at about 1 TFLOP/s (assumed)
    text_s = sum(2.0 * model.component(n).params * t * prompts * job.batch for n, t in text_tokens.items()
                 if any(c.name == n for c in model.components)) / te_rate
    vae_s = _vae_flops(model, job) / (rate * _CONV_SHARE)
    transfer_s = 0.0
    if job.offload == "model" or (job.runtime == "comfyui" and job.offload == "none" and mem.host_bytes):
        moved = sum(weight_bytes(c, precision_of(model, c, job)) for c in model.components
                    if not (job.te_cpu and c.role == "text_encoder"))
        transfer_s = 2 * moved / (rates.pcie_h2d * float(constants()["runtime"]["model_offload_transfer_efficiency"]))
    denoise_s = step_s * job.steps
    total = text_s + denoise_s + vae_s + transfer_s
    return DiffusionSpeed(call_flops, step_s, denoise_s, text_s, vae_s, transfer_s, total, total / job.batch,
                          call_flops / call_s * 1e-12 if call_s else 0.0)
