"""FSDP's sharded gradients live in blocks of its reduce-scatter stream, which the caching allocator keeps
for that stream: reserved memory holds them beside the next forward and loss (estimate/train_pool.py
stream_pool)."""

from __future__ import annotations

import inspect

import pytest

from gpuwise.estimate.train_pool import stream_pool
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB

LLAMA2_7B = "validation/models/meta-llama--Llama-2-7b-hf"


def test_the_pool_sits_beside_the_forward_and_loss_not_beside_the_step() -> None:
    phases = (10.0, 9.0, 11.0)  # loss, backward, optimizer step (the step holds the gradients themselves)
    assert stream_pool(3.0, phases, 11.0, deferred=False, carried=False) == pytest.approx(2.0)
    assert stream_pool(3.0, phases, 11.0, deferred=False, carried=True) == 0.0  # accumulating: alive
    assert stream_pool(0.0, phases, 11.0, deferred=False, carried=False) == 0.0


def test_under_a_pipeline_the_pool_sits_beside_every_backward_too() -> None:
    phases = (10.0, 12.0, 11.0)
    assert stream_pool(3.0, phases, 12.0, deferred=True, carried=True) == pytest.approx(3.0)


def _memory(**kw: object) -> dict[str, float]:
    base: dict[str, object] = {"model": LLAMA2_7B, "card": "rtx-4090", "framework": "torchtune-0.2", "seq_len": 2048,
                               "micro_batch": 4}
    return estimate_json(EstimateRequest(**{**base, **kw}))["memory"]  # type: ignore[arg-type]


def test_fsdp1_full_fine_tuning_reserves_its_sharded_bf16_gradients_beside_the_loss() -> None:
    m = _memory(task="full", gpus=4, zero=3)
    sharded = 6.74e9 * 2 / 4  # Llama-2-7B's bf16 gradients over 4 ranks
    assert m["reserved_peak"] - m["allocated_peak"] > sharded
    assert m["reserved_peak"] - m["allocated_peak"] < sharded + 3 * GiB


def test_lora_and_gradient_accumulation_add_no_pool() -> None:
    lora = _memory(task="lora", gpus=2, zero=3, lora_rank=8, lora_targets="q,v", grad_ckpt="full")
    why = {i["name"]: i["why"] for i in lora["items"]}
    assert "reduce-scatter stream" not in why["allocator_slack"]
    accumulating = _memory(task="full", gpus=4, zero=3, grad_accum=2)
    why = {i["name"]: i["why"] for i in accumulating["items"]}
    assert "reduce-scatter stream" not in why["allocator_slack"]


def test_the_installed_fsdp2_allocates_its_reduce_scatter_output_on_the_reduce_scatter_stream() -> None:
    pytest.importorskip("torch")
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    source = inspect.getsource(_fsdp_collectives.foreach_reduce)
    in_stream = source.index("with device_handle.stream(reduce_scatter_stream):")
    assert in_stream < source.index("reduce_output =", in_stream) < source.index("torch.as_strided(", in_stream)
