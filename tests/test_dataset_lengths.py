"""--dataset-lengths: the input, the caching-allocator replay (hand-worked cases of the rules in
c10/cuda/CUDACachingAllocator.cpp) and what an estimate does with it."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.errors import InputError
from gpuwise.estimate.caching_pool import CachingPool
from gpuwise.estimate.dataset_lengths import DatasetLengths, batch_lengths, parse_dataset_lengths
from gpuwise.estimate.length_reserve import StepShape, step_reserve
from gpuwise.service import EstimateRequest, estimate_json

MiB = 2**20
STATS = "3234.4±2547.5, min=91, max=19548"  # ms-swift docs/source_en/LLM/Benchmark.md@46922151e


def test_ms_swift_printed_statistics_are_read_as_printed() -> None:
    d = parse_dataset_lengths(STATS)
    assert (d.mean, d.std, d.shortest, d.longest, d.samples) == (3234.4, 2547.5, 91, 19548, None)
    assert parse_dataset_lengths(f"Dataset Token Length: {STATS}, size=4959").samples == 4959
    assert parse_dataset_lengths(d.text()) == d


def test_the_plain_form_names_each_statistic() -> None:
    d = parse_dataset_lengths("mean=3234.4, std=2547.5, min=91, max=19548, samples=1000")
    assert d == DatasetLengths(3234.4, 2547.5, 91, 19548, 1000)


@pytest.mark.parametrize("text", ["abc", "3234±2547, min=5000, max=100", "mean=1,std=0,min=1,max=2,foo=3",
                                  "mean=10,std=50,min=1,max=20", "mean=10,std=1,min=1.5,max=20",
                                  "mean=10,std=1,min=1,max=20,samples=0", "mean=nan,std=1,min=1,max=2"])
def test_bad_statistics_are_refused_in_both_languages(text: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_dataset_lengths(text)
    assert "--dataset-lengths" in caught.value.message.en and "--dataset-lengths" in caught.value.message.zh
    assert caught.value.message.en != caught.value.message.zh


def test_samples_longer_than_max_length_are_dropped_and_batches_padded_to_their_longest() -> None:
    d = DatasetLengths(3234.4, 2547.5, 91, 19548, 4959)
    single = batch_lengths(d, 2048, 1)
    assert max(single) <= 2048 and min(single) >= 91
    assert 0.2 * 4959 < len(single) < 0.6 * 4959  # a log-normal of these moments keeps ~38 % below 2,048
    assert batch_lengths(d, 2048, 1) == single  # one fixed draw: the same every time
    pairs = batch_lengths(d, 2048, 2)
    assert pairs == tuple(max(single[i:i + 2]) for i in range(0, len(single), 2))


def test_a_small_request_takes_a_2_mib_segment_rounded_to_512_bytes() -> None:
    pool = CachingPool()
    block = pool.malloc(1000)
    assert (block.size, pool.allocated, pool.reserved) == (1024, 1024, 2 * MiB)


def test_requests_of_1_to_10_mib_share_a_20_mib_segment() -> None:
    pool = CachingPool()
    pool.malloc(5 * MiB)
    pool.malloc(5 * MiB)
    assert (pool.reserved, pool.allocated, pool.segments) == (20 * MiB, 10 * MiB, 1)


def test_a_rest_of_1_mib_or_less_is_not_split_off_a_large_block() -> None:
    pool = CachingPool()
    pool.free(pool.malloc(30 * MiB))
    block = pool.malloc(29 * MiB + MiB // 2)  # 0.5 MiB left over: the whole block is handed out
    assert (block.size, pool.allocated, pool.reserved) == (30 * MiB, 30 * MiB, 30 * MiB)
    pool.free(block)
    pool.malloc(28 * MiB)  # 2 MiB left over: split, cached
    assert pool.allocated == 28 * MiB and pool.reserved == 30 * MiB


def test_free_neighbours_of_one_segment_merge_but_segments_never_do() -> None:
    pool = CachingPool()
    a, b = pool.malloc(5 * MiB), pool.malloc(5 * MiB)  # one 20 MiB segment
    pool.free(a)
    pool.free(b)
    pool.malloc(20 * MiB)  # the merged segment serves it
    assert pool.reserved == 20 * MiB
    c, d = pool.malloc(12 * MiB), pool.malloc(12 * MiB)  # two segments of 12 MiB
    pool.free(c)
    pool.free(d)
    pool.malloc(24 * MiB)  # neither 12 MiB block is enough: a new segment
    assert pool.reserved == (20 + 12 + 12 + 24) * MiB


def test_the_smallest_cached_block_that_fits_is_taken() -> None:
    pool = CachingPool()
    big, small = pool.malloc(40 * MiB), pool.malloc(24 * MiB)
    pool.free(big)
    pool.free(small)
    block = pool.malloc(22 * MiB)
    assert block.segment == small.segment and pool.reserved == 64 * MiB


LOSS_ONLY = StepShape(layers=1, layer_kept=0.0, head=0.0, recompute=0.0, vocab=32_000, micro_batch=1)


def test_one_fixed_length_reserves_16_bytes_a_logit_for_12_allocated() -> None:
    # Worked by hand: forward cuts logits 2, shifted 2, upcast 4, log-probs 4 (12 at once); the
    # fp32 copy of the outputs (4 s V) is larger than the freed upcast (4 (s-1) V): a new segment,
    # 16 in all; backward's gradients fit in the freed blocks, and every later step reuses them.
    # Each segment is rounded up to 2 MiB; the empty activation blocks (512 B) share one 2 MiB small segment.
    s, v = 1024, 32_000
    run = step_reserve((s, s, s), LOSS_ONLY)

    def segment(nbytes: int) -> int:
        return -(-nbytes // (2 * MiB)) * 2 * MiB

    cut = (2 * s * v, 2 * (s - 1) * v, 4 * (s - 1) * v, 4 * (s - 1) * v, 4 * s * v)
    assert run.peak_reserved == sum(segment(n) for n in cut) + 2 * MiB
    assert run.peak_reserved == pytest.approx(16 * s * v, rel=0.02)
    assert run.peak_allocated == pytest.approx(12 * s * v, rel=0.01)


def test_lengths_that_grow_reserve_more_than_the_longest_alone_and_shrinking_ones_do_not() -> None:
    longest = step_reserve((1024,), LOSS_ONLY)
    growing = step_reserve((512, 768, 1024), LOSS_ONLY)
    shrinking = step_reserve((1024, 768, 512), LOSS_ONLY)
    assert growing.peak_reserved > longest.peak_reserved
    assert shrinking.peak_reserved == longest.peak_reserved
    assert growing.peak_allocated == shrinking.peak_allocated == longest.peak_allocated


QWEN: dict[str, Any] = {"task": "lora", "model": "validation/models/Qwen--Qwen-1_8B-Chat", "card": "a100-80gb-sxm",
                        "framework": "ms-swift-1", "seq_len": 1024, "grad_accum": 16, "grad_ckpt": "full",
                        "lora_rank": 8, "lora_targets": "q,k,v"}


def _slack(result: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = result["memory"]["items"]
    return next(i for i in items if i["name"] == "allocator_slack")


def test_without_the_lengths_the_estimate_says_the_reserve_depends_on_them() -> None:
    why = _slack(estimate_json(EstimateRequest(**QWEN)))["why"]
    assert "--dataset-lengths" in str(why)


def test_the_stated_lengths_are_replayed_and_named() -> None:
    plain = estimate_json(EstimateRequest(**QWEN))
    stated = estimate_json(EstimateRequest(**QWEN, dataset_lengths=f"{STATS}, size=4959"))
    assert "3234.4±2547.5" in str(_slack(stated)["why"])
    assert stated["memory"]["allocated_peak"] == plain["memory"]["allocated_peak"]
    assert stated["memory"]["reserved_peak"] != plain["memory"]["reserved_peak"]


def test_frameworks_that_pack_or_pad_to_a_fixed_length_ignore_the_lengths() -> None:
    hf = {**QWEN, "framework": "hf"}
    assert estimate_json(EstimateRequest(**hf)) == estimate_json(
        EstimateRequest(**hf, dataset_lengths=STATS))


def test_bad_lengths_in_a_request_are_an_input_error() -> None:
    with pytest.raises(InputError):
        estimate_json(EstimateRequest(**QWEN, dataset_lengths="lots"))
