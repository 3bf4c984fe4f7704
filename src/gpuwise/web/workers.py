"""Worker processes: spawned once, warmed before they take work, fed over one pipe each.

Each worker is a spawned Python process that runs `warm()` (catalogs read, one plan computed,
so every cache is filled) before it says it is ready, then runs one call at a time, sent over
its own pipe. The server reads the answers in its event loop, with no helper threads:
concurrent.futures.ProcessPoolExecutor's two queue threads cost the server process about
0.4 ms of CPU per call (measured here: 1,127 calls/s, 422 us of the parent's CPU each, for
a 42 kB answer), time the event loop then lacks on a 2-core machine. A worker past its time
limit is killed and replaced, so a runaway plan never keeps a core. No web framework is
imported here.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import sys
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text

READY = b"ready"
MAX_FAILED_STARTS = 3  # then a worker that cannot start (a broken install) is not restarted forever
START_TIMEOUT_S = 120.0  # spawn, import and warm-up of one worker on a busy 2-core machine
_ctx = multiprocessing.get_context("spawn")  # no copy of the server's threads or sockets


class WorkerLost(GpuwiseError):
    """The process computing the request stopped (killed, out of memory): HTTP 500."""

    exit_code = 500


def _answer(message: bytes) -> bytes:
    """Run one pickled `(fn, args)`; the pickled `(ok, result or exception)`."""
    try:
        fn, args = pickle.loads(message)
        out: tuple[bool, Any] = (True, fn(*args))
    except Exception as exc:  # noqa: BLE001 - every error goes back to the server whole
        out = (False, exc)
    try:
        return pickle.dumps(out, pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - an answer that cannot be pickled is an error, not a hang
        return pickle.dumps((False, GpuwiseError(Text("The worker's answer could not be sent back.",
                                                      "计算进程的结果无法传回。"))))


def _batch_priority() -> None:
    """Mark this process CPU-bound (Linux SCHED_BATCH, no privilege needed): the same share of
    the CPU by its nice value, but a waking worker does not preempt the server process, whose
    event loop answers every connection. sched(7): "the scheduler will apply a small scheduling
    penalty with respect to wakeup behavior"; kernel commit 91c234b4e341 "sched: do not
    wakeup-preempt with SCHED_BATCH tasks". A raised nice value would instead starve the
    workers on a shared machine."""
    batch = getattr(os, "SCHED_BATCH", None)
    if batch is not None:
        try:
            os.sched_setscheduler(0, batch, os.sched_param(0))
        except OSError:
            pass  # not allowed here: normal scheduling


def _main(conn: Connection, warm: Callable[[], None] | None, batch: bool) -> None:
    """A worker's life: warm up, say ready, answer calls until the server closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C stops the server, which closes the pipe
    if batch:
        _batch_priority()
    if warm is not None:
        try:
            warm()
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only makes the first request slower
            print(f"gpuwise: a worker's warm-up failed ({type(exc).__name__}); "
                  "its first request reads the catalogs instead.", file=sys.stderr)
    conn.send_bytes(READY)
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the server has gone
        conn.send_bytes(_answer(message))


class Worker:
    """One worker process and the server's end of its pipe."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        ours, theirs = _ctx.Pipe()
        self.process = _ctx.Process(target=_main, args=(theirs, pool.warm, pool.batch), daemon=True,
                                    name="gpuwise-worker")
        self.process.start()
        theirs.close()
        self.conn = ours
        self.ready, self.alive = False, True
        self.pending: asyncio.Future[Any] | None = None
        pool.loop.add_reader(ours.fileno(), self._readable)

    def send(self, message: bytes) -> asyncio.Future[Any]:
        """Start one call (a pickled `(fn, args)`); its answer arrives in the future."""
        future = self.pending = self.pool.loop.create_future()
        try:
            self.conn.send_bytes(message)
        except OSError:  # the worker died since it was last idle
            self.pool.lost(self)
        return future

    def _readable(self) -> None:
        try:
            message = self.conn.recv_bytes()
        except (EOFError, OSError):
            self.pool.lost(self)
            return
        if not self.ready:
            self.ready = True
            self.pool.failed_starts = 0
            self.pool.idle(self)
            return
        future, self.pending = self.pending, None
        ok, value = pickle.loads(message)
        if future is not None and not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        self.pool.idle(self)

    def stop(self) -> None:
        """Close the pipe (the worker exits) and make sure the process has ended."""
        self.pool.loop.remove_reader(self.conn.fileno())
        self.conn.close()
        self.process.join(0.5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2)

    def kill(self) -> None:
        self.process.kill()
        self.stop()


class WorkerPool:
    """`size` worker processes. A ready worker is handed straight to the longest-waiting call
    (first come, first served: a newcomer never takes the worker a waiter was promised, which
    asyncio.Queue allows), else kept in `free`."""

    def __init__(self, size: int, warm: Callable[[], None] | None, *, batch: bool = False) -> None:
        self.size, self.warm, self.batch = size, warm, batch
        self.loop = asyncio.get_running_loop()
        self.free: deque[Worker] = deque()
        self.waiters: deque[asyncio.Future[Worker]] = deque()
        self.closed = False
        self.failed_starts = 0  # workers in a row that ended before they said ready
        self._all_ready = asyncio.Event()
        self.workers = [Worker(self) for _ in range(size)]

    @property
    def ready_count(self) -> int:
        return sum(1 for w in self.workers if w.ready)

    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers if w.process.pid is not None]

    async def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        await asyncio.wait_for(self._all_ready.wait(), timeout_s)
        if not self.workers:
            raise WorkerLost(Text("The worker processes end before they are ready; check that "
                                  "`python -c \"import gpuwise.web.calls\"` runs.",
                                  "计算进程在就绪前即退出；请检查 `python -c \"import gpuwise.web.calls\"` 能否运行。"))

    def idle(self, worker: Worker) -> None:
        if self.closed or not worker.alive:
            return
        if self.ready_count == self.size:
            self._all_ready.set()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self.free.append(worker)

    async def take(self, timeout_s: float) -> Worker:
        """An idle worker: at once when one is free and no call waits, else in arrival order.
        TimeoutError past `timeout_s`."""
        while self.free and not self.waiters:
            worker = self.free.popleft()
            if worker.alive:
                return worker
        waiter: asyncio.Future[Worker] = self.loop.create_future()
        self.waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.idle(waiter.result())  # promised just as the wait ended: pass it on
            elif waiter in self.waiters:
                self.waiters.remove(waiter)
            raise

    def lost(self, worker: Worker) -> None:
        """A worker ended on its own: fail its call and start a replacement."""
        future, worker.pending = worker.pending, None
        self._replace(worker, killed=False)
        if future is not None and not future.done():
            future.set_exception(WorkerLost(Text(
                "The worker computing this request stopped; a new one has been started.",
                "计算该请求的进程已停止，已启动新的进程。")))

    def abandon(self, worker: Worker) -> None:
        """A call past its time limit: kill its worker; the replacement is free once warm."""
        worker.pending = None
        self._replace(worker, killed=True)

    def _replace(self, worker: Worker, *, killed: bool) -> None:
        if worker not in self.workers:
            return
        worker.alive = False
        worker.kill() if killed else worker.stop()
        if self.closed:
            return
        self.failed_starts += 0 if worker.ready else 1
        if self.failed_starts >= MAX_FAILED_STARTS:  # it dies before it is ready: do not loop
            self.workers.remove(worker)
            print(f"gpuwise: {self.failed_starts} worker processes in a row ended before they were ready; "
                  "no more are started.", file=sys.stderr)
            if not self.workers:
                self._all_ready.set()  # wait_ready() says so at once
            return
        self.workers[self.workers.index(worker)] = Worker(self)

    def close(self) -> None:
        self.closed = True
        for worker in self.workers:
            worker.stop()


__all__ = ["Worker", "WorkerLost", "WorkerPool"]
