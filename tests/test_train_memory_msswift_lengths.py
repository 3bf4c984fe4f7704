"""ms-swift pads each SFT batch to its own longest sample unless --packing is on (swift/trainers/mixin.py@3602360a
_get_data_collator: padding_to only for longlora; swift/llm/train/sft.py@v3.5.0 line 81), so the caching allocator
keeps an earlier batch's loss blocks beside the longest one's; a packed run's batches are bins filled up to max_length
and get no such bound."""

from __future__ import annotations

import pytest

from gpuwise.catalog.frameworks import find_framework
from gpuwise.service import EstimateRequest, estimate_json

VOCAB = 152064  # Qwen2.5-7B's vocabulary


def _pool(framework: str, packing: bool, seq_len: int = 2048) -> dict[str, float]:
    r = estimate_json(EstimateRequest(model="qwen2.5-7b", card="a100-80gb-sxm", task="lora", framework=framework,
                                      seq_len=seq_len, packing=packing))
    m = r["memory"]
    return {"slack": float(m["reserved_peak"] - m["allocated_peak"]),
            "logits": float({i["name"]: i["bytes"] for i in m["items"]}["logits"])}


def test_the_hf_trainer_sft_rows_that_pad_per_batch_all_charge_the_earlier_batch() -> None:
    for name in ("ms-swift", "ms-swift-1", "llama-factory"):
        fw = find_framework(name)
        assert fw.variable_length_batches and not fw.packing, name


def test_ms_swift_unpacked_batches_keep_an_earlier_batch_loss_in_the_pool() -> None:
    per_logit = 2048 * VOCAB
    varied = _pool("ms-swift", packing=False)
    assert varied["logits"] == pytest.approx(12 * per_logit)  # this batch's fp32 loss peak
    assert varied["slack"] == pytest.approx(16 * per_logit)  # + the earlier batch's peak and two bf16 logits


def test_packing_turns_the_variable_length_bound_off() -> None:
    varied, packed = _pool("ms-swift", packing=False), _pool("ms-swift", packing=True)
    assert packed["logits"] == varied["logits"]
    assert packed["slack"] < 7 * 2048 * VOCAB  # the usual slack only: about half the 12-byte loss peak
