"""NCCL's NVLink SHARP all-reduce: only past 2 GPUs (nvls.cc), and not under SGLang, which turns it off."""

from __future__ import annotations

from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.engines import engine_rules
from gpuwise.estimate.links import card_rates, link_path
from gpuwise.service import EstimateRequest, estimate_json


def test_nvls_needs_more_than_two_gpus_on_an_nvswitch_node() -> None:
    h100 = resolve_card("h100-sxm").card
    assert link_path(h100, 2) == "nvlink" and card_rates(h100, gpus=2).allreduce_busbw == 0.0
    assert link_path(h100, 4) == "nvls" and card_rates(h100, gpus=4).allreduce > card_rates(h100, gpus=2).allreduce


def test_sglang_runs_the_ring_where_vllm_gets_nvls() -> None:
    assert not engine_rules("sglang", "0.5").nccl_nvls and engine_rules("vllm").nccl_nvls
    ask: dict[str, object] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "context": 4096,
                              "concurrency": 64}
    vllm = estimate_json(EstimateRequest(**ask))["speed"]  # type: ignore[arg-type]
    sglang = estimate_json(EstimateRequest(**ask, engine="sglang"))["speed"]  # type: ignore[arg-type]
    assert vllm["collective_path"] == "nvls" and sglang["collective_path"] == "nvlink"
    assert sglang["collective_busbw_bytes_per_s"] < vllm["collective_busbw_bytes_per_s"]
    assert sglang["step_breakdown_s"]["communication"] > vllm["step_breakdown_s"]["communication"]
