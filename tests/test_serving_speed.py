"""Serving speed by phase: a decode step adds its GEMMs, attention, communication, offload and
overhead; FP8 GEMMs have their own efficiency; llama.cpp streams each GGUF type at its own rate
and runs --gpu-layers' CPU layers at host memory bandwidth."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.estimate.links import card_rates
from gpuwise.service import EstimateRequest, estimate_json


def _speed(**kw: object) -> dict:
    return estimate_json(EstimateRequest(**kw))["speed"]  # type: ignore[arg-type]


def test_a_decode_step_is_the_sum_of_its_parts() -> None:
    s = _speed(model="llama-3.1-8b", card="h100-sxm", context=8192, concurrency=64)
    assert set(s["step_breakdown_s"]) == {"gemm", "attention", "communication", "offload", "overhead",
                                         "cpu", "prefill_stall"}
    assert sum(s["step_breakdown_s"].values()) == pytest.approx(s["tpot_s"], rel=1e-4)


def test_long_contexts_add_attention_time_to_the_gemms_instead_of_hiding_under_them() -> None:
    short = _speed(model="llama-3.1-8b", card="h100-sxm", context=1024, concurrency=32)
    long = _speed(model="llama-3.1-8b", card="h100-sxm", context=32768, concurrency=32)
    assert long["step_breakdown_s"]["gemm"] == pytest.approx(short["step_breakdown_s"]["gemm"], rel=0.01)
    def step(s: dict) -> float:  # type: ignore[type-arg]
        return float(s["tpot_s"] - s["step_breakdown_s"]["prefill_stall"])

    assert step(long) - step(short) == pytest.approx(
        long["step_breakdown_s"]["attention"] - short["step_breakdown_s"]["attention"], rel=0.01)


def test_fp8_gemms_run_at_their_own_share_of_the_fp8_peak() -> None:
    from gpuwise.catalog.cards import load_cards, resolve_card

    card = resolve_card("h100-sxm", load_cards([])).card
    rates = card_rates(card)
    assert rates.gemm_at("fp8") < rates.gemm_at("bf16")
    # compute-bound batch: FP8 is faster than BF16, but by less than the 2x of the peaks
    bf16 = _speed(model="llama-3.1-8b", card="h100-sxm", context=2048, output_tokens=512, concurrency=1024)
    fp8 = _speed(model="llama-3.1-8b", card="h100-sxm", context=2048, output_tokens=512, concurrency=1024,
                 weights="fp8")
    assert 1.0 < bf16["step_breakdown_s"]["gemm"] / fp8["step_breakdown_s"]["gemm"] < 2.0


def test_llama_cpp_q4_0_decodes_below_its_byte_ratio_to_f16() -> None:
    f16 = _speed(model="llama-3.1-8b", card="rtx-4090", engine="llamacpp", weights="gguf:F16", context=1024)
    q4 = _speed(model="llama-3.1-8b", card="rtx-4090", engine="llamacpp", weights="gguf:Q4_0", context=1024)
    bytes_ratio = 16 / 4.5
    assert 1.5 < q4["decode_tokens_per_s"] / f16["decode_tokens_per_s"] < bytes_ratio * 0.8


def test_gpu_layers_run_the_rest_on_the_cpu_at_host_memory_bandwidth() -> None:
    base: dict[str, object] = {"model": "llama-3.1-8b", "card": "rtx-4050-laptop", "engine": "llamacpp",
                               "weights": "gguf:Q4_K_M", "context": 4096, "gpu_layers": 20}
    slow = _speed(**base, cpu_mem_bw=40.0)
    fast = _speed(**base, cpu_mem_bw=80.0)
    assert slow["step_breakdown_s"]["offload"] == pytest.approx(2 * fast["step_breakdown_s"]["offload"], rel=1e-3)
    est = estimate_json(EstimateRequest(**base, cpu_mem_bw=40.0))  # type: ignore[arg-type]
    cpu_weights = est["memory"]["weights"] * 12 / 20  # 12 of 32 layers on the CPU, 20 on the GPU
    assert slow["step_breakdown_s"]["offload"] == pytest.approx(cpu_weights / 40e9, rel=1e-3)
    assert est["host"]["cpu_ram"] > cpu_weights  # the CPU layers' KV is in host RAM too
    all_gpu = _speed(**{**base, "gpu_layers": None, "model": "llama-3.2-3b"})
    assert all_gpu["step_breakdown_s"]["offload"] == 0.0


MOE = ["qwen3-30b-a3b", "mixtral-8x7b", "qwen3-235b-a22b"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MOE), concurrency=st.integers(1, 512), context=st.integers(256, 32768),
       offload_gb=st.floats(0.0, 60.0), engine=st.sampled_from(["vllm", "llamacpp", "sglang", "trtllm"]),
       gpu_layers=st.one_of(st.none(), st.integers(0, 48)), card=st.sampled_from(["rtx-4090", "h100-sxm"]),
       gpus=st.sampled_from([1, 2, 4]), version=st.sampled_from(["", "0.5.4", "0.6.4"]))
def test_no_time_term_is_ever_negative_or_infinite(model: str, concurrency: int, context: int, offload_gb: float,
                                                   engine: str, gpu_layers: int | None, card: str, gpus: int,
                                                   version: str) -> None:
    """Random MoE workloads with CPU offload, llama.cpp's CPU layers, tensor parallel and old vLLM
    rules: every part of the step (GEMMs, attention, all-reduces, offload, overhead, CPU, the other
    requests' prefills) is finite and >= 0."""
    kw: dict[str, object] = {"model": model, "card": card, "concurrency": concurrency, "context": context,
                             "engine": engine, "offload": "cpu"}
    if engine == "vllm":
        kw.update(cpu_offload_gb=offload_gb, gpus=gpus, engine_version=version)
    elif engine == "llamacpp":
        kw.update(weights="gguf:Q4_K_M", gpu_layers=gpu_layers)
    else:
        kw.update(gpus=gpus)
    s = _speed(**kw)
    for name, seconds in s["step_breakdown_s"].items():
        assert math.isfinite(seconds) and seconds >= 0, (name, seconds)
    for key in ("decode_tokens_per_s", "throughput_tokens_per_s", "prefill_tokens_per_s", "ttft_s", "tpot_s"):
        assert math.isfinite(s[key]) and s[key] > 0, key


@pytest.mark.parametrize("card,gpus,concurrency,path", [
    ("h100-sxm", 8, 1024, "nvls"), ("h100-sxm", 8, 1, "nvlink"), ("rtx-3090", 2, 1, "nvlink-bridge"),
    ("rtx-3090", 4, 1, "nvlink-bridge-pairs-over-pcie"), ("rtx-4090", 2, 1, "pcie-host-bounce"),
    ("l40s", 2, 1, "pcie-p2p"), ("h100-sxm", 1, 1, "none")])
def test_the_estimate_names_the_collective_path_and_bandwidth_it_assumed(card: str, gpus: int, concurrency: int,
                                                                         path: str) -> None:
    """NVLS where NCCL runs the all-reduce (1,024 sequences: 10 MB a GPU); one sequence's 10 KB goes
    through vLLM's own peer-to-peer all-reduce over the card's NVLink."""
    s = _speed(model="qwen2.5-14b", card=card, gpus=gpus, weights="int4", context=1024, concurrency=concurrency)
    assert s["collective_path"] == path
    assert (s["collective_busbw_bytes_per_s"] > 0) == (gpus > 1)


def test_a_bridge_joins_only_a_pair_so_four_cards_ring_over_pcie() -> None:
    two = _speed(model="qwen2.5-14b", card="rtx-3090", gpus=2, weights="int4", context=4096)
    four = _speed(model="qwen2.5-14b", card="rtx-3090", gpus=4, weights="int4", context=4096)
    geforce = _speed(model="qwen2.5-14b", card="rtx-4090", gpus=4, weights="int4", context=4096)
    assert four["collective_busbw_bytes_per_s"] < two["collective_busbw_bytes_per_s"] / 3
    assert four["collective_busbw_bytes_per_s"] == pytest.approx(geforce["collective_busbw_bytes_per_s"])


def test_llama_cpp_prefill_runs_at_its_own_share_of_the_peak() -> None:
    from gpuwise.catalog.cards import load_cards, resolve_card
    from gpuwise.estimate.links import efficiency_table

    card = resolve_card("rtx-4090", load_cards([])).card
    fam = efficiency_table()[card.family]
    kw: dict[str, object] = {"model": "llama-3.1-8b", "card": "rtx-4090", "weights": "gguf:Q4_K_M",
                             "context": 1024, "output_tokens": 512}
    lcpp = _speed(**kw, engine="llamacpp")["prefill_tokens_per_s"]
    hf = _speed(**kw, engine="transformers")["prefill_tokens_per_s"]
    assert lcpp / hf == pytest.approx(fam["llamacpp_prefill"] / fam["prefill"], rel=0.02)


def test_vllm_v0_waits_for_its_python_scheduler_per_running_sequence() -> None:
    """vLLM before 0.6 runs scheduling and output processing between GPU steps (vLLM v0.6.0
    blog: 38 % of the time on the GPU); V1 overlaps them, so only V0 steps grow by a CPU term."""
    from gpuwise.catalog.engines import step_cpu_fixed, step_cpu_per_seq
    from gpuwise.estimate.speed_decode import step_cpu_held

    kw = {"model": "llama-3.1-8b", "card": "h100-sxm", "context": 381, "output_tokens": 179}
    v0 = {c: _speed(**kw, concurrency=c, engine_version="0.5.4") for c in (1, 256)}
    v1 = _speed(**kw, concurrency=256, engine_version="0.11")
    per_seq = step_cpu_per_seq("vllm", "0.5.4")
    assert per_seq > step_cpu_per_seq("vllm", "0.6.3") > step_cpu_per_seq("vllm", "0.11") == 0.0
    fixed = step_cpu_fixed("vllm", "0.5.4")
    assert fixed > 0 and step_cpu_fixed("vllm", "0.11") == 0.0
    per_token, pause = step_cpu_held("vllm", "0.5.4")
    held = (381 - 179) + 179 / 2  # each sequence holds its prompt and half its output on average
    for c in (1, 256):
        assert v0[c]["step_breakdown_s"]["cpu"] == pytest.approx(fixed + c * (per_seq + pause + per_token * held))
    assert v1["step_breakdown_s"]["cpu"] == 0.0
    gpu = sum(v0[256]["step_breakdown_s"][k] for k in ("gemm", "attention"))
    # the CPU part outweighs the GPU's at 256 sequences: LambdaLabsML/vllm-benchmark's Mistral-7B
    # 0.5.4 trace steps 31 ms at 250 sequences where gpuwise's GPU step is ~8 ms
    assert 2 < v0[256]["step_breakdown_s"]["cpu"] / gpu < 5
    def step(s: dict) -> float:  # type: ignore[type-arg]
        return float(s["tpot_s"] - s["step_breakdown_s"]["prefill_stall"])

    assert step(v0[256]) > 2 * step(v1)


def test_a_negative_step_cpu_row_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpuwise.catalog.engines import SHIPPED_ENGINES, load_step_cpu
    from gpuwise.errors import GpuwiseError

    bad = tmp_path / "engines.toml"
    text = SHIPPED_ENGINES.read_text(encoding="utf-8")
    bad.write_text(text.replace("per_seq_s = 6.83e-5", "per_seq_s = -1.0"), encoding="utf-8")
    with pytest.raises(GpuwiseError):
        load_step_cpu(bad)
    assert len(load_step_cpu(SHIPPED_ENGINES)) >= 5


def test_a_finite_run_drains_behind_its_longest_outputs() -> None:
    """--requests N: N prompts at once (benchmark_serving at request rate inf). Fewer prompts than
    slots finish one by one, so the run is slower than the steady state at that batch; a long run
    at full slots approaches it."""
    kw = {"model": "llama-3.1-8b", "card": "h100-sxm", "context": 407, "output_tokens": 249}
    steady = _speed(**kw, concurrency=64)
    few = _speed(**kw, concurrency=64, requests=64)
    many = _speed(**kw, concurrency=64, requests=20000)
    assert few["run_requests"] == 64 and few["run_seconds"] > 0
    assert few["throughput_tokens_per_s"] < 0.5 * steady["throughput_tokens_per_s"]
    assert 0.85 < many["throughput_tokens_per_s"] / steady["throughput_tokens_per_s"] <= 1.0
    assert steady["run_requests"] == 0
    # the run's time per token is its median inter-token gap: at its smaller batches, below the steady state's
    assert few["tpot_s"] < steady["tpot_s"]


def test_vllm_v0_pays_cpu_time_for_every_token_its_sequences_hold() -> None:
    """vLLM V0 (before 0.6) rebuilt each running request's whole output every step
    (efficiency.toml [[step_cpu_tokens]]): longer sequences cost more CPU per step; 0.6 on do not."""
    from gpuwise.estimate.speed_decode import step_cpu_held

    per_token, pause = step_cpu_held("vllm", "0.5.4")
    assert per_token > 0 and pause > 0
    assert step_cpu_held("vllm", "0.6.3") == (0.0, 0.0) and step_cpu_held("sglang", "0.4") == (0.0, 0.0)
    kw = {"model": "llama-3.1-8b", "card": "h100-sxm", "output_tokens": 256, "concurrency": 64}
    def cpu(context: int, version: str) -> float:
        return float(_speed(**kw, context=context, engine_version=version)["step_breakdown_s"]["cpu"])

    grown = cpu(4096, "0.5.4") - cpu(1024, "0.5.4")
    assert grown == pytest.approx(per_token * 64 * (4096 - 1024), rel=1e-6)
    assert cpu(4096, "0.6.3") == pytest.approx(cpu(1024, "0.6.3"))


def test_a_v0_run_holds_more_tokens_as_it_drains_behind_its_longest_outputs() -> None:
    """The finite run costs each step at the tokens its running requests hold (prompt + output so far),
    so a V0 run is slower than one priced at the mean hold, and its median gap is that of its own batches."""
    kw = {"model": "mistral-7b-v0.3", "card": "h100-sxm", "context": 454, "output_tokens": 224,
          "concurrency": 256, "requests": 320}
    v0 = _speed(**kw, engine_version="0.5.4")
    v1 = _speed(**kw, engine_version="0.8")
    assert v0["run_seconds"] > v1["run_seconds"]
    assert 0 < v0["tpot_s"] < v0["run_seconds"]
    assert v0["decode_tokens_per_s"] == pytest.approx(1 / v0["tpot_s"], rel=1e-4)


def test_output_lengths_are_exponential_with_the_mean_asked() -> None:
    import statistics

    from gpuwise.estimate.speed import output_lengths

    lengths = output_lengths(320, 224, 4096)
    assert statistics.mean(lengths) == pytest.approx(224, rel=0.01)
    assert statistics.pstdev(lengths) / statistics.mean(lengths) == pytest.approx(1.0, abs=0.1)
    assert max(output_lengths(320, 224, 500)) == 500
    assert output_lengths(320, 224, 4096) == lengths  # the same run every time


@pytest.mark.parametrize("kw", [{"requests": 0}, {"requests": 10, "task": "lora"}, {"requests": 10, "replicas": 2}])
def test_requests_out_of_place_are_a_message(kw: dict) -> None:  # type: ignore[type-arg]
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError):
        _speed(model="llama-3.1-8b", card="h100-sxm", concurrency=4, **kw)


def test_llama_cpp_decode_on_hbm_cards_runs_at_the_family_share() -> None:
    """efficiency.toml llamacpp_decode (fitted in-sample on the A100/H100 PCIe llama.cpp rows):
    llama.cpp's mat-vec decode streams an A100's HBM at a share of the GeForce-measured rate;
    vLLM on the same card and llama.cpp on GeForce are untouched."""
    from gpuwise.catalog.cards import load_cards, resolve_card

    cards = load_cards([])
    a100 = card_rates(resolve_card("a100-80gb-sxm", cards).card)
    assert 0.0 < a100.decode_llamacpp < 1.0
    assert card_rates(resolve_card("rtx-4090", cards).card).decode_llamacpp == 1.0
    kw = {"model": "llama-3.1-8b", "card": "a100-80gb-sxm", "context": 640}
    lcpp = _speed(**kw, engine="llamacpp", weights="gguf:Q4_K_M")
    gemm = lcpp["step_breakdown_s"]["gemm"]
    assert gemm > 0
    vllm = _speed(**kw, weights="bf16")["step_breakdown_s"]["gemm"]
    f16 = _speed(**kw, engine="llamacpp", weights="gguf:F16")["step_breakdown_s"]["gemm"]
    assert f16 == pytest.approx(vllm / a100.decode_llamacpp / _f16_factor(), rel=0.02)


def _f16_factor() -> float:
    from gpuwise.estimate.speed_decode import gguf_decode_table

    return float(gguf_decode_table()["factors"]["F16"])


def test_each_user_waits_per_token_for_the_other_requests_prefills() -> None:
    """Under load a continuous-batching engine admits a new request whenever one finishes; its
    prefill holds up every decoding sequence, so TPOT carries (batch - 1) prompts per output
    length; alone, a request's own prefill is its TTFT, not its TPOT."""
    kw = {"model": "llama-3.1-8b", "card": "h100-sxm", "context": 1249, "output_tokens": 249}
    one, many = _speed(**kw, concurrency=1), _speed(**kw, concurrency=64)
    assert one["step_breakdown_s"]["prefill_stall"] == 0.0
    expected = 63 * 1000 / (249 * many["prefill_tokens_per_s"])
    assert many["step_breakdown_s"]["prefill_stall"] == pytest.approx(expected, rel=1e-3)
    assert many["tpot_s"] * many["throughput_tokens_per_s"] == pytest.approx(64, rel=0.02)
    llama = _speed(**kw, concurrency=64, engine="transformers")
    assert llama["step_breakdown_s"]["prefill_stall"] == 0.0  # a static batch: no prefills mid-run


def test_vllm_v0_steps_carry_a_fixed_cpu_part_measured_at_batch_one() -> None:
    """The V0 row's per_step_s comes from benchmark_serving's saved ITLs at batch 1-2 (7.8 ms a
    token for Mistral-7B bf16 on an H100 with vLLM 0.5.4, 10.8 ms on an A100 with 0.6)."""
    kw = {"model": "mistral-7b-v0.3", "context": 1300, "output_tokens": 900, "concurrency": 1}
    h100 = _speed(**kw, card="h100-sxm", engine_version="0.5.4")["tpot_s"]
    a100 = _speed(**kw, card="a100-80gb-sxm", engine_version="0.6")["tpot_s"]
    assert h100 == pytest.approx(7.85e-3, rel=0.05)
    assert a100 == pytest.approx(10.8e-3, rel=0.05)
    v1 = _speed(**kw, card="h100-sxm", engine_version="0.11")["tpot_s"]
    from gpuwise.estimate.speed_decode import step_cpu_held

    per_token, pause = step_cpu_held("vllm", "0.5.4")
    assert h100 - v1 == pytest.approx(1.35e-3 + 6.83e-5 + pause + per_token * (400 + 450), rel=0.02)


def test_mid_sized_all_reduces_run_below_the_large_message_bus_bandwidth() -> None:
    """NCCL's LL/LL128 protocols: half the bus bandwidth well below 8 MiB, the plateau far above;
    the curve through 18 us latency and 358 GB/s reproduces an 8x H20 all_reduce_perf table."""
    from gpuwise.estimate.links import allreduce_seconds, sized_allreduce_seconds

    measured_us = {2**15: 18.66, 2**20: 27.76, 2**23: 81.16, 2**24: 121.33, 2**27: 700.25, 2**30: 5252.64}
    for size, us in measured_us.items():
        assert sized_allreduce_seconds(size, 8, 358e9, 18e-6) * 1e6 == pytest.approx(us, rel=0.12), size
    small = sized_allreduce_seconds(2**20, 8, 358e9, 0.0) / allreduce_seconds(2**20, 8, 358e9, 0.0)
    large = sized_allreduce_seconds(2**32, 8, 358e9, 0.0) / allreduce_seconds(2**32, 8, 358e9, 0.0)
    assert 1.8 < small < 2.0 and 1.0 < large < 1.01
    assert sized_allreduce_seconds(2**20, 1, 358e9, 18e-6) == 0.0


def test_decode_gemm_flops_are_charged_in_whole_64_row_tiles_on_serving_engines() -> None:
    """Tile quantization: 65 tokens cost two 64-row tiles, 64 cost one, so the FLOP side of the
    GEMM roofline steps up past a multiple of 64; llama.cpp's mat-vec decode has no tile."""
    from gpuwise.catalog.cards import resolve_card
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.speed_gemm import _gemm_compute_seconds, _gemm_shape
    from gpuwise.estimate.workload import Deployment, Workload

    def get_model(name: str):  # type: ignore[no-untyped-def]
        preset = find_preset(name)
        assert preset is not None
        return preset.arch()

    h100 = resolve_card("h100-sxm").card
    model = get_model("llama-3.1-70b")
    w = Workload(context=2048)
    vllm = Deployment(card=h100, engine="vllm")
    t64, t65 = (_gemm_compute_seconds(model, w, vllm, b, 1, 1e15) for b in (64, 65))
    assert t65 / t64 == pytest.approx(2.0, rel=1e-6)
    assert _gemm_compute_seconds(model, w, vllm, 1, 1, 1e15) == pytest.approx(t64, rel=1e-6)
    lcpp = Deployment(card=h100, engine="llamacpp")
    tile = _gemm_shape(model, 1).rows(64)  # a tiled GEMM of few rows also runs below the large-GEMM rate
    assert tile > 1.0
    assert _gemm_compute_seconds(model, w, lcpp, 1, 1, 1e15) == pytest.approx(t64 / 64 / tile, rel=1e-6)
    moe = get_model("qwen3-235b-a22b")  # 128 experts, top 8: 256 tokens give each expert ~16
    dense_like = _gemm_compute_seconds(moe, w, lcpp, 256, 1, 1e15)
    assert _gemm_compute_seconds(moe, w, vllm, 256, 1, 1e15) > 2 * dense_like


def test_weight_only_marlin_decodes_at_its_plateau_once_compute_bound() -> None:
    """An FP8 checkpoint on an A100 (no FP8 tensor cores) runs fp8_marlin, W8A16: half the bytes of
    bf16 at batch 1, but at a large batch its GEMMs stop at Marlin's plateau (efficiency.toml
    marlin_peak_share, 0.45 of the 16-bit peak, from vllm PR #2497's bench), below cuBLAS's bf16."""
    from gpuwise.catalog.arch import ModelArch
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.links import efficiency_table
    from gpuwise.estimate.speed_gemm import _gemm_shape

    def _llama8b() -> ModelArch:
        preset = find_preset("llama-3.1-8b")
        assert preset is not None
        return preset.arch()

    kw = {"model": "llama-3.1-8b", "card": "a100-80gb-sxm", "context": 1024, "engine_version": "0.5.4"}
    def gemm(weights: str, c: int, card: str = "a100-80gb-sxm") -> float:
        return float(_speed(**{**kw, "card": card}, weights=weights, concurrency=c)["step_breakdown_s"]["gemm"])

    assert gemm("fp8", 1) < 0.6 * gemm("bf16", 1)  # memory-bound: the bytes halve
    share = float(efficiency_table()["overheads"]["marlin_peak_share"])
    # ampere-dc gemm 0.85, cuBLAS's 256 rows below its large-GEMM rate (_gemm_shape); Marlin's plateau is flat
    rows = _gemm_shape(_llama8b(), 1).rows(256)
    assert gemm("fp8", 256) / gemm("bf16", 256) == pytest.approx(0.85 / share / rows, rel=0.02)
    # an H100 has FP8 tensor cores: the FP8 checkpoint runs W8A8, faster than bf16 at a large batch
    assert gemm("fp8", 256, "h100-sxm") < gemm("bf16", 256, "h100-sxm")


@settings(max_examples=25, deadline=None)
@given(requests=st.integers(1, 400), concurrency=st.integers(1, 300), context=st.integers(64, 8192),
       engine=st.sampled_from(["vllm", "sglang", "trtllm"]), version=st.sampled_from(["0.5.4", "0.6.4", "0.11"]),
       weights=st.sampled_from(["auto", "fp8", "int4"]), card=st.sampled_from(["a100-80gb-sxm", "h100-sxm"]))
def test_a_finite_run_is_finite_and_positive(requests: int, concurrency: int, context: int, engine: str,
                                             version: str, weights: str, card: str) -> None:
    """N prompts at once, any engine, version, format and card: the run lasts a positive, finite time,
    its median gap is positive and at most the run, and its throughput is its tokens over that time."""
    from hypothesis import assume

    assume(not (weights == "fp8" and card.startswith("a100") and engine != "vllm"))  # refused: no FP8 there
    kw: dict[str, object] = {"model": "llama-3.1-8b", "card": card, "context": context, "weights": weights,
                             "output_tokens": max(1, context // 3), "concurrency": concurrency,
                             "engine": engine, "requests": requests}
    if engine == "vllm":
        kw["engine_version"] = version
    s = _speed(**kw)
    assert math.isfinite(s["run_seconds"]) and s["run_seconds"] > 0
    assert 0 < s["tpot_s"] <= s["run_seconds"]
    assert math.isfinite(s["throughput_tokens_per_s"]) and s["throughput_tokens_per_s"] > 0
