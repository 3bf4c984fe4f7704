"""The web server's work lanes under overload: admission counts queued work, not sockets; a full
lane refuses at once with Busy (503 + Retry-After); light work never waits behind heavy work."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gpuwise.web.lanes import Busy, Lane, TooSlow


def _blocked(gate: threading.Event) -> str:
    gate.wait(30)
    return "plan"


def test_an_estimate_is_answered_while_every_plan_worker_is_busy() -> None:
    async def scenario() -> list[str]:
        gate = threading.Event()
        heavy = Lane("heavy", 1, processes=False)
        light = Lane("light", 2, processes=False)
        plans = [asyncio.ensure_future(heavy.run(30, _blocked, gate)) for _ in range(3)]
        await asyncio.sleep(0)
        answer = await light.run(30, lambda: "estimate")  # not behind the blocked plans
        gate.set()
        got = [answer, *[await p for p in plans]]
        heavy.close()
        light.close()
        return got

    assert asyncio.run(scenario()) == ["estimate", "plan", "plan", "plan"]


def test_a_lane_whose_queue_would_take_too_long_refuses_at_once_with_retry_after() -> None:
    async def scenario() -> tuple[int, int]:
        gate = threading.Event()
        lane = Lane("heavy", 1, processes=False, max_wait_s=1.5)
        lane.mean_s = 1.0  # each plan takes a second: a queue of two already waits too long
        running = asyncio.ensure_future(lane.run(30, _blocked, gate))
        await asyncio.sleep(0.05)
        queued = asyncio.ensure_future(lane.run(30, _blocked, gate))
        await asyncio.sleep(0.05)
        with pytest.raises(Busy) as info:
            await lane.run(30, _blocked, gate)
        gate.set()
        await running
        await queued
        lane.close()
        return info.value.exit_code, info.value.retry_after_s

    status, retry_after = asyncio.run(scenario())
    assert status == 503 and retry_after >= 1


def test_a_lane_bounds_its_queue_whatever_the_expected_wait() -> None:
    async def scenario() -> int:
        gate = threading.Event()
        lane = Lane("heavy", 1, processes=False, max_wait_s=1e9, max_queue=2)
        lane.mean_s = 0.0
        jobs = [asyncio.ensure_future(lane.run(30, _blocked, gate)) for _ in range(3)]  # 1 runs, 2 wait
        await asyncio.sleep(0.05)
        refused = 0
        try:
            await lane.run(30, _blocked, gate)
        except Busy:
            refused = 1
        gate.set()
        await asyncio.gather(*jobs)
        lane.close()
        return refused

    assert asyncio.run(scenario()) == 1


def test_work_past_its_time_limit_is_504_and_its_slot_is_freed_only_when_it_ends() -> None:
    async def scenario() -> int:
        gate = threading.Event()
        lane = Lane("heavy", 1, processes=False)
        with pytest.raises(TooSlow):
            await lane.run(0.05, _blocked, gate)
        still = lane.running
        gate.set()
        await asyncio.sleep(0.2)
        lane.close()
        return still

    assert asyncio.run(scenario()) == 1


def test_plans_run_in_worker_processes_and_their_errors_come_back_whole() -> None:
    from gpuwise.web.api import plan_bytes

    async def scenario() -> tuple[bytes, dict[str, object]]:
        lane = Lane("heavy", 1, processes=True)
        await lane.warm()
        ok = await lane.run(120, plan_bytes, [("model", "qwen3-0.6b"), ("top", "1")])
        try:
            await lane.run(120, plan_bytes, [("model", "qwen3-0.6b"), ("budget", "nan")])
            err: dict[str, object] = {}
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            err = exc.to_dict()  # type: ignore[attr-defined]
        lane.close()
        return ok, err

    ok, err = asyncio.run(scenario())
    assert b'"schema_version"' in ok
    assert err["error"] == "InputError" and "budget" in str(err["message"]) and err["message_zh"]
