"""Serving memory at TP > 2 on an NVLink/NVSwitch node: NCCL keeps more peers over more channels
there, so the engines' memory outside torch (vLLM's non_torch_increase, SGLang's memory gone by
the end of its distributed init) is gigabytes, where 2 GPUs or PCIe take a fraction of one
(data/engines.toml non_torch_nvlink_gib / init_nvlink_gib, each a logged measurement).

Checked against vllm#21348 (Qwen3-235B-A22B-FP8 on 4x H100): vLLM logs 'Available KV cache
memory: 8.11 GiB', SGLang 'KV Cache is allocated. #tokens: 367404'. Neither figure was used to
set the rule values (they come from a TP 8 A100 vLLM log and TP 8 H200 SGLang logs)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuwise.catalog.cards import Card, load_cards
from gpuwise.catalog.engines import engine_rules, rules
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.memory_infer import infer_memory, on_card, serving_part, shortfall_floor
from gpuwise.estimate.serving_rules import card_fabric, on_nvlink_fabric
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB

QWEN3 = {"model": "qwen3-235b-a22b", "card": "h100-sxm", "gpus": 4, "weights": "fp8", "context": 40960}


def _card(card_id: str) -> Card:
    card = load_cards().get(card_id)
    assert card is not None
    return card


def _runtime(est: dict[str, Any]) -> float:
    return float(sum(i["bytes"] for i in est["memory"]["items"] if i["name"] == "runtime"))


@pytest.mark.parametrize("rule", [r for r in rules() if r.non_torch_nvlink_gib or r.init_nvlink_gib],
                         ids=lambda r: r.id)
def test_an_nvlink_figure_is_never_below_the_figure_it_replaces(rule: object) -> None:
    # the card-free part charges non_torch_tp_gib, so the shortfall floor stays a lower bound
    assert rule.non_torch_nvlink_gib >= rule.non_torch_tp_gib  # type: ignore[attr-defined]
    assert rule.init_nvlink_gib >= rule.init_gib  # type: ignore[attr-defined]
    assert any("nvlink_gib" in s for s in rule.sources)  # type: ignore[attr-defined]


def test_the_fabric_is_more_than_two_gpus_on_an_nvlink_card() -> None:
    sxm, pcie = _card("h100-sxm"), _card("l40s")
    assert on_nvlink_fabric(Deployment(card=sxm, gpus=4), 4)
    assert not on_nvlink_fabric(Deployment(card=sxm, gpus=2), 2)  # one peer: the TP 2 figure
    assert not on_nvlink_fabric(Deployment(card=pcie, gpus=4), 4)
    assert card_fabric(Deployment(card=sxm, gpus=8)) and not card_fabric(Deployment(card=sxm, gpus=8, tp=2))


def test_vllm_charges_the_nvlink_non_torch_memory_only_past_two_gpus_on_the_fabric() -> None:
    rule = engine_rules("vllm", "0.9")
    four = estimate_json(EstimateRequest(**QWEN3, engine_version="0.9"))  # type: ignore[arg-type]
    two = estimate_json(EstimateRequest(model="qwen3-32b", card="h100-sxm", gpus=2, engine_version="0.9"))
    pcie = estimate_json(EstimateRequest(model="qwen3-32b", card="l40s", gpus=4, engine_version="0.9"))
    assert _runtime(four) == pytest.approx(rule.non_torch_nvlink_gib * GiB)
    assert _runtime(two) == pytest.approx(rule.non_torch_tp_gib * GiB)
    assert _runtime(pcie) == pytest.approx(rule.non_torch_tp_gib * GiB)


def test_vllm_qwen3_235b_fp8_on_4_h100_sizes_its_pool_near_the_log() -> None:
    est = estimate_json(EstimateRequest(**QWEN3, engine_version="0.9"))  # type: ignore[arg-type]
    pool = est["memory"]["kv_pool"] / GiB
    assert pool == pytest.approx(8.11, rel=0.05)  # vllm#21348 'Available KV cache memory: 8.11 GiB'
    # the pool is the rule's arithmetic: 0.9 x the card less weights, the sampler peak and non-torch
    card = _card("h100-sxm").usable_bytes
    rest = sum(i["bytes"] for i in est["memory"]["items"] if i["component"] != "kv_cache")
    assert est["memory"]["kv_pool"] == pytest.approx(0.9 * card - rest)
    tokens = est["capacity"]["kv_tokens"]
    assert tokens == pytest.approx(178_880, rel=0.06)  # 'GPU KV cache size: 178,880 tokens'
    assert f"GPU KV cache size: {tokens:,} tokens" in est["engine_startup"]["lines"]


def test_sglang_measures_its_fraction_from_the_memory_left_after_the_nvlink_init() -> None:
    rule = engine_rules("sglang", "0.4.9")
    est = estimate_json(EstimateRequest(**QWEN3, engine="sglang", engine_version="0.4.9",  # type: ignore[arg-type]
                                        mem_fraction=0.93))
    weights = sum(i["bytes"] for i in est["memory"]["items"] if i["name"] == "weights")
    start = _card("h100-sxm").usable_bytes - rule.init_nvlink_gib * GiB
    assert est["memory"]["kv_pool"] == pytest.approx(0.93 * start - weights)
    assert est["capacity"]["kv_tokens"] == pytest.approx(367_404, rel=0.03)  # vllm#21348, SGLang's line
    assert _runtime(est) == pytest.approx(rule.non_torch_nvlink_gib * GiB)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_card_free_part_and_the_floor_still_hold_on_the_fabric(engine: str) -> None:
    arch = load_model("qwen3-30b-a3b")
    w = Workload(context=8192, concurrency=16)
    for card in (_card("h100-sxm"), _card("a100-80gb-sxm"), _card("l40s")):
        for gpus in (2, 4):
            d = Deployment(card=card, gpus=gpus, engine=engine)  # type: ignore[arg-type]
            part = serving_part(arch, w, d)
            mem = on_card(arch, w, d, part)
            assert mem == infer_memory(arch, w, d)
            assert shortfall_floor(part, d) <= mem.breakdown.required - mem.usable


def test_cards_that_agree_on_memory_name_and_fabric_get_one_estimate() -> None:
    """The plan shares a memory estimate between memory twins; with the fabric in the twin key
    (plan/fast.py) that stays exact: the same memory, name and fabric verdict give the same
    estimate, a different fabric verdict (NVLink vs PCIe at TP 4) a different one."""
    arch = load_model("qwen3-30b-a3b")
    w = Workload(context=8192, concurrency=16)
    sxm = _card("h100-sxm")
    pcie_twin = dataclasses.replace(_card("h100-pcie"), memory_cuda_gib=sxm.memory_cuda_gib, name=sxm.name)
    for gpus, same in ((2, True), (4, False)):
        a, b = Deployment(card=sxm, gpus=gpus), Deployment(card=pcie_twin, gpus=gpus)
        assert (card_fabric(a) == card_fabric(b)) is same
        assert (infer_memory(arch, w, a) == infer_memory(arch, w, b)) is same


def test_vllm_v0_counts_the_cuda_context_beside_the_nvlink_buffers() -> None:
    """V0 before 0.6.5 measures the device's used memory after the profile (context included):
    its NVLink figure is its TP 1 non-torch memory (context + cuBLAS) plus the 0.7.1 buffers."""
    old, new = engine_rules("vllm", "0.2.4"), engine_rules("vllm", "0.7")
    assert old.non_torch_nvlink_gib == pytest.approx(old.non_torch_gib + new.non_torch_nvlink_gib)
    est = estimate_json(EstimateRequest(model="70b", card="a100-80gb-sxm", gpus=4, context=4096,
                                        max_num_batched_tokens=4096, engine_version="0.2.4"))
    assert _runtime(est) == pytest.approx(old.non_torch_nvlink_gib * GiB)
    # PR #2031 (vLLM main after 0.2.4): Llama-2-70B at TP 4 on 4x A100-80GB, '# GPU blocks: 20865'
    assert est["capacity"]["kv_tokens"] == pytest.approx(20_865 * 16, rel=0.03)
