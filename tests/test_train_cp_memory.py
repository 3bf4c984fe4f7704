"""Context parallelism's memory: torch's all-gather ring attention backward replayed under MemTracker.

torch.distributed.tensor.experimental context_parallel runs SDPA's backward as
_templated_ring_attention_backward; with a fake process group of cp ranks its collectives allocate
their real outputs (the all-gathered K/V, the permuted dK/dV), so the function's own allocation
sequence can be measured on CPU. The SDPA backward op is a stand-in that returns its three bf16
gradients, as flash attention's does. gpuwise's cp_backward_transient (allgather) must match it.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_cp_memory.py -s
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.activations import cp_backward_transient
from gpuwise.estimate.workload import Workload

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
TOLERANCE = 0.05
SEQ, HEAD_DIM = 2048, 64


def _replayed(cp: int, rank: int, heads: int, kv_heads: int) -> float:
    """Peak bytes the backward adds over its inputs, per local token."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.tensor.experimental._context_parallel import _attention as cp_attention
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=cp)
    try:
        local = SEQ // cp
        q = torch.randn(1, heads, local, HEAD_DIM, dtype=torch.bfloat16)
        k, v = (torch.randn(1, kv_heads, local, HEAD_DIM, dtype=torch.bfloat16) for _ in range(2))
        out, dout = torch.randn_like(q), torch.randn_like(q)
        lse = torch.randn(1, heads, local, dtype=torch.float32)

        def sdpa_backward(query: Any, key: Any, value: Any, **_: Any) -> tuple[Any, Any, Any]:
            return torch.empty_like(query), torch.empty_like(key), torch.empty_like(value)

        cpu = torch.device("cpu")
        tracker = MemTracker()
        tracker.track_external(q, k, v, out, dout, lse)
        with tracker as mt:
            before = mt.get_tracker_snapshot("current")[cpu]["Total"]
            cp_attention._templated_ring_attention_backward(dist.group.WORLD, 2, sdpa_backward, dout, "grad_out",
                                                            q, k, v, out, lse, is_causal=True)
            peak = mt.get_tracker_snapshot("peak")[cpu]["Total"]
        return float(peak - before) / local
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("cp", [2, 4, 8])
@pytest.mark.parametrize("heads, kv_heads", [(32, 8), (8, 1), (32, 16), (8, 8)])
def test_the_all_gather_ring_backward_adds_what_torch_allocates(cp: int, heads: int, kv_heads: int) -> None:
    arch = ModelArch(name="tiny-cp", model_type="llama", hidden_size=heads * HEAD_DIM, num_layers=1,
                     num_heads=heads, num_kv_heads=kv_heads, head_dim=HEAD_DIM, intermediate_size=64,
                     vocab_size=256, max_context=SEQ)
    local = Workload(task="pretrain", seq_len=SEQ // cp)
    modelled = cp_backward_transient(arch, local, cp, "allgather") / local.seq_len
    measured = max(_replayed(cp, rank, heads, kv_heads) for rank in (0, cp - 1))  # rank 0 peaks highest
    assert modelled == pytest.approx(measured, rel=TOLERANCE)


def test_the_gathered_keys_and_values_grow_with_the_whole_sequence() -> None:
    """At a fixed share per rank, only the all-gathered K/V grow with cp: 4 bytes x kv_dim a token more per rank."""
    heads, kv_heads = 32, 8
    two, four = _replayed(2, 0, heads, kv_heads), _replayed(4, 0, heads, kv_heads)
    assert four - two == pytest.approx(4 * kv_heads * HEAD_DIM * 2, rel=0.01)


@pytest.mark.parametrize("cp", [2, 4])
def test_keys_and_values_repeated_before_sdpa_are_gathered_at_the_query_width(cp: int) -> None:
    """torchtitan 9dec370 repeats K/V to every query head before SDPA (frameworks.toml sdpa_repeats_kv), so
    torch's context_parallel is handed, gathers and accumulates n_heads-wide K/V: replayed with K/V at 32
    heads, the GQA model (8 KV heads) under torchtitan-2024-12 must match it."""
    arch = ModelArch(name="tiny-cp", model_type="llama", hidden_size=32 * HEAD_DIM, num_layers=1, num_heads=32,
                     num_kv_heads=8, head_dim=HEAD_DIM, intermediate_size=64, vocab_size=256, max_context=SEQ)
    local = Workload(task="pretrain", framework="torchtitan-2024-12", seq_len=SEQ // cp)
    modelled = cp_backward_transient(arch, local, cp, "allgather") / local.seq_len
    measured = max(_replayed(cp, rank, 32, 32) for rank in (0, cp - 1))
    assert modelled == pytest.approx(measured, rel=TOLERANCE)
    plain = cp_backward_transient(arch, replace(local, framework="torchtitan"), cp, "allgather") / local.seq_len
    assert plain < 0.8 * measured
