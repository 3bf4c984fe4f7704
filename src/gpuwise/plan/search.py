"""`gpuwise plan`: enumerate card x count x precision x parallelism x replicas x batch, keep what
fits and meets the targets. Ranking and the "why not" lines live in `plan.rank`."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.catalog.prices import currency_word
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.api import (
    CostOptions,
    check_valid,
    cost_of,
    estimate_memory,
    per_replica,
    scale_out,
    speed_of,
)
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.cost import Cost
from gpuwise.estimate.ranges import Cell, band, find_cell, full_pool_cap
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.estimate.weights import checkpoint_format
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.once import once
from gpuwise.units import GiB

COUNTS = (1, 2, 4, 8)  # GPUs per engine (tensor parallel) or per training node
REPLICAS = (1, 2, 3, 4, 6, 8)  # serving engines behind a load balancer
MAX_NODES = 4
TRAIN_NODES = (1, 2, 4)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
# The default ladder keeps the checkpoint's precision or FP8, both near-lossless
# (data/quant_quality.toml); 4-bit comes in only when asked or when nothing else fits.
DEFAULT_FORMATS = ("native", "fp8")
LOW_BIT_FORMATS = ("int4",)


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
    weights: str = "auto"  # auto: native or fp8; any: 4-bit too; else exactly this format
    grad_ckpt_options: tuple[str, ...] = ("none",)  # training: try these, cheapest memory last
    global_batch: int | None = None  # training: sequences per optimizer step, kept fixed
    replicas: int | None = None  # serving: exactly this many engines (None: search)
    low_bit: bool = False  # the fallback pass: 4-bit allowed because nothing else fitted
    engine: str = "vllm"  # serving: the engine whose memory and speed rules size each candidate
    engine_version: str = ""  # its version ('' = the newest rules in data/engines.toml)

    @property
    def given(self) -> tuple[str, ...]:
        """The targets the user set, by name (for "meets every target")."""
        names = ("budget_per_hour", "budget_per_run", "min_throughput", "max_ttft", "min_tokens_per_s_per_user")
        return tuple(n for n in names if getattr(self, n) is not None) + tuple(self.require)

    @property
    def reads_speed(self) -> bool:
        """Whether a target needs the speed estimate to be met (`target_failures` reads it)."""
        return bool(self.min_throughput or self.max_ttft or self.min_tokens_per_s_per_user)


@dataclass(frozen=True)
class Candidate:
    workload: Workload  # one replica's (serving) or one rank's (training) workload
    deployment: Deployment  # one replica's GPUs (serving) or the whole job (training)
    memory: MemoryResult
    speed: InferSpeed | TrainSpeed | None = None  # the whole deployment's
    cost: Cost | None = None  # the whole deployment's
    unmet: tuple[Text, ...] = ()  # the targets and requirements a configuration that fits misses
    replicas: int = 1
    users: int = 1  # concurrency of the whole deployment
    nodes: int = 1  # machines the deployment needs
    reasons: tuple[Text, ...] = field(default=(), compare=False)

    @once
    def fits(self) -> bool:
        return self.memory.fits

    @once
    def failures(self) -> tuple[Text, ...]:
        """Why it is not a plan: the memory it lacks, else every target it misses (worded here,
        when asked: most configurations that lose are never shown)."""
        if self.fits:
            return self.unmet
        short = (self.memory.breakdown.required - self.memory.usable) / GiB
        return (Text(f"does not fit by {short:,.1f} GiB per GPU", f"每卡还差 {short:,.1f} GiB 放不下"),)

    @property
    def ok(self) -> bool:
        return self.fits and not self.unmet

    @once
    def required_high(self) -> float | None:
        """The top of the 80 % band of the memory it needs per GPU, as `gpuwise estimate` gives it
        (estimate/ranges.py `ranges_for`: a training pool counted at the card is capped there unless the
        tensors' band passes it; no other cap or floor)."""
        d, w = self.deployment, self.workload
        required = self.memory.breakdown.required
        cell = _memory_cell(w.is_training, d.engine, d.card.family, w.task, w.framework)
        if cell is None or not math.isfinite(required) or required <= 0:
            return None
        top, tensors = band(required, cell).high, self.memory.tensors_beside_full_pool
        return top if tensors is None else min(top, full_pool_cap(self.memory.usable, tensors, cell))

    @property
    def tight(self) -> bool:
        """Fits at the estimate, not at the top of its 80 % band (`gpuwise estimate`'s "tight")."""
        if not self.fits:
            return False
        top = self.required_high
        return top is not None and top > self.memory.usable

    @property
    def gpus_total(self) -> int:
        return self.deployment.gpus * self.deployment.nodes * self.replicas

    @property
    def gpus_per_node(self) -> int:
        return self.gpus_total // self.nodes


@functools.lru_cache(maxsize=256)
def _memory_cell(training: bool, engine: str, family: str, task: str, framework: str) -> Cell | None:
    """The fitted band `ranges_for` gives memory.required in this regime."""
    return find_cell("memory", "training" if training else engine, family,
                     task=task if training else "", framework=framework if training else "")


def precisions(model: ModelArch, w: Workload, t: Targets) -> tuple[str, ...]:
    if w.task == "qlora":
        return ("nf4",)
    if w.is_training:
        return ("bf16",) if t.weights in ("any", "auto") else (t.weights,)
    if t.weights not in ("any", "auto"):
        return (t.weights,)
    native = checkpoint_format(model)
    if native == "gguf":  # a GGUF file runs as stored: its own quantisation, read by llama.cpp
        return ("auto",)
    base = "bf16" if native in ("fp32", "fp16", "bf16") else native
    ladder = [base, "fp8"] if base in ("bf16",) else [base]
    if t.weights == "any" or t.low_bit:
        ladder += [f for f in LOW_BIT_FORMATS if f != base]
    return tuple(dict.fromkeys(ladder))


# Deployments outlive a request: they are values of the card and a few settings, which the
# catalog's cards (parsed once) share with every request. Keyed by the card's identity, the
# card pinned beside it so that identity is never reused; cleared when full (a cards file makes
# new cards each time).
_DEPLOYMENTS: dict[tuple[object, ...], tuple[Card, Deployment]] = {}
_DEPLOYMENTS_MAX = 8192


# Workloads made from another by a change, by value: requests that share a workload (a server
# answers many alike) share its variants too. Cleared when full, like the deployments.
_WORKLOADS: dict[tuple[object, ...], Workload] = {}


def remade(w: Workload, **change: Any) -> Workload:
    """`dataclasses.replace(w, **change)`, made once per value."""
    key = (w, *change.items())
    found = _WORKLOADS.get(key)
    if found is None:
        if len(_WORKLOADS) >= _DEPLOYMENTS_MAX:
            _WORKLOADS.clear()
        found = _WORKLOADS[key] = dataclasses.replace(w, **change)
    return found


class Shapes:
    """The workloads and deployments of one request, each made once: `dataclasses.replace` and the
    constructors validate every field, which costs more than the estimate's own arithmetic."""

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], Any] = {}

    def workload(self, w: Workload, **change: Any) -> Workload:
        key = (id(w), *change.items())
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = remade(w, **change)
        return found

    @staticmethod
    def deployment(card: Card, **given: Any) -> Deployment:
        key = (id(card), *given.items())
        found = _DEPLOYMENTS.get(key)
        if found is None:
            if len(_DEPLOYMENTS) >= _DEPLOYMENTS_MAX:
                _DEPLOYMENTS.clear()
            found = _DEPLOYMENTS[key] = (card, Deployment(card=card, **given))
        return found[1]


def _serving(model: ModelArch, w: Workload, card: Card, t: Targets,
             shapes: Shapes) -> Iterator[tuple[Deployment, int, int]]:
    """(one replica's deployment, replicas, nodes). An engine stays inside one machine; replicas
    fill machines whole, and a one-GPU form factor (a laptop) is never a cluster."""
    per_node = card.max_gpus_per_node
    offloads = ("none", "cpu") if t.allow_offload else ("none",)
    for tp in (n for n in COUNTS if n <= per_node and model.num_heads % n == 0):
        engines = [shapes.deployment(card, gpus=tp, offload=off, engine=t.engine, engine_version=t.engine_version)
                   for off in offloads]
        for replicas in (t.replicas,) if t.replicas else REPLICAS:
            if replicas > w.concurrency:
                break  # an engine with no user of its own
            per_node_replicas = per_node // tp
            nodes = -(-replicas // per_node_replicas)
            if nodes > (1 if per_node == 1 else MAX_NODES):
                break
            for d in engines:
                yield d, replicas, nodes


def _training(w: Workload, card: Card, t: Targets, shapes: Shapes) -> Iterator[Deployment]:
    per_node = card.max_gpus_per_node
    offloads = ("none", "cpu") if t.allow_offload else ("none",)
    for nodes in TRAIN_NODES:
        for gpus in (n for n in COUNTS if n <= per_node):
            if nodes > 1 and (gpus < per_node or per_node == 1):
                continue  # a multi-node job uses whole machines
            for off in offloads:
                stages = (0,) if gpus * nodes == 1 and off == "none" else (2, 3) if off == "none" else (3,)
                for zero in stages:
                    if w.task == "qlora" and zero == 3:
                        continue
                    yield shapes.deployment(card, gpus=gpus, nodes=nodes, zero=zero, offload=off)


def batch_splits(w: Workload, dp: int, t: Targets) -> Iterator[tuple[int, int]]:
    """(micro-batch, accumulation) pairs: with a global batch fixed, every split of it over `dp`
    ranks, largest micro-batch (fastest) first up to the one asked for; else the one asked for."""
    if t.global_batch is None:
        yield w.micro_batch, w.grad_accum
        return
    if t.global_batch % dp:
        return
    per_rank = t.global_batch // dp
    for micro in sorted((m for m in {*MICRO_BATCHES, w.micro_batch} if m <= w.micro_batch), reverse=True):
        if per_rank % micro == 0:
            yield micro, per_rank // micro


def target_failures(c: Candidate, t: Targets) -> list[Text]:
    out: list[Text] = []
    cost, speed = c.cost, c.speed
    yuan = currency_word(cost.currency, "zh") if cost is not None else ""
    # an unpriced card is not failed here: it goes to the plan's "fits, no price" list
    if cost is not None and t.budget_per_hour is not None and cost.per_hour > t.budget_per_hour:
        out.append(Text(f"costs {cost.per_hour:,.2f} {cost.currency}/h, over the budget of "
                        f"{t.budget_per_hour:,.2f}",
                        f"每小时 {cost.per_hour:,.2f} {yuan}，超出预算 {t.budget_per_hour:,.2f}"))
    if cost is not None and t.budget_per_run is not None and cost.per_run and cost.per_run > t.budget_per_run:
        out.append(Text(f"the run costs {cost.per_run:,.0f} {cost.currency}, over the budget of "
                        f"{t.budget_per_run:,.0f}",
                        f"整次训练 {cost.per_run:,.0f} {yuan}，超出预算 {t.budget_per_run:,.0f}"))
    if isinstance(speed, InferSpeed):
        if t.min_throughput and speed.throughput_tokens_per_s < t.min_throughput:
            out.append(Text(f"throughput {speed.throughput_tokens_per_s:,.0f} tok/s is below {t.min_throughput:,.0f}",
                            f"吞吐 {speed.throughput_tokens_per_s:,.0f} tok/s 低于 {t.min_throughput:,.0f}"))
        if t.max_ttft and speed.ttft_s > t.max_ttft:
            out.append(Text(f"TTFT {speed.ttft_s:.2f} s is above {t.max_ttft:g} s",
                            f"首 token 延迟 {speed.ttft_s:.2f} 秒，高于 {t.max_ttft:g} 秒"))
        if t.min_tokens_per_s_per_user and speed.decode_tokens_per_s < t.min_tokens_per_s_per_user:
            d = c.deployment
            why = f" (TP over {'PCIe' if not d.card.linked(d.gpus) else d.card.interconnect})" if d.gpus > 1 else ""
            out.append(Text(f"decode drops to {speed.decode_tokens_per_s:,.1f} tok/s per user{why}",
                            f"单用户解码仅 {speed.decode_tokens_per_s:,.1f} tok/s{why}"))
    elif speed is not None and t.min_throughput and speed.tokens_per_s < t.min_throughput:
        out.append(Text(f"{speed.tokens_per_s:,.0f} training tok/s is below {t.min_throughput:,.0f}",
                        f"训练吞吐 {speed.tokens_per_s:,.0f} tok/s 低于 {t.min_throughput:,.0f}"))
    return out


def requirement_failures(c: Candidate, t: Targets) -> list[Text]:
    card, d = c.deployment.card, c.deployment
    need = set(t.require)
    if t.stage in ("stabilise", "scale"):
        need.add("ecc")
    out: list[Text] = []
    if t.stage == "scale" and c.gpus_total < 2:
        out.append(Text("the scale stage is a multi-GPU job", "扩展阶段是多卡任务"))
    if t.stage == "scale" and d.gpus > 1 and not card.linked(d.gpus):
        need.add("nvlink")
    if "ecc" in need and not card.ecc:
        out.append(Text("no ECC memory (needed for long runs and production)", "无 ECC 显存（长时间训练与生产需要）"))
    if "nvlink" in need and d.gpus > 1 and not card.linked(d.gpus):
        link = Text(f"NVLink joins only {card.interconnect_max_gpus} of the {d.gpus} GPUs",
                    f"NVLink 只连通 {d.gpus} 张卡中的 {card.interconnect_max_gpus} 张") \
            if card.interconnect != "none" else Text("no NVLink between GPUs", "卡间无 NVLink")
        out.append(link)
    return out


def evaluate(model: ModelArch, w: Workload, d: Deployment, t: Targets, opts: CostOptions,
             replicas: int = 1, nodes: int = 1) -> Candidate:
    """Memory, speed, cost and every unmet target of one configuration. Raises GpuwiseError for
    what `estimate` refuses too (the same `check_valid`)."""
    check_valid(model, w, d)
    users = w.concurrency
    w1 = per_replica(w, replicas) if not w.is_training else w
    mem = estimate_memory(model, w1, d)
    base = Candidate(w1, d, mem, replicas=replicas, users=users, nodes=nodes if not w.is_training else d.nodes)
    if not mem.fits:
        return base
    speed = scale_out(speed_of(model, w1, d, mem, inter_node_gbps=opts.inter_node_gbps), replicas)
    c = dataclasses.replace(base, speed=speed, cost=cost_of(d, speed, opts, replicas))
    return dataclasses.replace(c, unmet=tuple(requirement_failures(c, t) + target_failures(c, t)))


Engine = tuple[Deployment, int, int]  # one replica's deployment, replicas, nodes


# Each card's engine layouts by what they depend on (search.Shapes makes their deployments once),
# the card pinned beside its identity; cleared when full, like the deployments.
_LAYOUTS: dict[tuple[object, ...], tuple[Card, list[Engine]]] = {}


def serving_grid(model: ModelArch, w: Workload, card: Card, t: Targets,
                 shapes: Shapes) -> tuple[list[Workload], list[Engine]]:
    """Serving's configurations on `card` as a grid: each precision's workload with each engine
    layout, workload by workload (the order `configurations` yields them in)."""
    return serving_workloads(model, w, t, shapes), engine_layouts(model, w, card, t, shapes)


def serving_workloads(model: ModelArch, w: Workload, t: Targets, shapes: Shapes) -> list[Workload]:
    """The grid's workloads: one per precision tried, the same on every card."""
    return [shapes.workload(w, weights=fmt, grad_ckpt=w.grad_ckpt) for fmt in precisions(model, w, t)]


def engine_layouts(model: ModelArch, w: Workload, card: Card, t: Targets, shapes: Shapes) -> list[Engine]:
    """The grid's engine layouts on `card`. They depend on the users, not on the precision: listed
    once (and kept for the next request that asks the same of the card)."""
    key = (id(card), model.num_heads, w.concurrency, t.allow_offload, t.engine, t.engine_version, t.replicas)
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= _DEPLOYMENTS_MAX:
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = (card, list(_serving(model, w, card, t, shapes)))
    return found[1]


def configurations(
    model: ModelArch, w: Workload, card: Card, t: Targets, shapes: Shapes
) -> Iterator[tuple[Workload, Deployment, int, int]]:
    """Every (workload, deployment, replicas, nodes) the search tries on `card`, in its order."""
    if not w.is_training:
        workloads, serving = serving_grid(model, w, card, t, shapes)
        for w2 in workloads:
            for d, replicas, nodes in serving:
                yield w2, d, replicas, nodes
        return
    for fmt in precisions(model, w, t):
        for ckpt in t.grad_ckpt_options:
            w2 = shapes.workload(w, weights=fmt, grad_ckpt=ckpt)
            for d in _training(w2, card, t, shapes):
                dp = d.gpus * d.nodes // ((d.tp or 1) * d.pp)
                for micro, accum in batch_splits(w2, dp, t):
                    yield shapes.workload(w2, micro_batch=micro, grad_accum=accum), d, 1, d.nodes


def candidates(model: ModelArch, w: Workload, cards: list[Card], t: Targets,
               opts: CostOptions) -> Iterator[Candidate]:
    """Every configuration evaluated in full, one by one: the reference `plan.fast` must match."""
    shapes = Shapes()
    for card in cards:
        for w2, d, replicas, nodes in configurations(model, w, card, t, shapes):
            try:
                yield evaluate(model, w2, d, t, opts, replicas, nodes)
            except GpuwiseError:
                continue  # refused by check_valid, as `estimate` would refuse it
