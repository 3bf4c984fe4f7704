"""Serving all-reduces by the path they take: NCCL's NVLink SHARP curve on an NVSwitch node, TensorRT-LLM's
row cap on its own kernels, and a packed prefill forward all-reducing its prompts together."""

from __future__ import annotations

import pytest

from gpuwise.service import EstimateRequest, estimate_json

MiB = 2**20


def test_nvls_all_reduce_follows_nccls_own_curve_on_an_8x_h100_node() -> None:
    """microsoft/mscclpp docs/dsl/figs/single_node_allreduce_results_1M_to_1G.png: NCCL algbw 85 ... 275 GB/s
    from 4 MiB to 1 GiB on one H100 NVLS node; the NVLS latency and half-rate size reproduce each point."""
    from gpuwise.estimate.links import nvls_allreduce_shape, sized_allreduce_seconds

    algbw_gbps = {4: 85, 8: 105, 16: 130, 32: 165, 64: 205, 128: 225, 256: 245, 512: 260, 1024: 275}
    latency, half_rate = nvls_allreduce_shape()
    for mib, algbw in algbw_gbps.items():
        size = mib * MiB
        measured = size / (algbw * 1e9)
        assert sized_allreduce_seconds(size, 8, 475e9, latency, half_rate) == pytest.approx(measured, rel=0.06), mib


def test_mid_sized_nvls_all_reduces_cost_more_than_the_ring_slope_gave_them() -> None:
    """At 8-16 MiB NCCL's NVLS reaches about 40 % of its peak bus bandwidth (the ring slope read on
    an H20 table put it at 67-75 %); on the largest messages both reach the plateau."""
    from gpuwise.estimate.links import nvls_allreduce_shape, sized_allreduce_seconds

    latency, half_rate = nvls_allreduce_shape()
    for size in (8 * MiB, 16 * MiB):
        nvls = sized_allreduce_seconds(size, 8, 475e9, latency, half_rate)
        ring_slope = sized_allreduce_seconds(size, 8, 475e9, 10e-6)
        assert nvls > 1.3 * ring_slope
    big = 8 * 1024 * MiB
    assert sized_allreduce_seconds(big, 8, 475e9, latency, half_rate) == pytest.approx(
        sized_allreduce_seconds(big, 8, 475e9, 10e-6), rel=0.01)


def _speed(**kw: object) -> dict[str, object]:
    return estimate_json(EstimateRequest(**kw))["speed"]  # type: ignore[arg-type, no-any-return]


@pytest.mark.parametrize("sequences,path", [(128, "nvlink"), (129, "nvls")])
def test_tensorrt_llm_sends_more_than_128_decode_rows_to_nccl_even_below_its_8_mb_workspace(
        sequences: int, path: str) -> None:
    """TensorRT-LLM#5432: AUTO uses 128 tokens as the NCCL / MIN_LATENCY threshold. Llama-3.1-70B's
    8,192-wide rows: 129 sequences are 2.1 MB, far below the 8 MB workspace, yet go through NCCL (NVLS)."""
    s = _speed(model="llama-3.1-70b", card="h100-sxm", gpus=8, weights="fp8", context=2048,
               concurrency=sequences, engine="trtllm")
    assert s["collective_path"] == path


def test_vllm_keeps_its_own_all_reduce_for_a_few_hundred_rows() -> None:
    """vLLM's custom all-reduce has no row cap: 300 x 8,192 x 2 B = 4.9 MB stays on it (ring figure)."""
    s = _speed(model="llama-3.1-70b", card="h100-sxm", gpus=8, weights="fp8", context=2048, concurrency=300)
    assert s["collective_path"] == "nvlink"


def test_a_packed_prefill_forward_all_reduces_its_prompts_in_one_message() -> None:
    """16 prompts of 128 tokens in one 2,048-token forward pay that forward's all-reduces once,
    shared: each prompt's part is a sixteenth of the forward's, less than its own all-reduces alone."""
    from gpuwise.estimate.speed import _Prefill

    pre = _Prefill(prompt=128, compute=1e-3, read=3e-3, comm=2e-3, offload=0.0, budget=2048, comm_forward=8e-3)
    assert pre.packed == pytest.approx(1e-3 + 8e-3 / 16)
    assert pre.seconds(16) == pytest.approx(16e-3 + 8e-3)  # one forward: its FLOPs and one all-reduce pass
    assert pre.seconds(32) == pytest.approx(32e-3 + 2 * 8e-3)  # two full forwards
    assert pre.seconds() == pytest.approx(3e-3 + 2e-3)  # a prompt alone (its TTFT) all-reduces its own rows
    # a part-filled forward of 256 tokens: its all-reduces between one prompt's and a full forward's
    assert pre.seconds(2) == pytest.approx(3e-3 + 2e-3 + (256 - 128) / (2048 - 128) * (8e-3 - 2e-3))


def test_a_prompts_share_of_a_packed_forwards_all_reduces_is_below_its_own() -> None:
    """Llama-3.1-405B at TP 8: a 128-token prompt's share (a sixteenth) of a 2,048-token forward's
    all-reduces costs less than the prompt's own 4 MB all-reduces (their latency is paid once per forward)."""
    from gpuwise.estimate.speed import _prefill_comm
    from gpuwise.service import build

    model, _, d, _ = build(EstimateRequest(model="llama-3.1-405b", card="h100-sxm", gpus=8, weights="fp8",
                                           context=256, output_tokens=128, engine="trtllm"))
    from gpuwise.estimate.links import card_rates

    r = card_rates(d.card, None, d.gpus)
    one, forward = _prefill_comm(model, d, r, 8, 128), _prefill_comm(model, d, r, 8, 2048)
    assert forward / 16 < one


def test_the_residual_stream_s_norms_stream_the_whole_hidden_state_on_every_tp_rank() -> None:
    """Llama-3.1-405B at TP 8: two residual add + RMSNorm passes a layer over 16,384 elements of 2 B,
    8 B each (vLLM fused_add_rms_norm), on every rank; at 1,024 sequences they outlast the kernels'
    launch floors, at one sequence the floors stand."""
    from gpuwise.catalog.cards import resolve_card
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.speed_decode import _elementwise_bytes
    from gpuwise.estimate.workload import Deployment

    preset = find_preset("llama-3.1-405b")
    assert preset is not None
    model = preset.arch()
    h100 = resolve_card("h100-sxm").card
    trt = Deployment(card=h100, gpus=8, tp=8, engine="trtllm")
    per_token = _elementwise_bytes(model, trt, "fp8", 8)
    assert per_token == pytest.approx(model.num_layers * 2 * 8 * model.hidden_size)
    vllm = Deployment(card=h100, gpus=8, tp=8, engine="vllm")
    assert _elementwise_bytes(model, vllm, "fp8", 8) > per_token  # vLLM's quant, RoPE and SiLU kernels too
    assert _elementwise_bytes(model, Deployment(card=h100, engine="llamacpp"), "bf16", 1) == 0.0

    def floor(concurrency: int) -> float:
        s = _speed(model="llama-3.1-405b", card="h100-sxm", gpus=8, weights="fp8", context=256,
                   output_tokens=128, concurrency=concurrency, engine="trtllm")
        return float(s["kernel_floor_s"])  # type: ignore[arg-type]

    assert floor(1024) == pytest.approx(1024 * per_token / (3.35e12 * 0.85), rel=0.05)  # H100 at 0.85 of 3.35 TB/s
    assert floor(2) == pytest.approx(floor(1), rel=0.01)


def test_the_users_token_budget_sets_how_many_prompts_a_prefill_forward_packs() -> None:
    """--max-num-batched-tokens 8192: four 2,048-token prompts share each forward (their weight pass and
    one larger all-reduce a layer, nearer NVLS's plateau), so under load a prompt costs less than in the
    engine's default 2,048-token forward, which holds one."""
    ask: dict[str, object] = {"model": "llama-3.1-405b", "card": "h100-sxm", "gpus": 8, "weights": "fp8",
                              "context": 2176, "output_tokens": 128, "concurrency": 256, "engine": "trtllm"}
    default = _speed(**ask)
    budget = _speed(**ask, max_num_batched_tokens=8192)
    assert float(budget["throughput_tokens_per_s"]) > float(default["throughput_tokens_per_s"])  # type: ignore[arg-type]
    assert budget["ttft_s"] == pytest.approx(default["ttft_s"])  # a prompt alone still runs its own forward
