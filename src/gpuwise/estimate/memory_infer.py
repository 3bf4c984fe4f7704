"""Inference memory per GPU: weights, KV cache, activations and logits, runtime overhead.

Engines are modelled with their own rules: vLLM pre-allocates a KV pool out of
gpu_memory_utilization x total memory; transformers grows a cache for the batch it was given;
llama.cpp keeps `-ngl` layers on the GPU and a fixed compute buffer.
"""

from __future__ import annotations

import math

from gpuwise.catalog.arch import ModelArch
from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import Capacity, HostMemory, Item, MemoryBreakdown, MemoryResult
from gpuwise.estimate.constants import KV_BYTES, engine_constants, runtime_overhead_bytes
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB, MiB

ACT_BYTES = 2.0  # activations run in bf16/fp16

WHY_WEIGHTS = Text("parameters x bytes per weight in the chosen format, split over TP x PP GPUs",
                   "参数量 × 所选格式每参数字节数，按 TP × PP 切分到各卡")
WHY_KV = Text("2 (K and V) x attention layers x KV heads per GPU x head_dim x bytes x tokens "
              "(MLA: one latent; sliding layers capped at the window)",
              "2（K 与 V）× 注意力层数 × 每卡 KV 头数 × head_dim × 字节数 × token 数（MLA 只存潜向量；滑动窗口层封顶）")
WHY_STATE = Text("linear-attention layers keep a fixed state per sequence (conv window + recurrent state)",
                 "线性注意力层每个序列保存固定状态（卷积窗口 + 递归状态）")
WHY_ACT = Text("peak of one forward chunk: tokens x (2 x hidden + 3 x intermediate / TP) x 2 bytes",
               "单次前向分块峰值：token 数 × (2 × hidden + 3 × intermediate / TP) × 2 字节")
WHY_LOGITS = Text("fp32 logits for the sequences being sampled: rows x vocab x 4 bytes",
                  "采样时的 fp32 logits：行数 × 词表大小 × 4 字节")
WHY_RUNTIME = Text("CUDA context, cuBLAS workspace, and NCCL buffers when GPUs talk (data/engines.toml)",
                   "CUDA 上下文、cuBLAS 工作区，多卡时另加 NCCL 缓冲（见 data/engines.toml）")


def kv_element_bytes(w: Workload, model: ModelArch) -> float:
    if w.kv_dtype == "auto":
        return 4.0 if model.dtype == "float32" else 2.0
    if w.kv_dtype not in KV_BYTES:
        raise InputError(Text(f"Unknown --kv-dtype '{w.kv_dtype}': use auto, {', '.join(KV_BYTES)}.",
                              f"未知的 --kv-dtype“{w.kv_dtype}”：可用 auto、{', '.join(KV_BYTES)}。"))
    return KV_BYTES[w.kv_dtype]


def tensor_parallel(model: ModelArch, d: Deployment) -> int:
    """TP degree for serving: all GPUs of a pipeline stage unless --tp says otherwise."""
    tp = d.tp or max(1, d.gpus // d.pp)
    if model.num_heads % tp:
        raise InputError(Text(
            f"--tp {tp} does not divide the {model.num_heads} attention heads of {model.name}.",
            f"--tp {tp} 无法整除 {model.name} 的 {model.num_heads} 个注意力头。"),
            hint=Text("Use a TP degree that divides the head count (1, 2, 4, 8...).",
                      "请使用能整除头数的 TP（1、2、4、8……）。"))
    return tp


def kv_share(model: ModelArch, tp: int) -> float:
    """Fraction of the model's KV held by one TP rank: heads split, replicated past kv_heads,
    and the MLA latent replicated on every rank (vLLM's MLA backend)."""
    if model.mla is not None:
        return 1.0
    return max(model.num_kv_heads / tp, 1.0) / model.num_kv_heads


def sequence_kv_bytes(model: ModelArch, tokens: int, elem: float) -> float:
    return model.kv_bytes_for_context(tokens, elem) + model.state_bytes_per_sequence(elem)


def _batched_tokens(w: Workload, d: Deployment) -> int:
    if w.max_num_batched_tokens:
        return w.max_num_batched_tokens
    consts = engine_constants()
    if d.engine == "vllm":
        large = d.card.usable_bytes >= consts["vllm"]["large_gpu_gib"] * GiB
        return int(consts["vllm"]["max_num_batched_tokens_large" if large else "max_num_batched_tokens_small"])
    if d.engine == "llamacpp":
        return int(consts["llamacpp"]["n_ubatch"])
    return w.context * w.concurrency  # transformers prefills the whole batch at once


def _activation_bytes(model: ModelArch, tokens: int, tp: int) -> float:
    """Largest per-layer transient of a forward over `tokens` (MLP up/gate/act dominate)."""
    inner = 3 * model.intermediate_size
    if model.moe is not None:  # fused MoE caches top-k expert intermediates per token
        moe = model.moe
        inner = max(inner if moe.dense_layers else 0,
                    3 * moe.experts_per_token * moe.expert_intermediate_size
                    + 3 * moe.num_shared_experts * moe.shared_intermediate_size)
    return tokens * (2 * model.hidden_size + inner / tp) * ACT_BYTES


def _logit_rows(w: Workload, d: Deployment) -> int:
    consts = engine_constants()
    if d.engine == "vllm":
        large = d.card.usable_bytes >= consts["vllm"]["large_gpu_gib"] * GiB
        seqs = consts["vllm"]["max_num_seqs_large" if large else "max_num_seqs_small"]
        return int(seqs * consts["vllm"]["sampler_logit_copies"])
    return w.concurrency  # transformers and llama.cpp keep the last position of each sequence


def _gpu_weight_fraction(model: ModelArch, d: Deployment) -> float:
    if d.engine == "llamacpp" and d.gpu_layers is not None:
        return min(max(d.gpu_layers, 0), model.num_layers) / model.num_layers
    return 1.0


def _activation_items(model: ModelArch, w: Workload, d: Deployment, tp: int) -> list[Item]:
    """Forward transients and logits. vLLM profiles the sampler apart from the forward, so its
    peak is the larger of the two; transformers holds both at the end of the prefill."""
    act = _activation_bytes(model, _batched_tokens(w, d), tp)
    logits = _logit_rows(w, d) * model.vocab_size * 4.0
    if d.engine == "vllm" and logits > act:
        act = 0.0
    elif d.engine == "vllm":
        logits = 0.0
    return [Item("forward_activations", "activations", act, WHY_ACT),
            Item("logits", "activations", logits, WHY_LOGITS)]


def infer_memory(model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
    """Per-GPU memory of serving `model` as `w` on `d`, with KV capacity and offload needs."""
    tp = tensor_parallel(model, d)
    elem = kv_element_bytes(w, model)
    weights_all = weight_bytes(model, w.weights).total / (tp * d.pp)
    on_gpu = weights_all * _gpu_weight_fraction(model, d)
    on_gpu -= min(d.cpu_offload_gib * GiB, on_gpu)
    share = kv_share(model, tp) / d.pp
    block = engine_constants()["vllm"]["block_size"] if d.engine == "vllm" else 1
    tokens = math.ceil(w.context / block) * block  # vLLM pages KV in blocks of 16 tokens
    state = model.state_bytes_per_sequence(elem) * share * w.concurrency
    kv = model.kv_bytes_for_context(tokens, elem) * share * w.concurrency
    acts = _activation_items(model, w, d, tp)
    runtime = runtime_overhead_bytes(tp * d.pp > 1)
    budget = d.card.usable_bytes * (d.gpu_memory_utilization if d.engine == "vllm" else 1.0)
    fixed = on_gpu + sum(i.bytes for i in acts) + runtime
    moved = 0.0
    if d.offload != "none" and fixed + kv + state > budget:  # move just enough weights off the GPU
        moved = min(on_gpu, math.ceil((fixed + kv + state - budget) / MiB) * MiB)
    items = [Item("weights", "weights", on_gpu - moved, WHY_WEIGHTS), Item("kv_cache", "kv_cache", kv, WHY_KV),
             Item("sequence_state", "kv_cache", state, WHY_STATE), *acts,
             Item("runtime", "overhead", runtime, WHY_RUNTIME)]
    pool = max(0.0, budget - fixed + moved)
    off_host = (weights_all - on_gpu + moved) * d.gpus
    host = HostMemory(cpu_ram=off_host if d.offload != "nvme" else (weights_all - on_gpu) * d.gpus,
                      nvme=moved * d.gpus if d.offload == "nvme" else 0.0)
    breakdown = MemoryBreakdown(items=tuple(i for i in items if i.bytes > 0 or i.key in ("weights", "kv_cache")),
                                kv_pool=pool if d.engine == "vllm" else 0.0)
    return MemoryResult(breakdown=breakdown, usable=budget, capacity=_capacity(model, w, elem, share, pool),
                        host=host)


def _capacity(model: ModelArch, w: Workload, elem: float, share: float, pool: float) -> Capacity:
    """KV tokens the pool holds, sequences of --context it serves, context at --concurrency."""
    per_token = model.kv_bytes_per_token(elem) * share
    kv_tokens = int(pool // per_token) if per_token else 0
    per_seq = sequence_kv_bytes(model, w.context, elem) * share
    max_conc = pool / per_seq if per_seq else float("inf")
    return Capacity(kv_tokens=kv_tokens, max_concurrency=max_conc,
                    max_context=_max_context(model, pool / w.concurrency, elem, share))


def _max_context(model: ModelArch, bytes_per_seq: float, elem: float, share: float) -> int:
    """Longest context whose KV (+ state) fits `bytes_per_seq`, up to the model's maximum."""
    room = bytes_per_seq - model.state_bytes_per_sequence(elem) * share
    per_layer = model.kv_elements_per_token_per_layer() * elem * share
    full, sliding, window = model.count_kind("full"), model.count_kind("sliding"), model.sliding_window
    if room <= 0 or per_layer <= 0:
        return 0 if room <= 0 else model.max_context
    short = room / ((full + sliding) * per_layer)  # every attention layer still growing
    if not sliding or short <= window:
        return int(min(short, model.max_context))
    if not full:
        return model.max_context
    return int(min((room - sliding * window * per_layer) / (full * per_layer), model.max_context))
