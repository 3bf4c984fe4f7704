"""How fast gpuwise answers: cold `gpuwise estimate --json`, estimates per second in process, and a
warm `plan` over the whole catalog.

Targets: issue 1 of 4, at least 20,000 estimates/s; issue 8 of 9, cold `estimate --json` at most
0.12 s on the 2-core machine and a warm whole-catalog `plan` at most 10 ms in process. The warm
plan is also timed with the exhaustive reference search (plan.rank `exhaustive`), over distinct
requests (nothing shared between them but the parsed catalogs and models) and for a LoRA request.
Cold runs report wall time and the child's CPU time (user + sys): on a shared machine the wall
time includes waiting for a core, the CPU time does not.
Run: python -m benchmarks.speed
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

COLD = [sys.executable, "-m", "gpuwise", "estimate", "llama-3.1-8b", "--card", "H100-SXM",
        "--context", "16000", "--json"]


def cold_runs(n: int = 7, argv: list[str] = COLD, env: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of `n` runs of `argv` (after one untimed run that fills the caches)."""
    env = {**os.environ, **(env or {})}
    subprocess.run(argv, check=True, capture_output=True, env=env)
    walls, cpus = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


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


PLAN_WARM: dict[str, object] = {"model": "llama-3.1-70b", "context": 8192, "concurrency": 8}
# Distinct requests (no two share a workload, so nothing one estimated helps the next), and a
# training request, whose per-token objective needs every configuration's speed (no pruning).
PLAN_DISTINCT = [{"model": m, "context": c, "concurrency": n} for m in ("llama-3.1-70b", "qwen2.5-32b", "llama-3.1-8b")
                 for c, n in ((4096, 1), (8192, 8), (16384, 32))]
PLAN_LORA: dict[str, object] = {"model": "qwen2.5-7b", "task": "lora"}


def plan_time(repeats: int = 7, request: dict[str, object] | None = None,
              exhaustive: bool = False) -> tuple[float, float, float, int, tuple[int, int]]:
    """Warm in-process plan over the whole catalog: best and median wall seconds, median CPU
    seconds (this process's, so the waits of a shared machine drop out), configurations covered,
    and the memory and speed estimates run. `exhaustive`: the reference search, every
    configuration estimated in full."""
    from gpuwise.service_plan import PlanRequest, run_plan

    req = PlanRequest(**(request or PLAN_WARM))  # type: ignore[arg-type]
    run_plan(req, exhaustive=exhaustive).to_dict()  # warm: models, catalogs and price tables parsed once
    walls, cpus, evaluated, estimates = [], [], 0, (0, 0)
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        outcome = run_plan(req, exhaustive=exhaustive)
        evaluated = outcome.to_dict()["evaluated"]
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        estimates = outcome.result.estimates
    return min(walls), statistics.median(walls), statistics.median(cpus), evaluated, estimates


def distinct_plans() -> tuple[float, float, int]:
    """Median wall and CPU seconds over requests that are all different, each planned once."""
    from gpuwise.service_plan import PlanRequest, plan_json

    plan_json(PlanRequest(model="gpt2", context=1024))  # warm the catalogs, not these requests
    walls, cpus = [], []
    for raw in PLAN_DISTINCT:
        from gpuwise.catalog.sources import load_model

        load_model(str(raw["model"]))  # the model parsed once, as a warm server has it
        start, cpu = time.perf_counter(), time.process_time()
        plan_json(PlanRequest(**raw))  # type: ignore[arg-type]
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), len(walls)


if __name__ == "__main__":
    walls, cpus = cold_runs()
    print(f"cold `gpuwise estimate ... --json` (median of {len(walls)}): wall {statistics.median(walls):.3f} s "
          f"(min {min(walls):.3f}), CPU {statistics.median(cpus):.3f} s (min {min(cpus):.3f})")
    for what, env in (("the full Typer command", {"GPUWISE_FULL_CLI": "1"}),
                      ("no caches (TOML, compiled dataclass methods)", {"GPUWISE_NO_CACHE": "1"})):
        walls, cpus = cold_runs(5, COLD, env)
        print(f"  same, {what}: wall {statistics.median(walls):.3f} s, CPU {statistics.median(cpus):.3f} s")
    print(f"import gpuwise: {import_time() * 1000:.1f} ms")
    print(f"memory estimates per second in process: {in_process():,.0f}")
    best, median, cpu, evaluated, (mem, spd) = plan_time()
    print(f"warm `plan` llama-3.1-70b over the whole catalog, in process: best {best * 1000:.0f} ms, "
          f"median {median * 1000:.0f} ms ({evaluated:,} configurations, {evaluated / median:,.0f}/s); "
          f"CPU median {cpu * 1000:.0f} ms; {mem:,} memory and {spd:,} speed estimates")
    best, median, cpu, evaluated, (mem, spd) = plan_time(3, exhaustive=True)
    print(f"  same, exhaustive reference search: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms, "
          f"CPU median {cpu * 1000:.0f} ms; {mem:,} memory and {spd:,} speed estimates")
    median, cpu, n = distinct_plans()
    print(f"  {n} distinct requests (3 models x 3 context/concurrency), each once: median {median * 1000:.0f} ms, "
          f"CPU median {cpu * 1000:.0f} ms")
    best, median, cpu, evaluated, (mem, spd) = plan_time(5, PLAN_LORA)
    print(f"warm `plan` qwen2.5-7b --task lora over the whole catalog: best {best * 1000:.0f} ms, "
          f"median {median * 1000:.0f} ms ({evaluated:,} configurations), CPU median {cpu * 1000:.0f} ms; "
          f"{mem:,} memory and {spd:,} speed estimates")
    walls, cpus = cold_runs(5, PLAN_COLD)
    print(f"cold `gpuwise plan ... --json` (median of 5): wall {statistics.median(walls):.3f} s, "
          f"CPU {statistics.median(cpus):.3f} s")
