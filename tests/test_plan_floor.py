"""The plan search leans on two facts of the serving memory estimate (plan/fast.py):

- `memory_infer.serving_part` reads nothing of the card, so one part finished on any card
  (`on_card`) is that card's estimate;
- `memory_infer.shortfall_floor` never exceeds what the estimate is short of its card, so a
  configuration with a floor above 0 does not fit and is set aside unestimated.

These tests hold the estimator to both over every catalog card, several models (dense, MoE,
MLA, hybrid linear attention) and every engine, so a change to the estimate that breaks either
fails here rather than changing a plan.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.sources import load_model
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.memory_infer import infer_memory, on_card, serving_part, shortfall_floor
from gpuwise.estimate.workload import Deployment, Workload

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "qwen3-next-80b-a3b", "deepseek-v3")
CASES = [(Workload(context=4096, concurrency=8), {"engine": "vllm", "gpus": 1}),
         (Workload(context=32768, concurrency=2, weights="fp8"), {"engine": "vllm", "gpus": 2}),
         (Workload(context=8192, concurrency=4), {"engine": "vllm", "gpus": 8, "gpu_memory_utilization": 0.6}),
         (Workload(context=8192, concurrency=4), {"engine": "vllm", "gpus": 1, "engine_version": "0.6.0"}),
         (Workload(context=8192, concurrency=4), {"engine": "sglang", "gpus": 2}),
         (Workload(context=8192, concurrency=64), {"engine": "sglang", "gpus": 4, "mem_fraction": 0.5}),
         (Workload(context=8192, concurrency=4), {"engine": "trtllm", "gpus": 1}),
         (Workload(context=2048, concurrency=2), {"engine": "transformers", "gpus": 1}),
         (Workload(context=4096, concurrency=1, weights="int4"), {"engine": "llamacpp", "gpus": 1}),
         (Workload(context=4096, concurrency=8), {"engine": "vllm", "gpus": 1, "offload": "cpu"})]


def _deployments(given: dict[str, object]) -> list[Deployment]:
    return [Deployment(card=card, **given) for card in load_cards()]  # type: ignore[arg-type]


@pytest.mark.parametrize("model", MODELS)
def test_a_card_free_part_finished_on_any_card_is_that_cards_estimate(model: str) -> None:
    arch = load_model(model)
    for w, given in CASES:
        ds = _deployments(given)
        try:
            part = serving_part(arch, w, ds[0])
        except GpuwiseError:
            continue  # refused on every card alike (a TP that does not divide the heads)
        for d in ds:
            assert on_card(arch, w, d, part) == infer_memory(arch, w, d), (model, w, given, d.card.id)


@pytest.mark.parametrize("model", MODELS)
def test_the_shortfall_floor_is_never_above_what_the_estimate_is_short(model: str) -> None:
    arch = load_model(model)
    set_aside = 0
    for w, given in CASES:
        for d in _deployments(given):
            try:
                part = serving_part(arch, w, d)
            except GpuwiseError:
                break
            mem = infer_memory(arch, w, d)
            floor = shortfall_floor(part, d)
            assert floor <= mem.breakdown.required - mem.usable, (model, w, given, d.card.id)
            if floor > 0:
                assert not mem.fits
                set_aside += 1
    if model in ("llama-3.1-70b", "deepseek-v3"):
        assert set_aside > 0  # the floor is not vacuous: it sets big models aside on small cards
