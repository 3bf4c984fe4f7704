"""Xid events while gpuwise loads the GPUs: an NVML event set, polled in a thread (as gpud does).

Read-only: registering for events changes no GPU setting. Where events are unsupported
(GeForce, old drivers, no permission) the watcher records why and yields no event.
"""

from __future__ import annotations

import threading
from typing import Any

from gpuwise.verify.nvml import Nvml, is_na
from gpuwise.verify.raw import XidEvent

__all__ = ["XidWatcher"]

_XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError (nvml.h)


class XidWatcher:
    """Collects (NVML index, XidEvent) pairs between start() and stop()."""

    def __init__(self, nv: Nvml, n: int, poll_ms: int = 500) -> None:
        self.nv, self.n, self.poll_ms = nv, n, poll_ms
        self.events: list[tuple[int, XidEvent]] = []
        self.note = ""
        self._set: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> XidWatcher:
        event_set = self.nv.query("nvmlEventSetCreate")
        if is_na(event_set):
            self.note = event_set.reason
            return self
        kind = self.nv.const("nvmlEventTypeXidCriticalError", _XID_CRITICAL)
        registered = 0
        for i in range(self.n):
            h = self.nv.handle(i)
            if not is_na(h) and not is_na(self.nv.query("nvmlDeviceRegisterEvents", h, kind, event_set)):
                registered += 1
        if not registered:
            self.note = "no GPU accepts Xid event registration"
            return self
        self._set = event_set
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            data = self.nv.query("nvmlEventSetWait_v2", self._set, self.poll_ms)
            if is_na(data):
                data = self.nv.query("nvmlEventSetWait", self._set, self.poll_ms)
            if is_na(data):  # NVML_ERROR_TIMEOUT: nothing happened in this poll
                self._stop.wait(0.01)
                continue
            index = self.nv.query("nvmlDeviceGetIndex", getattr(data, "device", None))
            xid = int(getattr(data, "eventData", 0))
            if not is_na(index):
                self.events.append((int(index), XidEvent(xid, "nvml", True, "during gpuwise load")))

    def stop(self) -> list[tuple[int, XidEvent]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._set is not None:
            self.nv.query("nvmlEventSetFree", self._set)
            self._set = None
        return list(self.events)
