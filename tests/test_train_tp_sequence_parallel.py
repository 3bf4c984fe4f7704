"""Tensor-parallel traffic as each framework runs it: torchtitan's plan is sequence parallel (an all-gather
and a reduce-scatter where Megatron's plain TP all-reduces), at NCCL's ring bus bandwidth, with FP8
all-gathers under Float8 tensorwise linears (frameworks.toml tp_sequence_parallel / tp_float8_allgather)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.cards import resolve_card
from gpuwise.estimate.links import allgather_seconds, card_rates
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
