"""Unsloth 2023.12's in-place cross-entropy, and LLaMA-Factory 0.4's fp32 head hook, against MemTracker.

The kernel (unslothai/unsloth unsloth/kernels/cross_entropy_loss.py@28c7550, Fast_CrossEntropyLoss) saves
the logits it is handed and its backward writes the gradient into them; its Triton kernels work a row at
a time, so the emulation below does the same with torch ops on 64-row slices (no full-size temporary).
LLaMA-Factory 0.4 (hiyouga/LLaMA-Factory src/llmtuner/model/patcher.py@ebb32e85f lines 210-216) hooks
the head: 'return output.to(torch.float32)'. Measured at LLaMA-2-7B's vocabulary (32,000) over the wiki
table's batch of 4, at 64 tokens and a hidden size of 64 for time: bf16 matmuls on a CPU without AVX-512
BF16 run at about 1 GFLOP/s, and the head's 4,096 x 32,000 at 1,024 tokens took over half an hour. The
bytes a logit do not depend on either: 6 for the loss, plus the hidden states' bf16 gradient, 2 x hidden
/ vocabulary (6.26 at hidden 4,096); gpuwise's loss line must match.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_in_place_loss.py -s
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from benchmarks.allocator_replay import Allocator

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.train_pool import earlier_in_place_segments, in_place_loss
from gpuwise.estimate.workload import Deployment, Workload

torch = pytest.importorskip("torch")

H, VOCAB, BATCH, SEQ = 64, 32_000, 4, 64
HEAD_ONLY = ModelArch(name="llama-2-vocab-head", model_type="llama", hidden_size=H, num_layers=1, num_heads=1,
                      num_kv_heads=1, head_dim=H, intermediate_size=4 * H, vocab_size=VOCAB, max_context=4096)
ROWS = 4  # the Triton kernels keep a row in registers; a few rows of fp32 scratch stand for them


class _FastCE(torch.autograd.Function):  # type: ignore[misc]
    @staticmethod
    def forward(ctx: Any, logits: Any, labels: Any) -> Any:
        with torch.no_grad():
            lse = torch.empty(logits.shape[0], dtype=torch.float32)
            loss = torch.empty(logits.shape[0], dtype=torch.float32)
            for i in range(0, logits.shape[0], ROWS):
                x = logits[i:i + ROWS].float()
                lse[i:i + ROWS] = torch.logsumexp(x, -1)
                loss[i:i + ROWS] = lse[i:i + ROWS] - x.gather(1, labels[i:i + ROWS, None]).squeeze(1)
        ctx.save_for_backward(logits, lse, labels)
        return loss

    @staticmethod
    def backward(ctx: Any, dloss: Any) -> Any:
        logits, lse, labels = ctx.saved_tensors
        with torch.no_grad():
            for i in range(0, logits.shape[0], ROWS):  # tl.store(logits_ptr, dloss * probs): in place
                p = torch.exp(logits[i:i + ROWS].float() - lse[i:i + ROWS, None])
                p[torch.arange(p.shape[0]), labels[i:i + ROWS]] -= 1.0
                logits[i:i + ROWS].copy_(p * dloss[i:i + ROWS, None])
        return logits, None


class _Head(torch.nn.Module):  # the frozen head as a buffer: MemTracker hooks a gradient on every Parameter
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("weight", torch.randn(VOCAB, H, dtype=torch.bfloat16) * 0.02)

    def forward(self, x: Any) -> Any:
        return torch.nn.functional.linear(x, self.weight)


def _measured(fp32_hook: bool) -> float:
    """Peak bytes above the start of the head, the loss and their backward (the hidden states' gradient included)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    head = _Head()
    if fp32_hook:
        head.register_forward_hook(lambda module, args, output: output.to(torch.float32))
    hidden = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, VOCAB, (BATCH * SEQ,))
    tracker = MemTracker()
    tracker.track_external(head)
    with tracker as mt:
        start = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Total"]
        logits = head(hidden)
        loss = _FastCE.apply(logits.view(BATCH * SEQ, VOCAB), labels).sum() / (BATCH * SEQ)
        del logits  # the Trainer keeps only the loss
        loss.backward()
    return float(mt.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] - start)


def _workload(task: str = "lora") -> Workload:
    return Workload(task=task, framework="llama-factory-0.4-unsloth", loss="full", seq_len=SEQ, micro_batch=BATCH)


def test_the_fp32_hooked_in_place_loss_peaks_at_six_bytes_a_logit() -> None:
    measured = _measured(fp32_hook=True)
    assert measured / (BATCH * SEQ * VOCAB) == pytest.approx(6.0 + 2.0 * H / VOCAB, abs=0.06)
    assert in_place_loss(HEAD_ONLY, _workload(), fp32_logits=True) == pytest.approx(measured, rel=0.02)


def test_the_framework_row_charges_the_in_place_loss_not_aten_cross_entropy() -> None:
    card = resolve_card("A100-80G").card
    items = {i.key: i.bytes for i in train_memory(HEAD_ONLY, _workload(), Deployment(card=card)).breakdown.items}
    assert items["logits"] == in_place_loss(HEAD_ONLY, _workload(), fp32_logits=True)
    assert items["logits"] < 12.0 * BATCH * SEQ * VOCAB / 1.9  # aten's full loss holds 12 bytes a logit


def _step(a: Allocator, s: int) -> None:
    n = BATCH * s * VOCAB
    bf16 = a.malloc(2 * n)  # the head's output
    fp32 = a.malloc(4 * n)  # the hook's copy, saved by the kernel
    a.free(bf16)
    cast = a.malloc(2 * n)  # backward: the in-place fp32 gradient cast to bf16 for the head
    a.free(fp32)
    a.free(cast)


def test_a_slightly_shorter_earlier_batch_leaves_four_bytes_a_logit_cached() -> None:
    a = Allocator()
    for s in (1000, 1024):  # the replay needs no tensors: the wiki table's own length, and one just shorter
        _step(a, s)
    top = BATCH * 1024 * VOCAB
    slack = (a.peak_reserved - a.peak_allocated) / top
    assert a.peak_allocated / top == pytest.approx(6.0, abs=0.05)
    assert slack == pytest.approx(3.9, abs=0.1)
    bound = earlier_in_place_segments(HEAD_ONLY, replace(_workload(), seq_len=1024), True, 1)
    assert bound / top == pytest.approx(slack, abs=0.15)


def test_llama_factory_batches_padded_to_their_longest_keep_an_earlier_batch_loss_in_the_pool() -> None:
    """LLaMA-Factory's SFT collator (a DataCollatorForSeq2Seq, padding=True) pads each batch to its own
    longest sample, so the HF-path rows get the variable-length bound: the earlier batch's 12-byte loss
    peak and two bf16 logits, 16 bytes a logit, beside the allocated peak."""
    card = resolve_card("A100-80G").card
    w = Workload(task="lora", framework="llama-factory", loss="full", seq_len=1024, micro_batch=4)
    mem = train_memory(HEAD_ONLY, w, Deployment(card=card)).breakdown
    assert mem.reserved_peak - mem.allocated_peak == pytest.approx(16.0 * 4 * 1024 * VOCAB, rel=0.01)
