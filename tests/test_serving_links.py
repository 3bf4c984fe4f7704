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
    """At 1,024 sequences a decode all-reduce is 16 MB a GPU, past the engines' own 8 MiB kernels:
    NCCL's, with NVLS under vLLM and the ring under SGLang."""
    assert not engine_rules("sglang", "0.5").nccl_nvls and engine_rules("vllm").nccl_nvls
    ask: dict[str, object] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "context": 1024,
                              "concurrency": 1024}
    vllm = estimate_json(EstimateRequest(**ask))["speed"]  # type: ignore[arg-type]
    sglang = estimate_json(EstimateRequest(**ask, engine="sglang"))["speed"]  # type: ignore[arg-type]
    assert vllm["collective_path"] == "nvls" and sglang["collective_path"] == "nvlink"
    assert sglang["collective_busbw_bytes_per_s"] < vllm["collective_busbw_bytes_per_s"]
    # NVLS reaches its higher bus bandwidth only on large messages (efficiency.toml [links.nvls]
    # allreduce_half_rate_bytes): at 16 MB both NCCL paths take about the same time (8x H100 NVLS
    # 129 us, mscclpp's NCCL curve; 8x H20 ring 121 us, Mooncake#3484); at 4,096 sequences (64 MB) NVLS wins
    big: dict[str, object] = {**ask, "context": 256, "concurrency": 4096}
    vllm_big = estimate_json(EstimateRequest(**big))["speed"]  # type: ignore[arg-type]
    sglang_big = estimate_json(EstimateRequest(**big, engine="sglang"))["speed"]  # type: ignore[arg-type]
    assert sglang_big["step_breakdown_s"]["communication"] > vllm_big["step_breakdown_s"]["communication"]


def test_small_decode_all_reduces_take_the_engines_own_kernels_not_nvls() -> None:
    """At 64 sequences a decode all-reduce is 1 MB a GPU: vLLM runs its custom all-reduce (8 MiB at
    most, efficiency.toml [links] custom_allreduce_max_bytes) over NVLink peer-to-peer, at the same
    figure as SGLang, not NCCL's NVLS."""
    ask: dict[str, object] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "context": 4096,
                              "concurrency": 64}
    vllm = estimate_json(EstimateRequest(**ask))["speed"]  # type: ignore[arg-type]
    sglang = estimate_json(EstimateRequest(**ask, engine="sglang"))["speed"]  # type: ignore[arg-type]
    assert vllm["collective_path"] == sglang["collective_path"] == "nvlink"
    assert vllm["collective_busbw_bytes_per_s"] == sglang["collective_busbw_bytes_per_s"]
    assert vllm["step_breakdown_s"]["communication"] == sglang["step_breakdown_s"]["communication"]
