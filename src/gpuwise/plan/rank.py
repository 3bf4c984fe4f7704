"""Rank the candidates that pass, and explain every card that lost."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Card
from gpuwise.estimate.api import CostOptions
from gpuwise.estimate.speed import InferSpeed
from gpuwise.estimate.workload import Workload
from gpuwise.i18n import Text
from gpuwise.plan.search import Candidate, Targets, candidates
from gpuwise.units import GiB

SCHEMA_VERSION = 1


def _cost_key(c: Candidate) -> float:
    """Serving: per hour. Training: per run, or per token trained when no run size is given
    (a cheap hour that trains slowly is not cheap)."""
    if c.cost is None:
        return float("inf")
    if c.cost.per_run is not None:
        return c.cost.per_run
    if c.workload.is_training:
        return _token_cost(c)
    return c.cost.per_hour


def _token_cost(c: Candidate) -> float:
    if c.cost is None or c.speed is None:
        return float("inf")
    tps = c.speed.throughput_tokens_per_s if isinstance(c.speed, InferSpeed) else c.speed.tokens_per_s
    return c.cost.per_hour / max(tps, 1e-9)


def _speed_key(c: Candidate) -> float:
    if c.speed is None:
        return 0.0
    return c.speed.throughput_tokens_per_s if isinstance(c.speed, InferSpeed) else c.speed.tokens_per_s


SortKey = Callable[[Candidate], tuple[float, ...]]
# Costs within 3 % of each other count as equal: the estimate is not finer than that, and a tie
# then goes to the smaller job (fewer GPUs), not to whichever rounding wins.
_TIE = math.log(1.03)


def _bucket(value: float) -> float:
    return math.floor(math.log(value) / _TIE) if 0 < value < float("inf") else float("inf")


def _gpus(c: Candidate) -> int:
    return c.deployment.gpus * c.deployment.nodes


def sort_key(objective: str, stage: str | None) -> SortKey:
    if objective == "speed" or stage == "scale":
        return lambda c: (-_speed_key(c), _cost_key(c))
    if objective == "cost-per-token":
        return lambda c: (_bucket(_token_cost(c)), _gpus(c), _cost_key(c))
    return lambda c: (_bucket(_cost_key(c)), _gpus(c), -_speed_key(c))  # cheapest meeting the targets


def _deciding_reason(c: Candidate, objective: str, rank: int) -> Text:
    d = c.deployment
    what = f"{d.card.name} x{d.gpus * d.nodes}, {c.workload.weights}"
    if rank == 0:
        basis = {"speed": ("fastest", "最快"), "cost-per-token": ("lowest cost per token", "单位 token 成本最低")}
        en, zh = basis.get(objective, ("cheapest", "最便宜"))
        return Text(f"{what}: the {en} configuration that fits and meets every target",
                    f"{what}：满足全部目标且放得下的配置中{zh}")
    return Text(f"{what}: fits and meets the targets", f"{what}：放得下且满足目标")


def _why_not(card: Card, tried: list[Candidate], winner: Candidate | None) -> dict[str, Any]:
    """The one line that says why `card` lost, from its closest attempt."""
    passing = [c for c in tried if c.ok]
    if passing and passing[0].cost is None:  # unpriced: show its smallest passing configuration
        smallest = min(passing, key=lambda c: c.deployment.gpus * c.deployment.nodes)
        return _row(smallest, [Text("fits, but no provider file prices this card (add one with --prices)",
                                      "放得下，但价格文件中没有这张卡的报价（可用 --prices 补充）")])
    if passing:
        best = passing[0]
        reason = Text("meets the targets but ranks lower", "满足目标，但排名靠后")
        if winner is not None and best.cost and winner.cost:
            reason = Text(f"meets the targets but costs {best.cost.per_hour:,.2f} vs {winner.cost.per_hour:,.2f} "
                          f"{winner.cost.currency}/h", f"满足目标，但每小时 {best.cost.per_hour:,.2f} 对比 "
                          f"{winner.cost.per_hour:,.2f} {winner.cost.currency}")
        return _row(best, [reason])
    fitting = [c for c in tried if c.memory.fits]
    if fitting:
        best = fitting[0]
        fmts = sorted({c.workload.weights for c in fitting})
        extra = [Text(f"fits only at {', '.join(fmts)}", f"仅在 {', '.join(fmts)} 下放得下")] \
            if len(fmts) < len({c.workload.weights for c in tried}) else []
        return _row(best, [*extra, *best.failures])
    if not tried:
        return {"card": card.id, "gpus": None, "reasons": ["no configuration could be evaluated"],
                "reasons_zh": ["没有可评估的配置"]}
    closest = min(tried, key=lambda c: c.memory.breakdown.required - c.memory.usable)
    short = (closest.memory.breakdown.required - closest.memory.usable) / GiB
    d = closest.deployment
    return _row(closest, [Text(f"does not fit even on {d.gpus * d.nodes} GPUs at {closest.workload.weights}: "
                               f"short by {short:,.1f} GiB per GPU",
                               f"即使 {d.gpus * d.nodes} 卡、{closest.workload.weights} 也放不下：每卡差 {short:,.1f} GiB")])


def _row(c: Candidate, reasons: list[Text]) -> dict[str, Any]:
    return {"card": c.deployment.card.id, "gpus": c.deployment.gpus * c.deployment.nodes,
            "weights": c.workload.weights, "reasons": [r.en for r in reasons],
            "reasons_zh": [r.zh for r in reasons]}


@dataclass(frozen=True)
class PlanResult:
    plans: list[Candidate]
    reasons: list[Text]
    rejected: list[dict[str, Any]]
    evaluated: int


def plan(model: ModelArch, w: Workload, cards: list[Card], t: Targets, opts: CostOptions,
         top: int = 5) -> PlanResult:
    key = sort_key(t.objective, t.stage)
    by_card: dict[str, list[Candidate]] = {c.id: [] for c in cards}
    evaluated = 0
    for cand in candidates(model, w, cards, t, opts):
        by_card[cand.deployment.card.id].append(cand)
        evaluated += 1
    for tried in by_card.values():
        tried.sort(key=lambda c: (not c.ok, not c.memory.fits, key(c)))
    best_per_card = sorted((t_[0] for t_ in by_card.values() if t_ and t_[0].ok), key=key)
    plans = best_per_card[:top]
    winner = plans[0] if plans else None
    shown = {c.deployment.card.id for c in plans}
    rejected = [_why_not(card, by_card[card.id], winner) for card in cards if card.id not in shown]
    reasons = [_deciding_reason(c, t.objective, i) for i, c in enumerate(plans)]
    return PlanResult(plans=plans, reasons=reasons, rejected=rejected, evaluated=evaluated)
