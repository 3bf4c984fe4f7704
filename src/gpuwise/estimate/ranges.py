"""80 % intervals around an estimate's numbers, fitted on the validation table.

data/intervals.toml holds, per interval group (memory, kv, decode, throughput, ttft,
train_speed) and regime (the engine, or "training", optionally with the card family), the
10th-90th percentile band of ln(measured / estimated) over the table's points. It is written
by `python -m benchmarks.validation --fit` and checked by CI: on the table, the measured value
falls inside the band 75-85 % of the time for each group. A band always contains the estimate
itself, so a range never reads as if the point were outside it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.cost import Cost
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.tomlcache import load_toml

_PATH = Path(__file__).resolve().parent.parent / "data" / "intervals.toml"
ANY = "*"


@dataclass(frozen=True)
class Cell:
    """One fitted band: ln(measured / estimated) lies in [q_low, q_high] for ~80 % of its rows."""

    group: str
    regime: str
    q_low: float
    q_high: float
    rows: tuple[str, ...]  # validation point ids the band was fitted on

    @property
    def key(self) -> str:
        return f"{self.group}/{self.regime}"


@dataclass(frozen=True)
class Range:
    """The band around one estimated number, and the fitted cell it comes from."""

    low: float
    high: float
    cell: Cell


Cells = Mapping[tuple[str, str], Cell]


def _cell(raw: Mapping[str, Any]) -> Cell:
    q_low, q_high = float(raw["q_low"]), float(raw["q_high"])
    if not (math.isfinite(q_low) and math.isfinite(q_high) and q_low <= 0 <= q_high):
        raise ValueError(f"intervals.toml: {raw['group']}/{raw['regime']} must have q_low <= 0 <= q_high")
    return Cell(str(raw["group"]), str(raw["regime"]), q_low, q_high, tuple(str(r) for r in raw.get("rows", ())))


def parse_cells(data: Mapping[str, Any]) -> dict[tuple[str, str], Cell]:
    cells = [_cell(raw) for raw in data.get("cell", [])]
    return {(c.group, c.regime): c for c in cells}


@functools.cache
def fitted_cells() -> dict[tuple[str, str], Cell]:
    return parse_cells(load_toml(_PATH))


def regimes(base: str, family: str, task: str = "", framework: str = "") -> tuple[str, ...]:
    """Where to look, most specific first: the training framework, then the engine (or
    "training") on this card family, then the training task (full, lora, qlora, pretrain), then
    the engine, then any."""
    return (*([f"{base}/{framework}"] if framework else []), f"{base}/{family}",
            *([f"{base}/{task}"] if task else []), base, ANY)


def find_cell(group: str, base: str, family: str, cells: Cells | None = None, task: str = "",
              framework: str = "") -> Cell | None:
    table = fitted_cells() if cells is None else cells
    for regime in regimes(base, family, task, framework):
        cell = table.get((group, regime))
        if cell is not None:
            return cell
    return None


def band(value: float, cell: Cell, *, inverse: bool = False) -> Range:
    """The interval around `value`. `inverse`: the value is a time where the group is a rate
    (or the reverse), so the band flips."""
    lo, hi = (-cell.q_high, -cell.q_low) if inverse else (cell.q_low, cell.q_high)
    return Range(value * math.exp(lo), value * math.exp(hi), cell)


def _sig(x: float) -> float:
    return float(f"{x:.6g}")


@dataclass(frozen=True)
class Ranged:
    """The bands of one estimate, by the JSON path of the number they bound."""

    ranges: Mapping[str, Range]

    def to_dict(self) -> dict[str, dict[str, float | str]]:
        return {path: {"low": low, "high": high, "fitted": key} for path, low, high, key in self.bands()}

    def bands(self) -> tuple[tuple[str, float, float, str], ...]:
        """(path, low, high, band name) rows, rounded as the JSON shows them."""
        return tuple((path, _sig(r.low), _sig(r.high), r.cell.key) for path, r in self.ranges.items())

    def get(self, path: str) -> Range | None:
        return self.ranges.get(path)


# (JSON path, interval group, inverse): what each estimated number's band comes from.
SERVING = (("memory.required", "memory", False), ("memory.kv_pool", "kv", False),
           ("capacity.kv_tokens", "kv", False), ("capacity.max_concurrency", "kv", False),
           ("capacity.max_context", "kv", False),
           ("speed.decode_tokens_per_s", "decode", False), ("speed.tpot_s", "decode", True),
           ("speed.throughput_tokens_per_s", "throughput", False),
           ("speed.ttft_s", "ttft", False), ("speed.prefill_tokens_per_s", "ttft", True),
           ("cost.per_million_tokens", "throughput", True))
TRAINING = (("memory.required", "memory", False),
            ("speed.tokens_per_s", "train_speed", False), ("speed.step_time_s", "train_speed", True),
            ("speed.mfu", "train_speed", False), ("cost.per_million_tokens", "train_speed", True),
            ("cost.per_run", "train_speed", True), ("cost.run_hours", "train_speed", True))


def estimate_values(mem: MemoryResult, speed: InferSpeed | TrainSpeed | None, cost: Cost | None) -> dict[str, float]:
    """The numbers that get a band, by their path in the estimate JSON."""
    values: dict[str, float | None] = {"memory.required": mem.breakdown.required,
                                       "memory.kv_pool": mem.breakdown.kv_pool or None}
    if mem.capacity is not None:
        values |= {"capacity.kv_tokens": mem.capacity.kv_tokens,
                   "capacity.max_concurrency": mem.capacity.max_concurrency,
                   "capacity.max_context": mem.capacity.max_context}
    if isinstance(speed, InferSpeed):
        values |= {"speed.decode_tokens_per_s": speed.decode_tokens_per_s, "speed.tpot_s": speed.tpot_s,
                   "speed.throughput_tokens_per_s": speed.throughput_tokens_per_s, "speed.ttft_s": speed.ttft_s,
                   "speed.prefill_tokens_per_s": speed.prefill_tokens_per_s}
    elif isinstance(speed, TrainSpeed):
        values |= {"speed.tokens_per_s": speed.tokens_per_s, "speed.step_time_s": speed.step_time_s,
                   "speed.mfu": speed.mfu}
    if cost is not None:
        values |= {"cost.per_million_tokens": cost.per_million_tokens, "cost.per_run": cost.per_run,
                   "cost.run_hours": cost.run_hours}
    tensors = mem.tensors_beside_full_pool
    if tensors is not None:  # not banded themselves: they cap memory.required's band (ranges_for)
        values |= {"memory.pool_card": mem.usable, "memory.tensors": tensors}
    return {k: float(v) for k, v in values.items() if v is not None}


def full_pool_cap(usable: float, tensors: float, cell: Cell) -> float:
    """The top of the memory band when the pool is counted at the card: the card, unless the tensors'
    own band reaches past it."""
    return max(usable, band(tensors, cell).high)


def ranges_for(values: Mapping[str, float], *, training: bool, engine: str, family: str, task: str = "",
               framework: str = "", caps: Mapping[str, float] | None = None, cells: Cells | None = None) -> Ranged:
    """Bands for the numbers in `values` (JSON path -> estimate); `caps` bound a band's top
    (a model's maximum context, for one)."""
    base = "training" if training else engine
    caps = dict(caps or {})
    floors: dict[str, float] = {}
    mfu = values.get("speed.mfu")
    if training and mfu and mfu > 0:  # no band reaches past the card's peak: MFU 100 % at most
        caps.setdefault("speed.mfu", 1.0)
        if "speed.tokens_per_s" in values:
            caps.setdefault("speed.tokens_per_s", values["speed.tokens_per_s"] / mfu)
        if "speed.step_time_s" in values:
            floors["speed.step_time_s"] = values["speed.step_time_s"] * mfu
    out: dict[str, Range] = {}
    for path, group, inverse in (TRAINING if training else SERVING):
        value = values.get(path)
        cell = find_cell(group, base, family, cells, task if training else "", framework if training else "")
        if value is None or cell is None or not math.isfinite(value) or value <= 0:
            continue
        r = band(value, cell, inverse=inverse)
        cap, floor = caps.get(path, math.inf), floors.get(path, 0.0)
        if path == "memory.required" and "memory.pool_card" in values:
            cap = min(cap, full_pool_cap(values["memory.pool_card"], values["memory.tensors"], cell))
        out[path] = Range(min(max(r.low, floor), cap), min(max(r.high, floor), cap), r.cell)
    return Ranged(out)


def fit_verdict(required: float, usable: float, high: float | None) -> str:
    """fits: even the top of the memory band fits; tight: the estimate fits, the top does not."""
    if required > usable:
        return "does_not_fit"
    return "tight" if high is not None and high > usable else "fits"
