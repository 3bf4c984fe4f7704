"""`gpuwise serve`'s worker model, tested on a real server on loopback: one warm plan worker
process per core by default, estimates answered while every plan worker is stopped, a queue
bound answered 503 + Retry-After at once, a plan past its time limit 504 with its worker
replaced, workers that never outlive their server. A plan worker is held busy by stopping it
(SIGSTOP), so no test depends on how long a plan takes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from benchmarks.load_test import own_server

from gpuwise.web.lanes import Lane

POLL_S = 60.0  # the most any wait for a server's state may take (a busy 2-core machine)


def _health(c: Any) -> dict[str, Any]:
    lanes: dict[str, Any] = c.get("/api/health").json()["lanes"]
    return lanes


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {POLL_S:g} s: {what}")
        time.sleep(0.05)


def _children(pid: int) -> set[int]:
    return {int(x) for task in Path(f"/proc/{pid}/task").iterdir() for x in (task / "children").read_text().split()}


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture()
def server(request: pytest.FixtureRequest) -> Iterator[tuple[Any, int]]:
    """A server with the test's flags (`@pytest.mark.parametrize("server", [(...)], indirect=True)`):
    an httpx client on it and the server's pid."""
    args: tuple[str, ...] = getattr(request, "param", ())
    with own_server(args) as (port, pid), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=POLL_S) as c:
        yield c, pid


class Background:
    """One request sent from a thread; `.response` once answered."""

    def __init__(self, c: Any, url: str) -> None:
        self.response: Any = None
        self._thread = threading.Thread(target=self._go, args=(str(c.base_url), url), daemon=True)
        self._thread.start()

    def _go(self, base: str, url: str) -> None:
        with httpx.Client(base_url=base, timeout=POLL_S * 2) as own:
            self.response = own.get(url)

    def result(self) -> Any:
        self._thread.join(POLL_S * 2)
        return self.response


PLAN = "/api/plan?model=qwen3-0.6b&top=1&context="


def test_the_server_starts_one_warm_plan_worker_process_per_core_by_default(server: tuple[Any, int]) -> None:
    c, pid = server
    lanes = _health(c)
    plan, light = lanes["plan"], lanes["light"]
    cores = len(os.sched_getaffinity(0))
    assert (plan["kind"], plan["workers"], plan["ready"], len(plan["pids"])) == ("processes", cores, cores, cores)
    assert (light["kind"], light["ready"]) == ("processes", light["workers"])  # estimates apart from plans
    assert set(plan["pids"]) | set(light["pids"]) <= _children(pid)  # the server's own, warm before it answered
    assert not set(plan["pids"]) & set(light["pids"])
    assert plan["mean_ms"] > 0 and plan["answered"] == 0  # timed on a warm-up call, not guessed
    assert c.get(PLAN + "4096").status_code == 200


@pytest.mark.parametrize("server", [("--workers", "1", "--queue-wait", "0")], indirect=True)
def test_an_estimate_is_answered_while_the_only_plan_worker_is_stopped_and_a_plan_that_would_queue_is_503(
        server: tuple[Any, int]) -> None:
    c, _ = server
    worker = _health(c)["plan"]["pids"][0]
    os.kill(worker, signal.SIGSTOP)
    try:
        running = Background(c, PLAN + "5000")
        _until(lambda: _health(c)["plan"]["running"] == 1, "the first plan on the stopped worker")
        estimate = c.get("/api/estimate", params={"model": "qwen3-0.6b", "card": "H100-SXM", "context": 5002})
        refused = c.get(PLAN + "5003")  # it would wait behind the first: past --queue-wait 0, refused at once
    finally:
        os.kill(worker, signal.SIGCONT)
    assert estimate.status_code == 200 and estimate.json()["fits"] in (True, False)
    assert refused.status_code == 503 and int(refused.headers["retry-after"]) >= 1
    body = refused.json()
    assert body["error"] == "Busy" and body["message"] and body["message_zh"]
    assert refused.headers["content-security-policy"]
    assert running.result().status_code == 200


@pytest.mark.parametrize("server", [("--workers", "1", "--compute-timeout", "2")], indirect=True)
def test_a_plan_past_the_compute_timeout_is_504_and_its_worker_is_replaced_by_a_warm_one(
        server: tuple[Any, int]) -> None:
    c, _ = server
    worker = _health(c)["plan"]["pids"][0]
    os.kill(worker, signal.SIGSTOP)  # never answers: the server must give up on it
    late = c.get(PLAN + "6000")
    assert late.status_code == 504 and late.json()["error"] == "TooSlow" and late.json()["message_zh"]
    _until(lambda: _gone(worker), "the stopped worker killed")
    _until(lambda: _health(c)["plan"]["ready"] == 1, "a replacement worker warm")
    assert _health(c)["plan"]["pids"] != [worker]
    assert c.get(PLAN + "6001").status_code == 200


@pytest.mark.parametrize("server", [("--workers", "1",)], indirect=True)
def test_a_worker_killed_mid_plan_is_a_500_error_object_and_one_killed_idle_is_replaced(
        server: tuple[Any, int]) -> None:
    c, _ = server
    worker = _health(c)["plan"]["pids"][0]
    os.kill(worker, signal.SIGSTOP)
    busy = Background(c, PLAN + "7000")
    _until(lambda: _health(c)["plan"]["running"] == 1, "the plan on the stopped worker")
    os.kill(worker, signal.SIGKILL)  # as the kernel's out-of-memory killer would
    lost = busy.result()
    assert lost.status_code == 500 and lost.json()["error"] == "WorkerLost" and lost.json()["message_zh"]
    _until(lambda: _health(c)["plan"]["ready"] == 1 and _health(c)["plan"]["pids"] != [worker], "a new worker")
    idle = _health(c)["plan"]["pids"][0]
    os.kill(idle, signal.SIGKILL)  # dies while idle: never handed a request
    _until(lambda: _health(c)["plan"]["ready"] == 1 and _health(c)["plan"]["pids"] != [idle], "another worker")
    assert c.get(PLAN + "7001").status_code == 200


@pytest.mark.parametrize("server", [("--workers", "2",)], indirect=True)
def test_plan_workers_exit_when_their_server_is_killed(server: tuple[Any, int]) -> None:
    c, pid = server
    workers = _health(c)["plan"]["pids"]
    assert len(workers) == 2
    os.kill(pid, signal.SIGKILL)  # no shutdown code runs: the workers see their pipe close
    _until(lambda: all(_gone(w) for w in workers), f"plan workers {workers} exited")


@pytest.mark.parametrize("depth", [1, 2])
def test_calls_waiting_for_a_worker_process_are_answered_first_come_first_served(depth: int) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        lane = Lane("heavy", 1, processes=True, warm=None, depth=depth, max_wait_s=1e9)
        await lane.warm()
        order: list[str] = []
        jobs = [asyncio.ensure_future(lane.run(60, str, n)) for n in range(12)]
        for job in jobs:
            job.add_done_callback(lambda j: order.append(j.result()))
        answers = list(await asyncio.gather(*jobs))
        lane.close()
        return order, answers

    order, answers = asyncio.run(scenario())
    assert order == answers == [str(n) for n in range(12)]


@pytest.mark.parametrize("server", [("--processes", "2", "--workers", "2")], indirect=True)
def test_with_two_server_processes_each_has_its_share_of_the_plan_workers(server: tuple[Any, int]) -> None:
    c, pid = server
    plan = _health(c)["plan"]
    assert (plan["workers"], plan["ready"]) == (1, 1)
    servers = [p for p in _children(pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(servers) == 2  # uvicorn's two server processes, each with its own workers
    assert plan["pids"][0] in {w for s in servers for w in _children(s)}
    assert c.get(PLAN + "8000").status_code == 200


def test_workers_that_die_before_they_are_ready_are_not_restarted_forever() -> None:
    from gpuwise.web.workers import MAX_FAILED_STARTS, WorkerLost

    async def scenario() -> tuple[str, int]:
        lane = Lane("heavy", 1, processes=True, warm=sys.exit)  # every worker exits in its warm-up
        try:
            await lane.warm()
        except WorkerLost as exc:
            return exc.message.en, lane._pool.failed_starts if lane._pool else 0
        finally:
            lane.close()
        return "", 0

    message, failed = asyncio.run(scenario())
    assert "before they are ready" in message and failed == MAX_FAILED_STARTS


def test_a_lane_whose_predictions_fall_short_learns_to_expect_longer_waits() -> None:
    async def scenario() -> float:
        lane = Lane("heavy", 1, processes=False, warm=None, max_wait_s=1e9)
        lane.mean_s = 0.1  # predicts 0.1 s a call; each takes at least 0.4 s (a sleep)
        await asyncio.gather(*(lane.run(60, time.sleep, 0.4) for _ in range(4)))
        lane.close()
        return lane.calibration

    assert asyncio.run(scenario()) > 1.0


def _raw(port: int, data: bytes, wait_s: float = POLL_S) -> bytes:
    """What the server sends back on one connection to `data`, until it closes it."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_both_http_parsers_answer_and_guard_the_server_alike(parser: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if parser == "httptools":
        pytest.importorskip("httptools")
    monkeypatch.setenv("GPUWISE_SERVE_HTTP", parser)
    with own_server(("--workers", "1", "--request-timeout", "1")) as (port, _):
        ok = _raw(port, b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # a head still growing past 64 KiB (never buffered whole): refused before its end comes
        huge = _raw(port, b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (80 * 1024))
        garbage = _raw(port, b"GARBAGE\x00\x01 / HTTP/9.9\r\n\r\n")
        began = time.monotonic()
        stalled = _raw(port, b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # never finished
        waited = time.monotonic() - began
    assert ok.startswith(b"HTTP/1.1 200") and b'"status"' in ok
    # refused with the error object (h11's own limit answers 400; httptools' 431)
    assert huge.startswith(b"HTTP/1.1 431" if parser == "httptools" else b"HTTP/1.1 400"), huge[:80]
    for answer in (huge, garbage):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"nosniff" in head and b'"message_zh"' in body
    assert garbage.startswith(b"HTTP/1.1 400")
    assert stalled == b"" and waited < POLL_S  # closed at the request deadline, unanswered
