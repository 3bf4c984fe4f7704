"""Tensor-parallel traffic as each framework runs it: torchtitan's plan is sequence parallel (an all-gather
and a reduce-scatter where Megatron's plain TP all-reduces), at NCCL's ring bus bandwidth, with FP8
all-gathers under Float8 tensorwise linears (frameworks.toml tp_sequence_parallel / tp_float8_allgather)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.presets import find_preset
from gpuwise.estimate import speed_train
from gpuwise.estimate.links import allgather_seconds, card_rates
from gpuwise.estimate.workload import Workload
from gpuwise.service import EstimateRequest, estimate_json

JOB: dict[str, Any] = {"model": "llama-3.1-8b", "gpus": 8, "tp": 8, "task": "pretrain", "seq_len": 8192,
                       "micro_batch": 2, "grad_ckpt": "full", "compile": True}


def tp_total(**kw: Any) -> float:
    return float(estimate_json(EstimateRequest(**{**JOB, **kw}))["speed"]["communication_s"]["tp_total"])


def test_torchtitan_tp_is_an_all_gather_and_a_reduce_scatter_at_the_ring_rate_per_megatron_all_reduce() -> None:
    r = card_rates(resolve_card("h100-sxm").card, gpus=8)
    msg = 2 * 8192 * 4096 * 2.0  # micro-batch tokens x hidden x bf16
    per_layer = 6 * 2 * allgather_seconds(msg, 8, r.link_busbw, r.link_latency)  # fwd, bwd, full recompute
    assert tp_total(card="h100-sxm", framework="torchtitan") == pytest.approx(32 * per_layer, rel=1e-6)


def test_on_an_nvls_node_megatron_all_reduces_beat_torchtitan_gathers_and_without_nvls_they_tie() -> None:
    assert tp_total(card="h100-sxm", framework="torchtitan") > 1.2 * tp_total(card="h100-sxm", framework="megatron")
    # A100 has no NVLink SHARP: an all-reduce moves the bytes of an all-gather and a reduce-scatter
    assert tp_total(card="a100-80gb-sxm", framework="torchtitan") == pytest.approx(
        tp_total(card="a100-80gb-sxm", framework="megatron"), rel=0.02)  # one latency more


def test_float8_tensorwise_under_torchtitan_tp_halves_the_all_gathers_only() -> None:
    bf16, fp8 = tp_total(card="h100-sxm", framework="torchtitan"), tp_total(card="h100-sxm", framework="torchtitan",
                                                                           float8=True)
    assert fp8 == pytest.approx(0.75 * bf16, rel=0.02)  # all-gathers 1 byte, reduce-scatters 2 (+ latencies)
    assert tp_total(card="h100-sxm", framework="megatron", float8=True) == pytest.approx(
        tp_total(card="h100-sxm", framework="megatron"))



def test_float8_tp_copies_each_fp8_gathered_tensor_once_for_the_weight_gradient_gemm_and_nothing_else_does() -> None:
    preset = find_preset("llama-3.1-8b")
    assert preset is not None
    r = card_rates(resolve_card("h100-sxm").card, gpus=8)

    def transposes(framework: str, tp: int = 8) -> float:
        w = Workload(task="pretrain", seq_len=8192, micro_batch=2, framework=framework, float8=True)
        lay = speed_train._Layout(tp=tp, pp=1, dp=1, dp_local=1, micro_batches=1, tokens_mb=2 * 8192.0,
                                  real_share=1.0)
        return speed_train._float8_tp_transpose_seconds(preset.arch(), w, r, lay)
    # attention and MLP inputs, wo's and w2's output gradients: all the micro-batch's tokens x hidden, r 1 + w 1 B
    assert transposes("torchtitan") == pytest.approx(4 * 2 * 2 * 8192 * 4096 * 32 / r.mem_bw)
    assert transposes("torchtitan", tp=1) == 0.0
    assert transposes("megatron") == 0.0  # no FP8 all-gathers: the casts stay local
