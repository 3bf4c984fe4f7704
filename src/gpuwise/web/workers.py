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
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import time
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
    gc.collect()
    gc.freeze()  # the catalogs and caches just read live as long as the worker: out of every full pass
    conn.send_bytes(READY)
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the server has gone
        conn.send_bytes(_answer(message))


class Requeue(Exception):
    """A call queued behind one whose worker was killed: run it again on another worker."""


class Worker:
    """One worker process and the server's end of its pipe; `pending` holds the futures of the
    calls sent to it, answered in order."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        ours, theirs = _ctx.Pipe()
        self.process = _ctx.Process(target=_main, args=(theirs, pool.warm, pool.batch), daemon=True,
                                    name="gpuwise-worker")
        self.process.start()
        theirs.close()
        self.conn = ours
        self.ready, self.alive = False, True
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.sent_at: deque[float] = deque()  # beside `pending`
        self.last_done = 0.0
        self.reserved = 0  # handed to a call that has not sent yet
        pool.loop.add_reader(ours.fileno(), self._readable)
        # uvloop (libuv's uv_poll_init) makes a polled descriptor non-blocking, and Connection's
        # recv_bytes/send_bytes then fail half-way through a message with BlockingIOError, which
        # looked like a lost worker; readiness is all the loop needs from it (asyncio leaves it so).
        os.set_blocking(ours.fileno(), True)

    @property
    def load(self) -> int:
        return len(self.pending) + self.reserved

    def send(self, message: bytes) -> asyncio.Future[Any]:
        """Start one call (a pickled `(fn, args)`); its answer arrives in the future."""
        self.reserved = max(0, self.reserved - 1)
        future: asyncio.Future[Any] = self.pool.loop.create_future()
        self.pending.append(future)
        self.sent_at.append(time.monotonic())
        try:
            self.conn.send_bytes(message)
        except OSError:  # the worker died since it was last handed a call
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
        elif self.pending:
            future, now = self.pending.popleft(), time.monotonic()
            # its own time on the worker, not the time it waited in the pipe behind another call
            self.pool.served(now - max(self.sent_at.popleft(), self.last_done))
            self.last_done = now
            try:
                ok, value = pickle.loads(message)
            except Exception:  # noqa: BLE001 - an answer that cannot be read is an error, not a hang
                ok, value = False, GpuwiseError(Text("The worker's answer could not be read.",
                                                     "无法读取计算进程的结果。"))
            if not future.done():
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        self.pool.released()

    def fail(self, error: BaseException) -> None:
        self.sent_at.clear()
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(error)

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
    """`size` worker processes, each sent up to `depth` calls at once: with 2, a busy worker
    finds its next call already in its pipe when it finishes one, so it never sleeps between
    calls waiting for the server to wake, read the answer and send the next (on a saturated
    2-core machine each such wake-up costs milliseconds; ProcessPoolExecutor queues one call
    ahead for the same reason). Calls are handed out first come, first served: a newcomer never
    takes the place promised to a call already waiting."""

    def __init__(self, size: int, warm: Callable[[], None] | None, *, batch: bool = False,
                 depth: int = 1, served: Callable[[float], None] | None = None) -> None:
        """`served(seconds)`: told each call's own time on its worker."""
        self.size, self.warm, self.batch, self.depth = size, warm, batch, depth
        self.served = served or (lambda _: None)
        self.loop = asyncio.get_running_loop()
        self.waiters: deque[tuple[asyncio.Future[Worker], int]] = deque()
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

    def _pick(self, depth: int) -> Worker | None:
        """The least loaded ready worker, if it can take another call."""
        best = min((w for w in self.workers if w.ready and w.alive), key=lambda w: w.load, default=None)
        return best if best is not None and best.load < depth else None

    def can_take(self, depth: int) -> bool:
        return not self.waiters and self._pick(min(depth, self.depth)) is not None

    def released(self) -> None:
        """A worker finished a call or became ready: serve the waiting calls, oldest first."""
        if self.closed:
            return
        if self.ready_count == self.size:
            self._all_ready.set()
        while self.waiters:
            waiter, depth = self.waiters[0]
            if waiter.done():
                self.waiters.popleft()
                continue
            worker = self._pick(depth)
            if worker is None:
                return
            self.waiters.popleft()
            worker.reserved += 1
            waiter.set_result(worker)

    async def take(self, timeout_s: float, *, queue_ok: bool = True) -> Worker:
        """A worker for one call, reserved: at once when one has room and no call waits, else
        in arrival order; TimeoutError past `timeout_s`. `queue_ok=False`: only an idle worker
        (a large message must not wait in a pipe, where writing it could block the server)."""
        depth = self.depth if queue_ok else 1
        worker = None if self.waiters else self._pick(depth)
        if worker is not None:
            worker.reserved += 1
            return worker
        waiter: asyncio.Future[Worker] = self.loop.create_future()
        self.waiters.append((waiter, depth))
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                waiter.result().reserved -= 1  # handed over just as the wait ended: give it back
                self.released()
            raise

    def lost(self, worker: Worker) -> None:
        """A worker ended on its own: fail its calls and start a replacement."""
        self._replace(worker, killed=False)
        worker.fail(WorkerLost(Text("The worker computing this request stopped; a new one has been started.",
                                    "计算该请求的进程已停止，已启动新的进程。")))

    def abandon(self, worker: Worker, future: asyncio.Future[Any]) -> None:
        """A call past its time limit: kill its worker (the work ends with it); calls queued
        behind it run again elsewhere; the replacement takes calls once warm."""
        if future in worker.pending:
            del worker.sent_at[worker.pending.index(future)]
            worker.pending.remove(future)
        self._replace(worker, killed=True)
        worker.fail(Requeue())

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


__all__ = ["Requeue", "Worker", "WorkerLost", "WorkerPool"]
