"""What the plan search keeps between requests never changes an answer: the engine layouts of a
card (search._LAYOUTS) and their shape (fast._SHAPES), the workloads made from another
(search._WORKLOADS), a deployment's settings and memory twins (fast._KNOWN), the fixes' changed
workloads and deployments (fit._CHANGED), and a breakdown's total (MemoryBreakdown.required,
kept in the instance). Within a request, check_valid is asked once per workload, card and engine.

Each request here is planned after the others warmed those caches, then again with every cache
emptied, and the two `--json` objects must be equal; each is also compared with the exhaustive
search, which estimates every configuration from scratch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuwise.estimate import fit
from gpuwise.estimate.breakdown import Item, MemoryBreakdown
from gpuwise.i18n import Text
from gpuwise.plan import fast, search
from gpuwise.service_plan import PlanRequest, run_plan

REQUESTS = [PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8),
            PlanRequest(model="llama-3.1-70b", context=4096, concurrency=1),  # same model, other users
            PlanRequest(model="qwen2.5-32b", context=16384, concurrency=32),
            PlanRequest(model="llama-3.1-8b", concurrency=8, engine="sglang"),
            PlanRequest(model="llama-3.1-405b", cards="rtx-4060,t4,rtx-3070,h100-sxm"),  # fixes tried
            PlanRequest(model="qwen2.5-7b", task="lora", cards="rtx-4090,a100-80gb-sxm,l40s")]


def _empty_caches() -> None:
    for cache in (search._LAYOUTS, search._WORKLOADS, search._DEPLOYMENTS, fast._KNOWN, fast._TOKENS,
                  fast._SHAPES, fit._CHANGED):
        cache.clear()


def _plan(req: PlanRequest, exhaustive: bool = False) -> dict[str, Any]:
    return run_plan(req, exhaustive=exhaustive).to_dict()


def test_a_request_planned_after_others_equals_the_same_request_with_every_cache_empty() -> None:
    warm = []
    for req in REQUESTS:  # each one after the previous ones filled the caches
        warm.append(_plan(req))
    for req, seen in zip(REQUESTS, warm, strict=True):
        _empty_caches()
        assert _plan(req) == seen, req


@pytest.mark.parametrize("req", REQUESTS[:4], ids=["70b", "70b-one-user", "32b", "8b-sglang"])
def test_the_cached_search_equals_the_exhaustive_one(req: PlanRequest) -> None:
    for other in REQUESTS:
        _plan(other)  # warm every cache with other requests first
    assert _plan(req) == _plan(req, exhaustive=True)


def test_a_breakdown_keeps_its_total_without_it_becoming_a_field() -> None:
    why = Text("w", "w")
    items = (Item("weights", "weights", 3.0, why), Item("kv_cache", "kv_cache", 0.5, why))
    read, fresh = MemoryBreakdown(items=items), MemoryBreakdown(items=items)
    assert read.required == 3.5 == sum(i.bytes for i in items)
    assert read.required == 3.5  # the kept value, the same
    assert read == fresh and hash(read) == hash(fresh)
    assert dataclasses.asdict(read) == dataclasses.asdict(fresh)
    changed = dataclasses.replace(read, items=items[:1])
    assert changed.required == 3.0  # a new breakdown works out its own
    trained = MemoryBreakdown(items=items, device_total=7.0)
    assert trained.required == 7.0


@pytest.mark.parametrize("model", ["llama-3.1-70b", "qwen2.5-7b"])
def test_check_valid_reads_of_a_deployment_only_its_card_and_engine(model: str) -> None:
    """The plan search checks a workload once per card and engine (fast._Request.is_valid)."""
    from gpuwise.catalog.cards import load_cards
    from gpuwise.catalog.sources import load_model
    from gpuwise.errors import GpuwiseError
    from gpuwise.estimate.api import check_valid
    from gpuwise.estimate.workload import Deployment, Workload

    arch = load_model(model)
    workloads = [Workload(weights="fp8"), Workload(weights="bf16", context=200_000), Workload(task="lora", float8=True)]

    def valid(w: Workload, d: Deployment) -> bool:
        try:
            check_valid(arch, w, d)
            return True
        except GpuwiseError:
            return False
    for card in load_cards():
        for engine in ("vllm", "sglang", "llamacpp"):
            for w in workloads:
                first = valid(w, Deployment(card=card, engine=engine))
                for given in ({"gpus": 8}, {"gpus": 4, "offload": "cpu"}, {"gpus": 2, "nodes": 2, "zero": 3}):
                    assert valid(w, Deployment(card=card, engine=engine, **given)) == first
