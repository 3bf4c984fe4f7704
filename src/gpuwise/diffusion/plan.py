"""Rank cards for a diffusion job: on each card, the fastest way it fits (offload and
quantization are choices with their cost in seconds and quality), filtered by a seconds-per-output
target, ranked by cost per output (or speed), with a reason for every card left out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from gpuwise.catalog.cards import Card
from gpuwise.diffusion.estimate import OS, DiffusionEstimate, estimate_diffusion, usable_bytes
from gpuwise.diffusion.job import OFFLOAD_WORDS, ImageJob, Offload
from gpuwise.diffusion.memory import estimate_memory, precision_of
from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.i18n import Text
from gpuwise.units import GiB

Objective = Literal["cost", "speed"]
# Options tried on every card, from the one that changes nothing to the ones that trade speed or
# quality for memory. "auto" tries near-lossless precisions (bf16, fp8, GGUF Q8_0); "any" adds 4-bit.
_OFFLOADS: tuple[Offload, ...] = ("none", "model", "group", "sequential")
_RESIDENT: tuple[Offload, ...] = ("none", "model")
_NEAR_LOSSLESS = ("auto", "fp8", "gguf:Q8_0")
_FOUR_BIT = ("nf4", "gguf:Q4_K_S")


@dataclass(frozen=True)
class DiffusionPlan:
    estimate: DiffusionEstimate
    reasons: tuple[Text, ...]

    @property
    def per_output_cost(self) -> float | None:
        c = self.estimate.cost
        return c.per_run / self.estimate.job.batch if c is not None and c.per_run else None


@dataclass(frozen=True)
class Rejected:
    card: Card
    reason: Text


def _precisions(weights: str) -> tuple[str, ...]:
    if weights == "auto":
        return _NEAR_LOSSLESS
    if weights == "any":
        return _NEAR_LOSSLESS + _FOUR_BIT
    return (weights,)


def _options(job: ImageJob, weights: str, allow_offload: bool) -> list[ImageJob]:
    out = []
    for prec in _precisions(weights):
        for off in _OFFLOADS if allow_offload else _RESIDENT:
            for tiling in (False, True):
                out.append(replace(job, weights=prec, offload=off, vae_tiling=tiling or job.vae_tiling))
    return out


def best_on_card(model: DiffusionModel, job: ImageJob, card: Card, os: OS, weights: str,
                 allow_offload: bool) -> DiffusionEstimate | None:
    """The fastest option that fits on one card (near-lossless precisions first on ties)."""
    usable = usable_bytes(card, os)
    best: DiffusionEstimate | None = None
    for option in _options(job, weights, allow_offload):
        if estimate_memory(model, option, usable).required > usable:
            continue
        est = estimate_diffusion(model, option, card, os)
        if best is None or est.speed.per_output_s < best.speed.per_output_s * 0.999:
            best = est
    return best


def _reasons(est: DiffusionEstimate, max_seconds: float | None) -> tuple[Text, ...]:
    j, m = est.job, est.memory
    prec = precision_of(est.model, est.model.denoiser, j)
    offload = OFFLOAD_WORDS[j.offload]
    out = [Text(f"fits in {m.required / GiB:,.1f} of {est.usable / GiB:,.1f} GiB with {prec} weights, "
                f"{offload.en}" + (", VAE tiling" if j.vae_tiling else ""),
                f"以 {prec} 权重、{offload.zh}" + ("、VAE 分块" if j.vae_tiling else "")
                + f"放入 {m.required / GiB:,.1f} / {est.usable / GiB:,.1f} GiB")]
    out.append(Text(f"{est.speed.per_output_s:,.1f} s per {est.model.kind}"
                    + (f" (target {max_seconds:,.1f} s)" if max_seconds else ""),
                    f"每个输出 {est.speed.per_output_s:,.1f} 秒"
                    + (f"（目标 {max_seconds:,.1f} 秒）" if max_seconds else "")))
    if prec not in ("bf16", "fp16", "fp32"):
        out.append(Text(f"{prec} changes the weights: check image quality", f"{prec} 改变了权重：请检查画质"))
    return tuple(out)


def plan_diffusion(model: DiffusionModel, job: ImageJob, cards: Sequence[Card], *, os: OS = "linux",
                   weights: str = "auto", allow_offload: bool = True, max_seconds: float | None = None,
                   objective: Objective = "cost", price: Any = None, top: int = 5,
                   excluded: dict[str, Text] | None = None) -> tuple[list[DiffusionPlan], list[Rejected]]:
    """Ranked plans and the rejected cards. `price(card, seconds)` gives a Cost or None."""
    plans: list[DiffusionPlan] = []
    rejected = [Rejected(c, excluded[c.id]) for c in cards if excluded and c.id in excluded]
    for card in cards:
        if excluded and card.id in excluded:
            continue
        if not card.dense_tflops("bf16"):
            rejected.append(Rejected(card, Text("no BF16 tensor rate in the catalog", "目录中没有 BF16 张量算力")))
            continue
        est = best_on_card(model, job, card, os, weights, allow_offload)
        if est is None:
            need = estimate_memory(model, replace(job, offload="sequential", vae_tiling=True), 0).required
            rejected.append(Rejected(card, Text(f"does not fit even with sequential offload ({need / GiB:,.1f} GiB)",
                                                f"即使顺序卸载也放不下（{need / GiB:,.1f} GiB）")))
            continue
        if max_seconds and est.speed.per_output_s > max_seconds:
            rejected.append(Rejected(card, Text(f"{est.speed.per_output_s:,.1f} s per output, over the "
                                                f"{max_seconds:,.1f} s target",
                                                f"每个输出 {est.speed.per_output_s:,.1f} 秒，"
                                                f"超过 {max_seconds:,.1f} 秒的目标")))
            continue
        if price is not None:
            est = replace(est, cost=price(card, est.speed.total_s))
        plans.append(DiffusionPlan(est, _reasons(est, max_seconds)))

    def key(p: DiffusionPlan) -> tuple[float, float]:
        cost = p.per_output_cost
        if objective == "speed":
            return (p.estimate.speed.per_output_s, cost or 0.0)
        return (cost if cost is not None else float("inf"), p.estimate.speed.per_output_s)
    plans.sort(key=key)
    return plans[:top], rejected
