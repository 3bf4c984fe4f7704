"""DeepSpeed ZeRO-1/2 full fine-tuning: bf16 gradients and the step's fp32 gradient copy of one parameter
group's partition (deepspeed/runtime/zero/stage_1_and_2.py@v0.16.5 step, lines 1902-1933; v0.14.5 lines
1882-1913), replayed on CPU with the ZeRO-3 sub-group replay, whose calls are the same
(flatten(averaged_gradients).to(fp32) as the fp32 partition's .grad, the wrapped optimizer on it alone)."""

from __future__ import annotations

import pytest

from gpuwise.catalog.params import count_params
from tests.test_train_memory_deepspeed_step import TINY, TOLERANCE, _items, _zero3_step_extra

torch = pytest.importorskip("torch")


def test_zero2_keeps_bf16_partition_gradients_and_charges_the_measured_step() -> None:
    total = count_params(TINY).total
    share = total / 2
    items = _items(TINY, "ms-swift-3", gpus=2, zero=2)
    assert items["gradients"] == pytest.approx(2.0 * share)  # grads_in_partition, model dtype
    measured = _zero3_step_extra(int(share) // 8 * 8, foreach=True)  # fp32 copy + foreach sqrt
    assert items["optimizer"] - 12.0 * share == pytest.approx(measured, rel=TOLERANCE)


def test_zero1_counts_only_what_the_step_adds_beyond_the_full_gradients() -> None:
    total = count_params(TINY).total
    items = _items(TINY, "ms-swift-3", gpus=8, zero=1)
    assert items["gradients"] == pytest.approx(2.0 * total)  # unpartitioned bf16 gradients in backward
    # at the step: partition grads (2) + fp32 copy (4) + foreach (4) per partition element = 10/8 < 2 per element
    assert items["optimizer"] == pytest.approx(12.0 * total / 8)


def test_lora_under_zero2_is_unchanged() -> None:
    """PEFT adapters are fp32 already: no rule here (lora keeps the framework's grad dtype)."""
    from gpuwise.catalog.frameworks import find_framework
    from gpuwise.estimate.memory_train import _deepspeed_stage12
    from gpuwise.estimate.workload import Deployment, Workload
    from tests.test_train_memory_deepspeed_step import CARD
    w = Workload(task="lora", framework="ms-swift-3", optimizer="adamw", seq_len=1024, micro_batch=1)
    assert not _deepspeed_stage12(find_framework("ms-swift-3"), w, Deployment(card=CARD, gpus=2, zero=2), 2)
