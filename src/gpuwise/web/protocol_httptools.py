"""uvicorn's httptools HTTP/1.1 protocol (llhttp, in C) with the same defences as the h11 one
(web/protocol.py): a request deadline, per-client and total connection bounds, and the
bilingual error object for a malformed request; plus the cap on a request's head that h11
applies itself (`h11_max_incomplete_event_size`).

Where the server process is busy it costs about half the CPU of h11 per request: 0.56-0.68 ms
against 0.99-1.14 ms for a whole round trip of a distinct plan through the worker pipe, at
110-300 requests/s (measured here, `benchmarks/load_test.py --param cards=H100-SXM`, 100
clients), time that the plan workers share on a 2-core machine. At 25-40 whole-catalog plans/s
on the same busy machine both measured 1.3-1.4 ms: the process then wakes with cold caches
between requests, whatever parses them. Needs `httptools` (the `web` extra); without it
`gpuwise serve` uses the h11 protocol.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gpuwise.i18n import Text
from gpuwise.web.protocol import MAX_HEAD_BYTES, ConnectionGuard, error_response, stream_transport


class GuardedHttpToolsProtocol(ConnectionGuard, HttpToolsProtocol):
    """HttpToolsProtocol plus the request deadline, the connection bounds and a head cap."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(stream_transport(transport))
        self._head_bytes = 0  # bytes received since the current request's head began
        self._in_head = True
        self._guard_open()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard_lost()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._send_and_close(error_response(431, b"Request Header Fields Too Large", Text(
                f"The request line and headers are longer than {MAX_HEAD_BYTES // 1024} KiB.",
                f"请求行与请求头超过 {MAX_HEAD_BYTES // 1024} KiB。")))

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0  # what follows is the next request's head
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            self._disarm()  # the request is here whole: the work's own time limit applies now

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection has the same deadline

    def send_400_response(self, msg: str) -> None:
        self._malformed(msg)


__all__ = ["GuardedHttpToolsProtocol"]
