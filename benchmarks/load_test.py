"""Load test of `gpuwise serve`: N concurrent clients against /api/plan for a fixed time.

    python benchmarks/load_test.py                      # 200 clients, 30 s, own server on loopback
    python benchmarks/load_test.py --distinct 0         # every request different: no cache hits
    python benchmarks/load_test.py --url http://127.0.0.1:8000

Bounded in time (--duration, plus a 60 s per-request timeout) and in count (--max-requests).
Reports requests, answers, 503s (the server sheds load it cannot answer within its queue
bound, with Retry-After; the clients honour it), errors, throughput and latency percentiles
(p50, p90, p99, max) of all, answered and refused requests, and the latency of estimates asked
by one extra client while the plans run (estimates have their own lane); --json too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("llama-3.1-8b", "qwen3-8b", "qwen2.5-32b", "llama-3.1-70b", "mistral-7b-v0.3", "qwen3-30b-a3b")
CONTEXTS = (2048, 8192, 32768)
CONCURRENCY = (1, 8, 32)
WARMUP_S = 5.0


def workload(i: int, distinct: int, rng: random.Random) -> dict[str, Any]:
    """The i-th request's parameters: one of `distinct` mixes, or all different when 0."""
    k = i % distinct if distinct else rng.randrange(10**9)
    params: dict[str, Any] = {"model": MODELS[k % len(MODELS)], "context": CONTEXTS[k // 6 % 3],
                              "concurrency": CONCURRENCY[k // 18 % 3], "top": 5}
    if not distinct:
        params["context"] = 1024 + k % 30000  # a new value each time defeats the result cache
    return params


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[idx]


async def client(http: Any, base: str, stop_at: float, budget: list[int], distinct: int, seed: int,
                 latencies: list[tuple[float, float, int]], errors: Counter[str]) -> None:
    rng = random.Random(seed)
    i = seed
    while time.monotonic() < stop_at and budget[0] > 0:
        budget[0] -= 1
        params = workload(i, distinct, rng)
        i += 1
        began, t0 = time.monotonic(), time.perf_counter()
        status = 0
        try:
            r = await http.get(base + "/api/plan", params=params)
            status = r.status_code
            if r.status_code != 200:
                errors[f"HTTP {r.status_code}"] += 1
            else:
                r.json()
        except Exception as exc:  # noqa: BLE001 - every failure is counted, none stops the test
            errors[type(exc).__name__] += 1
        latencies.append((began, time.perf_counter() - t0, status))
        if status == 503:  # told to come back: do, after the Retry-After the server gave
            await asyncio.sleep(float(r.headers.get("retry-after", "1")))


async def estimate_probe(http: Any, base: str, stop_at: float, out: list[tuple[float, float, int]]) -> None:
    """One client asking distinct estimates (2-5 ms of work each) while the plans run: their
    latency shows whether an estimate waits behind plans."""
    i = 0
    while time.monotonic() < stop_at:
        i += 1
        params = {"model": MODELS[i % len(MODELS)], "card": "H100-SXM", "context": 1024 + i}
        began, t0 = time.monotonic(), time.perf_counter()
        try:
            r = await http.get(base + "/api/estimate", params=params)
            status = r.status_code
        except Exception:  # noqa: BLE001 - counted as status 0
            status = 0
        out.append((began, time.perf_counter() - t0, status))
        await asyncio.sleep(0.05)


async def run_part(base: str, clients: int, first: int, duration: float, max_requests: int,
                   distinct: int) -> tuple[list[tuple[float, float, int]], dict[str, int], float,
                                           list[tuple[float, float, int]]]:
    """One process's share: `clients` coroutines numbered from `first` (the first share also
    runs the estimate probe)."""
    import httpx

    latencies: list[tuple[float, float, int]] = []  # (seconds since start, latency in seconds, status)
    probe: list[tuple[float, float, int]] = []
    errors: Counter[str] = Counter()
    budget = [max_requests]
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
        await http.get(base + "/api/health")
        start = time.monotonic()
        jobs = [client(http, base, start + duration, budget, distinct, first + n, latencies, errors)
                for n in range(clients)]
        if first == 0:
            jobs.append(estimate_probe(http, base, start + duration, probe))
        await asyncio.gather(*jobs)
        elapsed = time.monotonic() - start
    t0 = min((t for t, _, _ in latencies), default=0.0)
    return ([(t - t0, s, c) for t, s, c in latencies], dict(errors), elapsed,
            [(t - t0, s, c) for t, s, c in probe])


def _part(args: tuple[Any, ...]) -> tuple[list[tuple[float, float, int]], dict[str, int], float,
                                          list[tuple[float, float, int]]]:
    return asyncio.run(run_part(*args))


def run(base: str, clients: int, duration: float, max_requests: int, distinct: int,
        procs: int) -> dict[str, Any]:
    """Split the clients over `procs` processes (one asyncio loop each), then merge."""
    from concurrent.futures import ProcessPoolExecutor

    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    firsts = [sum(shares[:i]) for i in range(procs)]
    jobs = [(base, n, f, duration, max_requests // procs, distinct) for n, f in zip(shares, firsts) if n]
    with ProcessPoolExecutor(len(jobs)) as pool:
        parts = list(pool.map(_part, jobs))
    latencies = [x for p in parts for x in p[0]]
    errors: Counter[str] = Counter()
    for p in parts:
        errors.update(p[1])
    elapsed = max(p[2] for p in parts)
    probe = [x for p in parts for x in p[3]]
    lat = sorted(s for _, s, _ in latencies)
    answered = sorted(s for _, s, c in latencies if c == 200)
    shed = sorted(s for _, s, c in latencies if c == 503)
    # After the first WARMUP_S every distinct workload has been computed once (then cached).
    steady = sorted(s for t, s, c in latencies if t >= WARMUP_S and c == 200)
    return {"clients": clients, "processes": len(jobs), "duration_s": round(elapsed, 1),
            "distinct": distinct, "requests": len(lat), "answered": len(answered), "shed_503": len(shed),
            "errors": sum(errors.values()) - len(shed),
            "error_kinds": dict(errors), "throughput_rps": round(len(answered) / elapsed, 1),
            "latency_ms": summary(lat), "latency_ms_answered": summary(answered),
            "latency_ms_503": summary(shed), f"latency_ms_answered_after_{WARMUP_S:g}s": summary(steady),
            "estimate_probe": {"requests": len(probe), "ok": sum(1 for *_, c in probe if c == 200),
                               "latency_ms": summary(sorted(s for _, s, _ in probe))}}


def summary(lat: list[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"p{q}": round(percentile(lat, q) * 1000, 1) if lat else None
                                    for q in (50, 90, 99)}
    out["max"] = round(lat[-1] * 1000, 1) if lat else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="an already running server (default: start one on loopback)")
    ap.add_argument("--server-args", default="", help="extra `gpuwise serve` flags for the server it starts")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds")
    ap.add_argument("--max-requests", type=int, default=1_000_000)
    ap.add_argument("--distinct", type=int, default=54, help="parameter mixes cycled (0: all different)")
    ap.add_argument("--procs", type=int, default=8,
                    help="client processes: one httpx event loop with 200 connections saturates near 250 req/s")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not (1 <= a.clients <= 2000 and 0 < a.duration <= 600 and 1 <= a.procs <= 64):
        ap.error("--clients must be 1-2000, --duration 0-600 s, --procs 1-64")
    sys.path.insert(0, str(ROOT))
    with ExitStack() as stack:
        base = a.url
        if base is None:
            from tests.web_server import running_server

            base = stack.enter_context(running_server(extra_args=tuple(a.server_args.split())))
        result = run(base.rstrip("/"), a.clients, a.duration, a.max_requests, a.distinct, a.procs)
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        lat, ok, shed = result["latency_ms"], result["latency_ms_answered"], result["latency_ms_503"]
        print(f"{result['clients']} clients in {result['processes']} processes, {result['duration_s']} s, "
              f"{result['distinct'] or 'all'} distinct workloads: {result['requests']} requests, "
              f"{result['answered']} answered, {result['shed_503']} told to retry (503), {result['errors']} errors "
              f"{result['error_kinds']}, {result['throughput_rps']} answers/s")
        for name, s in (("all", lat), ("answered (200)", ok), ("refused (503)", shed)):
            print(f"latency {name:15} p50 {s['p50']} ms, p90 {s['p90']} ms, p99 {s['p99']} ms, max {s['max']} ms")
        pr = result["estimate_probe"]
        print(f"estimates under plan load: {pr['ok']}/{pr['requests']} answered, p50 {pr['latency_ms']['p50']} ms, "
              f"p99 {pr['latency_ms']['p99']} ms, max {pr['latency_ms']['max']} ms")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
