"""What one generation asks for (size, frames, steps, guidance, precision, offload), its bounds,
and the latent geometry it implies for a pipeline."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Text

Offload = Literal["none", "model", "sequential", "group", "lowvram"]
# Each offload mode in words, for the reasons and every shell
OFFLOAD_WORDS: dict[str, Text] = {"none": Text("no offload", "不卸载"), "model": Text("model offload", "模型级卸载"),
                                  "sequential": Text("sequential offload", "逐层卸载"),
                                  "group": Text("group offload", "分组卸载"),
                                  "lowvram": Text("ComfyUI low-VRAM", "ComfyUI 低显存模式")}
Runtime = Literal["diffusers", "comfyui"]
OFFLOADS: tuple[Offload, ...] = ("none", "model", "sequential", "group", "lowvram")
RUNTIMES: tuple[Runtime, ...] = ("diffusers", "comfyui")
# Bounds, shared by the CLI, the web API and the Python API.
BOUNDS: dict[str, tuple[int, int]] = {"width": (64, 8192), "height": (64, 8192), "frames": (1, 1025),
                                      "batch": (1, 64), "steps": (1, 1000)}
_CONSTANTS = Path(__file__).resolve().parent.parent / "data" / "models" / "diffusion" / "constants.toml"


@functools.cache
def constants() -> dict[str, Any]:
    with _CONSTANTS.open("rb") as fh:
        return tomllib.load(fh)


def precisions() -> tuple[str, ...]:
    return tuple(constants()["precision"])


@dataclass(frozen=True)
class ImageJob:
    width: int
    height: int
    frames: int = 1
    batch: int = 1  # images (or videos) per prompt
    steps: int = 28
    guidance: float = 3.5
    weights: str = "auto"  # the denoiser's precision; auto: as stored (bf16 when unknown)
    te_weights: str = "auto"  # the large text encoder's precision
    offload: Offload = "none"
    vae_tiling: bool = False
    vae_slicing: bool = False
    runtime: Runtime = "diffusers"
    te_cpu: bool = False  # text encoders run on the CPU (Wan's --t5_cpu, ComfyUI's CPU text encoder)

    def __post_init__(self) -> None:
        for name, (lo, hi) in BOUNDS.items():
            value = getattr(self, name)
            flag = "--images" if name == "batch" else f"--{name}"  # the CLI's word for the batch
            if not lo <= value <= hi:
                raise InputError(Text(f"{flag} must be between {lo:,} and {hi:,}; got {value:,}.",
                                      f"{flag} 必须在 {lo:,} 到 {hi:,} 之间，实际为 {value:,}。"))
        if not 0.0 <= self.guidance <= 100.0:
            raise InputError(Text(f"--guidance must be between 0 and 100; got {self.guidance}.",
                                  f"--guidance 必须在 0 到 100 之间，实际为 {self.guidance}。"))
        for flag, value, choices in (("--offload", self.offload, OFFLOADS), ("--runtime", self.runtime, RUNTIMES),
                                     ("--weights", self.weights, ("auto", *precisions())),
                                     ("--te-weights", self.te_weights, ("auto", *precisions()))):
            if value not in choices:
                raise unknown_name(Text(f"{flag} value", f"{flag} 取值"), value, choices, "gpuwise estimate --help")

    @property
    def pixels(self) -> int:
        return self.width * self.height


@dataclass(frozen=True)
class Geometry:
    """Latent cells and denoiser tokens of one sample (one image or one video)."""

    latent_frames: int
    latent_h: int
    latent_w: int
    image_tokens: int
    text_tokens: int  # tokens of the largest text encoder (joint attention sees them)

    @property
    def latent_cells(self) -> int:
        return self.latent_frames * self.latent_h * self.latent_w


def geometry(model: DiffusionModel, job: ImageJob) -> Geometry:
    lat = model.latent
    step = lat.spatial * lat.patch[1]
    if job.width % step or job.height % step:
        raise InputError(Text(f"{model.name} needs width and height in multiples of {step}; got "
                              f"{job.width}x{job.height}.",
                              f"{model.name} 的宽和高须为 {step} 的倍数，实际为 {job.width}x{job.height}。"))
    if model.kind == "image" and job.frames != 1:
        raise InputError(Text(f"{model.name} makes images: --frames must be 1.",
                              f"{model.name} 生成图像：--frames 只能为 1。"))
    if model.kind == "video" and (job.frames - 1) % lat.temporal:
        raise InputError(Text(f"{model.name} needs frames = {lat.temporal}k + 1 (e.g. 49, 81, 121); got {job.frames}.",
                              f"{model.name} 的帧数须为 {lat.temporal}k + 1（如 49、81、121），实际为 {job.frames}。"))
    lf = (job.frames - 1) // lat.temporal + 1 if model.kind == "video" else 1
    lh, lw = job.height // lat.spatial, job.width // lat.spatial
    tokens = (lf // lat.patch[0]) * (lh // lat.patch[1]) * (lw // lat.patch[2])
    text = max(model.text_tokens.values(), default=0)
    return Geometry(lf, lh, lw, tokens, text)


def cfg_passes(model: DiffusionModel, job: ImageJob) -> tuple[int, int]:
    """(samples per denoiser call, calls per step): classifier-free guidance runs the prompt and the
    negative prompt, batched into one call (SD, SDXL, SD3, CogVideoX pipelines) or as two calls (Wan);
    guidance-distilled models (FLUX.1 dev, HunyuanVideo) take the scale as an input and run once."""
    if model.cfg in ("distilled", "none") or job.guidance <= 1.0:
        return job.batch, 1
    return (2 * job.batch, 1) if model.cfg == "batched" else (job.batch, 2)
