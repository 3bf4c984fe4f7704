"""`create_app()`: the FastAPI app behind `gpuwise serve` (JSON API, page, vendored assets).

Imported only by the `serve` command and the tests: FastAPI is an extra (`gpuwise[web]`).
Every asset is served from the package; the page loads nothing from other hosts.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpuwise import __version__
from gpuwise.errors import GpuwiseError, InputError
from gpuwise.i18n import Text
from gpuwise.web.api import Runner, add_api, json_response, status_of
from gpuwise.web.defaults import COMPUTE_TIMEOUT_S, MAX_WAIT_S
from gpuwise.web.lanes import Busy

HERE = Path(__file__).resolve().parent
MAX_BODY_BYTES = 256 * 1024  # a saved verify JSON of an 8-GPU server is well under 100 KiB
MAX_QUERY_BYTES = 16 * 1024  # a pasted config.json in the page's URL fits
# Only this origin: no CDN, no inline script, no framing.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY")]


def security_headers() -> list[tuple[bytes, bytes]]:
    """The headers every answer carries, errors included."""
    return [*_HEADERS, (b"content-security-policy", CSP.encode())]


class _TooLarge(Exception):
    pass


def _error_bytes(err: GpuwiseError) -> bytes:
    import json

    return json.dumps(err.to_dict(), ensure_ascii=False).encode("utf-8")


class Guard:
    """ASGI middleware: caps request body and query size; adds security headers."""

    def __init__(self, app: Any, max_body: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.max_body:
            await self._refuse(send, 413, Text(f"The request body is larger than {self.max_body // 1024} KiB.",
                                               f"请求体超过 {self.max_body // 1024} KiB。"))
            return
        if len(scope.get("query_string", b"")) > MAX_QUERY_BYTES:
            await self._refuse(send, 414, Text("The query string is too long.", "查询字符串过长。"))
            return
        started, seen = False, 0

        async def receive_capped() -> dict[str, Any]:
            nonlocal seen
            message: dict[str, Any] = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise _TooLarge
            return message

        async def send_with_headers(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *security_headers()]}
            await send(message)

        try:
            await self.app(scope, receive_capped, send_with_headers)
        except _TooLarge:
            if not started:
                await self._refuse(send, 413, Text(f"The request body is larger than {self.max_body // 1024} KiB.",
                                                   f"请求体超过 {self.max_body // 1024} KiB。"))

    @staticmethod
    async def _refuse(send: Any, status: int, message: Text) -> None:
        body = _error_bytes(InputError(message))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()), *security_headers()]})
        await send({"type": "http.response.body", "body": body})


_HTTP_WORDS: dict[int, Text] = {
    404: Text("There is nothing at this address; the API lives under /api (schema: /openapi.json).",
              "此地址没有内容；接口位于 /api 之下（模式见 /openapi.json）。"),
    405: Text("This method is not allowed here; the API takes GET and POST.",
              "此处不允许该请求方法；接口接受 GET 与 POST。"),
}


class HttpError(GpuwiseError):
    """An HTTP-level refusal (404, 405, ...) as the bilingual error object."""


def add_error_handlers(app: FastAPI) -> None:
    """Every 400-599 answer is the bilingual error object, with the security headers."""

    @app.exception_handler(GpuwiseError)
    async def _gpuwise_error(request: Request, err: GpuwiseError) -> Response:
        headers = {"retry-after": str(err.retry_after_s)} if isinstance(err, Busy) else None
        return json_response(err.to_dict(), status_of(err, request.url.path), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, err: RequestValidationError) -> Response:
        bad = InputError(Text(f"Invalid request: {str(err.errors()[:3])[:300]}",
                              f"请求无效：{str(err.errors()[:3])[:300]}"))
        return json_response(bad.to_dict(), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException) -> Response:
        words = _HTTP_WORDS.get(err.status_code) or Text(f"HTTP {err.status_code}: {str(err.detail)[:200]}",
                                                         f"HTTP {err.status_code}：{str(err.detail)[:200]}")
        return json_response(HttpError(words).to_dict(), err.status_code, headers=dict(err.headers or {}))

    @app.exception_handler(Exception)
    async def _crash(request: Request, err: Exception) -> Response:
        # Outside the Guard middleware (Starlette's outermost layer): add the headers here.
        bad = GpuwiseError(Text("The server failed on this request; it has been logged.",
                                "服务器处理该请求时出错，已记录。"))
        headers = {k.decode(): v.decode() for k, v in security_headers()}
        return json_response(bad.to_dict(), 500, headers=headers)


def create_app(*, workers: int | None = None, timeout_s: float | None = None,
               max_body: int = MAX_BODY_BYTES, plan_processes: bool = True,
               max_wait_s: float = MAX_WAIT_S) -> FastAPI:
    """The whole web service. `workers`: plan worker processes (default one per core);
    `plan_processes=False` runs plans in threads instead (tests of the app alone);
    `max_wait_s`: the expected queueing past which a request is answered 503 + Retry-After."""
    runner = Runner(workers, timeout_s or COMPUTE_TIMEOUT_S, plan_processes=plan_processes,
                    max_wait_s=max_wait_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # uvicorn listens only after this: the first request finds every plan worker warm
        # (catalogs read, one plan computed), the light lane's caches and the page's templates.
        from gpuwise.web.page import warm_page

        await runner.warm()
        warm_page()
        # What is alive now (the framework, routes, templates) lives as long as the server: kept
        # out of the collector's full passes, which then paused the event loop 4.2 ms at most
        # instead of 15.5 ms under the 200-client load (measured here). Garbage goes first.
        gc.collect()
        gc.freeze()
        yield
        runner.close()

    app = FastAPI(title="gpuwise", version=__version__, lifespan=lifespan, docs_url=None,
                  redoc_url=None,  # both load their assets from a CDN; /openapi.json stays
                  description="Does it fit, can it be fed, how fast, what does it cost. "
                              "Each endpoint returns the same JSON as the matching CLI command "
                              "with --json. 每个接口返回与对应命令 --json 相同的 JSON。")
    app.state.runner = runner
    add_error_handlers(app)
    add_api(app, runner)
    from gpuwise.web.page import add_page

    add_page(app, runner)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_middleware(Guard, max_body=max_body)
    return app


def _env_number(name: str, *, zero: bool = False) -> float | None:
    """A finite, positive number (or zero, when allowed) from the environment; else None."""
    import math
    import os

    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and (value > 0 or (zero and value == 0)) else None


def app_from_env() -> FastAPI:
    """`create_app` with what `gpuwise serve` set for every server process: plan workers
    (GPUWISE_SERVE_WORKERS), the queue bound (GPUWISE_SERVE_QUEUE_WAIT_S) and the time limit of
    one request's work (GPUWISE_SERVE_COMPUTE_TIMEOUT_S)."""
    workers = _env_number("GPUWISE_SERVE_WORKERS")
    wait = _env_number("GPUWISE_SERVE_QUEUE_WAIT_S", zero=True)
    return create_app(workers=int(workers) if workers else None,
                      timeout_s=_env_number("GPUWISE_SERVE_COMPUTE_TIMEOUT_S"),
                      max_wait_s=MAX_WAIT_S if wait is None else wait)
