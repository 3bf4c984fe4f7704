"""Ask gpuwise each point's question and score the answer."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.validation.metrics import METRICS
from benchmarks.validation.table import ROOT, Point
from gpuwise.errors import GpuwiseError
from gpuwise.service import EstimateRequest, estimate_json

MAX_IN_FLIGHT = 2048  # trtllm-bench's and vLLM's largest default batch


@dataclass(frozen=True)
class Scored:
    point: Point
    predicted: float | None  # canonical unit; None when the estimate refused
    estimate: dict[str, Any] | None
    error: str = ""  # why there is no prediction

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured."""
        assert self.predicted is not None
        return (self.predicted - self.point.value) / self.point.value

    @property
    def residual(self) -> float:
        """ln(measured / predicted) in the orientation of the metric's interval group."""
        assert self.predicted is not None
        r = math.log(self.point.value / self.predicted)
        return -r if METRICS[self.point.metric].inverse else r

    @property
    def passes(self) -> bool:
        p = self.point
        return not p.must_pass or (self.predicted is not None and abs(self.rel_error) <= (p.tolerance or 0.0))


def request_of(point: Point) -> EstimateRequest:
    fields = dict(point.request)
    for key in ("model", "cards_file", "replay"):  # table-local files: validation/models, cards, runs
        if str(fields.get(key, "")).startswith("validation/"):
            fields[key] = str(ROOT / str(fields[key]))
    if fields.get("concurrency") == "max":
        probe = estimate_json(EstimateRequest(**{**fields, "concurrency": 1}))
        fields["concurrency"] = max(1, min(MAX_IN_FLIGHT, int(probe["capacity"]["max_concurrency"])))
    return EstimateRequest(**fields)


def score(point: Point) -> Scored:
    try:
        est = estimate_json(request_of(point))
        predicted = METRICS[point.metric].pick(est)
    except (GpuwiseError, KeyError, TypeError) as exc:
        return Scored(point, None, None, error=f"{type(exc).__name__}: {exc}")
    if not math.isfinite(predicted) or predicted <= 0:
        return Scored(point, None, est, error=f"the estimate gave {predicted!r}")
    return Scored(point, predicted, est)


TRAINING_TASKS = ("lora", "qlora", "full", "pretrain")


def false_refusals(scored: list[Scored]) -> list[Scored]:
    """Training points (each one a run that ran and printed its figure) that gpuwise says do not fit."""
    return [s for s in scored if s.point.request.get("task") in TRAINING_TASKS
            and s.estimate is not None and s.estimate.get("fit") == "does_not_fit"]


@dataclass(frozen=True)
class Summary:
    metric: str
    n: int
    median: float  # median |relative error|, percent
    p90: float

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "median_abs_pct": round(self.median, 2), "p90_abs_pct": round(self.p90, 2)}


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    k = 0.9 * (len(ordered) - 1)
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarise(scored: list[Scored]) -> dict[str, Summary]:
    by: dict[str, list[float]] = {}
    for s in scored:
        if s.predicted is not None:
            by.setdefault(s.point.metric, []).append(abs(s.rel_error) * 100)
    return {m: Summary(m, len(v), statistics.median(v), _p90(v)) for m, v in sorted(by.items())}
