"""What the engines' start-up profiles charge, checked against their own logs: vLLM V0's sorted
dummy sampler, the forward's live tensors, the non-torch memory from 0.6.5, and the weights as
PyTorch's caching allocator holds them (vLLM: allocated, SGLang: reserved)."""

from __future__ import annotations

import pytest

from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB


def _est(**kw: object) -> dict:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


def _item(est: dict, name: str) -> float:
    return sum(i["bytes"] for i in est["memory"]["items"] if i["name"] == name)


def test_vllm_v0_profile_peak_is_the_sorted_sampler_at_256_rows() -> None:
    # PR #10511 (Llama-3-8B, 8,192 tokens, 256 rows): 'PyTorch activation peak memory 1.26GiB'
    est = _est(model="llama-3.1-8b", card="h100-sxm", context=8192, max_num_batched_tokens=8192,
               engine_version="0.6.4")
    sampler = _item(est, "sampler_peak") / GiB
    assert _item(est, "forward_activations") == 0.0
    assert sampler == pytest.approx(256 * 128256 * 39 / GiB + 256 * 4096 * 2 / GiB)
    assert sampler == pytest.approx(1.26, rel=0.06)


def test_vllm_v0_forward_peak_matches_vllm_10517_at_20k_and_29k_tokens() -> None:
    # vllm#10517 (RTX 3090): peak_torch_memory - weights = 17.06 - 14.99 and 17.98 - 14.99 GiB
    for tokens, logged in ((20000, 2.07), (29000, 2.99)):
        est = _est(model="llama-3.1-8b", card="rtx-3090", context=tokens, max_num_batched_tokens=tokens,
                   engine_version="0.6")
        assert _item(est, "forward_activations") / GiB == pytest.approx(logged, rel=0.01)


def test_vllm_0_6_5_no_longer_charges_the_cuda_context() -> None:
    before = _est(model="qwen2.5-7b", card="rtx-4060", weights="int4", context=4096, engine_version="0.6.4")
    after = _est(model="qwen2.5-7b", card="rtx-4060", weights="int4", context=4096, engine_version="0.7")
    assert _item(before, "runtime") / GiB == pytest.approx(0.45)  # V0 0.6.4 logs' median (engines.toml vllm-v0)
    assert _item(after, "runtime") / GiB == pytest.approx(0.03)  # vllm#13882 logs non_torch_memory 0.03GiB


def test_vllm_counts_the_weights_it_allocated_and_sglang_what_it_reserved() -> None:
    ask = {"model": "qwen2.5-32b", "card": "l4", "gpus": 4, "context": 131072}
    vllm = _item(_est(**ask, engine_version="0.7"), "weights") / GiB
    sglang = _item(_est(**ask, engine="sglang", engine_version="0.4.3"), "weights") / GiB
    assert sglang == pytest.approx(15.54, abs=0.01)  # 'Load weight end ... mem usage=15.54 GB'
    assert vllm < sglang  # the split-off rests are reserved, not allocated


def test_trtllm_and_llamacpp_weights_stay_the_tensor_bytes() -> None:
    for engine in ("trtllm", "llamacpp"):
        est = _est(model="llama-3.1-8b", card="h100-sxm", engine=engine)
        assert _item(est, "weights") == pytest.approx(8030261248 * 2, rel=1e-3)


def test_the_start_up_lines_end_with_the_weights_line_each_engine_prints() -> None:
    v1 = _est(model="llama-3.1-8b", card="l40s", engine_version="0.8.5")["engine_startup"]["lines"]
    v0 = _est(model="llama-3.1-8b", card="rtx-3090", context=20000, engine_version="0.6")["engine_startup"]["lines"]
    sg = _est(model="qwen2.5-32b", card="l4", gpus=4, context=131072, engine="sglang",
              engine_version="0.4.3")["engine_startup"]["lines"]
    assert v1[-1] == "Model loading took 14.9888 GiB"  # PR #17122 (0.8.5): 'Model loading took 14.9889 GiB'
    assert v0[-1] == "Loading model weights took 14.9888 GB"  # vllm#10517: '... took 14.9888 GB'
    assert sg[-1] == "Load weight end. mem usage=15.54 GB."  # llms-in-clouds docs/sglang.md@b001c86
