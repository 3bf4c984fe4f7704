"""CI's gate: no metric more than 2 points worse than validation/baseline.json, every must_pass
point inside its tolerance, no "does not fit" on a training run that ran, every group's band
holding 75-85 % of its points."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.validation.fit import COVERAGE, MIN_CELL
from benchmarks.validation.score import Scored, Summary, false_refusals
from benchmarks.validation.table import ROOT
from gpuwise.estimate.ranges import Cells

BASELINE = ROOT / "validation" / "baseline.json"
SLACK = 2.0  # percentage points a median or p90 may worsen before CI fails


def gate_failures(scored: list[Scored], summary: dict[str, Summary], cover: dict[str, tuple[int, int]],
                  baseline: dict[str, dict[str, float]]) -> list[str]:
    failures = []
    for metric, s in summary.items():
        base = baseline.get(metric)
        if base is None:
            continue
        for stat, now in (("median_abs_pct", s.median), ("p90_abs_pct", s.p90)):
            if now > base[stat] + SLACK:
                failures.append(f"{metric}: {stat} {now:.1f}% is worse than the baseline {base[stat]:.1f}% "
                                f"by more than {SLACK:g} points")
            elif now < base[stat] - SLACK:
                failures.append(f"{metric}: {stat} {now:.1f}% beats the baseline {base[stat]:.1f}%: record it "
                                "with --write-baseline in the same commit")
        if s.n != base.get("n", s.n):
            failures.append(f"{metric}: {s.n} points scored, the baseline has {base['n']}: "
                            "run --write-baseline after changing the table")
    for metric in sorted(set(baseline) - set(summary)):
        failures.append(f"{metric}: in the baseline but no point scored it")
    for s in scored:
        if not s.passes:
            got = f"{s.rel_error:+.1%}" if s.predicted is not None else f"refused ({s.error})"
            failures.append(f"{s.point.id}: must pass within {s.point.tolerance:.0%}, got {got}")
    for s in false_refusals(scored):
        failures.append(f"{s.point.id}: the run ran, gpuwise says it does not fit")
    lo, hi = COVERAGE
    for group, (inside, n) in cover.items():
        if n >= MIN_CELL and not lo <= inside / n <= hi:  # fewer points cannot show 75-85 %
            failures.append(f"{group}: the 80 % band holds {inside}/{n} = {inside / n:.0%} of the table's points "
                            f"(CI accepts {lo:.0%}-{hi:.0%}); refit with --fit")
    return failures


def stale_bands(fresh: Cells, committed: Cells) -> list[str]:
    """The committed bands must be the fit of the current model on the current table."""
    out = []
    for key in sorted(set(fresh) | set(committed)):
        a, b = fresh.get(key), committed.get(key)
        if a is None or b is None or (a.q_low, a.q_high, a.rows) != (b.q_low, b.q_high, b.rows):
            out.append(f"src/gpuwise/data/intervals.toml band {'/'.join(key)} is not the fit of the current "
                       "model and table: run python -m benchmarks.validation --fit")
    return out


def load_baseline(path: Path = BASELINE) -> dict[str, dict[str, float]]:
    return dict(json.loads(path.read_text(encoding="utf-8"))["metrics"]) if path.exists() else {}


def write_baseline(summary: dict[str, Summary], path: Path = BASELINE) -> None:
    body = {"note": "per-metric |error| on validation/points; CI fails more than 2 points above these "
                    "(python -m benchmarks.validation --write-baseline)",
            "metrics": {m: s.to_dict() for m, s in summary.items()}}
    path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
