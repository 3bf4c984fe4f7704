"""How fast: a roofline for decode and prefill, and a compute + communication model for training.

Decode reads the weights in use (for MoE, the experts the batch touches) plus every
sequence's KV each step: time = max(bytes / bandwidth, FLOPs / compute) + per-step overhead,
plus two all-reduces per layer under tensor parallel and weights streamed over PCIe when
offloaded. Training lives in speed_train.py (re-exported here for callers of this module).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Precision
from gpuwise.catalog.params import count_params
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.links import Rates, allreduce_seconds, efficiency_table
from gpuwise.estimate.memory_infer import kv_element_bytes, kv_share, tensor_parallel
from gpuwise.estimate.speed_train import TrainSpeed, train_speed
from gpuwise.estimate.weights import checkpoint_format, weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.units import GB

# Engines that pre-allocate a KV pool, batch continuously and run FP8/INT8 GEMMs natively.
POOL_ENGINES = ("vllm", "sglang", "trtllm")

__all__ = ["POOL_ENGINES", "InferSpeed", "TrainSpeed", "compute_precision", "infer_speed", "train_speed"]


@dataclass(frozen=True)
class InferSpeed:
    decode_tokens_per_s: float  # per sequence
    throughput_tokens_per_s: float  # all sequences together
    prefill_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    bound: str  # "memory" | "compute" | "communication" | "offload"
    step_breakdown_s: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def compute_precision(model: ModelArch, w: Workload, d: Deployment) -> Precision:
    """The tensor rate the matmuls run at: FP8 only where the card has it; weight-only int4/nf4
    and GGUF dequantise to 16-bit (Marlin/AWQ kernels, llama.cpp's CUDA path)."""
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    if fmt == "fp8" and d.card.dense_tflops("fp8") is not None and d.engine in POOL_ENGINES:
        return "fp8"
    if fmt == "int8" and d.card.dense_tflops("int8") is not None and d.engine in POOL_ENGINES:
        return "int8"
    if d.card.dense_tflops("bf16") is None:
        return "fp16"
    return "bf16"


def _peak_flops(d: Deployment, precision: Precision) -> float:
    return (d.card.dense_tflops(precision) or d.card.dense_tflops("fp16") or d.card.fp32_tflops or 1.0) * 1e12


def _decode_weight_bytes(model: ModelArch, w: Workload, batch: int) -> float:
    """Weights read per decode step: all of a dense model; for MoE the shared part plus the
    experts touched by `batch` tokens: E x (1 - (1 - k/E)^batch) per layer (uniform routing)."""
    wb = weight_bytes(model, w.weights)
    if model.moe is None:
        return wb.total
    p = count_params(model)
    per_param = wb.linear / max(p.linear, 1)
    e, k = model.moe.num_experts, model.moe.experts_per_token
    touched = e * (1 - (1 - k / e) ** batch)
    return wb.total - p.experts * per_param + p.experts * per_param * touched / e


def _avg_kv_tokens(w: Workload) -> float:
    """Mean KV length while decoding: the prompt plus half of the output."""
    return w.prompt_len + w.output_len / 2


def infer_speed(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates) -> InferSpeed:
    tp = tensor_parallel(model, d)
    gpus_per_stage = tp
    batch = w.concurrency
    cap = mem.capacity
    if d.engine in POOL_ENGINES and cap is not None and 1 <= cap.max_concurrency < batch:
        batch = int(cap.max_concurrency)  # the engine queues what its KV pool cannot hold
    elem = kv_element_bytes(w, model)
    share = kv_share(model, tp)
    kv = model.kv_bytes_for_context(int(_avg_kv_tokens(w)), elem) * share * batch / d.pp
    kv += model.state_bytes_per_sequence(elem) * share * batch / d.pp
    weights = _decode_weight_bytes(model, w, batch) / (tp * d.pp)
    offloaded = mem.host.cpu_ram / max(d.gpus, 1) + mem.host.nvme / max(d.gpus, 1)
    p = count_params(model)
    precision = compute_precision(model, w, d)
    flops_peak = _peak_flops(d, precision) * r.gemm
    attn_flops = 4 * model.num_layers * model.q_dim * _avg_kv_tokens(w)  # QK^T and AV per token
    flops = (2 * p.active + attn_flops) * batch / (tp * d.pp)
    t_mem = (weights - offloaded) / r.mem_bw + kv / r.mem_bw
    t_compute = flops / flops_peak
    links = efficiency_table()["links"]
    offload_bw = links["nvme_gbps"] * GB if mem.host.nvme else r.pcie_h2d
    t_offload = offloaded / offload_bw
    msg = batch * model.hidden_size * 2.0  # bf16 hidden state per token
    t_tp = 2 * model.num_layers / d.pp * allreduce_seconds(msg, gpus_per_stage, r.link_busbw, r.link_latency)
    overhead = efficiency_table()["overheads"]["decode_step_s"][d.engine]
    stage = max(t_mem, t_compute) + t_tp + t_offload + overhead
    # pipeline: a token passes every stage in turn; with >= pp batches in flight the stages overlap
    tpot = stage * d.pp
    decode_rate = batch / stage if batch >= d.pp else batch / tpot
    parts = {"memory": t_mem, "compute": t_compute, "communication": t_tp, "offload": t_offload}
    bound = max(parts, key=lambda k: parts[k])
    prefill_tps, ttft = _prefill(model, w, d, r, tp, precision, weights, t_offload)
    # Each request also costs its prefill: B requests of O output tokens take O decode steps plus
    # B prompt prefills (continuous batching interleaves them; their compute adds up).
    out = w.output_len
    throughput = batch * out / (batch * out / decode_rate + batch * w.prompt_len / prefill_tps / d.pp)
    return InferSpeed(decode_tokens_per_s=1 / tpot, throughput_tokens_per_s=throughput,
                      prefill_tokens_per_s=prefill_tps, ttft_s=ttft + tpot, tpot_s=tpot, bound=bound,
                      step_breakdown_s={**parts, "overhead": overhead})


def _prefill(model: ModelArch, w: Workload, d: Deployment, r: Rates, tp: int, precision: Precision,
             weights: float, t_offload: float) -> tuple[float, float]:
    """One prompt: 2 x active params x tokens + causal attention 2 x layers x q_dim x tokens^2,
    at the family's prefill fraction of peak; TP adds two all-reduces of the prompt per layer."""
    prompt = w.prompt_len
    p = count_params(model)
    flops = (2 * p.active * prompt + 2 * model.num_layers * model.q_dim * prompt * prompt) / tp
    t = max(flops / (_peak_flops(d, precision) * r.prefill), weights / r.mem_bw)
    msg = prompt * model.hidden_size * 2.0
    t += 2 * model.num_layers * allreduce_seconds(msg, tp, r.link_busbw, r.link_latency) + t_offload
    return prompt / t, t
