"""Speed follows --padding-free, --dora and --modules-to-save as memory does (one answer, not two)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.service import EstimateRequest, estimate_json

BASE: dict[str, Any] = {"model": "qwen2.5-7b", "card": "a100-80gb-sxm", "task": "lora", "framework": "ms-swift",
                        "micro_batch": 4, "seq_len": 2048}


def speed(**kw: Any) -> dict[str, Any]:
    return dict(estimate_json(EstimateRequest(**{**BASE, **kw}))["speed"])


def test_padding_free_counts_only_real_tokens_as_packing_does() -> None:
    plain, free, packed = speed(), speed(padding_free=True), speed(packing=True)
    assert free["step_time_s"] == pytest.approx(plain["step_time_s"])  # the same tokens computed
    assert free["tokens_per_s"] == pytest.approx(packed["tokens_per_s"])  # none of them padding
    assert free["tokens_per_s"] > plain["tokens_per_s"]


def test_dora_runs_the_base_gemm_again_and_the_weight_norm_every_forward() -> None:
    lora, dora = speed(), speed(dora=True)
    lb, db = lora["step_breakdown_s"], dora["step_breakdown_s"]
    # F.linear(x, weight): the targeted linears' forward and input-gradient GEMM again (~ the frozen base's)
    assert db["compute"] > 1.5 * lb["compute"]
    assert db["recompute"] > lb["recompute"]  # the recomputed forward runs it (and the norm) too
    assert db["memory_bound"] > lb["memory_bound"]
    assert dora["mfu"] < lora["mfu"]  # the same model FLOPs in a longer step
    ck = speed(dora=True, grad_ckpt="none")["step_breakdown_s"]
    assert ck["recompute"] == 0.0


def test_modules_to_save_adds_the_head_gradient_and_the_copies_update() -> None:
    lora, saved = speed(), speed(modules_to_save="embed_tokens,lm_head")
    assert saved["step_breakdown_s"]["compute"] > lora["step_breakdown_s"]["compute"]
    assert saved["step_breakdown_s"]["memory_bound"] > lora["step_breakdown_s"]["memory_bound"]
    head_only = speed(modules_to_save="lm_head")["step_breakdown_s"]["compute"]
    embed_only = speed(modules_to_save="embed_tokens")["step_breakdown_s"]["compute"]
    assert embed_only == pytest.approx(lora["step_breakdown_s"]["compute"])  # a lookup's gradient: no GEMM
    assert head_only > embed_only


def test_modules_to_save_gradients_travel_in_data_parallel() -> None:
    lora = speed(gpus=4)["communication_s"]["dp_total"]
    saved = speed(gpus=4, modules_to_save="embed_tokens,lm_head")["communication_s"]["dp_total"]
    assert saved > 10 * lora  # 2 x 152,064 x 3,584 bf16 gradients beside the adapters' 40 M fp32


@pytest.mark.parametrize("fw", ["hf", "torchtune"])
def test_dora_reuses_the_base_output_where_the_framework_does(fw: str) -> None:
    """PEFT >= 0.14 at lora_dropout 0 (hf) and torchtune's DoRALinear take the base output once: no second
    GEMM, only the weight norm and the products (frameworks.toml dora_reruns_base false)."""
    lora, dora = speed(framework=fw), speed(framework=fw, dora=True)
    assert dora["step_breakdown_s"]["compute"] == pytest.approx(lora["step_breakdown_s"]["compute"])
    assert dora["step_breakdown_s"]["memory_bound"] > lora["step_breakdown_s"]["memory_bound"]
    swift = speed(dora=True)
    assert swift["step_time_s"] > dora["step_time_s"]  # ms-swift's dropout 0.05 runs F.linear again
