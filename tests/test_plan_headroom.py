"""Headroom in the ranking: a configuration that fits at the estimate but not at the top of its
80 % memory range ("tight") never ranks above one that fits at the top, and every place that
ranks it lower says why, in the objective's unit.

The laptop case prices the cards in memory (no price file), so its inputs are fixed here.
"""

from __future__ import annotations

import functools

import pytest

from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.prices import PriceOffer
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.api import CostOptions
from gpuwise.estimate.workload import Workload
from gpuwise.plan.build import candidate_ranges
from gpuwise.plan.fast import search
from gpuwise.plan.rank import PlanResult, objective_for, plan, search_order
from gpuwise.plan.search import Targets
from gpuwise.service_plan import PlanRequest, _plan_cards, plan_json, plan_request_parts, run_plan


def offer(card: str, per_hour: float) -> PriceOffer:
    return PriceOffer(provider="test", card=card, currency="CNY", billing="hourly", unit="gpu_hour",
                      low=per_hour, high=per_hour, as_of="2026-11", source="test row")


def _laptop_or_l4(context: int, top: int) -> PlanResult:
    catalog = load_cards()
    opts = CostOptions(offers=(offer("rtx-4050-laptop", 0.5), offer("l4", 3.0)))
    cards = [card for card in catalog if card.id in ("rtx-4050-laptop", "l4")]
    return plan(load_model("qwen2.5-3b"), Workload(context=context), cards, Targets(), opts, top=top)


@functools.cache
def _tight_context() -> int:
    """The shortest context at which the laptop fits at the estimate but not at the top of its
    band. Searched, not written down: the band's width comes from the fitted intervals, which
    move with every refit of the validation table."""
    for context in range(1024, 16384, 32):
        laptop = [c for c in _laptop_or_l4(context, top=2).plans if c.deployment.card.id == "rtx-4050-laptop"]
        if not laptop:
            break  # past the tight stretch: it no longer fits at the estimate either
        if laptop[0].tight:
            return context
    pytest.fail("no context makes the laptop tight: its memory band has no width above the estimate")


def laptop_or_l4(top: int) -> PlanResult:
    """A 3B model on a 6 GB laptop GPU (tight, 0.50 CNY/h) or on an L4 (room to spare, 3.00 CNY/h)."""
    return _laptop_or_l4(_tight_context(), top)


def test_the_cheap_tight_laptop_ranks_below_the_dearer_l4_and_says_why() -> None:
    r = laptop_or_l4(top=2)
    assert [(c.deployment.card.id, c.tight) for c in r.plans] == [("l4", False), ("rtx-4050-laptop", True)]
    assert "ranks #2: it fits only at the estimate, not at the top of its 80 % memory range" in r.reasons[1].en
    assert "仅按估算放得下" in r.reasons[1].zh


def test_a_rejected_tight_card_is_never_said_to_cost_more_when_it_is_cheaper() -> None:
    r = laptop_or_l4(top=1)
    (why,) = [x for x in r.rejected if x.card == "rtx-4050-laptop"]
    (text,) = why.reasons
    assert "0.50 CNY/h vs 3.00 CNY/h for plan #1" in text.en and "costs more" not in text.en
    assert "not at the top of its 80 % memory range" in text.en
    assert "按显存 80% 区间上限放不下" in why.reasons[0].zh


@pytest.mark.parametrize("req", [
    PlanRequest(model="qwen2.5-7b", task="lora", top=10),
    PlanRequest(model="qwen2.5-7b", task="lora", cards="rtx-4090,rtx-5090,a100-40gb-sxm", top=10),
    PlanRequest(model="qwen2.5-32b", allow_offload=True, cards="rtx-4090,l40s,a100-40gb-sxm", top=10),
], ids=["lora-whole-catalog", "lora-three-cards", "offload-32b"])
def test_no_tight_plan_ranks_above_one_that_fits_at_the_top_of_its_range(req: PlanRequest) -> None:
    plans = plan_json(req)["plans"]
    assert plans
    tight = [p["memory"]["fit"] == "tight" for p in plans]
    assert tight == sorted(tight), [(p["card"], p["gpus"], p["memory"]["fit"]) for p in plans]
    for p in plans:
        assert (p["memory"]["required_high"] > p["memory"]["usable_bytes"]) == (p["memory"]["fit"] == "tight")


PASSED_OVER = [PlanRequest(model="qwen2.5-7b", task="lora"),
               PlanRequest(model="qwen2.5-7b", task="lora", cards="rtx-4090"),
               PlanRequest(model="llama-3.1-8b", task="lora", cards="rtx-4090,rtx-5090,a100-40gb-sxm"),
               PlanRequest(model="qwen2.5-32b", allow_offload=True, cards="rtx-4090,l40s")]


def test_plan_1_names_the_tight_variant_of_its_card_that_would_otherwise_have_won() -> None:
    """E.g. a LoRA without activation checkpointing that fits only at the estimate: plan #1 is the
    variant with headroom, and its reason names the tight one with its memory range."""
    named = 0
    for req in PASSED_OVER:
        model, w, t, opts = plan_request_parts(req)
        cards, excluded = _plan_cards(req)
        result = plan(model, w, cards, t, opts, excluded=excluded)
        order = search_order(result.objective, t.stage, opts)
        by_card, _, _ = search(model, w, [c for c in cards if c.id not in excluded], t, opts, order)
        best = result.plans[0]
        assert not best.tight or not any(c.ok and not c.tight for x in by_card.values() for c in x)
        tight = next((c for c in by_card[best.deployment.card.id] if c.ok and c.tight), None)
        untiered = [k[:1] + k[2:] for k in map(order.key, (tight, best))] if tight else []
        if tight is not None and untiered[0] < untiered[1]:
            named += 1
            assert "preferred to" in result.reasons[0].en and "fits only at the estimate" in result.reasons[0].en
            assert "优先于" in result.reasons[0].zh
        else:
            assert "preferred to" not in result.reasons[0].en
    assert named, "no request here had a tight variant that would have won: pick others"


@pytest.mark.parametrize("req", [
    PlanRequest(model="llama-3.1-8b", context=8192, concurrency=8, cards="h100-sxm,rtx-4090,l40s,t4"),
    PlanRequest(model="mixtral-8x7b", engine="sglang", cards="h100-sxm,a100-80gb-sxm"),
    PlanRequest(model="qwen2.5-7b", task="lora", cards="rtx-4090,a100-40gb-sxm"),
    PlanRequest(model="llama-3.1-8b", task="full", cards="h100-sxm,a100-80gb-sxm"),
    PlanRequest(model="qwen2.5-32b", task="qlora", cards="rtx-4090,l40s"),
], ids=["vllm", "sglang", "lora", "full", "qlora"])
def test_the_ranking_reads_the_same_memory_range_as_the_plan_it_writes(req: PlanRequest) -> None:
    """Candidate.required_high (the ranking's tier) is the band `gpuwise estimate` and the plan
    JSON give memory.required, for every configuration tried."""
    model, w, t, opts = plan_request_parts(req)
    cards, _ = _plan_cards(req)
    order = search_order(objective_for(t.objective, t.stage, w, opts), t.stage, opts)
    by_card, _, _ = search(model, w, cards, t, opts, order)
    tried = [c for x in by_card.values() for c in x]
    assert tried
    for c in tried:
        band = candidate_ranges(c, model).get("memory.required")
        assert c.required_high == (band.high if band else None)


def test_a_card_names_its_tight_variant_with_fewer_gpus() -> None:
    """A 7B LoRA at micro-batch 2 on one RTX 4090 fits only at the estimate: LLaMA-Factory's caching
    pool is counted at the card, and the tensors' own band (allocated peak and context, 23.0 GiB)
    reaches past it. So the card's best is two 4090s, and its line says what one 4090 needs and why
    it ranks lower, in both languages, never leaving "does one do?" unanswered. (At micro-batch 1
    the tensors leave 4.6 GiB and one 4090 is a plan that fits: tests/test_plan.py.)"""
    out = run_plan(PlanRequest(model="qwen2.5-7b", task="lora", micro_batch=2)).to_dict()
    row = next(r for r in out["plans"] + out["rejected"] if r["card"] == "rtx-4090")
    assert row["gpus"] == 2
    said, said_zh = " ".join(row["reasons"]), " ".join(row["reasons_zh"])
    assert "RTX 4090 x1" in said and "fits only at the estimate" in said and "24.4 GiB of 23.6" in said
    assert "RTX 4090 x1" in said_zh and "仅按估算放得下" in said_zh