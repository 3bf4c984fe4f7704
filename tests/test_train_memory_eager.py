"""Eager attention's backward against PyTorch's MemTracker: what it saves and what its backward adds.

The attention is transformers' eager LlamaAttention (v4.36): scores = q k^T / sqrt(d) + causal mask,
softmax(..., dtype=float32).to(q.dtype), dropout(p=0), then the PV matmul. gpuwise charges 6 bytes a
score saved (fp32 probabilities + their bf16 copy) and 4 more at the peak of the backward.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_eager.py -s
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.activations import layer_saved, saved_activations
from gpuwise.estimate.workload import Workload

torch = pytest.importorskip("torch")
F = torch.nn.functional

BATCH, HEADS, SEQ, HEAD_DIM = 1, 4, 512, 8  # head_dim small: the scores dominate every other tensor
ARCH = ModelArch(name="tiny-eager", model_type="llama", hidden_size=HEADS * HEAD_DIM, num_layers=1,
                 num_heads=HEADS, num_kv_heads=HEADS, head_dim=HEAD_DIM, intermediate_size=64, vocab_size=256,
                 max_context=SEQ)
TOLERANCE = 0.10


def _eager(q: Any, k: Any, v: Any, mask: Any) -> Any:
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HEAD_DIM) + mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    probs = F.dropout(probs, p=0.0, training=True)
    return torch.matmul(probs, v)


def _measured() -> tuple[float, float]:
    """(bytes saved for backward, bytes the backward adds over them at its peak)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    q, k, v = (torch.randn(shape, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = torch.full((SEQ, SEQ), float("-inf"), dtype=torch.bfloat16).triu(1)
    grad = torch.randn(shape, dtype=torch.bfloat16)
    cpu = torch.device("cpu")
    tracker = MemTracker()
    tracker.track_external(q, k, v, mask, grad)
    with tracker as mt:
        start = mt.get_tracker_snapshot("current")[cpu]["Total"]
        out = _eager(q, k, v, mask)
        saved = mt.get_tracker_snapshot("current")[cpu]["Total"] - start - out.numel() * out.element_size()
        mt.reset_mod_stats()
        before = mt.get_tracker_snapshot("current")[cpu]["Total"]
        out.backward(grad)
        peak = mt.get_tracker_snapshot("peak")[cpu]["Total"]
    return float(saved), float(peak - before)


def test_eager_attention_saves_six_bytes_a_score_and_its_backward_four_more() -> None:
    w = Workload(task="lora", flash_attention=False, seq_len=SEQ, micro_batch=BATCH, grad_ckpt="none")
    scores = BATCH * HEADS * SEQ * SEQ
    saved, extra = _measured()
    print(f"\nsaved {saved / scores:.2f} B a score, backward +{extra / scores:.2f} B a score")
    assert layer_saved(ARCH, w, 0, full_ft=False).core_attention == pytest.approx(saved, rel=TOLERANCE)
    # CUDA's softmax takes bf16 in and writes fp32 out in one kernel (half_to_float), and its backward
    # writes the bf16 gradient; on CPU 'softmax with half to float conversion is not supported'
    # (aten/src/ATen/native/SoftMax.cpp), so F.softmax upcasts its input first and the backward makes
    # that copy's fp32 gradient before casting it down: 2 bytes a score more than on a GPU
    cpu_only = 2.0 * scores
    assert saved_activations(ARCH, w, full_ft=False, layers=1).backward_transient + cpu_only == pytest.approx(
        extra, rel=TOLERANCE)


def test_flash_attention_keeps_no_scores_for_its_backward() -> None:
    w = Workload(task="lora", flash_attention=True, seq_len=SEQ, micro_batch=BATCH)
    assert saved_activations(ARCH, w, full_ft=False, layers=1).backward_transient == 0.0
