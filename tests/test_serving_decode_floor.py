"""The per-layer kernel floor of a serving decode step (efficiency.toml [decode_kernels]): counted
per layer by block type (attention / MLA, dense MLP / MoE), scaling with the layers, inside every
pool-engine path (the steady state and the finite benchmark run), absent for llama.cpp and
transformers, and leaving the model decode_step_s was measured on where it was."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuwise.estimate.links import efficiency_table
from gpuwise.estimate.speed import output_lengths
from gpuwise.estimate.speed_decode import _fixed_overhead, _kernel_floor, _kernels
from gpuwise.estimate.speed_gemm import compute_precision
from gpuwise.service import EstimateRequest, build, estimate_json

_DS = {"model": "deepseek-v3", "card": "h200-sxm", "gpus": 8, "context": 2048, "output_tokens": 1024}


def _speed(**kw: Any) -> dict[str, Any]:
    speed: dict[str, Any] = estimate_json(EstimateRequest(**kw))["speed"]
    return speed


def _decode_step_s(engine: str) -> float:
    return float(efficiency_table()["overheads"]["decode_step_s"][engine])


def test_every_weight_free_kernel_of_every_layer_pays_the_floor() -> None:
    """With no bandwidth time to hide under, the floor is layers x kernels x floor, by block:
    DeepSeek-V3's MLA on all 61 layers, MoE on 58, a dense MLP on the first 3."""
    model, w, d, _ = build(EstimateRequest(**_DS, engine="sglang"))  # type: ignore[arg-type]
    k = _kernels("sglang")
    assert k is not None and model.mla is not None and model.moe is not None
    dense = len(model.moe.dense_layers)
    assert dense == 3 and model.num_layers == 61
    precision = compute_precision(model, w, d)
    assert precision == "fp8"
    gemms = 61 * k.mla.gemm + 58 * k.moe.gemm + dense * k.mlp.gemm
    kernels = (61 * (k.mla.small + k.mla.kv) + 58 * k.moe.small + dense * k.mlp.small
               + gemms * (1 + k.quant_per_gemm))
    f = k.floor(d.card.family)
    assert _kernel_floor(model, d, precision, 0.0, 0.0) == pytest.approx(kernels * f)
    # GEMMs and attention that stream for longer than their floors add nothing beyond their own time
    slow = _kernel_floor(model, d, precision, gemm=1.0, attention=1.0)
    assert slow == pytest.approx((kernels - gemms - 61 * k.mla.kv) * f)


def test_the_floor_scales_with_the_layers() -> None:
    model, w, d, _ = build(EstimateRequest(model="llama-3.1-70b", card="h100-sxm", gpus=4, engine="vllm"))
    precision = compute_precision(model, w, d)
    twice = dataclasses.replace(model, num_layers=2 * model.num_layers)
    one = _kernel_floor(model, d, precision, gemm=0.004, attention=0.0005)
    two = _kernel_floor(twice, d, precision, gemm=0.008, attention=0.001)  # twice the layers read twice the bytes
    assert one > 0
    assert two == pytest.approx(2 * one)
    # a pipeline stage runs its own layers only
    assert _kernel_floor(model, dataclasses.replace(d, pp=2), precision, 0.002, 0.00025) == pytest.approx(one / 2)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_deepseek_v3_at_batch_1_pays_milliseconds_of_kernel_floors(engine: str) -> None:
    s = _speed(**_DS, engine=engine, concurrency=1)
    floor = s["kernel_floor_s"]
    assert s["step_breakdown_s"]["overhead"] == pytest.approx(_fixed_overhead(engine) + floor, abs=1e-6)
    assert floor > 0.004  # ~2,000 kernels a step at a few microseconds each
    assert s["decode_tokens_per_s"] < 150  # was ~270 tok/s with bandwidth and all-reduces alone
    assert s["bound"] == "kernel-latency"


def test_the_floor_is_in_the_benchmark_run_too() -> None:
    """benchmark_run prices each decode step with the same _decode_step: the run lasts at least its
    longest request's steps, each at least the weight-free kernels' floors."""
    model, w, d, _ = build(EstimateRequest(**_DS, engine="sglang", concurrency=8))  # type: ignore[arg-type]
    run = _speed(**_DS, engine="sglang", concurrency=8, requests=16)
    assert run["run_requests"] == 16
    lower = _kernel_floor(model, d, compute_precision(model, w, d), gemm=1.0, attention=1.0)
    longest = max(output_lengths(16, w.output_len, model.max_context - w.prompt_len))
    assert run["run_seconds"] > longest * (lower + _fixed_overhead("sglang"))


@pytest.mark.parametrize("engine", ["llamacpp", "transformers"])
def test_engines_without_counts_keep_their_measured_step_overhead(engine: str) -> None:
    assert _kernels(engine) is None
    s = _speed(model="llama-3.1-8b", card="rtx-4090", engine=engine, context=1024, concurrency=1)
    assert s["step_breakdown_s"]["overhead"] == pytest.approx(_decode_step_s(engine))
    assert s["kernel_floor_s"] == 0.0


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_small_dense_model_at_tp1_moves_by_less_than_5_percent(engine: str) -> None:
    """decode_step_s was read off Llama-3.1-8B at batch 1 on one H100: its floors are taken out of
    the fixed part, so that model's step stays within 5 % of the flat overhead it had."""
    s = _speed(model="llama-3.1-8b", card="h100-sxm", engine=engine, context=1024, concurrency=1)
    before = s["tpot_s"] - s["step_breakdown_s"]["overhead"] + _decode_step_s(engine)
    assert s["tpot_s"] == pytest.approx(before, rel=0.05)
    assert s["step_breakdown_s"]["overhead"] > _fixed_overhead(engine) > 0
    assert s["bound"] == "memory"  # an 8B model's GEMMs stream far longer than its kernels' floors
