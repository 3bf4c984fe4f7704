"""Weights as PyTorch's caching allocator holds them: segment rounding, split rests, and the
engines' own logs of the weights they loaded."""

from __future__ import annotations

import pytest

from gpuwise.catalog.sources import load_model
from gpuwise.estimate.allocator import allocator_overhead, held_bytes, weight_tensors
from gpuwise.estimate.weights import weight_bytes
from gpuwise.units import GiB, MiB


def _mib(x: float) -> int:
    return int(x * MiB)


def test_a_large_tensor_keeps_its_rounding_when_the_rest_is_too_small_to_split() -> None:
    held = held_bytes((_mib(17.5),))  # a 2 MiB-rounded 18 MiB segment; the 0.5 MiB rest stays in the block
    assert held.reserved == _mib(18) and held.allocated == _mib(18)


def test_a_rest_above_one_mib_is_split_off_and_stays_reserved_unallocated() -> None:
    held = held_bytes((_mib(12.5),))
    assert held.reserved == _mib(14) and held.allocated == _mib(12.5)


def test_mid_size_tensors_share_a_twenty_mib_segment() -> None:
    held = held_bytes((_mib(9), _mib(8)))  # 1-10 MiB requests are cut from 20 MiB segments
    assert held.reserved == _mib(20) and held.allocated == _mib(17)


def test_small_tensors_pack_into_two_mib_segments() -> None:
    held = held_bytes((10_000,) * 100)  # 100 norms of 10 kB, each rounded to 10,240 B
    assert held.reserved == 2 * MiB and held.allocated == 100 * 10_240


def test_the_tensors_of_a_dense_model_sum_to_its_weight_bytes() -> None:
    model = load_model("llama-3.1-8b")
    sizes = weight_tensors(model, 2.0, 1, 0.0)
    assert sizes is not None
    assert sum(sizes) == pytest.approx(weight_bytes(model, "bf16").total, rel=1e-4)


def test_vllm_allocates_llama_3_1_8b_as_it_logs() -> None:
    # vllm#10517 / PR #17122: 'Loading model weights took 14.9888 GB' (GiB): the tensors plus the
    # bf16 rotary cache of 131,072 positions x 128 (RotaryEmbedding: cache.to(dtype))
    model = load_model("llama-3.1-8b")
    loaded = weight_bytes(model, "bf16").total + allocator_overhead(model, 2.0, 1, 2.0, False)
    assert loaded / GiB == pytest.approx(14.9888, abs=0.0005)


def test_vllm_allocates_a_qwen2_5_14b_rank_as_vllm_13061_logs() -> None:
    # vllm#13061 (DeepSeek-R1-Distill-Qwen-14B, TP 2): 'Loading model weights took 13.9476 GB';
    # 13.756 GiB of tensors, the o_proj, gate_up and down blocks rounded to 2 MiB
    model = load_model("qwen2.5-14b")
    loaded = weight_bytes(model, "bf16").total / 2 + allocator_overhead(model, 2.0, 2, 2.0, False)
    assert loaded / GiB == pytest.approx(13.9476, abs=0.005)


def test_sglang_reserves_more_than_it_allocates_for_qwen2_5_32b_at_tp4() -> None:
    # didier-durand/llms-in-clouds docs/sglang.md@b001c86 (SGLang 0.4.3.post4, QwQ-32B, 4x L4):
    # 'Load weight end ... mem usage=15.54 GB', 15.26 GiB of tensors
    model = load_model("qwen2.5-32b")
    tensors = weight_bytes(model, "bf16").total / 4
    reserved = tensors + allocator_overhead(model, 2.0, 4, 4.0, True)
    allocated = tensors + allocator_overhead(model, 2.0, 4, 4.0, False)
    assert allocated < reserved
    assert reserved / GiB == pytest.approx(15.54, rel=0.01)


def test_layouts_it_does_not_know_add_nothing() -> None:
    model = load_model("deepseek-v3")  # MLA
    assert weight_tensors(model, 1.0, 8, 2.0) is None
    assert allocator_overhead(model, 1.0, 8, 2.0, True) == 0.0
