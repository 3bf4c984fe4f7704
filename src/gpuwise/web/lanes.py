"""Where the web server's work runs: two lanes, each bounded in concurrency, queue and time.

- The light lane (estimates, cards, models, verify judgements: milliseconds of work) runs in
  threads of the server process.
- The heavy lane (plans: a search over the catalog, CPU-bound pure Python) runs in worker
  processes, one per core by default, so that a plan never holds the server process's GIL and
  an estimate never waits behind a plan.

Admission counts work, not sockets: a lane admits a request while the queue ahead of it is
expected to clear within `max_wait_s` (queued requests / workers x the lane's recent service
time); beyond that it answers at once with `Busy` (HTTP 503 with Retry-After), so under
overload the requests that are answered stay fast and the others are told when to retry.
No web framework is imported here.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text

MAX_WAIT_S = 1.0  # expected queueing before a request is refused (Retry-After instead): p99 near 2 s
MAX_QUEUE = 1024  # requests waiting in one lane, whatever their expected wait
FIRST_GUESS_S = {"light": 0.01, "heavy": 0.3}  # service time before any is measured
_EWMA = 0.2  # weight of the newest service time in the running mean


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


def _worker_start() -> None:
    """In each plan process: load the catalogs once, before the first request."""
    from gpuwise.catalog.cards import load_cards

    load_cards(())


class Lane:
    """One pool of workers with a bounded, time-aware queue in front of it."""

    def __init__(self, name: str, workers: int, *, processes: bool, max_wait_s: float = MAX_WAIT_S,
                 max_queue: int = MAX_QUEUE) -> None:
        self.name, self.workers, self.processes = name, workers, processes
        self.max_wait_s, self.max_queue = max_wait_s, max_queue
        self.mean_s = FIRST_GUESS_S.get(name, 0.1)
        self.waiting = 0  # admitted, not yet running
        self.running = 0
        self._slots: asyncio.Semaphore | None = None
        self.executor: Executor = self._new_executor()

    def _new_executor(self) -> Executor:
        if self.processes:
            return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_worker_start)
        return ThreadPoolExecutor(self.workers, thread_name_prefix=f"gpuwise-{self.name}")

    def expected_wait_s(self) -> float:
        """How long a request admitted now would queue: the work ahead of it over the workers."""
        ahead = self.waiting + max(0, self.running - self.workers + 1)
        return ahead / self.workers * self.mean_s

    def _admit(self) -> None:
        wait = self.expected_wait_s()
        if self.waiting >= self.max_queue or (self.waiting > 0 and wait > self.max_wait_s):
            raise Busy(wait)

    async def run(self, timeout_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a worker: refused at once when the queue is full, 504 past `timeout_s`."""
        self._admit()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        slots = self._slots
        if slots.locked():  # every worker busy: queue, bounded in time
            self.waiting += 1
            try:
                await asyncio.wait_for(slots.acquire(), max(self.max_wait_s * 4, 10.0))
            except TimeoutError:
                raise Busy(self.expected_wait_s()) from None
            finally:
                self.waiting -= 1
        else:
            await slots.acquire()  # free: taken at once, without yielding to the loop
        self.running += 1
        began = time.monotonic()

        def done(_: Any) -> None:  # the slot is free only when the work has really ended
            self.running -= 1
            self.mean_s += _EWMA * (time.monotonic() - began - self.mean_s)
            slots.release()

        try:
            future = asyncio.wrap_future(self.executor.submit(fn, *args))
        except (BrokenProcessPool, RuntimeError):
            done(None)
            self.executor = self._new_executor()  # a worker died: start a fresh pool
            raise Busy(1.0) from None
        future.add_done_callback(done)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            raise TooSlow(Text(f"The request took longer than {timeout_s:g} s and was stopped.",
                               f"请求超过 {timeout_s:g} 秒，已停止。")) from None
        except BrokenProcessPool:
            self.executor = self._new_executor()
            raise Busy(1.0) from None

    async def warm(self) -> None:
        """Start every worker process (spawned, catalogs loaded) before the first request."""
        if self.processes:
            jobs = [asyncio.wrap_future(self.executor.submit(time.sleep, 0.05)) for _ in range(self.workers)]
            await asyncio.gather(*jobs)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


def default_workers() -> int:
    """One plan process per core (what `os.sched_getaffinity` allows this process)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


__all__ = ["Busy", "Lane", "TooSlow", "default_workers"]
