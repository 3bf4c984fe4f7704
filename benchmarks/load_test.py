"""Load test of `gpuwise serve`: N concurrent clients sending distinct plan requests, on loopback.

    python -m benchmarks.load_test                   # 200 clients, 30 s, every request distinct, 2 cores
    python -m benchmarks.load_test --cores 0         # ... on every core this machine allows
    python -m benchmarks.load_test --json            # the same figures as JSON
    python -m benchmarks.load_test --server-args "--workers 1"
    python -m benchmarks.load_test --url http://127.0.0.1:8000   # a server already running
    python -m benchmarks.load_test --param cards=H100-SXM,RTX-4090   # cheaper plans (fewer cards)

Each client holds one keep-alive connection and sends its next /api/plan as soon as the last
is answered (a closed loop: 200 clients keep 200 requests outstanding). Every request differs
(model x concurrency x context from a counter), so the server's result cache never answers one.
A 503 is the server shedding load it cannot answer within its queue bound; the client waits the
Retry-After it was given, as a polite client does, and the target counts it as not answered.
One more client asks distinct estimates the whole time, and records how many plans were
outstanding when it asked: its latency shows whether an estimate waits behind plans.

The clients speak HTTP/1.1 over asyncio streams (a few lines, below): httpx costs ~1 ms of CPU
per request, which on the 2 cores the server runs on would be taken from the server.

Bounded: loopback addresses only, --duration (at most 600 s) plus a 60 s limit per request,
--max-requests in all. Reports requests, answers, 503s, errors, answers/s, latency p50/p95/p99/max
(all, answered, refused), the estimate probe, the CPU the server and the clients used per
request, and how loaded the machine was (load average, Linux CPU pressure: a shared machine's
other work shows there); exit status 1 when a request failed (not a 503). The target (issue 15):
every plan request answered (no 503, no failure) with p99 over all of them at most 2 s, and the
estimates asked meanwhile all answered with p99 at most 250 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("llama-3.1-8b", "qwen3-8b", "qwen2.5-32b", "llama-3.1-70b", "mistral-7b-v0.3", "qwen3-30b-a3b")
CONCURRENCY = (1, 8, 32)
BASE_CONTEXT = 1024
REQUEST_TIMEOUT_S = 60.0
P99_TARGET_MS = 2000.0  # issue 15: p99 at most 2 s for 200 clients on 2 cores, over every request
# ... each of them answered: a 503 is a failure to the user who sees it, so none is allowed
# (with a closed loop a refusal only hides lacking throughput: the client comes back for more).
MAX_REFUSED = 0
# Estimates never queue behind plans: asked while plans are outstanding, their p99 stays within
# a small multiple of one estimate's own few milliseconds on a busy machine.
PROBE_P99_TARGET_MS = 250.0


try:  # the clients share the server's 2 cores: orjson reads a 46 KiB answer in a third of json's time
    import orjson

    def parse_json(body: bytes) -> Any:
        return orjson.loads(body)
except ImportError:
    def parse_json(body: bytes) -> Any:
        return json.loads(body)


def plan_params(n: int, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The n-th distinct plan request: no two n share (model, concurrency, context); `extra`
    parameters (--param) are added to every one."""
    k = len(MODELS) * len(CONCURRENCY)
    return {"model": MODELS[n % len(MODELS)], "concurrency": CONCURRENCY[n // len(MODELS) % len(CONCURRENCY)],
            "context": BASE_CONTEXT + n // k, "top": 5, **dict(extra)}


def estimate_params(n: int) -> dict[str, Any]:
    return {"model": MODELS[n % len(MODELS)], "card": "H100-SXM", "context": BASE_CONTEXT + n}


# ------------------------------------------------------------------ a small HTTP/1.1 client

class Connection:
    """One keep-alive HTTP/1.1 connection; reconnects when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, target: str) -> tuple[int, dict[str, str], bytes]:
        reused = self.writer is not None
        try:
            return await self._exchange(target)
        except (asyncio.IncompleteReadError, ConnectionError):
            if not reused:
                raise
            self.close()  # the server closed an idle keep-alive connection: as any client, reconnect once
            return await self._exchange(target)

    async def _exchange(self, target: str) -> tuple[int, dict[str, str], bytes]:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(f"GET {target} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode("ascii"))
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        if "chunked" in headers.get("transfer-encoding", ""):
            raise ValueError("chunked answers are not expected from gpuwise serve")
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


# ------------------------------------------------------------------ the clients

@dataclass
class Tally:
    plans: list[tuple[float, int, float]] = field(default_factory=list)  # (latency s, status, sent at s)
    started: float = 0.0
    probes: list[tuple[float, int, int]] = field(default_factory=list)  # (latency s, status, plans out)
    errors: Counter[str] = field(default_factory=Counter)
    outstanding: int = 0  # plan requests sent and not yet answered
    next_n: int = 0
    budget: int = 0
    extra: tuple[tuple[str, str], ...] = ()


async def timed_get(conn: Connection, target: str, tally: Tally) -> tuple[float, int, dict[str, str]]:
    began = time.perf_counter()
    try:
        status, headers, body = await asyncio.wait_for(conn.get(target), REQUEST_TIMEOUT_S)
        if status == 200:
            parse_json(body)  # every answer read whole: a truncated or invalid one is a failure
    except Exception as exc:  # noqa: BLE001 - every failure is counted, none stops the test
        conn.close()
        tally.errors[type(exc).__name__] += 1
        return time.perf_counter() - began, 0, {}
    if status not in (200, 503):
        tally.errors[f"HTTP {status}"] += 1
    return time.perf_counter() - began, status, headers


async def plan_client(host: str, port: int, stop_at: float, tally: Tally, stride: int) -> None:
    conn = Connection(host, port)
    while time.monotonic() < stop_at and tally.budget > 0:
        tally.budget -= 1
        n, tally.next_n = tally.next_n, tally.next_n + stride
        tally.outstanding += 1
        latency, status, headers = await timed_get(conn, "/api/plan?" + urlencode(plan_params(n, tally.extra)), tally)
        tally.outstanding -= 1
        tally.plans.append((latency, status, time.monotonic() - latency - tally.started))
        if status == 503:  # told when to come back: do, as a polite client does
            await asyncio.sleep(min(float(headers.get("retry-after", "1")), 10.0))
    conn.close()


async def estimate_probe(host: str, port: int, stop_at: float, tally: Tally) -> None:
    conn = Connection(host, port)
    n = 0
    while time.monotonic() < stop_at:
        out = tally.outstanding
        latency, status, _ = await timed_get(conn, "/api/estimate?" + urlencode(estimate_params(n)), tally)
        tally.probes.append((latency, status, out))
        n += 1
        await asyncio.sleep(0.05)
    conn.close()


async def run_share(host: str, port: int, clients: int, first: int, stride: int, duration: float,
                    budget: int, probe: bool, extra: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """One process's clients (numbered `first`, `first + stride`, ...); the first share also probes."""
    tally = Tally(next_n=first, budget=budget, extra=extra)
    cpu0, start = time.process_time(), time.monotonic()
    tally.started = start
    jobs = [plan_client(host, port, start + duration, tally, stride) for _ in range(clients)]
    if probe:
        jobs.append(estimate_probe(host, port, start + duration, tally))
    await asyncio.gather(*jobs)
    return {"plans": tally.plans, "probes": tally.probes, "errors": dict(tally.errors),
            "elapsed_s": time.monotonic() - start, "cpu_s": time.process_time() - cpu0}


def _share(args: tuple[Any, ...]) -> dict[str, Any]:
    return asyncio.run(run_share(*args))


# ------------------------------------------------------------------ figures

def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    idx = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[idx]


def summary(values: list[float]) -> dict[str, float | None]:
    lat = sorted(values)
    out: dict[str, float | None] = {f"p{q}": round(percentile(lat, q) * 1000, 1) if lat else None
                                    for q in (50, 95, 99)}
    out["max"] = round(lat[-1] * 1000, 1) if lat else None
    return out


def cpu_pressure() -> float | None:
    """Linux PSI: the share of the last 10 s in which some runnable task waited for a CPU (%)."""
    try:
        return float(Path("/proc/pressure/cpu").read_text().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used so far (Linux /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_cpu_s(pid: int) -> tuple[float, float]:
    """CPU seconds used so far by a process, and by it and all its descendants (Linux /proc)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += cpu_s(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return cpu_s(pid), total


def run(host: str, port: int, clients: int, duration: float, max_requests: int, procs: int,
        server_pid: int | None, extra: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """Split the clients over `procs` processes (one event loop each), then merge their tallies."""
    from concurrent.futures import ProcessPoolExecutor

    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    jobs = [(host, port, n, i, procs, duration, max_requests // procs, i == 0, extra)
            for i, n in enumerate(shares) if n]
    load_before = (*os.getloadavg(), cpu_pressure())
    before = tree_cpu_s(server_pid) if server_pid else None
    with ProcessPoolExecutor(len(jobs)) as pool:
        parts = list(pool.map(_share, jobs))
    after = tree_cpu_s(server_pid) if server_pid else None
    server_cpu = (after[0] - before[0], after[1] - before[1]) if before and after else None
    return {**figures(parts, clients, load_before, server_cpu), "extra_params": dict(extra)}


def figures(parts: list[dict[str, Any]], clients: int, load_before: tuple[Any, ...],
            server_cpu_s: tuple[float, float] | None) -> dict[str, Any]:
    """The report, from each client process's tally and the server's CPU seconds (its own
    process, and all of its processes)."""
    plans = [x for p in parts for x in p["plans"]]
    probes = [x for p in parts for x in p["probes"]]
    errors: Counter[str] = Counter()
    for p in parts:
        errors.update(p["errors"])
    elapsed = max(p["elapsed_s"] for p in parts)
    answered = [s for s, c, _ in plans if c == 200]
    refused = [s for s, c, _ in plans if c == 503]
    failed = len(plans) - len(answered) - len(refused)
    lat_all, lat_ok = summary([s for s, _, _ in plans]), summary(answered)
    probe_lat = summary([s for s, c, o in probes if o > 0])
    probes_ok = sum(1 for _, c, _ in probes if c == 200)
    held = bool(answered) and not failed and len(refused) <= MAX_REFUSED \
        and (lat_all["p99"] or 0.0) <= P99_TARGET_MS
    probe_held = bool(probes) and probes_ok == len(probes) and (probe_lat["p99"] or 0.0) <= PROBE_P99_TARGET_MS
    per_answer = 1000 / max(1, len(answered))
    client_cpu_s = sum(p["cpu_s"] for p in parts)
    return {
        "clients": clients, "client_processes": len(parts), "duration_s": round(elapsed, 1),
        "cores": len(os.sched_getaffinity(0)), "load_average_before": [round(x, 2) for x in load_before[:3]],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_pressure_some_avg10_before": load_before[3], "cpu_pressure_some_avg10_after": cpu_pressure(),
        "requests": len(plans), "answered": len(answered), "refused_503": len(refused), "failed": failed,
        "failures": dict(errors), "answers_per_s": round(len(answered) / elapsed, 1),
        "requests_per_s": round(len(plans) / elapsed, 1),
        "latency_ms_all": lat_all, "latency_ms_answered": lat_ok,
        "latency_ms_refused": summary(refused),
        "estimates_during_plans": {
            "requests": len(probes), "ok": probes_ok,
            "plans_outstanding_mean": round(sum(o for *_, o in probes) / max(1, len(probes)), 1),
            "with_plans_outstanding": sum(1 for *_, o in probes if o > 0),
            "latency_ms": probe_lat},
        "server_cpu_ms_per_answer": round(server_cpu_s[1] * per_answer, 1) if server_cpu_s else None,
        "front_cpu_ms_per_request": (round(server_cpu_s[0] * 1000 / max(1, len(plans) + len(probes)), 2)
                                     if server_cpu_s else None),
        "client_cpu_ms_per_request": round(client_cpu_s * 1000 / max(1, len(plans)), 2),
        "implied_by_cpu": implied(server_cpu_s[1] * per_answer if server_cpu_s else None, clients),
        # ... and with this test's own clients on the same cores, as they are here
        "implied_with_clients": implied(server_cpu_s[1] * per_answer + client_cpu_s * per_answer
                                        if server_cpu_s else None, clients),
        "target": {"p99_ms_at_most": P99_TARGET_MS, "refused_at_most": MAX_REFUSED, "held": held,
                   "estimate_p99_ms_at_most": PROBE_P99_TARGET_MS, "estimates_held": probe_held},
        "timeline": timeline(plans),
    }


def implied(cpu_ms_per_answer: float | None, clients: int) -> dict[str, float] | None:
    """What the server's CPU time per answer implies on this machine's cores were they its alone
    (a shared machine's other work taken out): answers/s, and the closed-loop latency of
    `clients` clients at that rate (Little's law: clients / rate). An upper bound on the rate,
    which counts the CPU spent on 503s as well."""
    if not cpu_ms_per_answer:
        return None
    rate = len(os.sched_getaffinity(0)) * 1000 / cpu_ms_per_answer
    return {"answers_per_s": round(rate, 1), "latency_s": round(clients / rate, 2)}


def timeline(plans: list[tuple[float, int, float]], step_s: float = 5.0) -> list[dict[str, Any]]:
    """Per `step_s` window of sending time: answers, 503s and the answers' p50/p99 (ms)."""
    out = []
    end = max((t for *_, t in plans), default=0.0)
    for i in range(int(end // step_s) + 1):
        window = [(s, c) for s, c, t in plans if i * step_s <= t < (i + 1) * step_s]
        ok = sorted(s for s, c in window if c == 200)
        out.append({"from_s": i * step_s, "answered": len(ok), "refused_503": sum(1 for _, c in window if c == 503),
                    "p50_ms": round(percentile(ok, 50) * 1000) if ok else None,
                    "p99_ms": round(percentile(ok, 99) * 1000) if ok else None})
    return out


# ------------------------------------------------------------------ a server of our own

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def own_server(extra_args: tuple[str, ...], timeout_s: float = 180.0) -> Iterator[tuple[int, int]]:
    """`gpuwise serve` on a free loopback port until it answers /api/health (its workers are warm
    by then); yields (port, pid); stopped and waited for afterwards."""
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GPUWISE_LANG": "en"}
    cmd = [sys.executable, "-m", "gpuwise", "serve", "--host", "127.0.0.1", "--port", str(port), *extra_args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout_s
        while not _answers(port):
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"gpuwise serve exited with {proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"gpuwise serve did not answer on port {port} within {timeout_s:g} s")
            time.sleep(0.2)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def loopback(url: str) -> tuple[str, int]:
    """The host and port of a loopback URL; anything else is refused (this test floods)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if parts.scheme != "http" or not ok:
        raise SystemExit(f"--url must be http:// on a loopback address (127.0.0.1, ::1, localhost); got {url!r}")
    return host, parts.port or 80


# ------------------------------------------------------------------ the command

def print_report(r: dict[str, Any]) -> None:
    def line(name: str, s: dict[str, Any]) -> str:
        return f"  {name:22} p50 {s['p50']} ms, p95 {s['p95']} ms, p99 {s['p99']} ms, max {s['max']} ms"

    extra = "".join(f", {k}={v}" for k, v in r["extra_params"].items())
    print(f"{r['clients']} clients ({r['client_processes']} process(es)), {r['duration_s']} s, every request "
          f"distinct{extra or ' (whole catalog)'}; {r['cores']} cores, load average "
          f"{r['load_average_before'][0]} before, {r['load_average_after'][0]} after; CPU pressure (PSI some, 10 s) "
          f"{r['cpu_pressure_some_avg10_before']}% before, {r['cpu_pressure_some_avg10_after']}% after")
    print(f"  {r['requests']} plan requests: {r['answered']} answered, {r['refused_503']} told to retry (503), "
          f"{r['failed']} failed {r['failures'] or ''}; {r['answers_per_s']} answers/s")
    print(line("latency, all", r["latency_ms_all"]))
    print(line("latency, answered", r["latency_ms_answered"]))
    print(line("latency, 503", r["latency_ms_refused"]))
    e = r["estimates_during_plans"]
    print(line(f"estimates ({e['ok']}/{e['requests']} ok)", e["latency_ms"])
          + f"; {e['plans_outstanding_mean']} plans outstanding on average")
    print(f"  CPU: server {r['server_cpu_ms_per_answer']} ms per answer (all its processes), of which the "
          f"server process {r['front_cpu_ms_per_request']} ms per request; "
          f"clients {r['client_cpu_ms_per_request']} ms per request")
    if r["implied_by_cpu"]:
        i, c = r["implied_by_cpu"], r["implied_with_clients"]
        print(f"  implied by CPU time on {r['cores']} cores, with these clients on them too: {c['answers_per_s']} "
              f"answers/s, {c['latency_s']} s per request")
        print(f"  implied by CPU time on {r['cores']} cores of its own: {i['answers_per_s']} answers/s, "
              f"{i['latency_s']} s per request for {r['clients']} closed-loop clients")
    print("  by 5 s of sending time (answered/503, p50-p99 ms): " + "; ".join(
        f"{w['answered']}/{w['refused_503']} {w['p50_ms']}-{w['p99_ms']}" for w in r["timeline"]))
    plan_lane = (r.get("lanes_after") or {}).get("plan")
    if plan_lane:
        print(f"  server's plan lane after: {plan_lane['workers']} workers, mean {plan_lane['mean_ms']} ms, "
              f"wait calibration {plan_lane['wait_calibration']}, {plan_lane['answered']} answered, "
              f"{plan_lane['refused_503']} refused")
    t = r["target"]
    print(f"  target (every request answered, none refused or failed, p99 of all <= {t['p99_ms_at_most']:g} ms): "
          f"{'held' if t['held'] else 'NOT held'}; estimates (all answered, p99 <= "
          f"{t['estimate_p99_ms_at_most']:g} ms while plans are outstanding): "
          f"{'held' if t['estimates_held'] else 'NOT held'}")


def lanes(host: str, port: int) -> dict[str, Any] | None:
    """The server's own account of its lanes after the run (/api/health): workers, mean service
    time, wait calibration, answers and 503s."""
    async def ask() -> dict[str, Any]:
        conn = Connection(host, port)
        try:
            status, _, body = await asyncio.wait_for(conn.get("/api/health"), REQUEST_TIMEOUT_S)
        finally:
            conn.close()
        found: dict[str, Any] = parse_json(body)["lanes"] if status == 200 else {}
        return found

    try:
        return asyncio.run(ask())
    except Exception:  # noqa: BLE001 - a report without it is still a report
        return None


def use_cores(n: int) -> None:
    """Keep this process, and so the server and the client processes it starts, on its first `n`
    allowed cores (Linux affinity, inherited): the server's one worker per core follows."""
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[:n])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a server already running on loopback (default: start one)")
    ap.add_argument("--server-args", default="", help="extra `gpuwise serve` flags for the server it starts")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds (at most 600)")
    ap.add_argument("--max-requests", type=int, default=200_000, help="plan requests in all")
    ap.add_argument("--procs", type=int, default=1, help="client processes (one event loop each)")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="added to every plan request, e.g. cards=H100-SXM to time plans over fewer cards")
    ap.add_argument("--cores", type=int, default=2,
                    help="CPU cores the server it starts and the clients share (default 2, as issue 15 "
                         "asks; 0: every core this process may use)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if any("=" not in p for p in a.param):
        ap.error("--param takes KEY=VALUE")
    extra = tuple((k, v) for k, _, v in (p.partition("=") for p in a.param))
    if not (1 <= a.clients <= 2000 and 0 < a.duration <= 600 and 1 <= a.procs <= 16 and a.max_requests >= 1):
        ap.error("--clients must be 1-2000, --duration 0-600 s, --procs 1-16, --max-requests at least 1")
    if a.cores < 0:
        ap.error("--cores must be 0 (all) or more")
    if a.cores and not a.url:
        use_cores(a.cores)
    with ExitStack() as stack:
        pid: int | None = None
        if a.url:
            host, port = loopback(a.url)
        else:
            host, (port, pid) = "127.0.0.1", stack.enter_context(own_server(tuple(a.server_args.split())))
        result = run(host, port, a.clients, a.duration, a.max_requests, a.procs, pid, extra)
        result["lanes_after"] = lanes(host, port)
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
