"""torch pipelining's receive buffers: one per micro-batch, kept after the step.

A real two-rank Schedule1F1B step on CPU (gloo): rank 0 (the first stage) keeps one gradient-receive buffer
per micro-batch, rank 1 (the last) one activation-receive buffer per micro-batch, each the size of a
micro-batch's stage output. gpuwise's memory_train._recv_buffers counts the same for frameworks with
pp_recv_buffers (torchtitan).

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_pp_recv.py -s
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.frameworks import find_framework
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.memory_train import _recv_buffers
from gpuwise.estimate.workload import Deployment, Workload

torch = pytest.importorskip("torch")
M, MB, S, H = 4, 2, 16, 32


def _rank(rank: int, store: str, out: Any) -> None:
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.manual_seed(0)
        stage = PipelineStage(torch.nn.Sequential(torch.nn.Linear(H, H), torch.nn.Linear(H, H)), rank, 2,
                              torch.device("cpu"))
        schedule = Schedule1F1B(stage, n_microbatches=M, loss_fn=lambda y, t: (y - t).pow(2).mean())
        x, target = torch.randn(M * MB, S, H), torch.randn(M * MB, S, H)
        for _ in range(2):  # the buffers are made at the first step and kept
            schedule.step(x) if rank == 0 else schedule.step(target=target)

        def held(infos: dict[int, Any]) -> int:
            return sum(i.buffer.numel() * i.buffer.element_size() for t in infos.values() for i in t
                       if getattr(i, "buffer", None) is not None)

        out[rank] = (held(stage.grad_recv_info), held(stage.args_recv_info))
    finally:
        dist.destroy_process_group()


def test_each_stage_keeps_a_receive_buffer_per_micro_batch(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    out = mp.Manager().dict()
    mp.spawn(_rank, args=(str(tmp_path / "store"), out), nprocs=2)  # a file store: no port to race for
    one = MB * S * H * 4  # a micro-batch's stage output, fp32 here
    assert out[0] == (M * one, 0)  # first stage: the gradients coming back
    assert out[1] == (0, M * one)  # last stage: the activations coming in


def test_gpuwise_counts_them_on_the_first_and_last_ranks() -> None:
    model = load_model("llama-3.1-8b")
    w = Workload(task="pretrain", framework="torchtitan-2024-12", seq_len=8192, micro_batch=1, grad_accum=8)
    fw = find_framework(w.framework)
    boundary = 2.0 * 8192 * model.hidden_size / 4  # bf16, sequence-sharded over TP 4
    d = Deployment(card=resolve_card("H100-SXM").card, gpus=8, tp=4, pp=2)
    first, last = _recv_buffers(model, fw, w, d, 4, in_flight=2.0)
    assert (first, last) == (8 * boundary, 7 * boundary)  # the last stage's one in-flight input is `kept`
    # interleaved, 2 stages a rank (loop placement: rank 0 holds stages 0 and pp): gradients back for both,
    # inputs for the second, all of whose 8 micro-batches are in flight at the end of warm-up (kept)
    v2 = Deployment(card=resolve_card("H100-SXM").card, gpus=8, tp=4, pp=2, virtual_stages=2)
    first, _ = _recv_buffers(model, fw, w, v2, 4, in_flight=8.0)
    assert first == 16 * boundary
