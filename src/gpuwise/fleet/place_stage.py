"""Each pipeline stage alone on one GPU: its memory and its GPU-seconds per call.

generate: gpuwise's estimate at `batch` concurrent calls; one call takes ttft + output x tpot,
so the GPU finishes batch / (ttft + output x tpot) calls a second. encode (embedders,
rerankers): prefill only, tokens per call / prefill tokens per second. Diffusion components
(text_encoder, unet, vae) that name their pipeline: that part of gpuwise's diffusion estimate
(gpuwise.diffusion.split), one call being one image or video; without a model, the pipeline
file's own declared figures.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from gpuwise.errors import DataError, InputError, unknown_name
from gpuwise.fleet.place_input import StageSpec
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["Kind", "StageCost", "budget_fraction", "kinds", "stage_cost"]


@dataclass(frozen=True)
class Kind:
    id: str
    estimate: str  # generate | encode | declared
    vllm_flags: tuple[str, ...]
    comfyui_node: str | None
    output_bytes_per_token: int


@dataclass(frozen=True)
class StageCost:
    spec: StageSpec
    kind: Kind
    memory_bytes: float
    seconds_per_call: float  # GPU-seconds one call occupies at the stage's batch
    output_bytes: float  # handed downstream per call
    source: str  # "estimate" or "declared"
    hf_id: str | None  # the checkpoint the settings load

    @property
    def calls_per_s(self) -> float:
        return 1.0 / self.seconds_per_call


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    raw = tomllib.loads(resources.files("gpuwise.data").joinpath("fleet_place.toml").read_text("utf-8"))
    if raw.get("schema_version") != 1:
        raise DataError(Text("data/fleet_place.toml: unknown schema_version.",
                             "data/fleet_place.toml：schema_version 未知。"))
    return raw


def kinds() -> dict[str, Kind]:
    return {r["id"]: Kind(r["id"], r["estimate"], tuple(r.get("vllm_flags", ())), r.get("comfyui_node"),
                          int(r.get("output_bytes_per_token", 0))) for r in _table()["kind"]}


def budget_fraction() -> float:
    return float(_table()["gpu_budget_fraction"])


def _declared(s: StageSpec, kind: Kind) -> StageCost:
    if s.memory_gib is None or s.seconds_per_call is None:
        raise InputError(Text(f"Stage '{s.name}' ({kind.id}) is not estimated by gpuwise: give memory_gib "
                              "and seconds_per_call.",
                              f"阶段“{s.name}”（{kind.id}）不由 gpuwise 估算：请给出 memory_gib 与 seconds_per_call。"))
    out = float(s.output_bytes or 0)
    return StageCost(s, kind, s.memory_gib * GiB, s.seconds_per_call, out, "declared", s.model)


# The diffusion role each ComfyUI component kind loads (data/fleet_place.toml [[kind]] ids).
_DIFFUSION_ROLE: dict[str, Literal["text_encoder", "denoiser", "vae"]] = {
    "text_encoder": "text_encoder", "unet": "denoiser", "vae": "vae"}


def _diffusion(s: StageSpec, kind: Kind, card: Any) -> StageCost:
    """A diffusion component sized by gpuwise: its part of the pipeline's estimate for the workload."""
    from gpuwise.diffusion.job import ImageJob
    from gpuwise.diffusion.resolve import is_diffusion_source, load_diffusion
    from gpuwise.diffusion.split import split_pipeline

    model_src = s.model or ""
    if s.memory_gib is not None or s.seconds_per_call is not None:
        raise InputError(Text(f"Stage '{s.name}' names a model and declares memory_gib/seconds_per_call: give one "
                              "or the other.",
                              f"阶段“{s.name}”既给了 model 又声明了 memory_gib/seconds_per_call：二者只能选一。"))
    if not is_diffusion_source(model_src):
        raise InputError(Text(f"Stage '{s.name}' ({kind.id}) needs an image or video pipeline as its model; "
                              f"'{model_src}' is not one.",
                              f"阶段“{s.name}”（{kind.id}）的 model 须为图像或视频流水线；“{model_src}”不是。"),
                         hint=Text("Image and video presets include flux.1-dev, sdxl and wan2.1-t2v-14b "
                                   "(`gpuwise model NAME`).",
                                   "图像/视频预设有 flux.1-dev、sdxl、wan2.1-t2v-14b 等（`gpuwise model 名称`）。"))
    model = load_diffusion(model_src)
    d = model.defaults
    job = ImageJob(width=s.width or d.width, height=s.height or d.height, frames=s.frames or d.frames,
                   batch=s.batch, steps=s.steps or d.steps, guidance=d.guidance, weights=s.weights,
                   te_weights=s.te_weights)
    part = split_pipeline(model, job, card)[_DIFFUSION_ROLE[kind.id]]
    out = float(s.output_bytes if s.output_bytes is not None else part.output_bytes / job.batch)
    return StageCost(s, kind, float(part.memory_bytes), part.seconds / job.batch, out, "estimate",
                     s.checkpoint or model.hf_id or model_src)


def stage_cost(s: StageSpec, card: Any) -> StageCost:
    table = kinds()
    if s.kind not in table:
        raise unknown_name(Text("stage kind", "阶段类型"), s.kind, table, "gpuwise place --help")
    kind = table[s.kind]
    if kind.estimate == "declared" and s.model is not None and kind.id in _DIFFUSION_ROLE:
        return _diffusion(s, kind, card)
    if kind.estimate == "declared":
        return _declared(s, kind)
    if s.model is None:
        raise InputError(Text(f"Stage '{s.name}' needs a model.", f"阶段“{s.name}”需要 model。"))
    from gpuwise.estimate.api import estimate
    from gpuwise.estimate.speed import InferSpeed
    from gpuwise.service import EstimateRequest, build

    generate = kind.estimate == "generate"
    out_tokens = min(s.output_tokens, s.tokens - 1) if generate and s.tokens > 1 else 1
    req = EstimateRequest(model=s.model, card=card.id, weights=s.weights, context=s.tokens,
                          concurrency=s.batch, output_tokens=out_tokens)
    model, w, d, _ = build(req)
    result = estimate(model, w, d)
    if not result.memory.fits:
        need = result.memory.breakdown.required / GiB
        raise InputError(Text(f"Stage '{s.name}' ({s.model}) needs {need:.1f} GiB: it does not fit one "
                              f"{card.name} even alone.",
                              f"阶段“{s.name}”（{s.model}）需要 {need:.1f} GiB：单独一张 {card.name} 也放不下。"),
                         hint=Text("Lower its precision, tokens or batch, or size it with `gpuwise plan`.",
                                   "请降低精度、tokens 或 batch，或用 `gpuwise plan` 选卡。"))
    sp = result.speed
    if not isinstance(sp, InferSpeed):  # a serving stage always gets a serving speed
        raise InputError(Text(f"Stage '{s.name}' ({s.model}) has no serving speed estimate.",
                              f"阶段“{s.name}”（{s.model}）没有推理速度估计。"))
    if generate:
        per_call = float(sp.ttft_s) + out_tokens * float(sp.tpot_s)
        seconds = per_call / s.batch
        out = float(s.output_bytes if s.output_bytes is not None else out_tokens * kind.output_bytes_per_token)
    else:
        seconds = s.tokens / float(sp.prefill_tokens_per_s)
        vector = model.hidden_size * 4 if kind.id == "embed" else 4  # fp32 embedding, or one fp32 score
        out = float(s.output_bytes if s.output_bytes is not None else vector)
    return StageCost(s, kind, result.memory.breakdown.required, seconds, out, "estimate", _checkpoint(s))


def _checkpoint(s: StageSpec) -> str | None:
    """What the settings load: the stage's checkpoint, else the preset's Hugging Face id."""
    if s.checkpoint:
        return s.checkpoint
    from gpuwise.catalog.presets import find_preset

    preset = find_preset(s.model or "")
    return preset.hf_id if preset is not None else s.model
