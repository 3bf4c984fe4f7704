"""Context parallelism (--cp, --cp-kind): validated like every flag, each rank's share of a sequence in
memory, FSDP sharded over data x context parallel ranks, and the K/V traffic in the step."""

from __future__ import annotations

import dataclasses

import pytest

from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, estimate_json

TITAN = {"model": "llama-3.1-8b", "card": "h100-sxm", "framework": "torchtitan-2024-12", "gpus": 8,
         "task": "pretrain", "micro_batch": 1, "zero": 3, "grad_ckpt": "full", "loss": "chunked"}


def _items(out: dict) -> dict[str, float]:
    return {i["name"]: i["bytes"] for i in out["memory"]["items"]}


@pytest.mark.parametrize("changes, words", [
    ({"cp": 3}, "must divide"),
    ({"cp": 2, "seq_len": 8190}, "multiple of 4"),
    ({"cp": 4, "seq_len": 8194, "cp_kind": "ulysses"}, "multiple of 4"),
    ({"cp": 16}, "must divide"),
    ({"cp": 0}, "--cp"),
    ({"cp": 2, "cp_kind": "zigzag"}, "--cp-kind"),
    ({"cp": 2, "flash_attention": False}, "flash"),
    ({"cp": 3, "gpus": 6, "cp_kind": "ulysses", "seq_len": 8190}, "heads"),
])
def test_a_context_parallel_setting_that_cannot_run_is_refused_in_both_languages(changes: dict, words: str) -> None:
    kw = {**TITAN, "seq_len": 8192, **changes}
    with pytest.raises(InputError) as err:
        estimate_json(EstimateRequest(**kw))
    assert words in err.value.message.en
    assert err.value.message.zh and err.value.message.zh != err.value.message.en


def test_serving_refuses_cp() -> None:
    with pytest.raises(InputError):
        estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", gpus=2, cp=2))


def test_a_rank_holds_the_activations_and_loss_of_its_share_of_the_sequence() -> None:
    whole = _items(estimate_json(EstimateRequest(**TITAN, seq_len=16384)))
    split = _items(estimate_json(EstimateRequest(**TITAN, seq_len=32768, cp=2, cp_kind="allgather")))
    assert split["logits"] == pytest.approx(whole["logits"], rel=1e-9)
    assert split["activations"] == pytest.approx(whole["activations"], rel=1e-9)
    for state in ("weights", "gradients", "optimizer", "zero3_gather"):  # FSDP over dp_shard x cp: 8 ranks
        assert split[state] == pytest.approx(whole[state], rel=1e-9)


def test_the_all_gather_kind_peaks_above_the_ring_and_ulysses_at_the_same_split() -> None:
    kw = {**TITAN, "seq_len": 262144, "cp": 8, "grad_ckpt": "none", "loss": "fused"}
    peaks = {kind: estimate_json(EstimateRequest(**kw, cp_kind=kind))["memory"]["allocated_peak"]
             for kind in ("allgather", "ring", "ulysses")}
    assert peaks["allgather"] > peaks["ring"] > peaks["ulysses"]


def test_more_context_parallel_ranks_never_need_more_memory_per_gpu_at_the_same_sequence() -> None:
    peaks = [estimate_json(EstimateRequest(**TITAN, seq_len=65536, cp=cp, cp_kind="ring"))["memory"]["allocated_peak"]
             for cp in (1, 2, 4, 8)]
    assert peaks == sorted(peaks, reverse=True)


def test_context_parallel_traffic_is_in_the_step_and_tokens_count_once() -> None:
    base = {"model": "llama-3.1-8b", "card": "h100-sxm", "framework": "megatron", "gpus": 8, "task": "pretrain",
            "seq_len": 8192, "micro_batch": 1, "zero": 1}
    one = estimate_json(EstimateRequest(**base, grad_accum=16))["speed"]
    two = estimate_json(EstimateRequest(**base, grad_accum=32, cp=2, cp_kind="ulysses"))["speed"]
    # the same global batch (4 data-parallel ranks x 32 = 8 x 16 sequences) in one step
    tokens_one = one["tokens_per_s"] * one["step_time_s"]
    assert two["tokens_per_s"] * two["step_time_s"] == pytest.approx(tokens_one, rel=1e-6)
    assert two["communication_s"]["cp_total"] > 0
    assert two["step_breakdown_s"]["cp_comm"] == pytest.approx(two["communication_s"]["cp_exposed"])  # not hidden
    assert "cp_comm" not in one["step_breakdown_s"]  # an estimate without --cp is unchanged


def test_ring_passes_hide_under_the_attention_they_overlap() -> None:
    base = {"model": "llama-3.1-8b", "card": "h100-sxm", "framework": "megatron", "gpus": 8, "task": "pretrain",
            "seq_len": 8192, "micro_batch": 1, "zero": 1, "grad_accum": 32, "cp": 2}
    ring = estimate_json(EstimateRequest(**base, cp_kind="ring"))["speed"]["communication_s"]
    assert ring["cp_exposed"] <= ring["cp_total"]


def test_the_request_default_is_no_context_parallelism() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(EstimateRequest)}
    assert (fields["cp"], fields["cp_kind"]) == (1, "ring")


def test_the_python_api_refuses_cp_that_does_not_divide_the_gpus() -> None:
    from gpuwise.catalog.cards import load_cards, resolve_card
    from gpuwise.estimate.workload import Deployment

    card = resolve_card("h100-sxm", load_cards(())).card
    with pytest.raises(InputError) as err:
        Deployment(card=card, gpus=8, tp=2, cp=3)
    assert "--cp" in err.value.message.en and "--cp" in err.value.message.zh
    assert Deployment(card=card, gpus=8, tp=2, cp=4).cp == 4


def _cp_comm(**changes: object) -> dict[str, float]:
    req = {**TITAN, "seq_len": 131072, "cp": 4, "cp_kind": "allgather", **changes}
    return estimate_json(EstimateRequest(**req))["speed"]["communication_s"]


def test_repeated_kv_heads_move_n_heads_wide_keys_and_values_under_context_parallelism() -> None:
    """torchtitan 9dec370 repeats K/V to every query head before SDPA (model.py repeat_kv), so torch's
    context_parallel gathers and passes 32 heads of Llama-3.1-8B's K/V, not its 8: 4x the bytes; torchtitan
    0.2.2 hands SDPA the 8 heads (enable_gqa)."""
    repeated, native = _cp_comm(), _cp_comm(framework="torchtitan")
    assert repeated["cp_total"] == pytest.approx(4 * native["cp_total"], rel=0.02)  # link latency aside


def test_the_last_gradient_pass_of_the_all_gather_ring_is_never_hidden() -> None:
    """torch's ring backward waits on each step's fp32 dK/dV after the next step's block and on the last one
    after the loop: at least that one pass is exposed per layer, however fast the link."""
    comm = _cp_comm()
    layers, kv = 32, 131072 // 4 * 4096 * 2.0  # bf16 K (repeated to 32 heads) of a rank's 32k tokens
    assert comm["cp_exposed"] > 0
    assert comm["cp_exposed"] >= layers * 2 * 2 * kv / (900e9 * 2)  # dK + dV in fp32 over at most NVLink 4's 900 GB/s
    assert comm["cp_exposed"] < comm["cp_total"]


def test_a_recomputed_forward_repeats_the_gather_only_where_sdpa_is_recomputed() -> None:
    """Full checkpointing recomputes the attention and its all-gather; torchtitan's op SAC saves SDPA's
    output, so its recompute runs no ring."""
    full, sac = _cp_comm(), _cp_comm(grad_ckpt="op-sac")
    assert sac["cp_total"] < full["cp_total"]
