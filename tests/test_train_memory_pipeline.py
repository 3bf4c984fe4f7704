"""How many micro-batches of its layers the first pipeline stage holds (estimate/memory_train.py
_first_stage_in_flight): 1F1B and interleaved 1F1B warm-up, capped at the step's micro-batches."""

from __future__ import annotations

import pytest

from gpuwise.estimate.memory_train import _first_stage_in_flight
from gpuwise.service import EstimateRequest, estimate_json


def test_1f1b_holds_pp_micro_batches_or_all_of_them_when_fewer() -> None:
    assert _first_stage_in_flight(8, 1, 32) == 8
    assert _first_stage_in_flight(8, 1, 4) == 4


def test_interleaved_warm_up_tends_to_korthikantis_factor_and_is_capped_at_the_micro_batches() -> None:
    pp, v = 8, 2
    # (v - 1) pp + 2 (pp - 1) = 22 chunk forwards of half the stage's layers each: 11 micro-batches
    assert _first_stage_in_flight(pp, v, 64) == pytest.approx(11.0)
    assert _first_stage_in_flight(pp, v, 64) == pytest.approx(pp * (1 + (pp - 1) / (pp * v)), rel=0.05)
    # torchtitan's default of as many micro-batches as stages: every one is in flight, as under 1F1B
    assert _first_stage_in_flight(pp, v, 8) == _first_stage_in_flight(pp, 1, 8) == 8


def test_with_as_many_micro_batches_as_stages_interleaving_costs_no_activation_memory() -> None:
    """Interleaving keeps no more checkpointed activations when every micro-batch is in flight anyway; what
    grows is torch pipelining's receive buffers, one per micro-batch for each stage a rank holds
    (memory_train._recv_buffers), each one micro-batch's 8,192 x 8,192 bf16 hidden states over TP 8."""
    def memory(virtual: int) -> dict:
        r = estimate_json(EstimateRequest(model="llama-3.1-70b", card="h100-sxm", framework="torchtitan",
                                          task="pretrain", gpus=8, nodes=4, tp=8, pp=4, zero=3, seq_len=8192,
                                          micro_batch=1, grad_accum=4, grad_ckpt="full", virtual_stages=virtual))
        return dict(r["memory"])

    def item(m: dict, key: str) -> float:
        return float(next(i["bytes"] for i in m["items"] if i["name"] == key))
    one, two = memory(1), memory(2)
    assert item(two, "activations") == pytest.approx(item(one, "activations"), rel=1e-9)
    boundary = 2.0 * 8192 * 8192 / 8  # one micro-batch's stage boundary, sequence-sharded by TP
    # the last rank, the larger peak here: (v - 1) m + v m - 1 buffers, 3 at v = 1 and 11 at v = 2
    assert two["allocated_peak"] - one["allocated_peak"] == pytest.approx(8 * boundary, rel=1e-6)
