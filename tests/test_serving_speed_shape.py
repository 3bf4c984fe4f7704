"""Serving speed under load, as the engines run it: prompts waiting together share one weight pass
per prefill forward (efficiency.toml prefill_batch_tokens), and a decode step's tiled GEMMs of few
rows or TP-narrowed sides run below the large-GEMM rate (decode_gemm_*, read off DeepGEMM's tables)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.presets import find_preset
from gpuwise.estimate.links import efficiency_table
from gpuwise.estimate.speed import _Prefill
from gpuwise.estimate.speed_gemm import _gemm_shape
from gpuwise.service import EstimateRequest, estimate_json


def _model(name: str) -> ModelArch:
    preset = find_preset(name)
    assert preset is not None
    return preset.arch()


def _speed(**kw: object) -> dict:  # type: ignore[type-arg]
    out: dict = estimate_json(EstimateRequest(**kw))["speed"]  # type: ignore[arg-type, type-arg]
    return out


def test_a_prompt_alone_reads_the_weights_and_packed_prompts_share_them() -> None:
    pre = _Prefill(prompt=128, compute=1e-3, read=3e-3, comm=0.0, offload=0.0, budget=8192)
    assert pre.seconds() == pytest.approx(3e-3)  # alone: one whole weight pass (its TTFT)
    assert pre.seconds(64) == pytest.approx(64e-3)  # 64 x 128 = 8,192 tokens: one pass, 64 prompts of FLOPs
    assert pre.seconds(65) == pytest.approx(65e-3)  # two passes (6e-3) still below the FLOPs
    assert pre.packed == pytest.approx(1e-3)  # under load a prompt costs its FLOPs
    read_bound = _Prefill(prompt=128, compute=1e-5, read=3e-3, comm=0.0, offload=0.0, budget=8192)
    assert read_bound.seconds(64) == pytest.approx(3e-3)
    assert read_bound.seconds(65) == pytest.approx(6e-3)
    assert read_bound.packed == pytest.approx(3e-3 * 128 / 8192)


def test_short_prompts_under_load_cost_less_than_one_weight_pass_each() -> None:
    """TRT-LLM 128/128 on an L40S: a prompt alone reads all 8 GB of weights (TTFT), but the engine
    packs 16 of them into one 2,048-token forward, so the throughput counts their FLOPs, not 16 passes."""
    kw = {"model": "llama-3.1-8b", "card": "l40s", "weights": "fp8", "kv_dtype": "fp8", "context": 256,
          "output_tokens": 128, "concurrency": 1024, "engine": "trtllm"}
    s = _speed(**kw)
    one_prompt = 128 / s["prefill_tokens_per_s"]  # a single prompt's prefill: the TTFT's
    decode = 128 * sum(v for k, v in s["step_breakdown_s"].items() if k != "prefill_stall")
    unpacked = 1024 * 128 / (decode + 1024 * one_prompt)  # every prompt reading the weights
    assert s["throughput_tokens_per_s"] > 1.2 * unpacked
    assert efficiency_table()["overheads"]["prefill_batch_tokens"]["trtllm"] >= 2048


def test_gemm_shape_slowdowns_are_at_least_one_and_fall_with_rows() -> None:
    shape = _gemm_shape(_model("llama-3.1-70b"), 1)
    rows = [shape.rows(m) for m in (1, 64, 128, 256, 512, 1024, 4096, 16384)]
    assert all(r >= 1.0 for r in rows)
    assert rows == sorted(rows, reverse=True)
    assert rows[0] == rows[1] == rows[2]  # below 128 rows: the two-tile figure (the memory-bound side)
    assert shape.rows(4096) == pytest.approx(1.0)  # the reference shape
    assert shape.rows(256) == pytest.approx(356 / 256 * 4096 / 4196)  # DeepGEMM's 4 x 256 masked row: 0.71


def test_tensor_parallel_narrows_the_dense_gemms() -> None:
    model = _model("llama-3.1-70b")
    widths = [_gemm_shape(model, tp).dense for tp in (1, 2, 4, 8)]
    assert widths[0] == pytest.approx(1.0)  # 8,192-wide GEMMs: at or past the reference width
    assert widths == sorted(widths)
    assert widths[-1] > 1.03  # TP 8: QKV 1,280 and O 1,024 wide


def test_a_batch_of_one_stays_memory_bound_on_a_bf16_a100() -> None:
    """The rows slowdown stops at two tiles: a batch-1 bf16 step on an A100 (ridge ~74 rows) still
    reads its weights at the bandwidth, as vLLM's measured 75 tok/s on an A100-40GB says."""
    s = _speed(model="llama-3.1-8b", card="a100-80gb-sxm", context=1024, concurrency=1)
    rates = efficiency_table()["ampere-dc"]
    weights = 16.06e9
    assert s["step_breakdown_s"]["gemm"] == pytest.approx(weights / (2039e9 * rates["bw"]), rel=0.03)


def test_large_batch_decode_on_tp8_costs_more_than_the_large_gemm_rate() -> None:
    """Llama-3.1-70B FP8 on 8 H100 at 512 sequences: the GEMM FLOP side carries the rows and width
    slowdowns, so the GEMM time exceeds the FLOPs at the FP8 large-GEMM share."""
    s = _speed(model="llama-3.1-70b", card="h100-sxm", gpus=8, weights="fp8", context=4096, output_tokens=2048,
               concurrency=512, engine="trtllm")
    share = float(efficiency_table()["hopper-sxm"]["gemm_fp8"])
    flops = 2 * 70.6e9 * 512 / 8
    assert s["step_breakdown_s"]["gemm"] > 1.05 * flops / (1979e12 * share)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 2048), tp=st.sampled_from([1, 2, 4, 8]),
       name=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b", "deepseek-v3"]))
def test_shape_slowdowns_are_finite_and_at_least_one(batch: int, tp: int, name: str) -> None:
    shape = _gemm_shape(_model(name), tp)
    assert 1.0 <= shape.dense < 3.0
    assert 1.0 <= shape.rows(float(batch)) < 3.0
