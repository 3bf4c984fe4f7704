"""Training memory's own warnings reach the estimate: the caching pool counted at the card's size
(it would grow past it; PyTorch frees cached blocks before an allocation fails) and paged 8-bit
AdamW's states in unified memory."""

from __future__ import annotations

from gpuwise.service import EstimateRequest, estimate_json


def _estimate(**kw: object) -> dict[str, object]:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


def test_a_pool_capped_at_the_card_says_so_in_both_languages() -> None:
    out = _estimate(model="qwen2.5-7b", card="rtx-4090", task="lora")
    memory = out["memory"]
    assert isinstance(memory, dict)
    assert memory["reserved_peak"] > memory["allocated_peak"]
    assert any("grow past the card" in w for w in out["warnings"])  # type: ignore[union-attr]
    assert any("超过显卡容量" in w for w in out["warnings_zh"])  # type: ignore[union-attr]


def test_a_pool_with_room_to_spare_is_not_flagged() -> None:
    out = _estimate(model="qwen2.5-7b", card="h100-sxm", task="lora")
    assert not any("grow past the card" in w for w in out["warnings"])  # type: ignore[union-attr]


def test_paged_adamw_says_where_its_states_live() -> None:
    out = _estimate(model="qwen2.5-7b", card="rtx-4090", task="lora", optimizer="paged-adamw8bit")
    assert any("unified memory" in w for w in out["warnings"])  # type: ignore[union-attr]


def test_a_pool_at_the_card_is_judged_by_its_tensors() -> None:
    """The pool cannot pass the card, so the band's top stops there unless the tensors' own band
    (allocated peak + the memory outside the pool) passes it: micro-batch 1 fits, 2 is tight."""
    one = _estimate(model="qwen2.5-7b", card="rtx-4090", task="lora")
    mem, usable = one["memory"], float(one["usable_bytes"])  # type: ignore[arg-type]
    assert isinstance(mem, dict)
    tensors = mem["allocated_peak"] + mem["device_total"] - mem["reserved_peak"]
    assert one["tensor_headroom_bytes"] == round(usable - tensors)
    assert one["fit"] == "fits"
    assert one["ranges"]["memory.required"]["high"] <= usable * (1 + 1e-5)  # type: ignore[index]
    two = _estimate(model="qwen2.5-7b", card="rtx-4090", task="lora", micro_batch=2)
    assert two["fit"] == "tight" and two["tensor_headroom_bytes"] is not None
    assert two["ranges"]["memory.required"]["high"] > usable  # type: ignore[index]
    roomy = _estimate(model="qwen2.5-7b", card="h100-sxm", task="lora")
    assert roomy["tensor_headroom_bytes"] is None


def test_the_verdict_line_gives_the_tensors_headroom_when_the_pool_fills_the_card() -> None:
    from gpuwise.cli.estimate_view import _verdict_line
    from gpuwise.units import GiB

    for mb, word in ((1, "FITS"), (2, "TIGHT")):
        est = _estimate(model="qwen2.5-7b", card="rtx-4090", task="lora", micro_batch=mb)
        line = _verdict_line(est, zh=False)
        assert line.find(word) >= 0 and f"{est['tensor_headroom_bytes'] / GiB:.2f} GiB" in line  # type: ignore[operator]
        assert "0.00 GiB" not in line
