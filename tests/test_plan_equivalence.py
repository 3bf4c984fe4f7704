"""The fast search gives the same plans as the exhaustive one: every configuration evaluated in
full, one by one, as `gpuwise plan` did before pruning and memoisation.

Two checks. The live one runs each request through both searches now and compares the whole
`--json` object. The frozen one compares the fast search with JSON captured in
tests/fixtures/plan_equiv/ (before the search was optimised); it applies while the estimator's
sources are the ones the capture was made with (their hash is stored beside it) and is skipped,
saying so, once someone changes the estimator. Regenerate it from the exhaustive search with
    python -m tests.test_plan_equivalence --write
Floats are equal within 1e-9 relative; a price's age in days (it grows each day) is masked.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuwise.errors import GpuwiseError
from gpuwise.service_plan import PlanRequest, run_plan

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "plan_equiv"
# What the plans depend on besides the search itself (src/gpuwise/plan is the code under test).
ESTIMATOR = ("src/gpuwise/estimate", "src/gpuwise/catalog", "src/gpuwise/data")

QUERIES: dict[str, PlanRequest] = {
    "dense-70b-serving": PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8),
    "8b-slo-and-budget": PlanRequest(model="llama-3.1-8b", concurrency=32, budget=6.0, max_ttft=0.5,
                                     min_tokens_per_s_per_user=30.0),
    "moe-fastest-any-precision": PlanRequest(model="qwen3-30b-a3b", concurrency=16, objective="speed",
                                             weights="any"),
    "long-context-four-cards": PlanRequest(model="llama-3.1-8b", context=131072, concurrency=4,
                                           cards="h100-sxm,a100-80gb-sxm,rtx-4090,l40s"),
    "lora-7b": PlanRequest(model="qwen2.5-7b", task="lora"),
    "full-8b-fixed-batch-run-budget": PlanRequest(model="llama-3.1-8b", task="full", global_batch=64,
                                                  train_tokens=1e8, budget=2000.0),
    "qlora-70b": PlanRequest(model="llama-3.1-70b", task="qlora", seq_len=4096),
    "hybrid-cost-per-token-nvlink": PlanRequest(model="qwen3-next-80b-a3b", concurrency=4,
                                                objective="cost-per-token", require="nvlink"),
    "offload-32b-consumer": PlanRequest(model="qwen2.5-32b", allow_offload=True, cards="rtx-4090,rtx-3090,l4"),
    "moe-sglang-two-replicas": PlanRequest(model="mixtral-8x7b", engine="sglang", replicas=2, concurrency=8),
    "full-8b-scale-stage": PlanRequest(model="llama-3.1-8b", task="full", stage="scale", seq_len=4096),
    "nothing-fits-small-cards": PlanRequest(model="llama-3.1-405b", cards="rtx-4060,t4,rtx-3070"),
    "a-card-named-twice": PlanRequest(model="llama-3.1-8b", concurrency=8, cards="h100-sxm,rtx-4090,h100-sxm"),
    "validate-stage-lora": PlanRequest(model="qwen2.5-7b", task="lora", stage="validate",
                                       cards="rtx-4090,a100-40gb-sxm,l40s"),
    "custom-engine-version-offload": PlanRequest(model="qwen2.5-32b", engine="vllm", engine_version="0.6.0",
                                                 allow_offload=True, concurrency=2, cards="rtx-4090,l40s,a10"),
}

_AGE = (re.compile(r"is \d+ days old"), re.compile(r"已有 \d+ 天"))


def estimator_hash() -> str:
    h = hashlib.sha256()
    for top in ESTIMATOR:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def _mask(value: Any) -> Any:
    if isinstance(value, str):
        return _AGE[1].sub("已有 N 天", _AGE[0].sub("is N days old", value))
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def answer(req: PlanRequest, *, exhaustive: bool = False) -> Any:
    """The `gpuwise plan --json` object, through JSON (tuples as lists, keys as strings)."""
    return _mask(json.loads(json.dumps(run_plan(req, exhaustive=exhaustive).to_dict())))


def differences(a: Any, b: Any, path: str = "$") -> list[str]:
    """Where two JSON values differ; floats within 1e-9 relative count as equal."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
            or not isinstance(b, (int, float)):
        if type(a) is not type(b):
            return [f"{path}: {a!r} != {b!r}"]
    else:
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0) else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = [f"{path}: keys {sorted(set(a) ^ set(b))} differ"] if set(a) != set(b) else []
        return out + [d for k in a if k in b for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list):
        out = [f"{path}: {len(a)} items != {len(b)}"] if len(a) != len(b) else []
        return out + [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_fast_search_answers_exactly_as_the_exhaustive_one(name: str) -> None:
    req = QUERIES[name]
    found = differences(answer(req), answer(req, exhaustive=True))
    assert not found, "\n".join(found[:20])


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_fast_search_answers_as_the_captured_plans(name: str) -> None:
    stored = json.loads((FIXTURES / "estimator.json").read_text())
    if stored["sha256"] != estimator_hash():  # a skip here hid two stale captures: make it a failure
        pytest.fail("the estimator changed since the capture: regenerate with python -m tests.test_plan_equivalence "
                    "--write and check in the diff that no plan changes its picks")
    want = json.loads((FIXTURES / f"{name}.json").read_text())
    found = differences(answer(QUERIES[name]), want)
    assert not found, "\n".join(found[:20])


CARDS = ("h100-sxm", "a100-80gb-sxm", "a100-40gb-sxm", "rtx-4090", "rtx-4090d", "rtx-3090", "l40s", "l4", "t4",
         "v100-pcie-16gb", "rtx-4060", "rtx-4050-laptop", "h20", "gb200-gpu", "b200")


@st.composite
def requests(draw: st.DrawFn) -> PlanRequest:
    """A random plan request over a random handful of cards: serving or LoRA, with or without targets."""
    cards = ",".join(draw(st.lists(st.sampled_from(CARDS), min_size=1, max_size=5)))
    model = draw(st.sampled_from(("llama-3.1-8b", "qwen2.5-32b", "qwen3-30b-a3b", "llama-3.1-70b")))
    if draw(st.booleans()):
        return PlanRequest(model="qwen2.5-7b", task="lora", cards=cards, seq_len=draw(st.sampled_from((1024, 4096))),
                           stage=draw(st.sampled_from((None, "validate"))),
                           budget=draw(st.sampled_from((None, 500.0))),
                           train_tokens=draw(st.sampled_from((None, 1e8))))
    return PlanRequest(model=model, cards=cards, context=draw(st.sampled_from((1024, 8192, 32768))),
                       concurrency=draw(st.sampled_from((1, 3, 8, 32))),
                       objective=draw(st.sampled_from(("cost", "cost", "speed", "cost-per-token"))),
                       weights=draw(st.sampled_from(("auto", "any", "fp8"))),
                       budget=draw(st.sampled_from((None, 3.0, 20.0))),
                       max_ttft=draw(st.sampled_from((None, 0.5))),
                       min_tokens_per_s_per_user=draw(st.sampled_from((None, 25.0))),
                       stage=draw(st.sampled_from((None, None, "validate", "stabilise"))),
                       allow_offload=draw(st.booleans()), replicas=draw(st.sampled_from((None, None, 2))))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_random_requests_get_the_same_answer_from_both_searches(req: PlanRequest) -> None:
    try:
        fast = answer(req)
    except GpuwiseError as e:  # refused up front (a context past the model's): both searches refuse it
        event("refused")
        with pytest.raises(type(e)):
            answer(req, exhaustive=True)
        return
    event("planned" if fast["plans"] else "nothing planned")
    found = differences(fast, answer(req, exhaustive=True))
    assert not found, "\n".join(found[:20])


def test_the_comparison_itself_sees_a_changed_number_a_missing_key_and_a_reordered_list() -> None:
    a = {"x": [1.0, {"y": "a"}], "z": 2}
    assert differences(a, {"x": [1.0 + 1e-12, {"y": "a"}], "z": 2}) == []
    assert differences(a, {"x": [1.0 + 1e-6, {"y": "a"}], "z": 2})
    assert differences(a, {"x": [1.0, {"y": "a"}]})
    assert differences(a, {"x": [{"y": "a"}, 1.0], "z": 2})
    assert differences({"n": 1}, {"n": True})


def write() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, req in QUERIES.items():
        text = json.dumps(answer(req, exhaustive=True), ensure_ascii=False, indent=1, sort_keys=True)
        (FIXTURES / f"{name}.json").write_text(text + "\n")
        print(f"wrote {name}.json")
    (FIXTURES / "estimator.json").write_text(json.dumps({"sha256": estimator_hash()}) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_plan_equivalence --write")
    write()
