"""A fused loss's head gradient: made in the forward, beside gradients accumulated over earlier micro-batches.

Liger's FusedLinearCrossEntropy (linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py
@00eba634 fused_linear_cross_entropy_forward) and Unsloth's UnslothFusedLoss.forward both start with
`grad_weight = torch.zeros_like(weight)` when the head trains, fill it chunk by chunk in the forward and save it
for backward, whose only work is to hand it on. The replay below runs that sequence (the same torch calls, a
PyTorch autograd.Function on CPU, the kernels' in-place softmax gradient written as torch ops) under MemTracker
at the second micro-batch of an accumulation, where the head's .grad already exists: the new gradient is alive
beside it until AccumulateGrad adds it in place, so the loss phase holds one more head-sized tensor than an
unfused loss, whose head gradient autograd sums straight into the carried one.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.params import count_params
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.workload import Deployment, Workload

torch = pytest.importorskip("torch")

# a small body under a big head; the long batch below makes the loss phase the step's peak in every case
WIDE_HEAD = ModelArch(name="wide-head", model_type="llama", hidden_size=256, num_layers=2, num_heads=8,
                      num_kv_heads=2, head_dim=32, intermediate_size=688, vocab_size=152_064, max_context=4096)
CARD = resolve_card("A100-80GB-SXM").card


class _FusedLinearCE(torch.autograd.Function):
    """fused_linear_cross_entropy_forward's allocations: grad_input, grad_weight, one logits chunk at a time."""

    @staticmethod
    def forward(ctx, x, weight, target, chunk):  # type: ignore[no-untyped-def]
        grad_input = torch.zeros_like(x)
        grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
        loss = torch.zeros((), dtype=torch.float32)
        for start in range(0, x.shape[0], chunk):
            xs, ts = x[start:start + chunk], target[start:start + chunk]
            logits = xs @ weight.t()
            probs = torch.softmax(logits.float(), dim=-1)
            loss += -torch.log(probs.gather(1, ts[:, None])).sum()
            probs.scatter_add_(1, ts[:, None], torch.full_like(ts[:, None], -1.0, dtype=probs.dtype))
            g = probs.to(x.dtype) / x.shape[0]  # the kernel writes the gradient into the logits chunk
            del logits, probs
            grad_input[start:start + chunk] = g @ weight
            if grad_weight is not None:
                grad_weight += g.t() @ xs
        ctx.save_for_backward(grad_input, grad_weight)
        return loss / x.shape[0]

    @staticmethod
    def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
        grad_input, grad_weight = ctx.saved_tensors
        return grad_input, grad_weight, None, None


def _forward_extra(vocab: int, hidden: int, tokens: int, chunk: int) -> tuple[float, float]:
    """(bytes the fused loss's forward adds and keeps, its peak beyond the start) at the second
    micro-batch: the head's .grad carried from the first."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    head = torch.nn.Parameter(torch.randn(vocab, hidden) * 0.02)
    x = torch.randn(tokens, hidden, requires_grad=True)
    target = torch.randint(0, vocab, (tokens,))
    head.grad = torch.zeros_like(head)  # accumulated over the first micro-batch
    tracker = MemTracker()
    tracker.track_external(head, x)
    with tracker as mt:
        start = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Total"]
        loss = _FusedLinearCE.apply(x, head, target, chunk)
        kept = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Total"] - start
        loss.backward()
        peak = mt.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] - start
    return float(kept), float(peak)


def test_the_fused_forward_keeps_a_head_sized_gradient_beside_the_carried_one() -> None:
    vocab, hidden, tokens = 8192, 64, 512
    kept, _ = _forward_extra(vocab, hidden, tokens, chunk=64)
    head = vocab * hidden * 4.0  # fp32 here: the weight's dtype
    grad_input = tokens * hidden * 4.0
    assert kept == pytest.approx(head + grad_input, rel=0.02)


def _memory(loss: str, grad_accum: int):  # type: ignore[no-untyped-def]
    w = Workload(task="full", framework="hf", loss=loss, optimizer="adamw", grad_ckpt="none", seq_len=4096,
                 micro_batch=4, grad_accum=grad_accum)
    return train_memory(WIDE_HEAD, w, Deployment(card=CARD, gpus=1)).breakdown


def test_gpuwise_charges_the_fused_head_gradient_beside_accumulated_gradients() -> None:
    """Accumulating adds the carried gradients to the loss phase; under the fused loss the head's new gradient
    stays on top of them, under the unfused one it is summed into them: one head's gradient apart."""
    one = _memory("fused", 1)
    grads = next(i.bytes for i in one.items if i.key == "gradients")
    head = WIDE_HEAD.vocab_size * WIDE_HEAD.hidden_size * grads / count_params(WIDE_HEAD).total
    fused = _memory("fused", 2).allocated_peak - one.allocated_peak
    unfused = _memory("full", 2).allocated_peak - _memory("full", 1).allocated_peak
    assert fused - unfused == pytest.approx(head, rel=1e-6)
