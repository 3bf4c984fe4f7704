"""vLLM V0 before 0.6.5 charges the CUDA context as non-torch memory: checked against vllm#10517's
RTX 3090 log, and the start-up lines gpuwise prints for it against the pool it sizes."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB


def _est(**kw: object) -> dict[str, Any]:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


# vllm#10517 (Llama-3.1-8B, one RTX 3090, V0 0.6.4 'Memory profiling results' line):
# kv_cache_size=3.81GiB and 1952 GPU blocks at max_model_len 20000; 2.89GiB and 23648 tokens at 29000
_LOGGED = ((20000, 3.81, 1952 * 16), (29000, 2.89, 23648))


@pytest.mark.parametrize(("tokens", "pool_gib", "kv_tokens"), _LOGGED)
def test_rtx3090_pool_within_3_percent_of_the_log(tokens: int, pool_gib: float, kv_tokens: int) -> None:
    est = _est(model="llama-3.1-8b", card="rtx-3090", context=tokens, max_num_batched_tokens=tokens,
               engine_version="0.6")
    assert est["memory"]["kv_pool"] / GiB == pytest.approx(pool_gib, rel=0.03)
    assert est["capacity"]["kv_tokens"] == pytest.approx(kv_tokens, rel=0.03)


def test_v0_start_up_lines_agree_with_the_pool() -> None:
    est = _est(model="llama-3.1-8b", card="rtx-3090", context=20000, max_num_batched_tokens=20000,
               engine_version="0.6")
    lines = est["engine_startup"]["lines"]
    blocks = est["capacity"]["kv_tokens"] // 16
    assert lines[0].startswith(f"# GPU blocks: {blocks}, ")
    # 16 tokens x 128 KiB a token (32 layers x 8 KV heads x 128 x 2 x 2 B) a block
    assert blocks == int(est["memory"]["kv_pool"] // (16 * 131072))


def test_v1_start_up_lines_agree_with_the_pool() -> None:
    # vllm#21348's settings (Qwen3-235B-A22B-FP8, TP 4 on H100): the lines print the pool and capacity
    est = _est(model="qwen3-235b-a22b", card="h100-sxm", gpus=4, weights="fp8", context=40960,
               engine_version="0.9")
    lines = est["engine_startup"]["lines"]
    tokens = est["capacity"]["kv_tokens"]
    assert f"Available KV cache memory: {est['memory']['kv_pool'] / GiB:.2f} GiB" in lines
    assert f"GPU KV cache size: {tokens:,} tokens" in lines
    assert f"Maximum concurrency for 40,960 tokens per request: {tokens / 40960:.2f}x" in lines
    # 94 layers x 1 KV head a GPU (4 over TP 4) x 128 x 2 (K, V) x 2 B, in blocks of 16 tokens
    assert tokens == int(est["memory"]["kv_pool"] // (16 * 94 * 128 * 2 * 2)) * 16
