"""`gpuwise plan`: enumerate card x count x precision x parallelism x offload, keep what fits
and meets the targets, rank, and say why every other card lost."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.api import CostOptions, cost_of, estimate_memory, speed_of
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.cost import Cost
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.estimate.weights import checkpoint_format
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB

COUNTS = (1, 2, 4, 8)
TRAIN_NODES = (1, 2, 4)


@dataclass(frozen=True)
class Targets:
    budget_per_hour: float | None = None
    budget_per_run: float | None = None
    min_throughput: float | None = None
    max_ttft: float | None = None
    min_tokens_per_s_per_user: float | None = None
    require: tuple[str, ...] = ()  # "ecc", "nvlink"
    objective: str = "cost"  # cost | speed | cost-per-token
    stage: str | None = None  # validate | stabilise | scale
    allow_offload: bool = False
    weights: str = "any"
    grad_ckpt_options: tuple[str, ...] = ("none",)  # training: try these, cheapest memory last


@dataclass(frozen=True)
class Candidate:
    workload: Workload
    deployment: Deployment
    memory: MemoryResult
    speed: InferSpeed | TrainSpeed | None = None
    cost: Cost | None = None
    failures: tuple[Text, ...] = ()
    reasons: tuple[Text, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return self.memory.fits and not self.failures


def _precisions(model: ModelArch, w: Workload, t: Targets) -> tuple[str, ...]:
    if w.task == "qlora":
        return ("nf4",)
    if w.is_training:
        return ("bf16",) if t.weights in ("any", "auto") else (t.weights,)
    if t.weights not in ("any", "auto"):
        return (t.weights,)
    native = checkpoint_format(model)
    ladder = [f for f in ("bf16", "fp8", "int4") if native in ("bf16", "fp16", "fp32") or f != "bf16"]
    return tuple(dict.fromkeys([native if native not in ("fp32", "fp16") else "bf16", *ladder]))


def _deployments(model: ModelArch, w: Workload, card: Card, t: Targets) -> Iterator[Deployment]:
    offloads = ("none", "cpu") if t.allow_offload else ("none",)
    for nodes in (TRAIN_NODES if w.is_training else (1,)):
        for gpus in COUNTS:
            if nodes > 1 and gpus < 8:
                continue
            for off in offloads:
                if w.is_training:
                    stages = (0,) if gpus * nodes == 1 and off == "none" else (2, 3) if off == "none" else (3,)
                    for zero in stages:
                        if w.task == "qlora" and zero == 3:
                            continue
                        yield Deployment(card=card, gpus=gpus, nodes=nodes, zero=zero, offload=off)  # type: ignore[arg-type]
                elif model.num_heads % gpus == 0:
                    yield Deployment(card=card, gpus=gpus, offload=off)  # type: ignore[arg-type]


def _target_failures(w: Workload, d: Deployment, speed: InferSpeed | TrainSpeed,
                     cost: Cost | None, t: Targets) -> list[Text]:
    out: list[Text] = []
    if cost is None and (t.budget_per_hour is not None or t.budget_per_run is not None):
        out.append(Text("no price for this card in the provider files, so the budget cannot be checked",
                        "价格文件中没有这张卡的报价，无法核对预算"))
    if cost is not None and t.budget_per_hour is not None and cost.per_hour > t.budget_per_hour:
        out.append(Text(f"over the budget by {cost.per_hour - t.budget_per_hour:,.2f} {cost.currency}/h",
                        f"超出预算 {cost.per_hour - t.budget_per_hour:,.2f} {cost.currency}/时"))
    if cost is not None and t.budget_per_run is not None and cost.per_run and cost.per_run > t.budget_per_run:
        out.append(Text(f"the run costs {cost.per_run:,.0f} {cost.currency}, over the budget",
                        f"整次训练 {cost.per_run:,.0f} {cost.currency}，超出预算"))
    if isinstance(speed, InferSpeed):
        if t.min_throughput and speed.throughput_tokens_per_s < t.min_throughput:
            out.append(Text(f"throughput {speed.throughput_tokens_per_s:,.0f} tok/s is below {t.min_throughput:,.0f}",
                            f"吞吐 {speed.throughput_tokens_per_s:,.0f} tok/s 低于 {t.min_throughput:,.0f}"))
        if t.max_ttft and speed.ttft_s > t.max_ttft:
            out.append(Text(f"TTFT {speed.ttft_s:.2f} s is above {t.max_ttft:g} s",
                            f"首 token 延迟 {speed.ttft_s:.2f} 秒，高于 {t.max_ttft:g} 秒"))
        if t.min_tokens_per_s_per_user and speed.decode_tokens_per_s < t.min_tokens_per_s_per_user:
            link = "PCIe" if d.card.interconnect == "none" else d.card.interconnect
            why = f" (TP over {link})" if d.gpus > 1 else ""
            out.append(Text(f"decode drops to {speed.decode_tokens_per_s:,.1f} tok/s per user{why}",
                            f"单用户解码仅 {speed.decode_tokens_per_s:,.1f} tok/s{why}"))
    elif t.min_throughput and speed.tokens_per_s < t.min_throughput:
        out.append(Text(f"{speed.tokens_per_s:,.0f} training tok/s is below {t.min_throughput:,.0f}",
                        f"训练吞吐 {speed.tokens_per_s:,.0f} tok/s 低于 {t.min_throughput:,.0f}"))
    return out


def _requirement_failures(card: Card, d: Deployment, t: Targets) -> list[Text]:
    need = set(t.require)
    if t.stage in ("stabilise", "scale"):
        need.add("ecc")
    if t.stage == "scale" and d.gpus > 1:
        need.add("nvlink")
    out: list[Text] = []
    if "ecc" in need and not card.ecc:
        out.append(Text("no ECC memory (needed for long runs and production)", "无 ECC 显存（长时间训练与生产需要）"))
    if "nvlink" in need and not card.has_nvlink:
        out.append(Text("no NVLink between GPUs", "卡间无 NVLink"))
    return out


def evaluate(model: ModelArch, w: Workload, d: Deployment, t: Targets, opts: CostOptions) -> Candidate:
    """Memory, speed, cost and every unmet target of one configuration."""
    mem = estimate_memory(model, w, d)
    if not mem.fits:
        return Candidate(w, d, mem, failures=(Text(
            f"does not fit by {(mem.breakdown.required - mem.usable) / GiB:,.1f} GiB per GPU",
            f"每卡还差 {(mem.breakdown.required - mem.usable) / GiB:,.1f} GiB 放不下"),))
    speed = speed_of(model, w, d, mem, inter_node_gbps=opts.inter_node_gbps)
    cost = cost_of(d, speed, opts)
    failures = _requirement_failures(d.card, d, t) + _target_failures(w, d, speed, cost, t)
    return Candidate(w, d, mem, speed, cost, tuple(failures))


def candidates(model: ModelArch, w: Workload, cards: list[Card], t: Targets,
               opts: CostOptions) -> Iterator[Candidate]:
    for card in cards:
        for fmt in _precisions(model, w, t):
            for ckpt in (t.grad_ckpt_options if w.is_training else (w.grad_ckpt,)):
                w2 = dataclasses.replace(w, weights=fmt, grad_ckpt=ckpt)  # type: ignore[arg-type]
                for d in _deployments(model, w2, card, t):
                    try:
                        yield evaluate(model, w2, d, t, opts)
                    except GpuwiseError:
                        continue  # a combination the engine refuses (e.g. FP8 weights without FP8 cores)
