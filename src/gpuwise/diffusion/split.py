"""A diffusion pipeline split by role, each part on its own GPU (ComfyUI-MultiGPU's text encoder /
UNet / VAE loaders, or diffusers components moved with `.to("cuda:N")`): what each part needs on
its GPU and how long it runs per generation. `gpuwise place` sizes its diffusion stages here.

A part's memory is its components' weights at their precision, the transient of the phase it runs
(text encoding: the encoder's own hidden states; denoising: data/models/diffusion/constants.toml
[activations]; the VAE decode: [vae]) and one CUDA context (the GPU it runs on). Its seconds are
the same phase's time in the whole-pipeline speed estimate (gpuwise.diffusion.speed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwise.catalog.cards import Card
from gpuwise.diffusion.job import ImageJob, cfg_passes, geometry
from gpuwise.diffusion.memory import denoiser_activations, estimate_memory, precision_of, vae_decode_bytes, weight_bytes
from gpuwise.diffusion.pipeline import DiffusionModel, Role
from gpuwise.diffusion.speed import estimate_speed
from gpuwise.estimate.constants import runtime_overhead_bytes

__all__ = ["ROLES", "PartCost", "split_pipeline"]

ROLES: tuple[Role, ...] = ("text_encoder", "denoiser", "vae")
Phase = Literal["encode", "denoise", "decode"]


@dataclass(frozen=True)
class PartCost:
    role: Role
    components: tuple[str, ...]  # model_index.json names
    weights_bytes: int
    transient_bytes: int
    runtime_bytes: int  # the CUDA context + cuBLAS workspace of its GPU
    seconds: float  # per generation (the whole batch of images or videos)
    output_bytes: int  # what one generation hands the next part

    @property
    def memory_bytes(self) -> int:
        return self.weights_bytes + self.transient_bytes + self.runtime_bytes


def _text_output(model: DiffusionModel, job: ImageJob) -> int:
    """Hidden states the text encoders hand the denoiser: tokens x width x 2 bytes (bf16), for the
    prompt and, with classifier-free guidance, the negative prompt."""
    samples, calls = cfg_passes(model, job)
    prompts = 2 if samples * calls > job.batch else 1
    return sum(t * model.component(n).width * 2 * prompts * job.batch for n, t in model.text_tokens.items()
               if any(c.name == n for c in model.components))


def _latent_bytes(model: DiffusionModel, job: ImageJob) -> int:
    """The denoised latents handed to the VAE: cells x latent channels x 4 bytes (fp32)."""
    channels = int(model.vae.config.get("latent_channels") or model.vae.config.get("z_dim") or 16)
    return geometry(model, job).latent_cells * channels * 4 * job.batch


def _text_transient(model: DiffusionModel, job: ImageJob) -> int:
    """An encoder's forward keeps a few hidden-state copies of its tokens (bf16): small next to its weights."""
    samples, calls = cfg_passes(model, job)
    prompts = 2 if samples * calls > job.batch else 1
    live = 8  # residual, norm, q, k, v, attention out + the feed-forward's two halves (as [activations])
    return max((t * model.component(n).width * 2 * live * prompts * job.batch for n, t in model.text_tokens.items()
                if any(c.name == n for c in model.components)), default=0)


def split_pipeline(model: DiffusionModel, job: ImageJob, card: Card) -> dict[Role, PartCost]:
    """Each role's part of one generation, estimated with everything it needs on its own GPU."""
    whole = estimate_memory(model, job)
    speed = estimate_speed(model, job, card, whole)
    runtime = int(runtime_overhead_bytes(False))
    geo = geometry(model, job)
    transient = {"text_encoder": _text_transient(model, job), "denoiser": denoiser_activations(model, job, geo),
                 "vae": vae_decode_bytes(model, job)}
    seconds = {"text_encoder": speed.text_s, "denoiser": speed.denoise_s, "vae": speed.vae_s}
    output = {"text_encoder": _text_output(model, job), "denoiser": _latent_bytes(model, job),
              "vae": job.batch * job.frames * 3 * job.height * job.width}  # 8-bit RGB frames
    parts: dict[Role, PartCost] = {}
    for role in ROLES:
        comps = tuple(c for c in model.components if c.role == role)
        weights = sum(weight_bytes(c, precision_of(model, c, job)) for c in comps)
        parts[role] = PartCost(role, tuple(c.name for c in comps), weights, transient[role], runtime,
                               seconds[role], output[role])
    return parts
