"""The JSON API: each route returns exactly the CLI's --json object for the same inputs.

Work runs in a bounded thread pool with a time limit, so a slow request never blocks the
server and none runs unbounded. Errors are the CLI's bilingual error objects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
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
from gpuwise.web import calls
from gpuwise.web.defaults import COMPUTE_TIMEOUT_S, MAX_WAIT_S
from gpuwise.web.jsonbytes import encoded
from gpuwise.web.lanes import Busy, Lane, TooSlow, default_workers
from gpuwise.web.params import Spec, UnknownParameterError
from gpuwise.web.workers import WorkerLost

# Estimates, cards, models: milliseconds each. Two processes, so one slow request (a hub lookup:
# several requests of up to 10 s) leaves the other answering; apart from the server process,
# whose event loop then shares its GIL with nothing.
LIGHT_WORKERS = 2


def status_of(err: GpuwiseError, path: str) -> int:
    if isinstance(err, UnknownParameterError):
        return 422
    if isinstance(err, (Busy, TooSlow, WorkerLost)):
        return err.exit_code
    if isinstance(err, SourceUnavailableError):
        return 502
    if isinstance(err, UnknownNameError) and path.startswith("/api/models/"):
        return 404
    return 400


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = obj if isinstance(obj, bytes) else encoded(obj)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


class Runner:
    """Runs requests' work in two lanes (web/lanes.py) of worker processes, warmed before the
    server answers: light work (estimates, cards, models) and plans; the server process itself
    only parses HTTP and passes bytes on. Results cached, identical requests in flight computed
    once. `plan_processes=False`: both lanes in threads (tests of the app alone)."""

    def __init__(self, workers: int | None = None, timeout_s: float = COMPUTE_TIMEOUT_S, *,
                 plan_processes: bool = True, max_wait_s: float = MAX_WAIT_S) -> None:
        self.workers = workers or default_workers()
        self.timeout_s = timeout_s
        self.light = Lane("light", LIGHT_WORKERS, processes=plan_processes, max_wait_s=max_wait_s,
                          warm=calls.warm_light, probe=(calls.estimate_bytes, (list(calls.WARM_ESTIMATE),)))
        self.heavy = Lane("heavy", self.workers, processes=plan_processes, max_wait_s=max_wait_s,
                          warm=calls.warm_plans, batch=True, depth=2,
                          probe=(calls.plan_bytes, (list(calls.PROBE_PLAN),)))
        self.cache = calls.ResultCache()
        self._inflight: dict[Any, asyncio.Task[Any]] = {}

    async def warm(self) -> None:
        """Every plan worker started and warm, and the light lane's caches filled."""
        await asyncio.gather(self.heavy.warm(probe=False), self.light.warm(probe=False))
        # Each lane's service time is timed once nothing else runs: while the other lane's
        # workers warm up they share the cores with the probe, whose time then comes out long.
        await self.heavy.time_probe()
        await self.light.time_probe()

    def state(self) -> dict[str, Any]:
        return {"plan": self.heavy.state(), "light": self.light.state(), "cache_entries": len(self.cache)}

    async def __call__(self, key: Any, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the light lane (cached under `key` unless it is None); `fn` and `args`
        must pickle (a worker process runs it)."""
        return await self._cached(key, self.light, fn, *args)

    async def plan(self, key: Any, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in the heavy lane: `fn` and `args` must pickle (a worker process runs it)."""
        return await self._cached(key, self.heavy, fn, *args)

    async def _cached(self, key: Any, lane: Lane, fn: Callable[..., Any], *args: Any) -> Any:
        hit = self.cache.get(key) if key is not None else None
        if hit is not None:
            return hit
        if key is None:
            return await lane.run(self.timeout_s, fn, *args)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._compute_and_keep(key, lane, fn, *args))
            self._inflight[key] = task
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        return await asyncio.shield(task)  # a client that goes away does not cancel the others

    async def _compute_and_keep(self, key: Any, lane: Lane, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            result = await lane.run(self.timeout_s, fn, *args)
            self.cache.put(key, result)
            return result
        finally:
            del self._inflight[key]

    def close(self) -> None:
        self.light.close()
        self.heavy.close()


plan_bytes = calls.plan_bytes  # the /api/plan answer as JSON bytes, encoded in the worker process


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


def _add_pair(app: FastAPI, path: str, spec: Spec, call: Callable[[list[tuple[str, Any]]], bytes],
              runner: Runner, summary: str, heavy: bool = False) -> None:
    """GET (query) and POST (JSON body) of one call (module level: a worker process runs it);
    `heavy`: in the plan lane."""
    async def answer(items: list[tuple[str, Any]]) -> Response:
        if heavy:
            return json_response(await runner.plan(_key(path, items), call, items))
        return json_response(await runner(_key(path, items), call, items))

    async def get(request: Request) -> Response:
        return await answer(request.query_params.multi_items())

    async def post(request: Request) -> Response:
        return await answer([*request.query_params.multi_items(), *(await json_body(request)).items()])

    app.add_api_route(path, get, methods=["GET"], summary=summary, openapi_extra=_openapi(spec, False),
                      tags=["api"])
    app.add_api_route(path, post, methods=["POST"], summary=summary + " (JSON body)",
                      openapi_extra=_openapi(spec, True), tags=["api"])


def add_api(app: FastAPI, runner: Runner) -> None:
    _add_pair(app, "/api/estimate", calls.estimate_spec(), calls.estimate_bytes, runner,
              "Memory per GPU and fit verdict: `gpuwise estimate --json`")
    _add_pair(app, "/api/plan", calls.plan_spec(), calls.plan_bytes, runner,
              "Ranked plans with why-not reasons: `gpuwise plan --json`", heavy=True)
    _add_pair(app, "/api/cards", calls.cards_spec(), calls.cards_bytes, runner,
              "GPU card catalog: `gpuwise cards --json`")

    @app.get("/api/health", tags=["api"], summary="Liveness, version and the work lanes' state")
    async def health() -> Response:
        return json_response({"status": "ok", "version": __version__, "lanes": runner.state()})

    @app.get("/api/models", tags=["api"], summary="Model presets: `gpuwise model --list --json`")
    async def presets() -> Response:
        return json_response(await runner("/api/models", calls.presets_bytes))

    @app.get("/api/models/{name:path}", tags=["api"], openapi_extra=_openapi(calls.model_spec(), False),
             summary="A model's architecture: `gpuwise model NAME --json`")
    async def model(name: str, request: Request) -> Response:
        items = request.query_params.multi_items()
        return json_response(await runner(_key("/api/models/" + name, items), calls.model_bytes, name, items))

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
        return json_response(await runner(None, calls.judge_bytes, body))
