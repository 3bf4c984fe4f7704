"""The page at `/`: a workload form whose state lives in the URL, and the result under it.

A plain GET form, so the page works without JavaScript and any address reproduces its
result; htmx swaps only the result in when scripts run. `?lang=zh|en` or Accept-Language.
"""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from gpuwise import __version__
from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang
from gpuwise.web import calls
from gpuwise.web.api import Runner, _key, status_of
from gpuwise.web.labels import labels, pick_page_lang
from gpuwise.web.params import canonical
from gpuwise.web.view import build_view, emit_configs, page_words

TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGE_ONLY = ("lang", "card", "gpus", "emit")  # not passed to the planner
TASKS = ("infer", "lora", "qlora", "full", "pretrain")
WEIGHTS = ("any", "bf16", "fp8", "int8", "int4")
KV_DTYPES = ("auto", "fp8")
OBJECTIVES = ("cost", "speed", "cost-per-token")
STAGES = ("", "validate", "stabilise", "scale")


@functools.cache
def _env() -> Any:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    # Package files: compiled once, never re-read (auto_reload would stat them on every render).
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]),
                       trim_blocks=True, lstrip_blocks=True, auto_reload=False)


@functools.cache
def _choices() -> dict[str, Any]:
    from gpuwise.catalog.cards import load_cards
    from gpuwise.catalog.prices import BILLINGS, providers
    from gpuwise.cli.model_cmd import list_presets

    return {"presets": [p["id"] for p in list_presets()["presets"]], "tasks": TASKS,
            "weights": WEIGHTS, "kv_dtypes": KV_DTYPES, "objectives": OBJECTIVES, "stages": STAGES,
            "providers": providers(), "billings": BILLINGS,
            "cards": [(c.id, c.name) for c in load_cards(())]}


def form_state(items: list[tuple[str, str]]) -> dict[str, Any]:
    """The values the form shows: what the URL says, else the planner's defaults."""
    spec = calls.plan_spec()
    state: dict[str, Any] = {p.name: "" if p.default is None else p.default for p in spec.params
                             if p.default is not inspect.Parameter.empty}
    state.update({"model": "", "config": "", "card": "", "gpus": 1, "require": []})
    for raw, value in items:
        name = spec.aliases.get(canonical(raw), canonical(raw))
        if name == "require":
            state["require"] = [*state["require"], *(v.strip() for v in value.split(",") if v.strip())]
        elif name in state:
            state[name] = value
    state["allow_offload"] = str(state.get("allow_offload")).lower() in ("1", "true", "on", "yes")
    return state


def _estimate_items(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The page's fields as `gpuwise estimate` takes them (planner-only words translated)."""
    out = []
    for raw, value in items:
        name = canonical(raw)
        if name == "weights" and value == "any":
            value = "auto"
        if name == "grad_ckpt" and value == "auto":
            value = "none"
        if name not in ("lang", "emit"):
            out.append((name, value))
    return out


async def compute(items: list[tuple[str, str]], runner: Runner, lang: Lang,
                  L: dict[str, str]) -> dict[str, Any]:
    plan_items = [(k, v) for k, v in items if canonical(k) not in PAGE_ONLY]
    # the plan runs in the plan lane's worker processes, so the page never delays an estimate
    plan = json.loads(await runner.plan(_key("/page/plan", plan_items), calls.plan_bytes, plan_items, False))
    est = None
    if any(canonical(k) == "card" and v.strip() for k, v in items):
        est_items = _estimate_items(items)
        est = await runner(_key("/page/estimate", est_items), calls.estimate, est_items, False)
    configs = await runner(_key("/page/emit", plan_items), emit_configs, plan)
    return build_view(plan, est, configs, lang, L)


def _lang_links(request: Request) -> dict[str, str]:
    items = [(k, v) for k, v in request.query_params.multi_items() if k != "lang"]
    return {lang: "/?" + urlencode([*items, ("lang", lang)]) for lang in ("en", "zh")}


def warm_page() -> None:
    """Compile the templates and read the form's choices before the first page request; a
    failure here is the first page request's to report, not a reason not to start."""
    import sys

    try:
        for name in ("index.html", "_result.html"):
            _env().get_template(name)
        _choices()
    except Exception as exc:  # noqa: BLE001 - the page request shows the error itself
        print(f"gpuwise: the page could not be prepared ({type(exc).__name__}: {exc}); "
              "the first page request will try again.", file=sys.stderr)


def add_page(app: FastAPI, runner: Runner) -> None:
    @app.get("/", include_in_schema=False)
    async def index(request: Request) -> Response:
        items = [(k, v) for k, v in request.query_params.multi_items()]
        lang = pick_page_lang(request.query_params.get("lang"), request.headers.get("accept-language"))
        L = labels(lang)
        form = form_state(items)
        view: dict[str, Any] = {}
        status = 200
        if str(form.get("model")).strip() or str(form.get("config")).strip():
            try:
                view = await compute(items, runner, lang, L)
            except GpuwiseError as err:
                view, status = {"error": page_words(err.message.render(lang), L), "error_hint":
                                page_words(err.hint.render(lang), L) if err.hint else None}, status_of(err, "/")
        fragment = (request.headers.get("hx-request") == "true"
                    and not request.headers.get("hx-history-restore-request"))
        api_items = [(k, v) for k, v in items if canonical(k) not in PAGE_ONLY and v != ""]
        query = urlencode(api_items)
        html = _env().get_template("_result.html" if fragment else "index.html").render(
            L=L, lang=lang, form=form, view=view, choices=_choices(), version=__version__,
            lang_links=_lang_links(request), api_url="/api/plan?" + query if query else "")
        return HTMLResponse(html, status_code=status,
                            headers={"Vary": "HX-Request, Accept-Language"})
