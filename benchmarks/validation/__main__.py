"""python -m benchmarks.validation [--points FILE ...] [--gate] [--fit] [--write-baseline]"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.validation.fit import (
    INTERVALS,
    MIN_CELL,
    coverage,
    fit_cells,
    held_out_coverage,
    residuals,
    write_intervals,
)
from benchmarks.validation.gate import (
    BASELINE,
    gate_failures,
    load_baseline,
    stale_bands,
    write_baseline,
)
from benchmarks.validation.metrics import METRICS
from benchmarks.validation.score import Scored, false_refusals, score, summarise
from benchmarks.validation.table import ROOT, Point, TableError, load_points
from gpuwise.estimate.ranges import fitted_cells

REPORT = ROOT / "validation-report.json"


def _shown(value: float, metric: str) -> str:
    unit = METRICS[metric].unit
    if unit == "bytes":
        return f"{value / 2**30:,.2f} GiB"
    if unit == "s":
        return f"{value * 1e3:,.1f} ms"
    return f"{value:,.4g}"


def _print_points(scored: list[Scored]) -> None:
    print(f"{'point':52s} {'metric':20s} {'predicted':>12s} {'measured':>12s} {'error':>8s}")
    for s in scored:
        p = s.point
        if s.predicted is None:
            print(f"{p.id[:52]:52s} {p.metric:20s} {'-':>12s} {_shown(p.value, p.metric):>12s}"
                  f"   refused: {s.error[:60]}")
            continue
        flag = "" if s.passes else "  MUST-PASS FAILED"
        print(f"{p.id[:52]:52s} {p.metric:20s} {_shown(s.predicted, p.metric):>12s}"
              f" {_shown(p.value, p.metric):>12s} {s.rel_error * 100:+7.1f}%{flag}")


def _counts(points: list[Point]) -> dict[str, dict[str, list[int]]]:
    """Points per card and per engine/framework: [scored, all]."""
    out: dict[str, dict[str, list[int]]] = {"card": {}, "stack": {}}
    for p in points:
        for kind, key in (("card", p.card or "(not in the catalog)"), ("stack", p.stack)):
            tally = out[kind].setdefault(key, [0, 0])
            tally[0] += p.expressible
            tally[1] += 1
    return {k: dict(sorted(v.items(), key=lambda kv: -kv[1][1])) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.validation", description=__doc__)
    ap.add_argument("--points", nargs="*", type=Path, help="table files (default: validation/points/*.toml)")
    ap.add_argument("--report", type=Path, default=REPORT)
    ap.add_argument("--gate", action="store_true", help="fail on regressions against validation/baseline.json")
    ap.add_argument("--fit", action="store_true", help="refit src/gpuwise/data/intervals.toml first")
    ap.add_argument("--write-baseline", action="store_true", help="record the scores as the new baseline")
    args = ap.parse_args(argv)
    try:
        points = load_points(args.points)
    except TableError as exc:
        print(f"validation table: {exc}", file=sys.stderr)
        return 2
    todo = [p for p in points if not p.expressible]
    scored = [score(p) for p in points if p.expressible]
    _print_points(scored)
    summary = summarise(scored)
    print(f"\n{'metric':20s} {'n':>4s} {'median |err|':>13s} {'p90 |err|':>10s}")
    for m, s in summary.items():
        print(f"{m:20s} {s.n:4d} {s.median:12.1f}% {s.p90:9.1f}%")
    res = residuals(scored)
    fresh = fit_cells(res)
    cells = fresh if args.fit else None
    if cells is not None:
        write_intervals(cells, len(scored))
        print(f"\nwrote {INTERVALS.relative_to(ROOT)} ({len(cells)} bands)")
    cover = coverage(res, cells)
    held = held_out_coverage(res)
    print(f"\n{'group':14s} {'inside its 80 % band':>22s} {'held out':>12s}")
    for group, (inside, n) in cover.items():
        a, b = held.get(group, (0, 0))
        print(f"{group:14s} {inside:>10d}/{n:<4d} {inside / n:6.0%} {a:>6d}/{b:<4d} {a / b if b else 0:4.0%}"
              + ("  (too few points to check)" if n < MIN_CELL else ""))
    counts = _counts(points)
    for kind, tally in counts.items():
        print(f"\npoints per {kind} (scored/all): " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in tally.items()))
    refused = false_refusals(scored)
    print(f"\ntraining runs that ran but gpuwise calls 'does not fit': {len(refused)}"
          + "".join(f"\n  {s.point.id}" for s in refused))
    print(f"\n{len(points)} points: {len(scored)} scored, {len(todo)} not yet expressible")
    for p in todo:
        print(f"  to do: {p.id}: {p.missing}")
    args.report.write_text(json.dumps({
        "metrics": {m: s.to_dict() for m, s in summary.items()},
        "points": [{"id": s.point.id, "metric": s.point.metric, "measured": s.point.value,
                    "predicted": s.predicted, "error": s.error or None} for s in scored],
        "coverage": {g: {"inside": a, "n": b, "held_out_inside": held.get(g, (0, 0))[0]}
                     for g, (a, b) in cover.items()},
        "counts": {kind: {k: {"scored": a, "all": b} for k, (a, b) in t.items()} for kind, t in counts.items()},
        "not_expressible": [{"id": p.id, "missing": p.missing} for p in todo],
    }, indent=1) + "\n", encoding="utf-8")
    if args.write_baseline:
        write_baseline(summary)
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    failures = [*gate_failures(scored, summary, cover, load_baseline()),
                *stale_bands(fresh, cells or fitted_cells())] if args.gate else \
        [f"{s.point.id}: outside its tolerance" for s in scored if not s.passes]
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
