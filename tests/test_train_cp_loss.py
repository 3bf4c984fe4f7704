"""ms-swift's sequence-parallel loss against PyTorch's MemTracker: aten cross-entropy on bf16 logits.

Under --sequence_parallel_size ms-swift pops the labels and runs its own loss_scale_sp_func on the
model's logits as returned (bf16, no upcast): CrossEntropyLoss(reduction='none'), then a sum. gpuwise
charges 6 bytes a logit at the loss's peak (activations.loss_bytes, bf16_loss): the bf16 log-probs
saved, nll's dense gradient and log_softmax's input gradient, the model's logits freed before backward.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_cp_loss.py -s
"""

from __future__ import annotations

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.activations import loss_bytes
from gpuwise.estimate.workload import Workload

torch = pytest.importorskip("torch")
TOKENS, VOCAB = 512, 4096
TOLERANCE = 0.05


def _measured_peak() -> float:
    """Peak bytes over the loss's forward (logits alive) and backward (logits dropped)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    head = torch.randn(TOKENS, VOCAB, dtype=torch.bfloat16, requires_grad=True)  # stands for lm_head's output
    labels = torch.randint(0, VOCAB, (TOKENS,))
    cpu = torch.device("cpu")
    tracker = MemTracker()
    tracker.track_external(head, labels)
    with tracker as mt:
        before = mt.get_tracker_snapshot("current")[cpu]["Total"]
        logits = head * 1  # the model's bf16 output, a tensor of the graph
        loss = torch.nn.CrossEntropyLoss(reduction="none")(logits.view(-1, VOCAB), labels).sum()
        del logits  # compute_loss returns only the loss: the outputs go before backward
        loss.backward()
        peak = mt.get_tracker_snapshot("peak")[cpu]["Total"]
    # the stand-in head's gradient (2 bytes a logit) is made after nll's gradient is freed: it never adds
    return float(peak - before)


def test_the_bf16_sequence_parallel_loss_peaks_at_six_bytes_a_logit() -> None:
    arch = ModelArch(name="tiny-loss", model_type="llama", hidden_size=64, num_layers=1, num_heads=1,
                     num_kv_heads=1, head_dim=64, intermediate_size=64, vocab_size=VOCAB, max_context=TOKENS)
    modelled = loss_bytes(arch, Workload(task="full", seq_len=TOKENS), 1, bf16_loss=True)
    assert modelled == pytest.approx(_measured_peak(), rel=TOLERANCE)
    assert modelled == pytest.approx(loss_bytes(arch, Workload(task="full", seq_len=TOKENS), 1) / 2)
