"""vLLM's hybrid allocator for attention + Gated-DeltaNet models (Qwen3-Next, Qwen3.5/3.6):
one page size for every layer, layers grouped by the repeating pattern, one block pool; the
recurrent state at mamba_ssm_dtype. Checked on a vLLM v0.17.0 start-up log whose numbers a blog
post traces through the source ('vLLM 로그의 KV cache size 는 용량이 아니다', 2026-08-30):
40 layers (10 full), 2 KV heads of 256, fp8 KV, 6.08 GiB of KV -> block 2,096, 304 blocks,
'GPU KV cache size: 159,296 tokens', 'Maximum concurrency for 65,536 tokens per request: 8.00x'."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.catalog.arch import LinearAttention
from gpuwise.catalog.engines import engine_rules
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.kv_pool import _hybrid_capacity, hybrid_pages
from gpuwise.estimate.workload import Workload
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB


def _blog_model():  # type: ignore[no-untyped-def]
    """The log's model: Qwen3-Next's layer shapes (2 KV heads x 256; 16 key / 32 value heads of
    128, conv 4) on 40 layers, linear x 3 + full x 1, recurrent state in float32."""
    base = load_model("qwen3-next-80b-a3b")
    assert base.linear is not None
    kinds = tuple("full" if (i + 1) % 4 == 0 else "linear" for i in range(40))
    return dataclasses.replace(base, num_layers=40, layer_kinds=kinds,
                               linear=dataclasses.replace(base.linear, ssm_dtype_bytes=4.0))


def test_the_published_v0_17_log_is_reproduced() -> None:
    model = _blog_model()  # the blog's run had prefix caching on: mamba_cache_mode 'align', 2 pages
    rules = dataclasses.replace(engine_rules("vllm", "0.17"), state_blocks_per_request=2)
    pages = hybrid_pages(model, 1.0, 1.0, rules)
    assert pages is not None
    assert pages.block == 2096  # 'Setting attention block size to 2096 tokens'
    assert (pages.group_size, pages.attention_groups, pages.state_groups) == (10, 1, 3)
    pool = 6.08 * GiB
    assert pages.blocks(pool) == 304
    cap = _hybrid_capacity(model, Workload(context=65536), pages, pool)
    assert cap.kv_tokens == 159_296
    assert cap.max_concurrency == pytest.approx(8.00, abs=0.005)


def test_the_recurrent_state_is_counted_at_mamba_ssm_dtype() -> None:
    lin = LinearAttention(num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128,
                          conv_kernel=4)
    conv = (2 * 16 * 128 + 32 * 128) * 3
    recurrent = 32 * 128 * 128
    assert lin.state_bytes(2.0) == conv * 2 + recurrent * 2
    assert dataclasses.replace(lin, ssm_dtype_bytes=4.0).state_bytes(2.0) == conv * 2 + recurrent * 4
    qwen35 = load_model("qwen3.5-27b")  # config.json: "mamba_ssm_dtype": "float32"
    assert qwen35.linear is not None and qwen35.linear.ssm_dtype_bytes == 4.0


def test_the_log_line_counts_far_fewer_tokens_than_the_attention_bytes_imply() -> None:
    """Before the report changed (v0.19) the log splits the blocks over four groups; the newest
    rules print max concurrency x context. Both lines come out of the estimate as vLLM prints them."""
    model = load_model("qwen3.5-27b")
    for version in ("0.19", ""):
        est = estimate_json(EstimateRequest(model="qwen3.5-27b", card="h100-sxm", context=65536,
                                            engine_version=version))
        plain = est["memory"]["kv_pool"] / model.kv_bytes_per_token(2.0)
        conc = est["capacity"]["max_concurrency"]
        if version:
            assert est["capacity"]["kv_tokens"] < plain / 3  # four groups share one pool
        else:
            assert est["capacity"]["kv_tokens"] == pytest.approx(conc * 65536, rel=0.01)
        lines = est["engine_startup"]["lines"]
        assert f"Maximum concurrency for 65,536 tokens per request: {conc:.2f}x" in lines
        assert f"GPU KV cache size: {est['capacity']['kv_tokens']:,} tokens" in lines


def test_engines_without_the_shared_page_rule_keep_their_own_layout() -> None:
    model = load_model("qwen3.5-27b")
    assert hybrid_pages(model, 2.0, 1.0, engine_rules("sglang")) is None
    assert hybrid_pages(load_model("llama-3.1-8b"), 2.0, 1.0, engine_rules("vllm")) is None


def test_the_v0_24_log_counts_concurrency_times_the_context() -> None:
    """club-3090#612 (v0.24.0, the same 40-layer shapes, fp8 KV, prefix caching on, 5.98 GiB):
    'GPU KV cache size: 567,978 tokens', 'Maximum concurrency for 131,072 tokens per request: 4.33x'."""
    rules = dataclasses.replace(engine_rules("vllm", "0.24"), state_blocks_per_request=2)
    pages = hybrid_pages(_blog_model(), 1.0, 1.0, rules)
    assert pages is not None and pages.block == 2096 and pages.blocks(5.98 * GiB) == 299
    cap = _hybrid_capacity(_blog_model(), Workload(context=131072), pages, 5.98 * GiB)
    assert cap.kv_tokens == 567_978
    assert cap.max_concurrency == pytest.approx(4.33, abs=0.005)


def test_the_v0_19_default_holds_one_state_page_per_request() -> None:
    """vllm#40691 (v0.19.0, Qwen3.5-27B, bf16 KV, 32,768 tokens, prefix caching off): 290,864
    tokens and 33.04x are 1,487 blocks of 784: 1,487 // 4 x 784 and 1,487 / (42 + 3)."""
    model = load_model("qwen3.5-27b")
    pages = hybrid_pages(model, 2.0, 1.0, engine_rules("vllm", "0.19.0"))
    assert pages is not None and pages.block == 784 and pages.state_blocks == 1
    assert pages.blocks_per_request(32768) == 45
    pool = 1487.5 * pages.page * pages.group_size
    cap = _hybrid_capacity(model, Workload(context=32768, concurrency=16), pages, pool)
    assert (cap.kv_tokens, round(cap.max_concurrency, 2)) == (290_864, 33.04)
