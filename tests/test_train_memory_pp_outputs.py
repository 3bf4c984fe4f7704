"""The outputs pipeline stages keep for the whole step (estimate/memory_train.py _kept_outputs): torch 2.6's
torch.distributed.pipelining appends every micro-batch's output to output_chunks on every stage and returns
the last stage's merged after the last backward (torchtitan passes step(return_outputs=False) from e5ef99aa,
2025-10-22)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwise.catalog.frameworks import find_framework
from gpuwise.estimate import memory_train
from gpuwise.service import EstimateRequest, estimate_json

# a small model with a large vocabulary, many micro-batches and few stages: the last stage is the worse one
_ASK: dict[str, object] = {"model": "llama-3.2-1b", "card": "h100-sxm", "framework": "torchtitan-2024-12",
                           "task": "pretrain", "gpus": 8, "pp": 2, "zero": 3, "seq_len": 8192, "micro_batch": 1,
                           "grad_accum": 16, "grad_ckpt": "full"}


def _peaks(monkeypatch: pytest.MonkeyPatch, keeps: bool, **changes: object) -> dict[str, float]:
    monkeypatch.setattr(memory_train, "find_framework",
                        lambda name: replace(find_framework(name), pp_keeps_outputs=keeps))
    memory = estimate_json(EstimateRequest(**{**_ASK, **changes}))["memory"]  # type: ignore[arg-type]
    return {k: float(memory[k]) for k in ("allocated_peak", "reserved_peak")}


def test_the_end_of_2024_torchtitan_keeps_the_last_stage_outputs_and_the_current_one_does_not() -> None:
    assert find_framework("torchtitan-2024-12").pp_keeps_outputs
    assert not find_framework("torchtitan").pp_keeps_outputs


def test_where_the_last_stage_is_the_worse_it_holds_every_micro_batchs_bf16_logits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kept, dropped = _peaks(monkeypatch, True), _peaks(monkeypatch, False)
    logits = 2.0 * 8192 * 128_256 * 16  # bf16, one micro-batch of 8,192 tokens, 16 micro-batches, no TP
    assert kept["allocated_peak"] - dropped["allocated_peak"] == pytest.approx(logits, rel=1e-6)
    # they are made at one size per micro-batch and freed together: no allocator slack on them
    assert kept["reserved_peak"] - dropped["reserved_peak"] == pytest.approx(logits, rel=1e-6)


def test_without_a_pipeline_nothing_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _peaks(monkeypatch, True, pp=1) == _peaks(monkeypatch, False, pp=1)


def test_where_the_first_stage_is_the_worse_it_holds_every_micro_batchs_stage_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Llama-3.1-405B, 8 stages of 8 micro-batches of 4 x 8,192 (torchtitan's 2024-12 Table 5): the first
    # stage's 8 micro-batches in flight beside the gradients outweigh the last stage's loss and logits
    ask = {"model": "llama-3.1-405b", "card": "h200-sxm", "tp": 8, "pp": 8, "nodes": 64, "micro_batch": 4,
           "grad_accum": 8}
    kept, dropped = _peaks(monkeypatch, True, **ask), _peaks(monkeypatch, False, **ask)
    outputs = 2.0 * 4 * 8192 * 8 * 16_384 / 8  # bf16, sequence-sharded over TP 8
    assert kept["allocated_peak"] - dropped["allocated_peak"] == pytest.approx(outputs, rel=1e-6)
    assert kept["reserved_peak"] - dropped["reserved_peak"] == pytest.approx(outputs, rel=1e-6)
