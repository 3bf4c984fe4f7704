"""A training loop that still names its shifted logits keeps them through backward and the optimizer step.

torchtune's recipes before 'del logits' (#1046, #1235; recipes/full_finetune_distributed.py@135cf2ef lines
492-506) run `logits = self._model(...)` (fp32: TransformerDecoder's self.output(h).float()), then
`logits = logits[..., :-1, :].contiguous()`, `logits = logits.transpose(1, 2)`, the loss, `loss.backward()`
and the optimizer step with the name still bound. The same sequence on CPU under PyTorch's MemTracker, with
and without the `del logits` that came later, against gpuwise's loss for the torchtune-0.2 row.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_kept_logits.py -s
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.frameworks import find_framework
from gpuwise.estimate import memory_train
from gpuwise.estimate.activations import kept_logits_bytes, loss_bytes
from gpuwise.estimate.workload import Deployment, Workload

torch = pytest.importorskip("torch")
F = torch.nn.functional

H, VOCAB, SEQ, BATCH = 64, 8192, 256, 2
TINY = ModelArch(name="tiny-llama", model_type="llama", hidden_size=H, num_layers=2, num_heads=4,
                 num_kv_heads=4, head_dim=16, intermediate_size=172, vocab_size=VOCAB, max_context=4096)


def _recipe_peak(delete: bool) -> float:
    """Peak bytes of the head, loss, backward and step of torchtune 0.2's recipe, two steps."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    weight = (torch.randn(VOCAB, H, dtype=torch.bfloat16) * 0.02).requires_grad_()
    hidden = torch.randn(BATCH, SEQ, H, dtype=torch.bfloat16)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    tracker = MemTracker()
    tracker.track_external(optimizer)
    with tracker:
        for _ in range(2):
            logits = F.linear(hidden, weight).float()  # TransformerDecoder: self.output(h).float()
            logits = logits[..., :-1, :].contiguous()  # the recipe's shift
            shifted_labels = labels[..., 1:].contiguous()
            logits = logits.transpose(1, 2)
            loss = F.cross_entropy(logits, shifted_labels)
            if delete:
                del logits
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    snapshot = tracker.get_tracker_snapshot("peak")
    return float(next(iter(snapshot.values()))["Total"])


def test_the_recipe_without_del_logits_peaks_four_bytes_a_logit_higher() -> None:
    logit_count = BATCH * (SEQ - 1) * VOCAB
    kept, freed = _recipe_peak(delete=False), _recipe_peak(delete=True)
    assert (kept - freed) / logit_count == pytest.approx(4.0, abs=0.1)  # the shifted fp32 copy


def test_gpuwise_loss_for_the_kept_logits_matches_the_measured_peak() -> None:
    w = Workload(task="full", framework="torchtune-0.2", seq_len=SEQ, micro_batch=BATCH)
    fw = find_framework("torchtune-0.2")
    assert fw.loss_logits_kept
    estimate = loss_bytes(TINY, w, fw.loss_chunks, fp32_logits=fw.logits_fp32) + kept_logits_bytes(TINY, w, True)
    measured = _recipe_peak(delete=False) - 2.0 * VOCAB * H * 2  # less the bf16 weight and its gradient
    assert estimate == pytest.approx(measured, rel=0.05)


def test_the_kept_logits_add_to_every_phase_of_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loss, the backward and the optimizer step each hold them: whichever phase is the peak, it
    grows by the shifted fp32 logits (4 bytes a logit), and nothing else moves."""
    w = Workload(task="full", framework="torchtune-0.2", seq_len=SEQ, micro_batch=BATCH)
    d = Deployment(card=resolve_card("RTX-4090").card, gpus=4, zero=3)
    kept = memory_train.train_memory(TINY, w, d).breakdown.allocated_peak
    fw = find_framework("torchtune-0.2")
    monkeypatch.setattr(memory_train, "find_framework", lambda name, task="": replace(fw, loss_logits_kept=False))
    freed = memory_train.train_memory(TINY, w, d).breakdown.allocated_peak
    assert kept - freed == pytest.approx(4.0 * SEQ * BATCH * VOCAB)
