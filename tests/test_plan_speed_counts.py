"""The fast plan search does less work for the same answer (tests/test_plan_equivalence.py checks
the answer): it covers every configuration but estimates far fewer. Counts, never timings."""

from __future__ import annotations

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
