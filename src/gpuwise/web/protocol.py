"""uvicorn's HTTP/1.1 protocols (h11 here; httptools, up to half the CPU per request, in
web/protocol_httptools.py and chosen when installed) with the defences `gpuwise serve` needs
against idle and slow clients (uvicorn sets no deadline on a request's headers, and its
`limit_concurrency` counts open sockets, so 1,000 idle sockets made every request answer 503).

- A request deadline: from the moment a connection opens (or finishes its last response) the
  next request must arrive whole (headers and body) within `request_timeout_s`, else the
  connection is closed. A slowloris client that sends a byte a second is cut off.
- A per-client bound: one address keeps at most `per_client` connections; a new one evicts
  that client's oldest connection that is not in the middle of a request. When all of them
  are busy the new one is answered 503 with Retry-After and closed.
- A total bound: past `max_connections` the server evicts its oldest idle connection the same
  way, so idle sockets can never crowd out a request.
- Protocol errors are answered with the bilingual error object and the security headers.

Imported only by `gpuwise serve` (the `[web]` extra); the limits come from the environment
(`GPUWISE_SERVE_*`), so every server process reads the same ones.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text

ENV_PREFIX = "GPUWISE_SERVE_"
MAX_HEAD_BYTES = 64 * 1024  # request line and headers: a pasted config.json in the URL fits


@dataclass(frozen=True)
class Limits:
    request_timeout_s: float = 10.0  # headers and body of one request
    per_client: int = 256  # above the 200-client load test, all from one address
    max_connections: int = 4096

    @classmethod
    def from_env(cls) -> Limits:
        def num(name: str, default: float) -> float:
            try:
                return float(os.environ.get(ENV_PREFIX + name.upper(), default))
            except ValueError:
                return default

        return cls(num("request_timeout_s", cls.request_timeout_s), int(num("per_client", cls.per_client)),
                   int(num("max_connections", cls.max_connections)))

    def to_env(self) -> dict[str, str]:
        return {ENV_PREFIX + k.upper(): str(v) for k, v in self.__dict__.items()}


def error_response(status: int, reason: bytes, message: Text, retry_after_s: int | None = None) -> bytes:
    """A complete HTTP/1.1 response carrying the bilingual error object, then close."""
    from gpuwise.web.app import security_headers

    body = json.dumps(GpuwiseError(message).to_dict(), ensure_ascii=False).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close"), *security_headers()]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    head = b"HTTP/1.1 %d %s\r\n" % (status, reason) + b"".join(k + b": " + v + b"\r\n" for k, v in headers)
    return head + b"\r\n" + body


def stream_transport(transport: asyncio.BaseTransport) -> asyncio.Transport:
    """`transport` as the stream transport it is: asyncio's socket transports subclass
    asyncio.Transport, uvloop's (TCPTransport, UnixTransport) have its methods without the base
    class, so they are checked by what they can do."""
    if isinstance(transport, asyncio.Transport):
        return transport
    if all(callable(getattr(transport, m, None)) for m in ("write", "pause_reading", "resume_reading")):
        return cast(asyncio.Transport, transport)
    raise TypeError(f"an HTTP connection needs a stream transport, got {type(transport).__name__}")


class ConnectionGuard:
    """The request deadline and connection bounds (see the module docstring), shared by the two
    HTTP/1.1 protocols below; each calls `_guard_open`, `_guard_lost`, `_disarm` once a request
    is whole and `_arm` once its answer is sent."""

    limits: ClassVar[Limits] = Limits.from_env()
    by_client: ClassVar[dict[str, OrderedDict[ConnectionGuard, None]]] = {}
    everyone: ClassVar[OrderedDict[ConnectionGuard, None]] = OrderedDict()
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None
    cycle: Any  # uvicorn's RequestResponseCycle of the request in progress, or None

    def _guard_open(self) -> None:
        self._deadline: asyncio.TimerHandle | None = None
        self._peer = self.client[0] if self.client else "?"
        mine = self.by_client.setdefault(self._peer, OrderedDict())
        if len(mine) >= self.limits.per_client and not self._evict_idle(mine):
            self._refuse_busy()
            return
        if len(self.everyone) >= self.limits.max_connections and not self._evict_idle(self.everyone):
            self._refuse_busy()
            return
        mine[self] = None
        self.everyone[self] = None
        self._arm()

    def _guard_lost(self) -> None:
        self._disarm()
        self.everyone.pop(self, None)
        mine = self.by_client.get(getattr(self, "_peer", "?"))
        if mine is not None:
            mine.pop(self, None)
            if not mine:
                self.by_client.pop(self._peer, None)

    def _malformed(self, msg: str) -> None:
        self._send_and_close(error_response(400, b"Bad Request", Text(
            f"The HTTP request is malformed ({msg}).", f"HTTP 请求格式有误（{msg}）。")))

    def _busy(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body

    def _evict_idle(self, group: OrderedDict[ConnectionGuard, None]) -> bool:
        """Close the oldest connection of `group` that holds no request in progress."""
        for other in group:
            if other is not self and not other._busy():
                other._close()
                group.pop(other, None)
                return True
        return False

    def _refuse_busy(self) -> None:
        self._send_and_close(error_response(503, b"Service Unavailable", Text(
            "Too many connections from this address are busy; try again shortly.",
            "来自此地址的繁忙连接过多，请稍后再试。"), retry_after_s=1))

    def _send_and_close(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)
        self._close()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.limits.request_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self._busy():
            return  # already answering: the work's own time limit applies
        self._close()

    def _close(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self._closing()
            self.transport.close()

    def _closing(self) -> None:
        """What the protocol's own state needs before its transport closes."""


class GuardedH11Protocol(ConnectionGuard, H11Protocol):
    """uvicorn's pure-Python HTTP/1.1 protocol (h11), guarded."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(stream_transport(transport))
        self._guard_open()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard_lost()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and not cycle.more_body and not cycle.response_complete:
            self._disarm()  # the request is here whole: the work's own time limit applies now

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection has the same deadline

    def send_400_response(self, msg: str) -> None:
        self._malformed(msg)

    def _closing(self) -> None:
        if self.conn.our_state not in (h11.ERROR, h11.CLOSED, h11.MUST_CLOSE):
            try:
                self.conn.send(h11.ConnectionClosed())
            except h11.LocalProtocolError:
                pass


def http_protocol() -> type[asyncio.Protocol]:
    """The guarded httptools protocol when httptools is installed (up to half the CPU per
    request, web/protocol_httptools.py), else the guarded h11 one; GPUWISE_SERVE_HTTP=h11
    chooses h11."""
    if os.environ.get(ENV_PREFIX + "HTTP", "").lower() != "h11":
        try:
            from gpuwise.web.protocol_httptools import GuardedHttpToolsProtocol

            return GuardedHttpToolsProtocol
        except ImportError:  # httptools (the web extra) is missing
            pass
    return GuardedH11Protocol


def uvicorn_options(limits: Limits) -> dict[str, Any]:
    """uvicorn settings that go with the protocol: no socket-counting concurrency limit, and
    asyncio's own event loop even where uvloop is installed (uvicorn's "auto" would take it):
    with httptools it saved no CPU here (0.59-0.68 against 0.56-0.61 ms per request), and one
    loop is the one tested."""
    return {"http": http_protocol(), "loop": "asyncio", "limit_concurrency": None, "timeout_keep_alive": 5,
            "backlog": 2048, "h11_max_incomplete_event_size": MAX_HEAD_BYTES}


__all__ = ["ConnectionGuard", "GuardedH11Protocol", "Limits", "error_response", "http_protocol", "stream_transport",
           "uvicorn_options"]
