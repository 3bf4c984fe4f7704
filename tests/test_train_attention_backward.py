"""The attention backward's FLOPs in a training step: FlashAttention recomputes S = QK^T inside its
backward (5 matmuls against the forward's 2, FlashAttention-3 paper s.4.1), eager attention does not."""

from __future__ import annotations

import pytest

from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.params import count_params
from gpuwise.estimate.links import efficiency_table
from gpuwise.estimate.speed_train import _flops_per_token
from gpuwise.estimate.workload import Workload
from tests.test_params import LLAMA_31_8B

LLAMA = arch_from_config(LLAMA_31_8B, "llama-3.1-8b")


def test_the_backward_factors_are_the_papers_matmul_counts() -> None:
    factors = efficiency_table()["training_attention"]["backward_factor"]
    assert factors == {"flash": 5 / 2, "eager": 4 / 2}


@pytest.mark.parametrize("flash, passes", [(True, 1 + 2.5), (False, 1 + 2.0)])
def test_attention_flops_are_forward_plus_backward(flash: bool, passes: float) -> None:
    w = Workload(task="pretrain", seq_len=32768, micro_batch=1, grad_ckpt="full", flash_attention=flash)
    f = _flops_per_token(LLAMA, w, count_params(LLAMA))
    forward = 2.0 * LLAMA.num_layers * LLAMA.q_dim * 32768  # causal: half of QK^T and PV
    assert f["attn"] == pytest.approx(passes * forward)
    assert f["re_attn"] == pytest.approx(forward)  # full checkpointing reruns the forward once



TITAN = {"model": "llama-3.1-8b", "card": "h100-sxm", "framework": "torchtitan-2024-12", "gpus": 8,
         "task": "pretrain", "micro_batch": 1, "zero": 3, "grad_ckpt": "full", "seq_len": 131072}


def _memory_bound(**changes: object) -> float:
    from gpuwise.service import EstimateRequest, estimate_json
    out = estimate_json(EstimateRequest(**{**TITAN, **changes}))
    return float(out["speed"]["step_breakdown_s"]["memory_bound"])


def test_torch_context_parallel_merges_its_partial_results_in_memory_bound_time() -> None:
    """torch's context_parallel (allgather) merges cp partial outputs in fp32 outside the kernel
    (_SDPAMerger); ring (Transformer Engine / ring-flash-attention) and Ulysses are not charged it."""
    ring, ulysses = _memory_bound(cp=4, cp_kind="ring"), _memory_bound(cp=4, cp_kind="ulysses")
    assert ring == pytest.approx(ulysses)
    b = efficiency_table()["training_attention"]["cp_merge_bytes"]
    tokens, q, kv = 131072 / 4, LLAMA.q_dim, 2 * LLAMA.kv_dim
    per_layer = (2 * (tokens * q * (b["merge_step"] * 3 + b["merge_once"]) + tokens * kv * b["kv_cat_step"] * 3)
                 + tokens * q * (b["grad_step"] * 4 + b["grad_once"]) + tokens * kv * b["kv_grad_step"] * 3)
    extra = _memory_bound(cp=4, cp_kind="allgather") - ring
    h100_bytes_per_s = LLAMA.num_layers * per_layer / extra
    assert 2.0e12 < h100_bytes_per_s < 3.35e12  # the card's achievable share of 3.35 TB/s
