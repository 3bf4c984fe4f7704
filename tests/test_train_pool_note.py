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
