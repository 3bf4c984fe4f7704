"""The typed plan: one objective in every reason, unpriced cards apart, plans that `estimate`
reproduces, replicas, a fixed global batch, and the plan file round trip.

Prices come from in-memory offers (no price file is read), so the ranking's inputs are fixed here.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.prices import PriceOffer
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.api import CostOptions
from gpuwise.estimate.workload import Workload
from gpuwise.plan.load import plan_from_dict, plan_to_dict
from gpuwise.plan.rank import plan
from gpuwise.plan.search import Targets
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.service_plan import PlanRequest, run_plan


def offer(card: str, per_hour: float) -> PriceOffer:
    return PriceOffer(provider="test", card=card, currency="CNY", billing="hourly", unit="gpu_hour",
                      low=per_hour, high=per_hour, as_of="2026-11", source="test row")


OFFERS = (offer("rtx-4090", 2.0), offer("rtx-5090", 4.0), offer("l40s", 5.0), offer("a100-80gb-sxm", 8.0),
          offer("h100-sxm", 18.0))
CARDS = ("rtx-4090", "rtx-5090", "l40s", "a100-80gb-sxm", "h100-sxm", "gb200-gpu", "h20")


def cards() -> list:  # type: ignore[type-arg]
    catalog = load_cards()
    return [catalog.get(c) for c in CARDS]


def _plan(model: str, w: Workload, t: Targets | None = None, top: int = 2):  # type: ignore[no-untyped-def]
    return plan(load_model(model), w, cards(), t or Targets(), CostOptions(offers=OFFERS), top=top)


_VS = re.compile(r"([\d,.]+) (CNY/\w+|tok/s) vs ([\d,.]+) (CNY/\w+|tok/s)")


@pytest.mark.parametrize(("model", "w", "unit"), [
    ("qwen2.5-7b", Workload(task="lora"), "CNY/Mtok"),
    ("qwen3-8b", Workload(context=8192, concurrency=8), "CNY/h"),
])
def test_every_costs_more_reason_speaks_the_objectives_unit_with_the_larger_number_for_the_loser(
        model: str, w: Workload, unit: str) -> None:
    r = _plan(model, w, top=1)
    assert r.objective.short in unit
    compared = [m for x in r.rejected for t in x.reasons if (m := _VS.search(t.en))]
    assert compared, [t.en for x in r.rejected for t in x.reasons]
    for m in compared:
        assert m.group(2) == m.group(4) == unit
        if "costs more" in m.string:
            assert float(m.group(1).replace(",", "")) > float(m.group(3).replace(",", ""))


def test_an_unpriced_card_is_never_ranked_but_listed_as_fits_no_price() -> None:
    for stage in (None, "validate", "scale"):
        r = _plan("qwen2.5-7b", Workload(task="lora"), Targets(stage=stage), top=5)
        ranked = {c.deployment.card.id for c in r.plans}
        assert not ranked & {"gb200-gpu", "h20"}, stage
        assert {"gb200-gpu", "h20"} <= {x.card for x in r.unpriced} | {x.card for x in r.rejected}
        assert all(c.cost is not None for c in r.plans)


def test_meets_every_target_is_said_only_when_targets_were_given() -> None:
    plain = _plan("qwen3-8b", Workload(context=8192))
    assert "no targets were set" in plain.reasons[0].en and "every target" not in plain.reasons[0].en
    aimed = _plan("qwen3-8b", Workload(context=8192), Targets(max_ttft=5.0))
    assert "every target (--max-ttft)" in aimed.reasons[0].en


def test_the_validate_stage_prefers_one_gpu_and_the_scale_stage_needs_linked_multi_gpu() -> None:
    v = _plan("qwen2.5-7b", Workload(task="lora"), Targets(stage="validate"))
    assert v.plans[0].gpus_total == 1
    s = _plan("qwen2.5-7b", Workload(task="lora"), Targets(stage="scale"))
    for c in s.plans:
        assert c.gpus_total >= 2 and c.deployment.card.ecc and c.deployment.card.linked(c.deployment.gpus)


def test_default_plans_keep_16_bit_or_fp8_and_int4_needs_asking() -> None:
    r = run_plan(PlanRequest(model="qwen2.5-7b", context=8192, top=10))
    assert {p.weights for p in r.plans} <= {"bf16", "fp8"}
    asked = run_plan(PlanRequest(model="qwen2.5-7b", context=8192, weights="any", top=50))
    quantised = [p for p in asked.plans if p.weights == "int4"]
    assert all(p.quality is not None and p.quality_sources for p in quantised)


def test_a_fixed_global_batch_is_kept_while_micro_batch_and_accumulation_trade() -> None:
    r = run_plan(PlanRequest(model="qwen2.5-3b", task="lora", micro_batch=4, global_batch=16, top=5))
    assert r.plans
    for p in r.plans:
        assert p.micro_batch * p.grad_accum * p.dp == 16 == p.global_batch
        assert p.micro_batch <= 4


def test_replicas_multiply_throughput_and_cost_but_not_memory_per_gpu() -> None:
    base = {"model": "llama-3.1-8b", "card": "h100-sxm", "context": 8192, "concurrency": 32}
    one = estimate_json(EstimateRequest(**base))  # type: ignore[arg-type]
    two = estimate_json(EstimateRequest(**base, replicas=2))  # type: ignore[arg-type]
    half = estimate_json(EstimateRequest(**{**base, "concurrency": 16}))  # type: ignore[arg-type]
    assert two["memory"]["required"] == half["memory"]["required"] < one["memory"]["required"]
    assert two["speed"]["throughput_tokens_per_s"] == pytest.approx(2 * half["speed"]["throughput_tokens_per_s"])
    assert two["cost"]["per_hour"] == pytest.approx(2 * one["cost"]["per_hour"])
    assert two["gpus_total"] == 2


def test_a_plan_survives_its_own_json_unchanged() -> None:
    for req in (PlanRequest(model="llama-3.1-8b", context=8192, concurrency=16),
                PlanRequest(model="qwen2.5-7b", task="lora", global_batch=8)):
        p = run_plan(req).plans[0]
        saved = plan_to_dict(p)
        back = plan_from_dict(saved)
        assert plan_to_dict(back) == saved
        assert (back.gpus_total, back.tp, back.replicas, back.deploy_model, back.weights) == \
            (p.gpus_total, p.tp, p.replicas, p.deploy_model, p.weights)


_MODELS = ("qwen3-0.6b", "qwen2.5-7b", "llama-3.1-8b", "qwen3-32b", "gemma-2-9b")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(_MODELS), task=st.sampled_from(("infer", "infer", "lora", "full")),
       context=st.sampled_from((1024, 4096, 8192)), concurrency=st.integers(1, 48),
       weights=st.sampled_from(("auto", "any")))
def test_a_ranked_plan_re_estimated_with_its_own_settings_gives_the_same_verdict_and_numbers(
        model: str, task: str, context: int, concurrency: int, weights: str) -> None:
    req = PlanRequest(model=model, task=task, context=context, concurrency=concurrency,
                      weights=weights if task == "infer" else "auto", top=1)
    plans = run_plan(req).plans
    if not plans:
        return
    p = plans[0]
    est = estimate_json(EstimateRequest(
        model=model, card=p.card, gpus=p.gpus_total // p.replicas // p.nodes if task == "infer" else p.gpus_per_node,
        nodes=1 if task == "infer" else p.nodes, replicas=p.replicas, task=task, weights=p.weights,
        context=context, concurrency=concurrency, tp=p.tp if task == "infer" else 0, zero=p.zero,
        offload=p.offload, micro_batch=p.micro_batch, grad_accum=p.grad_accum, grad_ckpt=p.grad_ckpt))
    assert est["fits"]
    assert p.breakdown is not None and est["memory"]["required"] == round(p.breakdown.required)
    rate = "throughput_tokens_per_s" if task == "infer" else "tokens_per_s"
    assert est["speed"][rate] == pytest.approx(p.speed.to_dict()[rate], rel=1e-6)  # type: ignore[union-attr]
    assert est["cost"]["per_hour"] == pytest.approx(p.cost.per_hour)  # type: ignore[union-attr]
    # the same 80 % bands and the same fit verdict as `gpuwise estimate`
    saved = plan_to_dict(p)
    for path, band in saved["ranges"].items():
        assert est["ranges"][path]["low"] == pytest.approx(band["low"], rel=1e-5), path
        assert est["ranges"][path]["high"] == pytest.approx(band["high"], rel=1e-5), path
    assert saved["memory"]["fit"] == est["fit"]
