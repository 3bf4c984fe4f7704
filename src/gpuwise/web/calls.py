"""The synchronous calls behind each endpoint: validated parameters in, the CLI's --json out.

Each call returns exactly what the matching `gpuwise ... --json` prints for the same inputs.
Web-only inputs: `config` (a pasted config.json, in place of `model`) and `emit` on plans.
No web framework is imported here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuwise import service, service_plan
from gpuwise.errors import InputError
from gpuwise.i18n import Text
from gpuwise.web.jsonbytes import encoded
from gpuwise.web.params import (
    MAX_CONFIG_BYTES,
    Param,
    Spec,
    check_model_source,
    parse,
    spec_from_dataclass,
    spec_from_function,
)

# A pasted config.json (web only): text, or in a JSON body also the object itself.
CONFIG = Param("config", "str", True, None, max_len=MAX_CONFIG_BYTES, allow_object=True)
EMIT = Param("emit", "str", True, None)  # plan: the top plan in a tool's vocabulary, like --emit
HUB = Param("hub", "str", False, "auto")
REVISION = Param("revision", "str", True, None)
CACHE_SIZE = 512
CACHE_TTL_S = 600.0  # user data files may change; recompute after ten minutes


@functools.cache  # built once per process, not per request (a Spec is frozen)
def estimate_spec() -> Spec:
    return spec_from_dataclass(service.EstimateRequest, {"src": "model", "tokens": "train_tokens"},
                               (CONFIG,))


@functools.cache
def plan_spec() -> Spec:
    # `tokens` is the CLI's flag for the field train_tokens.
    return spec_from_dataclass(service_plan.PlanRequest, {"src": "model", "tokens": "train_tokens"},
                               (CONFIG, EMIT))


@functools.cache
def cards_spec() -> Spec:
    return spec_from_function(service.cards_json)


def model_spec() -> Spec:
    return Spec((HUB, REVISION))


# ------------------------------------------------------------------ pasted config.json

def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.rsplit("/", 1)[-1]).strip("-.")[:60] or "pasted-config"


@contextmanager
def pasted_config(text: str) -> Iterator[str]:
    """A pasted config.json as a temporary model folder, removed afterwards."""
    if len(text.encode("utf-8")) > MAX_CONFIG_BYTES:
        raise InputError(Text("The pasted config.json is larger than 64 KiB.",
                              "粘贴的 config.json 超过 64 KiB。"))
    from gpuwise.safefile import loads_json_object

    data = loads_json_object(text, "pasted config.json", "config.json")  # bounded depth and numbers
    name = _slug(str(data.get("_name_or_path") or data.get("model_type") or "pasted-config"))
    with tempfile.TemporaryDirectory(prefix="gpuwise-web-") as tmp:
        folder = Path(tmp) / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(data), encoding="utf-8")
        yield str(folder / "config.json")


@contextmanager
def model_source(kw: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The request's keywords with `model` set from a pasted config, or a checked source."""
    kw = dict(kw)
    config = kw.pop("config", None)
    kw.pop("emit", None)
    if config:
        with pasted_config(config) as path:
            yield {**kw, "model": path}
        return
    if not kw.get("model"):
        raise InputError(Text("Give a model (a preset, a size like 7b, or a hub id) or paste a "
                              "config.json.", "请给出模型（预设名、7b 这样的规模或模型 id），"
                              "或粘贴 config.json。"))
    check_model_source(kw["model"])
    yield kw


# ------------------------------------------------------------------ the calls

def _model_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    return kw if "model" in kw or "config" in kw else {**kw, "model": ""}


def estimate(items: Iterable[tuple[str, Any]], strict: bool = True) -> dict[str, Any]:
    kw = parse(items, _estimate_in(), strict=strict)
    with model_source(_model_kwargs(kw)) as args:
        out = service.estimate_json(service.EstimateRequest(**args))
    if kw.get("config"):  # the temporary folder means nothing to the reader
        out["provenance"]["inputs"]["model"]["source"] = "pasted config.json"
    return out


def plan(items: Iterable[tuple[str, Any]], strict: bool = True) -> dict[str, Any]:
    kw = parse(items, _plan_in(), strict=strict)
    target = kw.get("emit")
    with model_source(_model_kwargs(kw)) as args:
        req = service_plan.PlanRequest(**args)
        return service_plan.emit_json(req, target) if target else service_plan.plan_json(req)


def _relaxed(spec: Spec) -> Spec:
    """`model` may be left out when `config` is given: checked in `model_source`."""
    params = tuple(dataclasses.replace(p, optional=True, default=None) if p.name == "model" else p
                   for p in spec.params)
    return Spec(params, spec.aliases)


@functools.cache
def _estimate_in() -> Spec:
    return _relaxed(estimate_spec())


@functools.cache
def _plan_in() -> Spec:
    return _relaxed(plan_spec())




# The answers as JSON bytes: a worker process runs these (module level, so they pickle) and
# encodes there, so the server process only passes the bytes on.

def plan_bytes(items: list[tuple[str, Any]], strict: bool = True) -> bytes:
    """The /api/plan answer (or the page's, `strict=False`)."""
    return encoded(plan(items, strict=strict))


def estimate_bytes(items: list[tuple[str, Any]]) -> bytes:
    return encoded(estimate(items))


def cards_bytes(items: list[tuple[str, Any]]) -> bytes:
    return encoded(cards(items))


def model_bytes(name: str, items: list[tuple[str, Any]]) -> bytes:
    return encoded(model(name, items))


def presets_bytes() -> bytes:
    from gpuwise.cli.model_cmd import list_presets

    return encoded(list_presets())


def judge_bytes(body: dict[str, Any]) -> bytes:
    return encoded(judge(body))


# A representative request, answered once by each worker before the server takes load: every
# catalog (cards, prices, engines, efficiencies, presets) read and every module imported.
WARM_PLAN = (("model", "llama-3.1-8b"), ("top", "1"))
PROBE_PLAN = (("model", "qwen3-8b"), ("context", "8192"), ("concurrency", "8"), ("top", "5"))  # timed, warm
WARM_ESTIMATE = (("model", "llama-3.1-8b"), ("card", "H100-SXM"))


def warm_plans() -> None:
    """A plan worker's warm-up (module level: runs in the worker process)."""
    plan_bytes(list(WARM_PLAN))


def warm_light() -> None:
    """A light worker's warm-up (estimates, cards, models, the page's exported configs)."""
    from gpuwise.web.view import emit_configs

    estimate(WARM_ESTIMATE)
    cards(())
    presets_bytes()
    emit_configs(plan((*WARM_PLAN, ("cards", "H100-SXM"))))  # one card: the exporters imported, quickly


def cards(items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    return service.cards_json(**parse(items, cards_spec()))


def model(name: str, items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    kw = parse(items, model_spec())
    check_model_source(name)
    return service.model_json(name, **kw)


JUDGE_KEYS = ("raw", "contract", "card", "gpus")


def judge(body: dict[str, Any]) -> dict[str, Any]:
    """`gpuwise verify --from raw.json [--contract c.toml] [--card C] [--gpus N] --json`."""
    from gpuwise.verify.contract import parse_contract
    from gpuwise.verify.judge import Claim, claimed_card
    from gpuwise.verify.judge import judge as run_judge
    from gpuwise.verify.raw import evidence_from_dict
    from gpuwise.web.params import UnknownParameterError, coerce

    unknown = [k for k in body if k not in JUDGE_KEYS]
    if unknown:
        raise UnknownParameterError(unknown, JUDGE_KEYS)
    raw = body.get("raw")
    if not isinstance(raw, dict):
        raise InputError(Text("'raw' must be the JSON object saved by `gpuwise verify --save`.",
                              "“raw” 必须是 `gpuwise verify --save` 保存的 JSON 对象。"))
    contract = None
    text = body.get("contract")
    if text:
        if not isinstance(text, str) or len(text) > MAX_CONFIG_BYTES:
            raise InputError(Text("'contract' must be TOML text under 64 KiB.",
                                  "“contract” 必须是 64 KiB 以内的 TOML 文本。"))
        from gpuwise.safefile import loads_toml

        contract = parse_contract(loads_toml(text, "contract"), origin="contract")
    card = coerce(Param("card", "str", True, None), body.get("card"))
    gpus = coerce(Param("gpus", "int", True, None, (1, 1024)), body.get("gpus"))
    claim = Claim(card=card, count=gpus, contract=contract)
    if claim.card_name:
        claimed_card(claim.card_name)
    return run_judge(evidence_from_dict(raw, origin="raw"), claim).to_dict()


# ------------------------------------------------------------------ a small result cache

class ResultCache:
    """Thread-safe LRU with a time limit; errors are never cached."""

    def __init__(self, size: int = CACHE_SIZE, ttl_s: float = CACHE_TTL_S) -> None:
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.size, self.ttl_s = size, ttl_s

    def get(self, key: Any) -> Any | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is None or time.monotonic() - hit[0] > self.ttl_s:
                return None
            self._data.move_to_end(key)
            return hit[1]

    def __len__(self) -> int:
        return len(self._data)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = (time.monotonic(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)
