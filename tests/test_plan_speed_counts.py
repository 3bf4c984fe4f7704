"""The fast plan search does less work for the same answer (tests/test_plan_equivalence.py checks
the answer): it covers every configuration but estimates far fewer. Counts, never timings."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.service_plan import PlanRequest, run_plan


@pytest.mark.parametrize(("req", "share"), [
    (PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8), 0.5),  # hourly: pruned and twinned
    (PlanRequest(model="qwen2.5-7b", task="lora"), 0.9),  # per token: every configuration, twins shared
], ids=["serving-70b", "lora-7b"])
def test_every_configuration_is_covered_with_fewer_memory_estimates_than_the_exhaustive_search(
        req: PlanRequest, share: float) -> None:
    fast, full = run_plan(req).result, run_plan(req, exhaustive=True).result
    assert fast.evaluated == full.evaluated > 100
    assert full.estimates[0] == full.evaluated  # the reference estimates each one
    assert fast.estimates[0] < share * full.estimates[0], (fast.estimates, full.estimates)
    assert fast.estimates[1] <= full.estimates[1]


def test_a_repeated_request_estimates_as_much_as_the_first_time() -> None:
    """No answer is cached between requests: the second plan runs the same estimates again."""
    req = PlanRequest(model="llama-3.1-8b", concurrency=8)
    first, second = run_plan(req).result, run_plan(req).result
    assert first.estimates == second.estimates and first.estimates[0] > 0


def _unpriced_speeds(req: PlanRequest) -> tuple[int, list[dict[str, object]]]:
    outcome = run_plan(req)
    return outcome.result.estimates[1], outcome.to_dict()["unpriced"]


def test_a_card_no_price_file_lists_is_listed_by_memory_alone() -> None:
    """Ranked by price, a card without one is never ranked: the search estimates no speed for it,
    and lists it at its fewest GPUs and the first precision tried there (bf16 before fp8), as the
    exhaustive search, which estimates everything, orders it too."""
    req = PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8)
    fast, full = run_plan(req), run_plan(req, exhaustive=True)
    assert fast.to_dict() == full.to_dict()
    unpriced = fast.to_dict()["unpriced"]
    assert len(unpriced) >= 10  # the catalog has many cards no shipped price file lists
    assert "bf16" in {x["weights"] for x in unpriced}  # where bf16 fits on the fewest GPUs, it is named
    assert all(c.speed is not None and c.cost is not None for c in fast.result.plans)
    # fewer speed estimates than cards: those without a price got none (the search used to run 61
    # for the catalog's 47 serving cards, most of them for unpriced ones)
    assert fast.result.estimates[1] < len(unpriced) + len(fast.result.plans)


def test_a_speed_target_makes_unpriced_cards_meet_it_before_they_are_listed() -> None:
    """With --min-throughput, a card without a price is listed only if it meets the target, so
    its speed is estimated; the answer is still the exhaustive search's."""
    base = PlanRequest(model="llama-3.1-70b", context=8192, concurrency=8)
    free, _ = _unpriced_speeds(base)
    req = dataclasses.replace(base, min_throughput=50.0)
    timed, unpriced = _unpriced_speeds(req)
    assert timed > free
    assert run_plan(req).to_dict() == run_plan(req, exhaustive=True).to_dict()
    assert unpriced  # some unpriced card still meets 50 tok/s
