"""How fast gpuwise answers: cold `gpuwise estimate` wall time and estimates per second in process.

Targets (issue 1 of 4): under 0.4 s cold on the 2-core machine; at least 20,000 estimates/s.
Run: python benchmarks/speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COLD = [sys.executable, "-m", "gpuwise", "estimate", "llama-3.1-8b", "--card", "H100-SXM",
        "--context", "16000", "--json"]


def cold_runs(n: int = 7) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(COLD, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def in_process(seconds: float = 2.0) -> float:
    from gpuwise.catalog.cards import resolve_card
    from gpuwise.catalog.sources import load_model
    from gpuwise.estimate.api import estimate_memory
    from gpuwise.estimate.workload import Deployment, Workload

    model = load_model("llama-3.1-8b")
    d = Deployment(card=resolve_card("H100-SXM").card)
    workloads = [Workload(context=c, concurrency=n) for c in (1024, 4096, 16000) for n in (1, 8, 64)]
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for w in workloads:
            estimate_memory(model, w, d)
        count += len(workloads)
    return count / (time.perf_counter() - start)


def import_time() -> float:
    code = "import time; t=time.perf_counter(); import gpuwise; print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout)


PLAN_COLD = [sys.executable, "-m", "gpuwise", "plan", "llama-3.1-70b", "--context", "8192",
             "--concurrency", "8", "--json"]


def plan_time() -> tuple[float, float]:
    """In-process plan time over the whole catalog, and candidate estimates per second."""
    from gpuwise.service import PlanRequest, plan_json

    start = time.perf_counter()
    result = plan_json(PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8))
    elapsed = time.perf_counter() - start
    return elapsed, result["evaluated"] / elapsed


if __name__ == "__main__":
    cold = cold_runs()
    print(f"cold `gpuwise estimate` (median of {len(cold)}): {statistics.median(cold):.3f} s "
          f"(min {min(cold):.3f}, max {max(cold):.3f})")
    print(f"import gpuwise: {import_time() * 1000:.1f} ms")
    print(f"memory estimates per second in process: {in_process():,.0f}")
    elapsed, per_s = plan_time()
    print(f"`plan` llama-3.1-70b over the whole catalog, in process: {elapsed:.3f} s "
          f"({per_s:,.0f} candidates/s incl. speed and cost)")
    cold_plan = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(PLAN_COLD, check=True, capture_output=True)
        cold_plan.append(time.perf_counter() - start)
    print(f"cold `gpuwise plan ... --json` (median of 5): {statistics.median(cold_plan):.3f} s")
