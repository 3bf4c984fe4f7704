"""Properties over random workloads (hypothesis, fixed seed): memory never falls when the job
grows, speed and cost are finite and positive, and every answer is strict JSON with its
schema_version. GPUWISE_FUZZ_SCALE=10 runs ten times as many examples (the opt-in longer run).

Plans re-estimated with their own settings are tested in tests/test_plan_typed.py.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuwise.errors import GpuwiseError
from gpuwise.jsonable import dumps
from gpuwise.service import EstimateRequest, estimate_json

SCALE = max(1, int(os.environ.get("GPUWISE_FUZZ_SCALE", "1") or 1))
MODELS = ("qwen3-0.6b", "llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b", "qwen3-30b-a3b", "mixtral-8x7b",
          "qwen3-32b", "llama-3.1-70b", "deepseek-v3", "qwen3-next-80b-a3b")
CARDS = ("rtx-4090", "l40s", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "h20")


def fuzz(n: int) -> Callable[[Any], Any]:
    return settings(max_examples=n * SCALE, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def run(**kw: Any) -> dict[str, Any] | None:
    """The estimate's JSON, parsed back strictly; None when the request is refused for a reason."""
    try:
        out = estimate_json(EstimateRequest(**kw))
    except GpuwiseError as err:
        assert err.message.en and err.message.zh
        return None
    back = _strict(dumps(out))
    assert back["schema_version"] >= 1
    return back  # type: ignore[no-any-return]


INFER = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "card": st.sampled_from(CARDS), "gpus": st.sampled_from((1, 2, 4, 8)),
    "weights": st.sampled_from(("auto", "bf16", "fp8", "int4")), "kv_dtype": st.sampled_from(("auto", "fp8")),
    "engine": st.sampled_from(("vllm", "vllm", "llamacpp", "transformers")),
    "offload": st.sampled_from(("none", "none", "cpu")), "cpu_offload_gb": st.sampled_from((0.0, 4.0, 40.0)),
})

# Offload moves layers off the GPU as the job grows, so GPU memory is monotone only without it.
RESIDENT = INFER.map(lambda d: {**d, "offload": "none", "cpu_offload_gb": 0.0})


@fuzz(250)
@given(RESIDENT, st.integers(256, 65_536), st.integers(256, 65_536), st.integers(1, 64))
def test_serving_memory_never_falls_when_the_context_grows(base: dict[str, Any], a: int, b: int,
                                                           conc: int) -> None:
    small, large = sorted((a, b))
    lo = run(**base, context=small, concurrency=conc, allow_long_context=True)
    hi = run(**base, context=large, concurrency=conc, allow_long_context=True)
    assume(lo is not None and hi is not None)
    assert lo["memory"]["required"] <= hi["memory"]["required"] * (1 + 1e-9)  # type: ignore[index]


@fuzz(250)
@given(RESIDENT, st.integers(1, 256), st.integers(1, 256))
def test_serving_memory_never_falls_when_concurrency_grows(base: dict[str, Any], a: int, b: int) -> None:
    few, many = sorted((a, b))
    lo, hi = run(**base, concurrency=few), run(**base, concurrency=many)
    assume(lo is not None and hi is not None)
    assert lo["memory"]["required"] <= hi["memory"]["required"] * (1 + 1e-9)  # type: ignore[index]


TRAIN = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS[:5]), "card": st.sampled_from(CARDS), "gpus": st.sampled_from((1, 2, 8)),
    "task": st.sampled_from(("lora", "qlora", "full")), "zero": st.sampled_from((0, 2, 3)),
    "grad_ckpt": st.sampled_from((None, "none", "full")),
})


@fuzz(200)
@given(TRAIN, st.integers(1, 16), st.integers(1, 16), st.sampled_from((512, 2048, 8192)))
def test_training_memory_never_falls_when_the_micro_batch_grows(base: dict[str, Any], a: int, b: int,
                                                                seq: int) -> None:
    few, many = sorted((a, b))
    lo, hi = run(**base, micro_batch=few, seq_len=seq), run(**base, micro_batch=many, seq_len=seq)
    assume(lo is not None and hi is not None)
    assert lo["memory"]["required"] <= hi["memory"]["required"] * (1 + 1e-9)  # type: ignore[index]


@fuzz(200)
@given(TRAIN, st.integers(128, 32_768), st.integers(128, 32_768))
def test_training_memory_never_falls_when_the_sequence_grows(base: dict[str, Any], a: int, b: int) -> None:
    short, long = sorted((a, b))
    lo, hi = run(**base, seq_len=short), run(**base, seq_len=long)
    assume(lo is not None and hi is not None)
    assert lo["memory"]["required"] <= hi["memory"]["required"] * (1 + 1e-9)  # type: ignore[index]


def _positive_finite(value: Any, path: str) -> None:
    assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (path, value)


@fuzz(300)
@given(INFER, st.integers(256, 32_768), st.integers(1, 64))
def test_serving_speed_and_cost_are_finite_and_positive(base: dict[str, Any], context: int, conc: int) -> None:
    out = run(**base, context=context, concurrency=conc)
    assume(out is not None and out["fits"])  # type: ignore[index]
    for key in ("decode_tokens_per_s", "throughput_tokens_per_s", "ttft_s", "tpot_s"):
        _positive_finite(out["speed"][key], key)  # type: ignore[index]
    for name, seconds in out["speed"]["step_breakdown_s"].items():  # type: ignore[index]
        assert math.isfinite(seconds) and seconds >= 0, (name, seconds)
    if out["cost"]:  # type: ignore[index]
        _positive_finite(out["cost"]["per_hour"], "cost.per_hour")  # type: ignore[index]


@fuzz(150)
@given(TRAIN, st.sampled_from((1e6, 1e9, 1e12)))
def test_training_speed_time_and_cost_are_finite_and_positive(base: dict[str, Any], tokens: float) -> None:
    out = run(**base, train_tokens=tokens)
    assume(out is not None and out["fits"])  # type: ignore[index]
    _positive_finite(out["speed"]["tokens_per_s"], "tokens_per_s")  # type: ignore[index]
    if out["cost"]:  # type: ignore[index]
        _positive_finite(out["cost"]["per_hour"], "cost.per_hour")  # type: ignore[index]


@pytest.mark.parametrize("field", ["gpus", "context", "concurrency", "tp", "pp", "nodes", "train_tokens",
                                   "inter_node_gbps", "gpu_memory_utilization", "cpu_offload_gb"])
@fuzz(20)
@given(value=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**30), 10**30))
def test_any_number_in_any_field_is_an_answer_or_a_refusal_never_nan(field: str, value: float) -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "h100-sxm", field: value}
    if field in ("nodes", "train_tokens", "inter_node_gbps"):
        kw["task"] = "lora"
    run(**kw)  # strict JSON is checked inside
