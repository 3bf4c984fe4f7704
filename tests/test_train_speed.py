"""Training speed follows the work: bandwidth, bubbles, collectives, shapes and dequantisation."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.cards import resolve_card
from gpuwise.estimate.links import allgather_seconds, allreduce_seconds, card_rates
from gpuwise.estimate.speed_train import gemm_efficiency, pipeline_bubble
from gpuwise.service import EstimateRequest, estimate_json

PARTS = ("compute", "recompute", "memory_bound", "tp_comm", "ep_comm", "dp_comm_exposed", "pp_bubble", "offload")


def speed(**kw: Any) -> dict[str, Any]:
    return dict(estimate_json(EstimateRequest(**kw))["speed"])


def test_the_step_breakdown_adds_up_to_the_step_time() -> None:
    s = speed(model="llama-3.1-8b", card="h100-sxm", gpus=8, nodes=2, task="pretrain", zero=3, seq_len=4096)
    assert set(s["step_breakdown_s"]) == set(PARTS)
    assert sum(s["step_breakdown_s"].values()) == pytest.approx(s["step_time_s"], rel=1e-5)
    assert s["communication_s"]["dp_total"] > 0  # shown even when hidden under compute


def test_a100_40gb_is_slower_than_80gb_on_an_optimizer_heavy_full_fine_tune() -> None:
    kw: dict[str, Any] = {"model": "llama-3.2-1b", "task": "full", "seq_len": 1024, "optimizer": "adamw"}
    small, large = speed(card="a100-40gb-sxm", **kw), speed(card="a100-80gb-sxm", **kw)
    assert small["step_time_s"] > 1.05 * large["step_time_s"]
    assert small["step_breakdown_s"]["compute"] == pytest.approx(large["step_breakdown_s"]["compute"])


def test_the_pipeline_bubble_shrinks_as_micro_batches_grow() -> None:
    assert pipeline_bubble(4, 4) == pytest.approx(3 / 7)
    assert pipeline_bubble(4, 32) < pipeline_bubble(4, 8) < pipeline_bubble(4, 4)
    assert pipeline_bubble(4, 8, virtual_stages=4) < pipeline_bubble(4, 8)
    kw: dict[str, Any] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "tp": 2, "pp": 4,
                          "task": "lora", "seq_len": 4096}
    shares = [speed(grad_accum=m, **kw) for m in (4, 16, 64)]
    bubble = [s["step_breakdown_s"]["pp_bubble"] / s["step_time_s"] for s in shares]
    assert bubble[0] > bubble[1] > bubble[2] > 0


def test_nvls_all_reduce_is_faster_than_the_ring_on_8_h100_sxm() -> None:
    r = card_rates(resolve_card("h100-sxm").card, gpus=8)
    assert r.allreduce > 1.2 * r.link_busbw  # ~475 vs ~370 GB/s busbw
    grads = 16e9
    assert allreduce_seconds(grads, 8, r.allreduce, r.link_latency) < \
        allreduce_seconds(grads, 8, r.link_busbw, r.link_latency)
    # all-gather / reduce-scatter stay at the ring figure; A100 (no NVLS) has one figure for both
    assert allgather_seconds(grads, 8, r.link_busbw, 0.0) == pytest.approx(7 / 8 * grads / r.link_busbw)
    a100 = card_rates(resolve_card("a100-80gb-sxm").card, gpus=8)
    assert a100.allreduce == a100.link_busbw


@pytest.mark.parametrize("card", ["a100-80gb-sxm", "h100-sxm"])
def test_4_nvlink_cards_scale_3_5x_while_4_rtx_4090_over_pcie_stay_under_1_7x(card: str) -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "task": "full", "zero": 3, "seq_len": 2048}
    def scaling(c: str) -> float:
        return float(speed(card=c, gpus=4, **kw)["tokens_per_s"] / speed(card=c, gpus=1, **kw)["tokens_per_s"])
    assert scaling("rtx-4090") < 1.7
    assert scaling(card) >= 3.5


def test_a_qlora_step_is_slower_than_lora_by_the_dequantisation_share() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "a100-80gb-sxm", "seq_len": 2048, "micro_batch": 2,
                          "grad_ckpt": "full"}
    lora, qlora = speed(task="lora", **kw), speed(task="qlora", **kw)
    extra = qlora["step_time_s"] - lora["step_time_s"]
    dequant = qlora["step_breakdown_s"]["memory_bound"] - lora["step_breakdown_s"]["memory_bound"]
    assert extra > 0
    assert extra == pytest.approx(dequant, abs=1e-5)  # to_dict rounds to 6 decimals
    assert extra / lora["step_time_s"] < 0.15  # bandwidth-bound, not the old flat 1.3x


def test_small_batch_gemm_efficiency_is_below_large_batch() -> None:
    r = card_rates(resolve_card("h100-sxm").card)
    assert gemm_efficiency(r, 256, 4096, 1) < gemm_efficiency(r, 8192, 4096, 1) <= r.train_gemm
    assert gemm_efficiency(r, 8192, 4096, 8) < gemm_efficiency(r, 8192, 4096, 1)
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "h100-sxm", "task": "lora", "seq_len": 512}
    assert speed(micro_batch=1, **kw)["mfu"] < speed(micro_batch=16, packing=True, **kw)["mfu"]


def test_compile_and_float8_make_a_step_faster_on_a_card_with_fp8() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "h100-sxm", "gpus": 8, "task": "pretrain", "zero": 3,
                          "seq_len": 8192, "micro_batch": 2}
    eager, compiled = speed(**kw), speed(compile=True, **kw)
    fp8 = speed(compile=True, float8=True, **kw)
    assert eager["tokens_per_s"] < compiled["tokens_per_s"] < fp8["tokens_per_s"]
    assert fp8["mfu"] < 1.0  # MFU stays against the bf16 peak


def test_interleaving_halves_the_bubble_and_costs_first_stage_memory() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "tp": 2, "pp": 4,
                          "task": "pretrain", "framework": "megatron", "seq_len": 4096, "grad_accum": 8,
                          "grad_ckpt": "selective"}
    plain, inter = estimate_json(EstimateRequest(**kw)), estimate_json(EstimateRequest(**kw, virtual_stages=2))
    assert inter["speed"]["step_breakdown_s"]["pp_bubble"] == pytest.approx(
        plain["speed"]["step_breakdown_s"]["pp_bubble"] / 2, rel=1e-6)
    assert inter["memory"]["allocated_peak"] > plain["memory"]["allocated_peak"]


def test_tp_overlap_is_opt_in_and_torchtitan_needs_compile_for_it() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-70b", "card": "h100-sxm", "gpus": 8, "tp": 8,
                          "task": "pretrain", "seq_len": 4096, "grad_ckpt": "full"}
    def tp(**more: Any) -> float:
        return float(speed(**kw, **more)["step_breakdown_s"]["tp_comm"])
    assert tp(framework="megatron", tp_overlap=True) < tp(framework="megatron")
    assert tp(framework="torchtitan", tp_overlap=True) == pytest.approx(tp(framework="torchtitan"))
    assert tp(framework="torchtitan", tp_overlap=True, compile=True) < tp(framework="torchtitan", compile=True)


def test_lora_under_fsdp_still_gathers_the_frozen_base_each_micro_batch() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "rtx-4090", "gpus": 2, "task": "lora", "seq_len": 512}
    sharded = speed(zero=3, **kw)["communication_s"]["dp_total"]
    replicated = speed(zero=0, **kw)["communication_s"]["dp_total"]
    base = 8.03e9 * 2  # bf16 bytes of the whole base, half of it fetched from the other GPU, twice
    assert sharded > replicated * 10
    assert sharded >= base / 2 * 2 / (31.5e9 * 0.8)  # at no more than PCIe 4.0 x16's 80 % bus bandwidth
    qlora = speed(zero=3, **{**kw, "task": "qlora"})["communication_s"]["dp_total"]
    assert qlora < sharded / 2  # NF4 is gathered packed


def test_cpu_adam_under_offload_is_charged_at_the_host_memory_bandwidth() -> None:
    from gpuwise.estimate.links import efficiency_table, host_memory_bandwidth
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "task": "full", "zero": 2, "offload": "cpu", "seq_len": 1024}
    t = efficiency_table()["overheads"]["cpu_adam_bytes_per_param"]
    for card in ("rtx-4090", "a100-80gb-sxm"):
        off = speed(card=card, **kw)["step_breakdown_s"]["offload"]
        adam = 8.03e9 * t / host_memory_bandwidth(resolve_card(card).card)
        assert adam <= off <= adam * 3  # the update, plus the PCIe copies


def test_float8_linears_run_at_the_family_fp8_share_of_the_fp8_peak() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "h100-sxm", "gpus": 8, "task": "pretrain", "zero": 3,
                          "seq_len": 8192, "compile": True, "grad_ckpt": "none", "framework": "torchtitan"}
    bf16 = speed(**kw)["step_breakdown_s"]["compute"]
    fp8 = speed(float8=True, **kw)["step_breakdown_s"]["compute"]
    rates = card_rates(resolve_card("h100-sxm").card)
    ratio = rates.gemm_at("fp8") / rates.gemm  # 0.65 / 0.80 on hopper-sxm
    # the linears at most 2 x ratio faster, attention (bf16) not at all: never below 1 / (2 x ratio)
    assert 0.5 / ratio <= fp8 / bf16 < 1.0


def test_lora_adapters_cost_bandwidth_per_adapted_linear_not_per_rank_until_the_ridge() -> None:
    kw: dict[str, Any] = {"model": "llama-3.1-8b", "card": "a100-80gb-sxm", "task": "lora", "seq_len": 2048,
                          "micro_batch": 2, "grad_ckpt": "full"}
    def part(name: str, **more: Any) -> float:
        return float(speed(**{**kw, **more})["step_breakdown_s"][name])
    every = "q,k,v,o,gate,up,down"
    # the adapters' own work is memory-bound: it grows with the adapted widths, not the matmul FLOPs
    assert part("memory_bound", framework="torchtune", lora_targets=every) > \
        part("memory_bound", framework="torchtune", lora_targets="q,v")
    assert part("compute", framework="torchtune", lora_targets=every) == \
        pytest.approx(part("compute", framework="torchtune", lora_targets="q,v"))
    r8 = part("memory_bound", framework="torchtune", lora_targets=every, lora_rank=8)
    r16 = part("memory_bound", framework="torchtune", lora_targets=every, lora_rank=16)
    r2048 = part("memory_bound", framework="torchtune", lora_targets=every, lora_rank=2048)
    # below the ridge the adapters cost bytes whatever the rank (the optimizer update over twice the
    # adapter parameters, ~0.1 %, is all that differs)
    assert r16 == pytest.approx(r8, rel=0.005)
    assert r2048 > 1.5 * r8  # past it the rank-r GEMMs' FLOPs set the time
    # PEFT's fp32 adapters cast x to fp32 and back in each adapted linear (torchtune's bf16 ones do not)
    def adapters(framework: str) -> float:
        return part("memory_bound", framework=framework, lora_targets=every) - \
            part("memory_bound", framework=framework, lora_targets="q")
    assert adapters("hf") > adapters("torchtune") > 0


def test_the_input_embedding_is_a_lookup_only_the_output_projection_a_matmul(tmp_path: Any) -> None:
    import json
    from pathlib import Path

    base = json.loads((Path(__file__).parent.parent / "validation" / "models" / "meta-llama--Llama-2-7b-hf"
                       / "config.json").read_text())
    def compute(vocab: int) -> float:
        folder = tmp_path / f"v{vocab}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**base, "vocab_size": vocab, "tie_word_embeddings": False}))
        return float(speed(model=str(folder), card="a100-80gb-sxm", task="pretrain", seq_len=2048,
                           micro_batch=2)["step_breakdown_s"]["compute"])
    r = card_rates(resolve_card("a100-80gb-sxm").card)
    tokens, grown = 4096, 64000
    peak = resolve_card("a100-80gb-sxm").card.dense_tflops("bf16")
    assert peak is not None
    rate = peak * 1e12 * gemm_efficiency(r, tokens, 4096, 1)
    # 6 FLOPs (forward 2, backward 4) per output-projection weight per token; the embedding costs none
    assert compute(32000 + grown) - compute(32000) == pytest.approx(6 * grown * 4096 * tokens / rate, rel=1e-3)
