"""ms-swift 1.x's Dec 2023 benchmark harness cuts samples to max_length: one batch length, the fixed-length pool.

scripts/benchmark/test_memory_time/run_single.py@cfcb6726 runs sft_main with truncation_strategy='truncation_left'
(swift/llm/utils/template.py@cfcb6726 _encode: input_ids[-max_length:]), where ms-swift's own default then and
later is 'delete'; frameworks.toml row ms-swift-1-bench-2023-12 (validation/points/msswift_2023.toml)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from gpuwise.catalog.frameworks import Framework, find_framework
from gpuwise.service import EstimateRequest, estimate_json

QWEN_7B = str(Path(__file__).resolve().parents[1] / "validation" / "models" / "Qwen--Qwen-7B-Chat")
TEXT = {"id", "name", "version", "launch", "peak_note", "sources", "notes", "unverified",
        "fix_checkpointing", "fix_activation_offload", "fix_fused_loss", "fix_8bit_optimizer",
        "fix_optimizer_offload", "fix_sharding", "default_for", "default_reason"}


def _memory(framework: str) -> dict[str, float]:
    r = estimate_json(EstimateRequest(task="lora", model=QWEN_7B, card="a100-80gb-sxm", framework=framework,
                                      seq_len=2048, micro_batch=1, grad_accum=16, grad_ckpt="full", lora_rank=8,
                                      lora_targets="q,k,v"))
    return dict(r["memory"])


def test_the_harness_row_differs_from_ms_swift_1_only_in_batch_lengths() -> None:
    jan, dec = find_framework("ms-swift-1"), find_framework("ms-swift-1-bench-2023-12")
    differ = {f.name for f in fields(Framework) if f.name not in TEXT and getattr(jan, f.name) != getattr(dec, f.name)}
    assert differ == {"variable_length_batches"}
    assert jan.variable_length_batches and not dec.variable_length_batches


def test_cut_samples_hold_the_same_tensors_in_a_smaller_pool() -> None:
    jan, dec = _memory("ms-swift-1"), _memory("ms-swift-1-bench-2023-12")
    assert jan["allocated_peak"] == dec["allocated_peak"]
    # an earlier batch's loss segments (its fp32 peak and two bf16 logits) are no longer charged: at least
    # 4 bytes a logit of Qwen-7B's 2,048 x 151,936 go (train_pool.earlier_loss_segments)
    assert jan["reserved_peak"] - dec["reserved_peak"] >= 4.0 * 2048 * 151_936
