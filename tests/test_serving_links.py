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


def test_vllm_charges_nccl_nvls_buffers_at_tp_above_two_on_nvswitch_hopper() -> None:
    from gpuwise.units import GiB

    def runtime(gpus: int, card: str = "h100-sxm", engine: str = "vllm") -> float:
        est = estimate_json(EstimateRequest(model="llama-3.1-70b", card=card, gpus=gpus, engine=engine))
        return next(i["bytes"] for i in est["memory"]["items"] if i["name"] == "runtime") / GiB

    nvls_tp4 = runtime(4) - runtime(2)  # 4 ranks x 288 MiB (vllm#9699's NCCL log)
    assert abs(nvls_tp4 - 4 * 288 / 1024) < 1e-6
    assert abs(runtime(8) - runtime(2) - 8 * 288 / 1024) < 1e-6
    assert runtime(4, card="a100-80gb-sxm") == runtime(2, card="a100-80gb-sxm")  # no NVLS on Ampere
    assert runtime(4, engine="sglang") == runtime(2, engine="sglang")  # SGLang keeps NVLS off
