"""Benchmark child processes with deadlines, and the sampler that reads the GPUs meanwhile.

Each child is `python -m gpuwise.verify.bench '<spec>'`, printing one JSON line per result.
Several children can run at once (the sustained window starts one per GPU so that every GPU
is loaded together). A child past its deadline is killed and reported as timed out; stderr
is drained in a thread so a chatty child cannot block on a full pipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwise.verify.raw import ChildOutcome

__all__ = ["Sampler", "run_children", "worst_outcome"]


class Sampler:
    """Polls each GPU every `period` seconds in a thread; each reading gets its time `t`."""

    def __init__(self, read: Callable[[int], dict[str, Any]], n: int, period: float = 1.0) -> None:
        self.read, self.n, self.period = read, n, period
        self.readings: dict[int, list[dict[str, Any]]] = {i: [] for i in range(n)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = 0.0

    def _run(self) -> None:
        while not self._stop.is_set():
            for i in range(self.n):
                reading = self.read(i)
                if reading:
                    self.readings[i].append({"t": round(time.monotonic() - self._t0, 3), **reading})
            self._stop.wait(self.period)

    def __enter__(self) -> Sampler:  # noqa: PYI034
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _Child:
    def __init__(self, spec: dict[str, Any], on_record: Callable[[dict[str, Any]], None]) -> None:
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")  # CUDA numbers GPUs by bus, as NVML
        self.proc = subprocess.Popen([sys.executable, "-m", "gpuwise.verify.bench", json.dumps(spec)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.records: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.on_record = on_record
        self.threads = [threading.Thread(target=self._out, daemon=True),
                        threading.Thread(target=self._err, daemon=True)]
        for t in self.threads:
            t.start()

    def _out(self) -> None:
        for line in self.proc.stdout or ():
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.records.append(record)
                self.on_record(record)

    def _err(self) -> None:
        for line in self.proc.stderr or ():
            self.stderr.append(line)
            del self.stderr[:-40]


def run_children(specs: list[dict[str, Any]], timeout_s: float,
                 on_record: Callable[[dict[str, Any]], None] = lambda r: None
                 ) -> tuple[list[dict[str, Any]], ChildOutcome]:
    """Run the children together; (every record, the worst of their outcomes)."""
    t0 = time.monotonic()
    children = [_Child(spec, on_record) for spec in specs]
    deadline = t0 + timeout_s
    timed_out = False
    for c in children:
        try:
            c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    for c in children:
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait(timeout=10)
        for t in c.threads:
            t.join(timeout=5)
    records = [r for c in children for r in c.records]
    codes = [c.proc.returncode or 0 for c in children]
    bad = next((c for c in children if c.proc.returncode), None)
    tail = "".join(bad.stderr)[-400:] if bad else ""
    code = next((x for x in codes if x != 0), 0)
    return records, ChildOutcome(code, timed_out, round(time.monotonic() - t0, 1), tail)


def worst_outcome(outcomes: list[ChildOutcome]) -> ChildOutcome:
    """One outcome for the run: timed out beats a non-zero code beats success; times add up."""
    wall = round(sum(o.wall_s for o in outcomes), 1)
    for o in outcomes:
        if o.timed_out:
            return ChildOutcome(o.returncode, True, wall, o.stderr_tail)
    for o in outcomes:
        if o.returncode:
            return ChildOutcome(o.returncode, False, wall, o.stderr_tail)
    return ChildOutcome(0, False, wall, "")
