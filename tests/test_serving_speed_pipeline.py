"""Serving under pipeline parallel (estimate/speed.py infer_speed, benchmark_run): the engine splits the
running batch into pp micro-batches, each stage passes one at a time, and a token of every sequence
takes pp stage passes of its micro-batch. So the total rate can never exceed what the users see (the
answer that said 522.6 tok/s for 16 users at 83.9 ms a token contradicted itself), and pipelining
a memory-bound decode buys capacity, not tokens per second."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.estimate.speed import micro_batch
from gpuwise.service import EstimateRequest, estimate_json


def _speed(**kw: Any) -> dict[str, Any]:
    speed: dict[str, Any] = estimate_json(EstimateRequest(**kw))["speed"]
    return speed


@pytest.mark.parametrize("kw", [
    # vllm#15322's deployment: DeepSeek-R1 on three 8-GPU L20 nodes, PP 3 x TP 8, 16 users
    {"model": "deepseek-r1", "card": "l20", "gpus": 8, "nodes": 3, "tp": 8, "pp": 3, "context": 4096,
     "output_tokens": 1024, "concurrency": 16, "engine_version": "0.8"},
    {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 4, "tp": 2, "pp": 2, "context": 2048,
     "concurrency": 64},
    {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 4, "tp": 2, "pp": 2, "context": 2048,
     "concurrency": 1},
])
def test_the_total_never_exceeds_what_the_users_see(kw: dict[str, Any]) -> None:
    sp = _speed(**kw)
    users = kw["concurrency"]
    assert sp["throughput_tokens_per_s"] <= users * sp["decode_tokens_per_s"] * (1 + 1e-6)


def test_pipelining_a_memory_bound_decode_does_not_multiply_its_rate() -> None:
    """Llama-3.1-70B bf16 on 4 H100 at 8 users: PP 2 x TP 2 reads each stage's half of the weights per
    micro-batch of 4, so it gives about what TP 2 would per half-batch, not pp times more."""
    base = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 4, "context": 2048, "output_tokens": 256,
            "concurrency": 8}
    pp2 = _speed(**base, tp=2, pp=2)
    tp4 = _speed(**base, tp=4, pp=1)
    assert pp2["throughput_tokens_per_s"] < tp4["throughput_tokens_per_s"]
    assert pp2["tpot_s"] > tp4["tpot_s"]


def test_micro_batches() -> None:
    assert [micro_batch(b, 3) for b in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 6]
    assert micro_batch(16, 1) == 16
