"""Memory estimate: engine semantics, training states, fit suggestions and properties."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.errors import InputError
from gpuwise.estimate.api import estimate, estimate_memory
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.units import GiB
from tests.test_params import LLAMA_31_8B

LLAMA = arch_from_config(LLAMA_31_8B, "llama-3.1-8b")
LLAMA_70B = arch_from_config({**LLAMA_31_8B, "hidden_size": 8192, "num_hidden_layers": 80,
                              "num_attention_heads": 64, "intermediate_size": 28672}, "llama-70b")
H100 = resolve_card("H100-SXM").card
RTX4090 = resolve_card("4090").card


def test_weights_of_llama_8b_in_bf16_are_its_bytes_on_disk() -> None:
    mem = estimate_memory(LLAMA, Workload(context=16000), Deployment(card=H100))
    # vLLM logs "Model loading took 14.99 GiB" for this checkpoint; 8,030,261,248 x 2 B = 14.96 GiB
    assert mem.breakdown.component("weights") / GiB == pytest.approx(14.99, rel=0.02)


def test_tensor_parallel_replicates_kv_heads_past_their_count() -> None:
    w = Workload(context=8192, concurrency=4)
    tp8 = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=8)).breakdown.component("kv_cache")
    tp16_like = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=8, tp=8)).breakdown.component("kv_cache")
    one = estimate_memory(LLAMA, w, Deployment(card=H100)).breakdown.component("kv_cache")
    assert tp8 == pytest.approx(one / 8, rel=0.01)
    assert tp16_like == tp8


def test_a_tp_degree_that_does_not_divide_the_heads_is_an_input_error() -> None:
    with pytest.raises(InputError, match="does not divide"):
        estimate_memory(LLAMA, Workload(), Deployment(card=H100, gpus=3))


def test_70b_in_bf16_does_not_fit_one_80gb_card_and_suggests_fixes() -> None:
    result = estimate(LLAMA_70B, Workload(weights="bf16"), Deployment(card=H100))
    assert not result.fits
    text = " ".join(s.en for s in result.suggestions)
    assert "--gpus 2" in text or "--weights" in text


def test_a_context_above_the_model_maximum_names_the_override() -> None:
    with pytest.raises(InputError) as err:
        estimate(LLAMA, Workload(context=200_000), Deployment(card=H100))
    assert err.value.hint is not None and "--allow-long-context" in err.value.hint.en


def test_full_finetune_of_8b_under_deepspeed_mixed_precision_keeps_16_bytes_per_parameter() -> None:
    # ZeRO paper s.3.1: bf16 weights and grads + fp32 master, m and v (K = 12)
    mem = estimate_memory(LLAMA, Workload(task="full", framework="deepspeed"), Deployment(card=H100)).breakdown
    states = mem.component("weights") + mem.component("gradients") + mem.component("optimizer")
    assert states == pytest.approx(16 * 8_030_261_248, rel=0.001)


def test_full_finetune_under_hf_loads_bf16_and_keeps_8_bytes_per_parameter() -> None:
    # frameworks.toml hf master_weights_full = none: transformers v5 loads the checkpoint dtype
    mem = estimate_memory(LLAMA, Workload(task="full"), Deployment(card=H100)).breakdown
    states = mem.component("weights") + mem.component("gradients") + mem.component("optimizer")
    assert states == pytest.approx(8 * 8_030_261_248, rel=0.001)


def test_full_finetune_in_pure_bf16_keeps_8_bytes_per_parameter() -> None:
    mem = estimate_memory(LLAMA, Workload(task="full", framework="torchtune"), Deployment(card=H100)).breakdown
    states = mem.component("weights") + mem.component("gradients") + mem.component("optimizer")
    assert states == pytest.approx(8 * 8_030_261_248, rel=0.001)


def test_qlora_of_8b_fits_a_4090_and_full_finetune_does_not() -> None:
    # peft's prepare_model_for_kbit_training turns gradient checkpointing on for QLoRA
    assert estimate_memory(LLAMA, Workload(task="qlora", grad_ckpt="full"), Deployment(card=RTX4090)).fits
    assert not estimate_memory(LLAMA, Workload(task="full"), Deployment(card=RTX4090)).fits


def test_offload_needs_a_zero_stage() -> None:
    with pytest.raises(InputError, match="ZeRO"):
        estimate_memory(LLAMA, Workload(task="full"), Deployment(card=H100, offload="cpu"))


def test_offloading_inference_weights_reports_the_host_ram_it_needs() -> None:
    mem = estimate_memory(LLAMA_70B, Workload(weights="bf16"), Deployment(card=RTX4090, offload="cpu"))
    assert mem.fits
    assert mem.host.cpu_ram > 100 * GiB


# --- properties -------------------------------------------------------------------------
contexts = st.integers(min_value=1, max_value=131_072)
concurrency = st.integers(min_value=1, max_value=256)


@settings(max_examples=60, deadline=None)
@given(contexts, contexts, concurrency)
def test_more_context_never_needs_less_memory(a: int, b: int, n: int) -> None:
    lo, hi = sorted((a, b))
    d = Deployment(card=H100)
    m_lo = estimate_memory(LLAMA, Workload(context=lo, concurrency=n), d).breakdown.required
    m_hi = estimate_memory(LLAMA, Workload(context=hi, concurrency=n), d).breakdown.required
    assert m_hi >= m_lo


@settings(max_examples=60, deadline=None)
@given(concurrency, concurrency, contexts)
def test_more_concurrency_never_needs_less_memory(a: int, b: int, ctx: int) -> None:
    lo, hi = sorted((a, b))
    d = Deployment(card=H100, engine="transformers")
    assert (estimate_memory(LLAMA, Workload(context=ctx, concurrency=hi), d).breakdown.required
            >= estimate_memory(LLAMA, Workload(context=ctx, concurrency=lo), d).breakdown.required)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["full", "lora", "pretrain"]), st.integers(1, 8), st.integers(0, 2))
def test_a_higher_zero_stage_never_needs_more_per_gpu(task: str, gpus: int, stage: int) -> None:
    # llama-factory keeps an fp32 master at every stage; plain hf full FT is pure bf16 under DDP and
    # gains one under ZeRO/FSDP (accelerate's upcast), a precision change rather than a sharding one
    w = Workload(task=task, seq_len=1024, framework="llama-factory")  # type: ignore[arg-type]
    lo = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=gpus, zero=stage + 1)).breakdown
    hi = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=gpus, zero=stage)).breakdown
    assert lo.required - lo.component("overhead") <= hi.required - hi.component("overhead")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64))
def test_more_gpus_under_zero3_never_need_more_per_gpu(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    w = Workload(task="full")
    few = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=lo, zero=3)).breakdown
    many = estimate_memory(LLAMA, w, Deployment(card=H100, gpus=hi, zero=3)).breakdown
    if lo > 1:  # one GPU pays no NCCL or gather buffers
        assert many.required <= few.required


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["infer", "full", "lora"]), contexts)
def test_smaller_weight_precision_never_needs_more(task: str, ctx: int) -> None:
    order = ["fp32", "bf16", "fp8", "int4"] if task == "infer" else ["bf16", "fp8", "int4"]
    w = Workload(task=task, context=min(ctx, 65536), seq_len=1024)  # type: ignore[arg-type]
    sizes = [estimate_memory(LLAMA, dataclasses.replace(w, weights=f), Deployment(card=H100)).breakdown.required
             for f in order]
    assert sizes == sorted(sizes, reverse=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64))
def test_a_card_that_fits_at_batch_n_fits_at_batch_1(n: int) -> None:
    d = Deployment(card=RTX4090, engine="transformers")
    if estimate_memory(LLAMA, Workload(context=4096, concurrency=n, weights="int4"), d).fits:
        assert estimate_memory(LLAMA, Workload(context=4096, weights="int4"), d).fits


def test_a_shorter_context_is_only_suggested_when_it_still_holds_the_output() -> None:
    # 70B FP8 on one H100 at 0.95 utilisation for 32 requests of 407 tokens (249 of them output):
    # after the sampler's profiling peak the KV pool holds ~200 tokens per request, so "shorten the
    # context" would ask for less than the output.
    from gpuwise.estimate.api import estimate_memory
    from gpuwise.estimate.fit import suggest_fixes
    from gpuwise.service import EstimateRequest, build

    model, w, d, _ = build(EstimateRequest(model="llama-3.1-70b", card="h100-sxm", weights="fp8", context=407,
                                           output_tokens=249, concurrency=32, gpu_memory_utilization=0.95))
    mem = estimate_memory(model, w, d)
    fixes = [t.en for t in suggest_fixes(model, w, d, mem, estimate_memory, limit=12)]
    assert not mem.fits
    assert not any("--context" in s for s in fixes)
    assert any("--concurrency" in s for s in fixes)


# --- training memory by policy ---------------------------------------------------------------

def _train(card: object = None, gpus: int = 1, zero: int = 0, **kw: object) -> object:
    w = Workload(**{"task": "lora", "seq_len": 2048, "micro_batch": 2, **kw})  # type: ignore[arg-type]
    return estimate_memory(LLAMA, w, Deployment(card=card or H100, gpus=gpus, zero=zero))  # type: ignore[arg-type]


def _item(mem: object, key: str) -> float:
    return sum(i.bytes for i in mem.breakdown.items if i.key == key)  # type: ignore[attr-defined]


def test_a_fused_loss_drops_the_logits_to_one_chunk() -> None:
    full, fused = _item(_train(loss="full"), "logits"), _item(_train(loss="fused"), "logits")
    tokens = 4096
    assert full == 12 * tokens * LLAMA.vocab_size
    # Liger: next_pow2(4096 / ceil(128256 / 4096)) = 128 rows of bf16 logits + the hidden-state gradient
    assert fused == 2 * 128 * LLAMA.vocab_size + 2 * tokens * LLAMA.hidden_size
    assert fused < full / 50


def test_a_chunked_loss_keeps_the_bf16_chunks_and_one_chunk_of_fp32_or_compiled_one_bf16_gradient() -> None:
    logits = 4096 * LLAMA.vocab_size
    eager = _item(_train(loss="chunked", framework="torchtune"), "logits")
    compiled = _item(_train(loss="chunked", framework="torchtune", compile=True), "logits")
    assert eager == pytest.approx(logits * (6 + 4 / 8))
    assert compiled == pytest.approx(logits * (2 + 2 / 8))  # inductor writes the chunk's gradient in bf16


def test_op_level_sac_keeps_less_than_none_and_more_than_full_checkpointing() -> None:
    acts = {c: _item(_train(grad_ckpt=c), "activations") for c in ("none", "op-sac", "full")}
    assert acts["full"] < acts["op-sac"] < acts["none"]


def test_checkpointing_every_second_layer_keeps_about_half_of_none() -> None:
    none, every2 = _item(_train(grad_ckpt="none"), "activations"), _item(_train(grad_ckpt="every-2"), "activations")
    assert 0.45 < every2 / none < 0.6


def test_megatron_selective_recompute_saves_almost_nothing_with_flash_attention() -> None:
    none, sel = _item(_train(grad_ckpt="none"), "activations"), _item(_train(grad_ckpt="selective"), "activations")
    assert 0.97 < sel / none < 1.0


def test_optimizer_in_backward_holds_one_parameters_gradient_not_the_buffer() -> None:
    mem = _train(task="full", framework="torchtune", optimizer_in_backward=True, grad_ckpt="full")
    assert _item(mem, "gradients") == LLAMA.vocab_size * LLAMA.hidden_size * 2  # the embedding, in bf16


def test_8bit_adamw_keeps_about_2_bytes_per_parameter_of_states() -> None:
    mem = _train(task="full", framework="torchtune", optimizer="adamw8bit", grad_ckpt="full")
    assert _item(mem, "optimizer") == pytest.approx((2 + 8 / 256) * 8_030_261_248, rel=0.01)  # + absmax a 256 block


def test_paged_8bit_states_leave_the_gpu_peak_for_pageable_host_memory() -> None:
    mem = _train(task="full", framework="torchtune", optimizer="paged-adamw8bit", grad_ckpt="full")
    assert _item(mem, "optimizer") == 0 and mem.host.cpu_ram == pytest.approx(  # type: ignore[attr-defined]
        (2 + 8 / 256) * 8_030_261_248, rel=0.01)
    assert mem.warnings  # type: ignore[attr-defined]


def test_qlora_under_fsdp_shards_the_nf4_base_where_the_framework_does() -> None:
    one = _train(task="qlora", framework="torchtune", grad_ckpt="full")
    sharded = _train(task="qlora", framework="torchtune", grad_ckpt="full", gpus=4, zero=3)
    assert _item(sharded, "weights") == pytest.approx(_item(one, "weights") / 4)


def test_qlora_under_fsdp_is_refused_where_the_framework_cannot_shard_it() -> None:
    with pytest.raises(InputError, match="4-bit"):
        _train(task="qlora", framework="torchtitan", gpus=4, zero=3)


def test_activation_offload_moves_the_saved_activations_to_host_ram() -> None:
    kept, moved = _train(grad_ckpt="none"), _train(grad_ckpt="none", activation_offload=True)
    assert _item(moved, "activations") < _item(kept, "activations") / 5
    assert moved.host.cpu_ram > _item(kept, "activations") / 2  # type: ignore[attr-defined]


def test_the_allocator_peak_is_below_reserved_below_the_device_total_which_decides_fit() -> None:
    mem = _train(framework="torchtune", grad_ckpt="full")
    b = mem.breakdown  # type: ignore[attr-defined]
    assert 0 < b.allocated_peak < b.reserved_peak < b.device_total == b.required
    out = b.to_dict()
    assert out["framework_reports"] == "allocated" and out["device_total"] == round(b.device_total)
