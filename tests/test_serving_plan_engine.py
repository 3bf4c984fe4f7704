"""`plan --engine`: every serving candidate is sized with the chosen engine's own rules (data/engines.toml)."""

from __future__ import annotations

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.service_plan import PlanRequest, plan_json


def _best(engine: str, version: str = "") -> dict:  # type: ignore[type-arg]
    out = plan_json(PlanRequest(model="llama-3.1-8b", cards="h100-sxm", context=8192, concurrency=16,
                                weights="bf16", replicas=1, engine=engine, engine_version=version))
    assert out["plans"], out
    return out["plans"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_plan_is_sized_with_the_engine_it_names(engine: str) -> None:
    plan = _best(engine)
    assert plan["parallelism"]["engine"] == engine
    alone = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", gpus=plan["gpus"], context=8192,
                                          concurrency=16, weights="bf16", engine=engine))
    assert plan["memory"]["kv_pool"] == alone["memory"]["kv_pool"]


def test_engines_size_the_same_plan_differently() -> None:
    pools = {e: _best(e)["memory"]["kv_pool"] for e in ("vllm", "sglang", "trtllm")}
    assert len(set(pools.values())) == 3, pools


def test_the_engine_version_picks_its_rules_in_the_plan_too() -> None:
    assert _best("vllm", "0.5.4")["memory"]["kv_pool"] != _best("vllm", "0.11")["memory"]["kv_pool"]


@pytest.mark.parametrize(("engine", "version"), [("vlm", ""), ("sglang", "0.0.1"), ("vllm", "new")])
def test_an_unknown_engine_or_version_is_a_message(engine: str, version: str) -> None:
    with pytest.raises(GpuwiseError):
        plan_json(PlanRequest(model="llama-3.1-8b", cards="h100-sxm", engine=engine, engine_version=version))
