"""Inference memory per GPU: weights, KV cache, activations and logits, runtime overhead.

Engines are modelled with their own rules: vLLM pre-allocates a KV pool out of
gpu_memory_utilization x total memory; transformers grows a cache for the batch it was given;
llama.cpp keeps `-ngl` layers on the GPU and a fixed compute buffer.

This module assembles the MemoryResult: the weights each GPU holds, the KV and runtime lines, the
card-free `Serving` part a plan shares between cards, and `on_card`, which finishes it on one card.
The engine's rules and its profiling peak are in estimate/serving_rules.py, the KV pool and its
capacity in estimate/kv_pool.py. This module imports catalog and the estimate modules below it;
neither of those two imports this module, and none of the three imports plan, cli or web.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.engines import EngineRules
from gpuwise.estimate.allocator import allocator_overhead, rotary_cache_bytes
from gpuwise.estimate.breakdown import HostMemory, Item, MemoryBreakdown, MemoryResult
from gpuwise.estimate.kv_pool import (
    HybridPages,
    KvRates,
    budget_cap,
    hybrid_pages,
    kv_capacity,
    kv_element_bytes,
    kv_rates,
    kv_share,
    pool_budget,
)
from gpuwise.estimate.serving_rules import activation_items, on_nvlink_fabric, rules_for, tensor_parallel
from gpuwise.estimate.weights import checkpoint_format, weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB, MiB

# kv_element_bytes, kv_share, rules_for and tensor_parallel are re-exported: speed.py and
# speed_decode.py import them from here
__all__ = ["WHY_RUNTIME", "Serving", "floor_limit", "floor_of", "held_weight_overhead", "infer_memory",
           "kv_element_bytes", "kv_share", "on_card", "rules_for", "serving_part", "shortfall_floor",
           "tensor_parallel"]

WHY_WEIGHTS = Text("parameters x bytes per weight in the chosen format, split over TP x PP GPUs, as PyTorch's "
                   "caching allocator holds them (2 MiB-rounded segments) with the rotary cache",
                   "参数量 × 所选格式每参数字节数，按 TP × PP 切分到各卡；按 PyTorch 缓存分配器实际占用计"
                   "（段按 2 MiB 取整），含旋转位置编码缓存")
WHY_KV = Text("2 (K and V) x attention layers x KV heads per GPU x head_dim x bytes x tokens "
              "(MLA: one latent; sliding layers capped at the window)",
              "2（K 与 V）× 注意力层数 × 每卡 KV 头数 × head_dim × 字节数 × token 数（MLA 只存潜向量；滑动窗口层封顶）")
WHY_STATE = Text("linear-attention layers keep a fixed state per sequence (conv window + recurrent state)",
                 "线性注意力层每个序列保存固定状态（卷积窗口 + 递归状态）")
WHY_RUNTIME = Text("memory outside torch's allocator the engine charges: CUDA context, cuBLAS workspace, NCCL "
                   "buffers when GPUs talk (data/engines.toml, by engine version)",
                   "引擎计入的 torch 分配器以外的显存：CUDA 上下文、cuBLAS 工作区，多卡时另加 NCCL 缓冲"
                   "（见 data/engines.toml，按引擎版本）")
WHY_RUNTIME_NVLINK = Text("memory outside torch's allocator at TP > 2 on an NVLink/NVSwitch node: NCCL's buffers for "
                          "that fabric's channels and the engine's all-reduce buffers, as logged there "
                          "(data/engines.toml non_torch_nvlink_gib / init_nvlink_gib, by engine version)",
                          "NVLink/NVSwitch 节点上 TP > 2 时 torch 分配器以外的显存：NCCL 为该互联各通道分配的缓冲区"
                          "及引擎的 all-reduce 缓冲区，按实测日志计（见 data/engines.toml non_torch_nvlink_gib / "
                          "init_nvlink_gib，按引擎版本）")
WHY_GRAPHS = Text("CUDA graphs the engine estimates and charges before sizing the KV pool (vLLM >= 0.21)",
                  "引擎在划分 KV 池之前估算并预留的 CUDA graph 显存（vLLM >= 0.21）")


_ELEMENT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def held_weight_overhead(model: ModelArch, w: Workload, rules: EngineRules, tp: int) -> float:
    """Bytes of one TP rank's weights the engine counts beyond the tensors: PyTorch's segment
    rounding and the rotary cache (estimate/allocator.py); 0 for engines that load no torch
    tensors (TensorRT-LLM engines, llama.cpp: engines.toml weights_counted) and formats whose layout it
    does not know."""
    fmt = checkpoint_format(model) if w.weights == "auto" else w.weights
    if rules.weights_counted == "none" or fmt not in _ELEMENT_BYTES:
        return 0.0
    reserved = rules.weights_counted == "reserved"
    rope = rules.rotary_cache_bytes or (4.0 if model.dtype == "float32" else 2.0)
    if fmt != checkpoint_format(model):
        # converted at load (vLLM's online FP8: process_weights_after_loading): the new tensors
        # are cut from the freed 16-bit blocks, whose rests are large enough to split off
        return rotary_cache_bytes(model, rope)
    return allocator_overhead(model, _ELEMENT_BYTES[fmt], tp, rope, reserved)


def _gpu_weight_fraction(model: ModelArch, d: Deployment) -> float:
    if d.engine == "llamacpp" and d.gpu_layers is not None:
        return min(max(d.gpu_layers, 0), model.num_layers) / model.num_layers
    return 1.0


def _runtime_items(d: Deployment, rules: EngineRules, tp_pp: int) -> list[Item]:
    """Memory outside the tensors: the engine's measured non-torch share, and the CUDA graphs
    where the engine charges them before sizing its pool."""
    non_torch = (rules.non_torch_tp_gib if tp_pp > 1 else rules.non_torch_gib) * GiB
    items = [Item("runtime", "overhead", non_torch, WHY_RUNTIME)]
    if rules.cuda_graph_in_pool and rules.cuda_graph_gib:
        items.append(Item("cuda_graphs", "overhead", rules.cuda_graph_gib * GiB, WHY_GRAPHS))
    return items


def _runtime_on_card(part: Serving, d: Deployment) -> tuple[Item, ...]:
    """The runtime lines on d's card: the engine's non-torch memory at TP > 2 on an NVLink node
    where its rule gives one (never below the card-free figure, so `shortfall_floor` holds)."""
    rules = part.rules
    if not rules.non_torch_nvlink_gib or not on_nvlink_fabric(d, part.tp):
        return part.runtime_lines
    return tuple(replace(i, bytes=max(i.bytes, rules.non_torch_nvlink_gib * GiB), why=WHY_RUNTIME_NVLINK)
                 if i.key == "runtime" else i for i in part.runtime_lines)


@dataclass(frozen=True)
class Serving:
    """The part of a serving memory estimate that does not read the card: computed once for a
    model, workload and deployment settings, then finished for each card (`on_card`). A plan
    shares it between every card and replica count with those settings."""

    tp: int
    rules: EngineRules
    elem: float  # bytes per KV element
    weights_all: float  # this GPU's share of all the weights
    on_gpu: float  # of which on the GPU (llama.cpp's -ngl, --cpu-offload-gib)
    share: float  # of the model's KV held by one GPU
    on_device: float  # of the KV on the GPU (llama.cpp's GPU layers)
    state: float
    kv: float
    host_kv: float
    runtime_bytes: float
    least: float  # weights + KV + state + runtime: the breakdown's total but its activations
    pages: HybridPages | None
    kv_rates: KvRates  # of the GPU's KV share that the capacity counts
    kv_lines: tuple[Item, ...]  # the KV lines a breakdown shows (the state only where there is one)
    runtime_lines: tuple[Item, ...]  # the runtime lines it shows (those above 0)


def serving_part(model: ModelArch, w: Workload, d: Deployment) -> Serving:
    """Weights, KV and runtime of serving `model` as `w` with `d`'s settings (not its card)."""
    tp = tensor_parallel(model, d)
    rules = rules_for(d)
    elem = kv_element_bytes(w, model)
    weights_all = weight_bytes(model, w.weights).total / (tp * d.pp) + held_weight_overhead(model, w, rules, tp) / d.pp
    on_gpu = weights_all * _gpu_weight_fraction(model, d)
    on_gpu -= min(d.cpu_offload_gib * GiB, on_gpu)
    share = kv_share(model, tp) / d.pp
    tokens = math.ceil(w.context / rules.block_size) * rules.block_size  # KV is paged in blocks
    # llama.cpp keeps each layer's KV where the layer runs: the CPU layers' KV is in host RAM
    on_device = _gpu_weight_fraction(model, d)
    state_all = model.state_bytes_per_sequence(elem) * share * w.concurrency
    kv_all = model.kv_bytes_for_context(tokens, elem) * share * w.concurrency
    state, kv = state_all * on_device, kv_all * on_device
    host_kv = (kv_all + state_all) * (1 - on_device) * d.gpus
    runtime = tuple(_runtime_items(d, rules, tp * d.pp))
    grown = rules.pool == "grow" and on_device > 0  # capacity: what the GPU layers' share could grow to
    lines = (Item("kv_cache", "kv_cache", kv, WHY_KV), Item("sequence_state", "kv_cache", state, WHY_STATE))
    return Serving(tp=tp, rules=rules, elem=elem, weights_all=weights_all, on_gpu=on_gpu, share=share,
                   on_device=on_device, state=state, kv=kv, host_kv=host_kv,
                   runtime_bytes=sum(i.bytes for i in runtime),
                   least=on_gpu + kv + state + sum(i.bytes for i in runtime),
                   pages=None if grown else hybrid_pages(model, elem, share, rules),
                   kv_rates=kv_rates(model, w, elem, share * on_device if grown else share),
                   kv_lines=tuple(i for i in lines if i.bytes > 0 or i.key == "kv_cache"),
                   runtime_lines=tuple(i for i in runtime if i.bytes > 0))


def shortfall_floor(part: Serving, d: Deployment) -> float:
    """The least `required - usable` can come to on d's card (`part` made for d's settings), for
    a search to set aside what cannot fit before estimating it: every line but the activations is
    known without the card, and the activations are never negative; the budget is at most
    `budget_cap`. -inf where no cap holds. tests/test_plan_floor.py holds the estimate to it."""
    cap = budget_cap(part.rules, d)
    return -math.inf if cap is None else floor_of(part.least, cap)


def floor_of(least: float, cap: float) -> float:
    """`least` bytes against a budget of at most `cap`: short by at least this, less a millionth
    for rounding."""
    return least - cap - 1e-6 * (least + cap)


def floor_limit(cap: float) -> float:
    """The least bytes above which `floor_of(least, cap)` is above 0: a caller that tests many
    `least` against one cap compares with this instead (the floor's millionth is far wider than
    the rounding of the division)."""
    return cap * (1 + 1e-6) / (1 - 1e-6)


def infer_memory(model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
    """Per-GPU memory of serving `model` as `w` on `d`, with KV capacity and offload needs."""
    return on_card(model, w, d, serving_part(model, w, d))


def on_card(model: ModelArch, w: Workload, d: Deployment, part: Serving) -> MemoryResult:
    """`infer_memory` from its card-free `part` (made by `serving_part` for this model, workload
    and every setting of `d` but its card): activations, the engine's budget, offload, capacity."""
    rules, tp, on_gpu, kv, state = part.rules, part.tp, part.on_gpu, part.kv, part.state
    acts = activation_items(model, w, d, tp)
    runtime = _runtime_on_card(part, d)
    fixed = on_gpu + sum(i.bytes for i in acts) + sum(i.bytes for i in runtime)
    budget = pool_budget(d, rules, fixed, on_gpu, tp, model.mla is not None)
    moved = 0.0
    if d.offload != "none" and fixed + kv + state > budget.usable:  # move just enough weights off the GPU
        moved = min(on_gpu, math.ceil((fixed + kv + state - budget.usable) / MiB) * MiB)
    items = (Item("weights", "weights", on_gpu - moved, WHY_WEIGHTS), *part.kv_lines,
             *(i for i in acts if i.bytes > 0), *runtime)  # the lines above 0, weights and KV always
    pool = 0.0 if rules.pool == "grow" else budget.pool + moved
    off_host = (part.weights_all - on_gpu + moved) * d.gpus + part.host_kv
    host = HostMemory(cpu_ram=off_host if d.offload != "nvme" else (part.weights_all - on_gpu) * d.gpus,
                      nvme=moved * d.gpus if d.offload == "nvme" else 0.0)
    breakdown = MemoryBreakdown(items=items, kv_pool=pool)
    if rules.pool == "grow" and part.on_device > 0:
        # no pool: the cache is grown for the batch asked, so the capacity is what the memory left
        # beside the weights, activations and runtime could hold (on the GPU layers' share)
        room = max(0.0, budget.usable - fixed)
        capacity = kv_capacity(model, w, part.kv_rates, room, rules.block_size)
    else:
        capacity = kv_capacity(model, w, part.kv_rates, pool, rules.block_size, part.pages)
    return MemoryResult(breakdown=breakdown, usable=budget.usable, capacity=capacity, host=host)
