"""Where the web server's work runs: two lanes, each bounded in concurrency, queue and time.

- The light lane (estimates, cards, models, verify judgements: milliseconds of work) runs in
  two worker processes of its own, at normal priority.
- The heavy lane (plans: a search over the catalog, CPU-bound pure Python) runs in worker
  processes, one per core by default, marked as batch work, so a waking estimate worker or
  the server process is not kept waiting by them. All plans share one first-come,
  first-served queue in front of every plan worker; an estimate never waits behind a plan.
- Every worker process (web/workers.py) is warmed before the server answers; the server
  process only parses HTTP and passes bytes on, so its GIL is never held by the work.
  `processes=False` runs a lane in threads instead (tests).

Admission counts work, not sockets: a lane admits a request while the queue ahead of it is
expected to clear within `max_wait_s` (queued requests / workers x the lane's recent service
time, calibrated against the waits seen); beyond that it answers at once with `Busy` (HTTP 503
with Retry-After), and a request still queued after `max_wait_s` is answered so then. Under
overload the requests that are answered stay fast and the others are told when to retry.
No web framework is imported here.
"""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text
from gpuwise.web.defaults import COMPUTE_TIMEOUT_S, MAX_WAIT_S
from gpuwise.web.workers import Requeue, Worker, WorkerPool

MAX_QUEUE = 1024  # requests waiting in one lane, whatever their expected wait
# A call sent to a worker that is still busy waits in its pipe; a larger one (a pasted config,
# a verify file) waits for an idle worker instead, so that writing it never blocks the server
# (an AF_UNIX socket buffers ~200 KiB: net.core.wmem_default 212992 on Linux).
PIPE_QUEUE_MAX_BYTES = 64 * 1024
# Service time before any is measured (a probe that failed): an estimate ~1 ms of CPU, a
# whole-catalog plan 15-25 ms here, both a few times that on a busy machine.
FIRST_GUESS_S = {"light": 0.01, "heavy": 0.05}
# Weight of the newest service time in the running mean: plans vary ~4x in cost, and the
# expected wait sums the ~100 ahead, so the mean follows the last ~50 (with 0.1, the last ~10,
# it followed seconds-long bursts of a shared machine's other work: 81 of 1,249 plans of 200
# closed-loop clients refused as over 10 s while no answered plan queued past 7.6 s).
_EWMA = 0.02
_CAL_EWMA = 0.05  # the calibration follows the queue's last ~20 predictions
OUTLIER_X = 4.0  # a service time past this many running means counts as this many (`_served`)
PROBE_ROUNDS = 3  # timed rounds of the probe at start-up, on every worker at once
CALIBRATION_MIN, CALIBRATION_MAX = 0.5, 4.0  # a broken prediction can neither open nor shut the lane


class Busy(GpuwiseError):
    """The lane is full: HTTP 503 with Retry-After."""

    exit_code = 503

    def __init__(self, retry_after_s: float) -> None:
        self.retry_after_s = max(1, math.ceil(retry_after_s))
        super().__init__(Text(f"The server is busy; try again in {self.retry_after_s} s.",
                              f"服务器繁忙，请 {self.retry_after_s} 秒后再试。"))


class TooSlow(GpuwiseError):
    """The work ran past the time limit: HTTP 504."""

    exit_code = 504


def _too_slow(timeout_s: float) -> TooSlow:
    return TooSlow(Text(f"The request took longer than {timeout_s:g} s and was stopped.",
                        f"请求超过 {timeout_s:g} 秒，已停止。"))


def load_catalogs() -> None:
    """The default warm-up of a worker process: read the card catalog once."""
    from gpuwise.catalog.cards import load_cards

    load_cards(())


class Lane:
    """One pool of workers (threads, or processes) with a bounded, time-aware queue in front."""

    def __init__(self, name: str, workers: int, *, processes: bool, max_wait_s: float = MAX_WAIT_S,
                 max_queue: int = MAX_QUEUE, warm: Callable[[], None] | None = load_catalogs,
                 batch: bool = False, depth: int = 1,
                 probe: tuple[Callable[..., Any], tuple[Any, ...]] | None = None) -> None:
        """`batch`: its worker processes are CPU-bound batch work; `depth`: calls sent to one
        worker at once (web/workers.py); `probe`: a representative call, timed on each warm
        worker to start the mean service time."""
        self.name, self.workers, self.processes, self.batch, self.depth = name, workers, processes, batch, depth
        self.max_wait_s, self.max_queue, self.warm_fn, self.probe = max_wait_s, max_queue, warm, probe
        self.mean_s = FIRST_GUESS_S.get(name, 0.1)
        self.calibration = 1.0  # realised queueing / predicted (`_calibrate`)
        self.waiting = 0  # admitted, not yet running
        self.running = 0
        self.answered = self.refused = 0
        self._slots: asyncio.Semaphore | None = None  # threads: one per worker
        self._pool: WorkerPool | None = None  # processes
        self._threads = None if processes else ThreadPoolExecutor(workers, thread_name_prefix=f"gpuwise-{name}")

    def _work_ahead_s(self) -> float:
        """The work ahead of a request admitted now, over the workers."""
        ahead = self.waiting + max(0, self.running - self.workers + 1)
        return ahead / self.workers * self.mean_s

    def expected_wait_s(self) -> float:
        """How long a request admitted now would queue: the work ahead of it, scaled by how
        long admitted requests have really queued against that prediction (on a shared or busy
        machine the workers get less than their cores, and plans vary)."""
        return self.calibration * self._work_ahead_s()

    def _admit(self) -> float:
        """Refuse (Busy) or admit; the prediction, for `_calibrate`."""
        ahead = self._work_ahead_s()
        wait = self.calibration * ahead
        if self.waiting >= self.max_queue or wait > self.max_wait_s:
            self.refused += 1
            raise Busy(wait)
        return ahead

    def _calibrate(self, predicted_s: float, took_s: float) -> None:
        """Move the calibration toward queued / predicted (the queueing is the answer's time
        less the lane's mean service time); predictions under 50 ms are too small to learn from."""
        if predicted_s < 0.05:
            return
        ratio = max(0.0, took_s - self.mean_s) / predicted_s
        self.calibration = min(CALIBRATION_MAX, max(CALIBRATION_MIN,
                                                    self.calibration + _CAL_EWMA * (ratio - self.calibration)))

    def _queue_limit_s(self) -> float:
        """A request that has queued this long is refused then (503 + Retry-After): admission
        predicts, this holds when the workers slow down after it (a busy machine), so an answer
        never comes after more than `max_wait_s` of queueing and the work it would have cost."""
        return self.max_wait_s

    def _took(self, began: float) -> None:
        self.running -= 1
        self.answered += 1
        if not self.processes:  # a process lane is told each call's own time (`_served`)
            self._served(time.monotonic() - began)

    def _served(self, seconds: float) -> None:
        """One call's own time into the running mean, at most OUTLIER_X times the mean: a worker
        that other work kept off the CPU for a second says little about the next hundred calls
        (unclipped, a few such calls raised the mean 3x for seconds and refused plans as over
        10 s while those sent beside them were answered within 6.2 s); a real change of cost
        still moves the mean, by up to 6 % a call."""
        cap = OUTLIER_X * self.mean_s if self.mean_s > 0 else seconds
        self.mean_s += _EWMA * (min(seconds, cap) - self.mean_s)

    async def run(self, timeout_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a worker: refused at once when the queue is full, 504 past `timeout_s`."""
        predicted, began = self._admit(), time.monotonic()
        if self.processes:
            result = await self._run_in_process(timeout_s, fn, args)
        else:
            result = await self._run_in_thread(timeout_s, fn, args)
        self._calibrate(predicted, time.monotonic() - began)
        return result

    async def _run_in_thread(self, timeout_s: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        slots = self._slots
        if slots.locked():  # every worker busy: queue, bounded in time
            self.waiting += 1
            try:
                await asyncio.wait_for(slots.acquire(), self._queue_limit_s())
            except TimeoutError:
                raise Busy(self.expected_wait_s()) from None
            finally:
                self.waiting -= 1
        else:
            await slots.acquire()  # free: taken at once, without yielding to the loop
        self.running += 1
        began = time.monotonic()

        def done(_: Any) -> None:  # the slot is free only when the work has really ended
            self._took(began)
            slots.release()

        if self._threads is None:
            raise RuntimeError("a process lane has no threads")
        future = asyncio.wrap_future(self._threads.submit(fn, *args))
        future.add_done_callback(done)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise _too_slow(timeout_s) from None

    async def _run_in_process(self, timeout_s: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        pool = self._start()
        message = pickle.dumps((fn, args), pickle.HIGHEST_PROTOCOL)  # before a worker is taken
        while True:
            worker = await self._take_worker(pool, queue_ok=len(message) <= PIPE_QUEUE_MAX_BYTES)
            self.running += 1
            began = time.monotonic()
            future = worker.send(message)
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout_s)
            except TimeoutError:
                pool.abandon(worker, future)  # killed: the work has ended; its replacement takes the next
                raise _too_slow(timeout_s) from None
            except Requeue:
                continue  # queued behind a call whose worker was killed: not run yet, so run it elsewhere
            finally:
                self._took(began)

    async def _take_worker(self, pool: WorkerPool, *, queue_ok: bool) -> Worker:
        """A worker with room: at once when one has, else first come, first served, bounded in time."""
        queued = not pool.can_take(pool.depth if queue_ok else 1)
        self.waiting += queued
        try:
            return await pool.take(self._queue_limit_s(), queue_ok=queue_ok)
        except TimeoutError:
            raise Busy(self.expected_wait_s()) from None
        finally:
            self.waiting -= queued

    def _start(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self.workers, self.warm_fn, batch=self.batch, depth=self.depth,
                                    served=self._served)
        return self._pool

    async def warm(self, *, probe: bool = True) -> None:
        """Start every worker process and wait until each has warmed up (catalogs read, caches
        filled), before the server accepts requests; a thread lane runs its warm-up once. Then
        time the probe, unless `probe=False` (the caller times it once every lane is warm)."""
        if self.processes:
            await self._start().wait_ready()
        elif self.warm_fn is not None and self._threads is not None:
            await asyncio.wrap_future(self._threads.submit(self.warm_fn))
        if probe:
            await self.time_probe()

    async def time_probe(self) -> None:
        """The mean service time measured, not guessed: one representative call on each (idle)
        worker at once, queue-free, timed with its round trip, after a first round (which reads
        the probe's model and fills its caches: 308 ms against 40 ms warm, measured here, and a
        mean 8x too long refuses a burst of clients that would be answered in time). The median
        of PROBE_ROUNDS rounds: on a shared machine one round can land in another's burst (one
        start measured 130 ms or more against 45 ms served later, and refused 44 of the first
        200 plans)."""
        if self.probe is None:
            return
        fn, args = self.probe

        async def timed() -> float:
            began = time.monotonic()
            await self.run(COMPUTE_TIMEOUT_S, fn, *args)
            return time.monotonic() - began

        try:
            await asyncio.gather(*(timed() for _ in range(self.workers)))
            times: list[float] = []
            for _ in range(PROBE_ROUNDS):
                times += await asyncio.gather(*(timed() for _ in range(self.workers)))
        except Exception:  # noqa: BLE001 - a failing probe keeps the first guess; requests report the error
            return
        finally:
            self.answered = 0  # /api/health counts requests only
        self.mean_s = statistics.median(times)

    def state(self) -> dict[str, Any]:
        """What /api/health reports of this lane."""
        ready = self._pool.ready_count if self._pool else (0 if self.processes else self.workers)
        return {"workers": self.workers, "kind": "processes" if self.processes else "threads",
                "ready": ready, "running": self.running, "waiting": self.waiting,
                "answered": self.answered, "refused_503": self.refused,
                "mean_ms": round(self.mean_s * 1000, 2), "max_wait_s": self.max_wait_s,
                "wait_calibration": round(self.calibration, 3),
                "pids": self._pool.pids() if self._pool else []}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)


def default_workers() -> int:
    """One plan process per core (what `os.sched_getaffinity` allows this process)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


__all__ = ["Busy", "Lane", "TooSlow", "default_workers"]
