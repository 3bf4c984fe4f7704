"""The memory floor of a training step's GEMMs (torchao's training roofline): a linear's forward,
input-gradient and weight-gradient GEMMs each take at least their bytes at achievable bandwidth."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.presets import find_preset
from gpuwise.estimate.train_gemm_roofline import linear_shards, roofline_slowdown

RATE, BW = 989.4e12 * 0.45, 2.04e12  # ~45 % of an H100's bf16 peak, a 2.4 TB/s HBM2e card at 0.85


def llama_8b_shards(framework: str, tp: int) -> list[tuple[float, float, float]]:
    preset = find_preset("llama-3.1-8b")
    assert preset is not None
    return linear_shards(preset.arch(), framework, tp, 14336)


def test_a_gemm_below_the_ridge_takes_its_bytes_and_one_above_it_its_flops() -> None:
    m, k, n = 98304.0, 4096.0, 128.0  # Llama 3 8B wk at TP 8: ~124 FLOP a byte
    bytes_s = (m * k + k * n + m * n) * 2 / BW
    assert roofline_slowdown([(k, n, 1.0)], m, RATE, BW, fp8=False) == pytest.approx(bytes_s / (2 * m * k * n / RATE))
    assert roofline_slowdown([(4096.0, 1792.0, 1.0)], m, RATE, BW, fp8=False) == pytest.approx(1.0)


def test_torchtitan_8b_at_tp_8_pays_for_its_narrow_k_and_v_shards_and_tp_1_or_fused_qkv_does_not() -> None:
    assert roofline_slowdown(llama_8b_shards("torchtitan", 8), 98304, RATE, BW, fp8=False) > 1.02
    assert roofline_slowdown(llama_8b_shards("torchtitan", 1), 8192, RATE, BW, fp8=False) == pytest.approx(1.0)
    assert roofline_slowdown(llama_8b_shards("megatron", 8), 98304, RATE, BW, fp8=False) == pytest.approx(1.0)


def test_fp8_at_twice_the_rate_is_more_memory_bound_than_bf16() -> None:
    shards = llama_8b_shards("torchtitan", 8)
    assert roofline_slowdown(shards, 98304, 2 * RATE, BW, fp8=True) > roofline_slowdown(shards, 98304, RATE, BW,
                                                                                         fp8=False)


def test_a_frozen_base_runs_two_gemms_a_linear_not_three() -> None:
    one = [(4096.0, 128.0, 1.0)]
    assert roofline_slowdown(one, 98304, RATE, BW, fp8=False, weight_grads=False) == pytest.approx(
        roofline_slowdown(one, 98304, RATE, BW, fp8=False))  # all three have the same bytes in bf16


def test_float8_gains_nothing_on_linears_inside_torchaos_tensorwise_filter_and_everywhere_else_it_does() -> None:
    from gpuwise.estimate.train_gemm_roofline import fp8_no_gain_share

    tp8 = fp8_no_gain_share(llama_8b_shards("torchtitan", 8))  # wq 4096 x 512, wk / wv 4096 x 128
    tp1 = fp8_no_gain_share(llama_8b_shards("torchtitan", 1))  # wk / wv 4096 x 1024 only
    per_layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336
    lm_head = 4096 * 128256 / 32
    # the output projection (linear_shards' last entry) stays in bf16 under every Float8 converter
    assert tp8 == pytest.approx((4096 * (4096 + 2 * 1024) + lm_head) / (per_layer + lm_head))
    assert tp1 == pytest.approx((4096 * 2 * 1024 + lm_head) / (per_layer + lm_head))
    assert fp8_no_gain_share([(8192.0, 7168.0, 1.0), (8192.0, 16032.0, 0.0)]) == 0.0
    assert fp8_no_gain_share([(8192.0, 7168.0, 1.0), (7168.0, 8192.0, 1.0)]) == pytest.approx(0.5)


def test_a_float8_step_of_8b_at_tp_8_saves_less_than_at_tp_1() -> None:
    from gpuwise.service import EstimateRequest, estimate_json

    job: dict[str, Any] = {"model": "llama-3.1-8b", "card": "h100-sxm", "gpus": 8, "task": "pretrain",
                           "seq_len": 8192, "micro_batch": 2, "compile": True, "framework": "torchtitan"}

    def compute(**kw: Any) -> float:
        return float(estimate_json(EstimateRequest(**job, **kw))["speed"]["step_breakdown_s"]["compute"])
    tp1 = compute(zero=3, float8=True) / compute(zero=3)
    tp8 = compute(tp=8, float8=True) / compute(tp=8)
    assert tp8 > tp1
