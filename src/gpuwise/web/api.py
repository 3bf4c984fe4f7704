"""The JSON API: each route returns exactly the CLI's --json object for the same inputs.

Work runs in a bounded thread pool with a time limit, so a slow request never blocks the
server and none runs unbounded. Errors are the CLI's bilingual error objects.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from gpuwise import __version__
from gpuwise.errors import (
    DataError,
    GpuwiseError,
    InputError,
    SourceUnavailableError,
    UnknownNameError,
)
from gpuwise.i18n import Text
from gpuwise.jsonable import json_default
from gpuwise.web import calls
from gpuwise.web.params import Spec, UnknownParameterError

COMPUTE_TIMEOUT_S = 30.0  # hub lookups make several requests of up to 10 s each (catalog/hub.py)
QUEUE_TIMEOUT_S = 30.0  # waiting for a free worker longer than this answers 503


class Busy(GpuwiseError):
    exit_code = 503


class TooSlow(GpuwiseError):
    exit_code = 504


def status_of(err: GpuwiseError, path: str) -> int:
    if isinstance(err, UnknownParameterError):
        return 422
    if isinstance(err, (Busy, TooSlow)):
        return err.exit_code
    if isinstance(err, SourceUnavailableError):
        return 502
    if isinstance(err, UnknownNameError) and path.startswith("/api/models/"):
        return 404
    return 400


def encode(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, default=json_default).encode("utf-8")


def json_response(obj: Any, status: int = 200) -> Response:
    body = obj if isinstance(obj, bytes) else encode(obj)
    return Response(body, status_code=status, media_type="application/json")


class Runner:
    """Runs a synchronous call in the pool: cached, bounded in concurrency and in time."""

    def __init__(self, workers: int | None = None, timeout_s: float = COMPUTE_TIMEOUT_S,
                 queue_timeout_s: float = QUEUE_TIMEOUT_S) -> None:
        self.workers = workers or min(8, (os.cpu_count() or 2))
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="gpuwise-web")
        self.timeout_s, self.queue_timeout_s = timeout_s, queue_timeout_s
        self.cache = calls.ResultCache()
        self._slots: asyncio.Semaphore | None = None
        self._inflight: dict[Any, asyncio.Task[Any]] = {}

    async def __call__(self, key: Any, fn: Callable[[], Any]) -> Any:
        """The result for `key`: from the cache, from an identical request already running
        (computed once, shared), or computed now."""
        hit = self.cache.get(key) if key is not None else None
        if hit is not None:
            return hit
        if key is None:
            return await self._compute(fn)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._compute_and_keep(key, fn))
            self._inflight[key] = task
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return await asyncio.shield(task)  # a client that goes away does not cancel the others

    async def _compute_and_keep(self, key: Any, fn: Callable[[], Any]) -> Any:
        try:
            result = await self._compute(fn)
            self.cache.put(key, result)
            return result
        finally:
            del self._inflight[key]

    async def _compute(self, fn: Callable[[], Any]) -> Any:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        slots, loop = self._slots, asyncio.get_running_loop()
        try:
            await asyncio.wait_for(slots.acquire(), self.queue_timeout_s)
        except TimeoutError:
            raise Busy(Text("The server is busy; try again shortly.", "服务器繁忙，请稍后再试。")) from None

        def work() -> Any:
            try:
                return fn()
            finally:  # the slot is free only when the work has really ended
                loop.call_soon_threadsafe(slots.release)

        future = loop.run_in_executor(self.pool, work)
        future.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
        except TimeoutError:
            raise TooSlow(Text(f"The request took longer than {self.timeout_s:g} s and was stopped.",
                               f"请求超过 {self.timeout_s:g} 秒，已停止。")) from None

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


async def json_body(request: Request) -> dict[str, Any]:
    from gpuwise.safefile import loads_json

    raw = await request.body()
    if not raw.strip():
        return {}
    try:  # bounded: nesting depth and number length, NaN and Infinity refused
        data = loads_json(raw, "request body")
    except DataError as exc:
        raise InputError(exc.message) from None
    if not isinstance(data, dict):
        raise InputError(Text("The request body must be a JSON object.", "请求体必须是 JSON 对象。"))
    return data


def _key(path: str, items: Iterable[tuple[str, Any]]) -> str:
    return path + json.dumps(sorted(items, key=lambda kv: kv[0]), sort_keys=True, default=str)


def _openapi(spec: Spec, post: bool) -> dict[str, Any]:
    """The parameters of a generic route, for FastAPI's OpenAPI document."""
    if not post:
        return {"parameters": [{"name": p.name, "in": "query", "required": p.name in spec.required,
                                "schema": p.schema()} for p in spec.params]}
    schema = {"type": "object", "additionalProperties": False, "required": spec.required,
              "properties": {p.name: p.schema() for p in spec.params}}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _add_pair(app: FastAPI, path: str, spec: Spec, call: Callable[[list[tuple[str, Any]]], Any],
              runner: Runner, summary: str) -> None:
    async def get(request: Request) -> Response:
        items = request.query_params.multi_items()
        return json_response(await runner(_key(path, items), lambda: encode(call(items))))

    async def post(request: Request) -> Response:
        items = [*request.query_params.multi_items(), *(await json_body(request)).items()]
        return json_response(await runner(_key(path, items), lambda: encode(call(items))))

    app.add_api_route(path, get, methods=["GET"], summary=summary, openapi_extra=_openapi(spec, False),
                      tags=["api"])
    app.add_api_route(path, post, methods=["POST"], summary=summary + " (JSON body)",
                      openapi_extra=_openapi(spec, True), tags=["api"])


def add_api(app: FastAPI, runner: Runner) -> None:
    _add_pair(app, "/api/estimate", calls.estimate_spec(), calls.estimate, runner,
              "Memory per GPU and fit verdict: `gpuwise estimate --json`")
    _add_pair(app, "/api/plan", calls.plan_spec(), calls.plan, runner,
              "Ranked plans with why-not reasons: `gpuwise plan --json`")
    _add_pair(app, "/api/cards", calls.cards_spec(), calls.cards, runner,
              "GPU card catalog: `gpuwise cards --json`")

    @app.get("/api/health", tags=["api"], summary="Liveness and version")
    async def health() -> Response:
        return json_response({"status": "ok", "version": __version__})

    @app.get("/api/models", tags=["api"], summary="Model presets: `gpuwise model --list --json`")
    async def presets() -> Response:
        from gpuwise.cli.model_cmd import list_presets

        return json_response(await runner("/api/models", lambda: encode(list_presets())))

    @app.get("/api/models/{name:path}", tags=["api"], openapi_extra=_openapi(calls.model_spec(), False),
             summary="A model's architecture: `gpuwise model NAME --json`")
    async def model(name: str, request: Request) -> Response:
        items = request.query_params.multi_items()
        return json_response(await runner(_key("/api/models/" + name, items),
                                          lambda: encode(calls.model(name, items))))

    judge_schema = {"type": "object", "additionalProperties": False, "required": ["raw"], "properties": {
        "raw": {"type": "object", "description": "the file written by `gpuwise verify --save`"},
        "contract": {"type": "string", "description": "contract TOML text (docs/verify.md)"},
        "card": {"type": "string"}, "gpus": {"type": "integer", "minimum": 1}}}

    @app.post("/api/verify/judge", tags=["api"],
              summary="Re-judge saved verify evidence: `gpuwise verify --from raw.json --json`",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": judge_schema}}}})
    async def judge(request: Request) -> Response:
        body = await json_body(request)
        return json_response(await runner(None, lambda: calls.judge(body)))
