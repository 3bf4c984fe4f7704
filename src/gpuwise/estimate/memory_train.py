"""Training memory per GPU, by the framework's policy: model states, saved activations, the loss.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, s.3.1), with each dtype taken from the
framework (data/frameworks.toml): mixed precision with an fp32 master keeps 2 + 2 + 4 + 4 + 4 bytes
per trainable parameter; pure bf16 (torchtune: master_weights = none) keeps 2 + 2 + 2 + 2; ZeRO-1/2/3
shard optimizer, then gradients, then weights over the data-parallel ranks. Saved activations, the
checkpointing policies and the loss are in `activations.py`. The peak is the largest of the step's
phases (loss, backward, optimizer step), not the sum of tensors that never coexist.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import Framework, find_framework, master_weights_for
from gpuwise.catalog.params import ParamBreakdown, count_params
from gpuwise.errors import InputError
from gpuwise.estimate.activations import cp_backward_transient, kept_logits_bytes, loss_bytes, saved_activations
from gpuwise.estimate.breakdown import HostMemory, Item, MemoryBreakdown, MemoryResult
from gpuwise.estimate.constants import engine_constants
from gpuwise.estimate.memory_infer import WHY_RUNTIME
from gpuwise.estimate.peft_modules import dora_activations, dora_layers_kept, dora_magnitude_params, saved_module_params
from gpuwise.estimate.train_pool import earlier_in_place_segments, earlier_loss_segments, in_place_loss, stream_pool
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB

# Optimizer states per trainable parameter, in units of the state dtype (the dtype of the tensor the
# optimizer updates: the fp32 master, or the bf16 parameter itself under pure bf16). AdamW: m and v.
# SGD: momentum. Adafactor (beta1 None, the HF default): factored second moments, rows + cols, ~0.
_STATES = {"adamw": 2.0, "sgd": 1.0, "adafactor": 0.0}
# bitsandbytes 8-bit Adam (Dettmers et al. 2022): m and v at 1 byte each, plus one fp32 absmax per
# 256-value block per state (bitsandbytes/optim/optimizer.py Optimizer8bit.init_state, block_wise:
# 'blocks = n // 256', absmax1 and absmax2 float32). The paged variant keeps the same bytes in unified memory.
_8BIT_BYTES = 2.0 + 2 * 4 / 256
# Caching-allocator slack: what torch.cuda.max_memory_reserved adds over max_memory_allocated. It
# follows the loss's tensors, not the saved activations. A step allocates its checkpointed layer inputs
# at the same sizes in the same order every time, so they reuse their own cached blocks; the loss's
# full-vocabulary tensors are the largest of the step and come in several sizes (bf16 logits, fp32
# upcast, log-probs and gradients, full and shifted lengths) that coexist in one combination forward
# and another backward, so the pool keeps blocks for both. Measured (validation/points, estimated
# allocated peaks): Liger's Llama-3-8B FSDP chart (liger-readme-e2e-llama3-8b-fsdp-8xa100) at 1,024 and
# 2,048 tokens x 8 has the same activations with and without Liger's fused loss, and reserved minus
# allocated falls from 7.7 and 17.4 GiB (HF, full fp32 loss of 11.7 and 23.5 GiB) to 1.6 and 1.5 GiB
# (Liger): 0.64-0.72 of the loss; torchtitan's Llama-3.1-8B on 128 H100s and at 32k tokens (loss not
# compiled, no shifted copy) 0.24-0.44; benchmarks/allocator_replay.py gives 0.33 for one fixed length
# over the loss's tensors alone. The Liger runs from 3.7 to 29.8 GiB of activations keep 1.1-3.1 GiB of
# slack: 0.06 of the rest of the churn. meta-llama/llama-cookbook PR #41 (Llama-2-7B LoRA, FSDP,
# active/reserved 25.86/32.67, 20.20/27.36, 15.22/19.36 GB) is 30-43 % of all the churn, most of it
# the full fp32 loss of a 32k vocabulary.
# The slack never pushes the pool past the card: an allocation that fails first releases the cached
# free blocks and retries (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::
# malloc: release_available_cached_blocks, then release_cached_blocks, before raising OOM), so under
# pressure reserved stays at the room left beside the CUDA context, and only allocated must fit.
_LOSS_SLACK = 0.5  # of the loss's peak: between torchtitan's 0.24-0.44 and the HF Trainer's 0.64-0.72
_OTHER_SLACK = 0.05  # of the other tensors that churn (activations, the recomputed layer, gradients)

WHY = {
    "weights": Text("compute weights (bf16; QLoRA: NF4 base; FSDP2 fp32 shards where the framework keeps them), "
                    "sharded by ZeRO-3 and TP",
                    "计算权重（bf16；QLoRA 为 NF4 基座；框架保留 fp32 分片时为 FSDP2 fp32 分片），"
                    "由 ZeRO-3 与 TP 切分"),
    "adapters": Text("LoRA adapters r x (d_in + d_out) per target module (DoRA: and a magnitude per output row), in "
                     "the framework's adapter dtype; --modules-to-save: a bf16 copy of each module trained in full",
                     "LoRA 适配器：每个目标模块 r × (d_in + d_out)（DoRA 另有每个输出行一个幅值），"
                     "采用框架的适配器精度；--modules-to-save：每个全量训练模块的一份 bf16 副本"),
    "gradients": Text("gradients of the trainable parameters in the framework's grad dtype, sharded by ZeRO-2+; "
                      "optimizer-in-backward: one parameter's gradient at a time; FSDP full fine-tuning: plus, in "
                      "backward, one unit's unsharded gradient and the previous unit's reduce-scatter input",
                      "可训练参数的梯度（框架的梯度精度），ZeRO-2 起切分；反向中更新优化器时只有一个参数的梯度；"
                      "FSDP 全参微调在反向中另有一个单元的未切分梯度与上一单元的 reduce-scatter 输入"),
    "optimizer": Text("optimizer states (+ fp32 master weights where the framework keeps them) per trainable "
                      "parameter, sharded by ZeRO-1+; 8-bit: 1 byte per state",
                      "每个可训练参数的优化器状态（框架保留时含 fp32 主权重），ZeRO-1 起切分；8-bit 每个状态 1 字节"),
    "step_temp": Text("optimizer states (+ fp32 master weights where the framework keeps them) per trainable "
                      "parameter, sharded by ZeRO-1+, and during the step foreach AdamW's sqrt of the second "
                      "moments (one more state-sized tensor); DeepSpeed ZeRO-3 steps one sub-group at a time, "
                      "beside that sub-group's fp32 gradients",
                      "每个可训练参数的优化器状态（框架保留时含 fp32 主权重），ZeRO-1 起切分；更新时另有 foreach AdamW "
                      "对二阶矩开方的中间量（再一份与状态同尺寸的张量）；DeepSpeed ZeRO-3 每次只更新一个子组，"
                      "旁有该子组的 fp32 梯度"),
    "activations": Text("saved for backward per layer by the checkpointing policy (norm fp32 copies, q/k/v, "
                        "attention output and log-sum-exp, MLP gate/up/act/down inputs), plus one layer recomputed",
                        "按重计算策略每层为反向保存的张量（norm 的 fp32 副本、q/k/v、注意力输出与 LSE、MLP 中间量），"
                        "加一层重计算"),
    "logits": Text("the loss at its peak: full = 12 bytes per logit (fp32 log-probs and gradients), chunked = the "
                   "bf16 chunks + one chunk's fp32, fused = one chunk only",
                   "损失峰值：完整 = 每个 logit 12 字节（fp32 对数概率与梯度）；"
                   "分块 = bf16 分块 + 一块 fp32；融合 = 仅一块"),
    "gather": Text("FSDP/ZeRO-3 all-gather buffers: the current and prefetched layer in bf16 (FSDP1: and the "
                   "root unit, embedding and output projection, whole through forward and backward)",
                   "FSDP/ZeRO-3 全收集缓冲：当前层与预取层的 bf16 权重（FSDP1 另有根单元，即嵌入与输出投影，"
                   "在前向与反向中保持完整）"),
    "slack": Text(f"caching-allocator slack: reserved minus allocated, {_LOSS_SLACK:.0%} of the loss's peak (its "
                  f"full-vocabulary tensors of several sizes) and {_OTHER_SLACK:.0%} of the other tensors that churn "
                  "each step (Liger and torchtitan benchmark measurements)",
                  f"缓存分配器余量：reserved 减 allocated，按损失峰值（多种尺寸的全词表张量）的 {_LOSS_SLACK:.0%}"
                  f"与每步其余反复分配张量的 {_OTHER_SLACK:.0%}（Liger 与 torchtitan 基准实测）"),
    "slack_pool": Text(f"caching-allocator slack: reserved minus allocated, {_LOSS_SLACK:.0%} of the loss's peak and "
                       f"{_OTHER_SLACK:.0%} of the other tensors that churn, plus FSDP's sharded gradients, whose "
                       "blocks belong to its reduce-scatter stream and stay cached there while the forward and the "
                       "loss run",
                       f"缓存分配器余量：reserved 减 allocated，按损失峰值的 {_LOSS_SLACK:.0%} 与其余反复分配张量的 "
                       f"{_OTHER_SLACK:.0%}，另加 FSDP 的分片梯度：其显存块属于 reduce-scatter 流，"
                       "在前向与损失计算时仍缓存于该流"),
    "slack_varied": Text("caching-allocator slack: batches of varying length leave an earlier batch's loss segments "
                         "(its fp32 peak and bf16 logits) cached beside this one's; a lower bound",
                         "缓存分配器余量：批长度逐步变化时，较早批次的损失显存段（其 fp32 峰值与 bf16 logits）"
                         "仍被缓存在本批旁；此为下界"),
}


@functools.lru_cache(maxsize=1024)
def lora_params(model: ModelArch, rank: int, targets: tuple[str, ...]) -> int:
    """r x (d_in + d_out) per targeted linear per layer (PEFT LoraLayer A: d_in x r, B: r x d_out).
    In MoE layers gate/up/down adapt the shared experts only (routed experts are left frozen).
    Cached: a training plan asks it for every configuration of the same model."""
    h, q, kv = model.hidden_size, model.q_dim, model.kv_dim
    attn = {"q": h + q, "k": h + kv, "v": h + kv, "o": q + h}
    total = 0
    for index in range(model.num_layers):
        inter = model.intermediate_size
        if model.is_moe_layer(index) and model.moe is not None:
            inter = model.moe.shared_intermediate_size * model.moe.num_shared_experts
        mlp = {"gate": h + inter, "up": h + inter, "down": inter + h} if inter else {}
        total += rank * sum({**attn, **mlp}.get(t, 0) for t in targets)
    return total


@dataclass(frozen=True)
class Precision:
    """Bytes per trainable parameter of each model state, from the framework's dtypes."""

    param: float  # the trainable tensor itself (adapters; full FT: the weights)
    grad: float
    master: float
    optimizer: float  # states only


# Bytes a parameter of the fp32 master beside 16-bit weights: a copy, or the 16 bits bf16 drops (the
# weight's own bits are the rest; Apex DistributedFusedAdam store_param_remainders, int16 shards)
_MASTER_BYTES = {"fp32": 4.0, "remainders": 2.0, "none": 0.0}


def precision(fw: Framework, w: Workload, peft: bool, sharded: bool = False) -> Precision:
    if peft:
        param, kind = (4.0 if fw.adapter_dtype == "fp32" else 2.0), fw.master_weights
    else:  # FSDP2 fp32 sharded params are their own master; otherwise bf16 weights + optional fp32 master
        param, kind = (4.0 if fw.fp32_sharded_params else 2.0), master_weights_for(fw, w.task, sharded)
    master = _MASTER_BYTES[kind] if param == 2.0 else 0.0
    updated = 4.0 if param == 4.0 or master else 2.0  # the dtype the optimizer steps, and its states take
    # fp32 gradients where the framework accumulates them in fp32 beside an fp32 copy (Megatron's
    # main_grad) or shards fp32 params (FSDP2); a pure-bf16 full fine-tune keeps bf16 gradients
    grad = 4.0 if (fw.grads_dtype == "fp32" and (peft or master)) or fw.fp32_sharded_params and not peft \
        else param
    if w.optimizer in ("adamw8bit", "paged-adamw8bit"):
        states = _8BIT_BYTES
    else:
        states = _STATES[w.optimizer] * updated
    return Precision(param=param, grad=grad, master=master, optimizer=states)


def _saved_precision(fw: Framework, w: Workload, d: Deployment, dp: int) -> Precision:
    """Bytes per parameter of a --modules-to-save copy (estimate/peft_modules.py): a 16-bit weight trained in
    full, so the framework treats it as it treats full fine-tuning's weights: the HF Trainer's torch AdamW
    steps the bf16 copy with bf16 states (no master, bf16 gradients; checked with peft 0.13.2 on CPU), a
    DeepSpeed ZeRO stage keeps an fp32 master and fp32 states (deepspeed/runtime/zero/stage_1_and_2.py@v0.16.5
    line 401: the fp32 partition, .float()) and, at every stage, gradients in the model dtype (engine.py@v0.16.5
    get_data_types, lines 1020-1024: grad_accum_dtype = the model dtype under zero_optimization)."""
    full = replace(w, task="full", modules_to_save=(), dora=False)
    p = precision(fw, full, False, sharded=d.zero > 0 and dp > 1)
    deepspeed = fw.zero_is_deepspeed and d.zero > 0 and dp > 1
    return replace(p, grad=p.param) if deepspeed else p


def _largest_tensor(model: ModelArch, w: Workload, peft: bool) -> float:
    """Elements of the largest trainable tensor: optimizer-in-backward holds one gradient at a time
    (torchtune optimizer_in_bwd steps each parameter from its post-accumulate-grad hook)."""
    h, wide = model.hidden_size, _widest_linear(model)
    if peft:
        return float(w.lora_rank * max(h, wide))
    return float(max(model.vocab_size * h, h * wide))


def _widest_linear(model: ModelArch) -> int:
    """Width of the widest linear layer beside the hidden size: the MLP (an expert's under MoE) or q."""
    inter = max(model.intermediate_size, model.moe.expert_intermediate_size if model.moe is not None else 0)
    return max(inter, model.q_dim, model.kv_dim)


def _check_training(model: ModelArch, fw: Framework, w: Workload, d: Deployment) -> None:
    if d.offload != "none" and d.zero == 0:
        raise InputError(Text("--offload needs ZeRO: DeepSpeed offloads optimizer states from stage 1 on.",
                              "--offload 需要 ZeRO：DeepSpeed 从 stage 1 起才能卸载优化器状态。"),
                         hint=Text("Add --zero 2 (or --zero 3 to offload the weights too).",
                                   "请加上 --zero 2（或 --zero 3 以同时卸载权重）。"))
    if w.task == "qlora" and d.zero == 3 and not fw.qlora_fsdp:
        raise InputError(Text(f"{fw.name} does not shard QLoRA's 4-bit base with FSDP/ZeRO-3; use --zero 0-2.",
                              f"{fw.name} 不支持以 FSDP/ZeRO-3 切分 QLoRA 的 4-bit 基座；请用 --zero 0–2。"),
                         hint=Text("Or pick a framework that does (--framework hf with FSDP-QLoRA, or torchtune).",
                                   "或选择支持的框架（--framework hf 的 FSDP-QLoRA，或 torchtune）。"))
    if d.ep > 1:
        dp = d.gpus * d.nodes // ((d.tp or 1) * d.pp)
        experts = model.moe.num_experts if model.moe is not None else 0
        if not experts:
            raise InputError(Text(f"--ep {d.ep} needs an MoE model; {model.name} has no routed experts.",
                                  f"--ep {d.ep} 需要 MoE 模型；{model.name} 没有路由专家。"),
                             hint=Text("Drop --ep, or shard the model with --zero 3 / --tp.",
                                       "去掉 --ep，或用 --zero 3 / --tp 切分模型。"))
        if experts % d.ep or dp % d.ep:
            raise InputError(Text(f"--ep {d.ep} splits the routed experts over data-parallel ranks: it must divide "
                                  f"the expert count ({experts}) and the data-parallel GPUs ({dp}).",
                                  f"--ep {d.ep} 把路由专家分到数据并行的各卡上：必须整除专家数（{experts}）"
                                  f"与数据并行卡数（{dp}）。"))
    if d.cp > 1:
        _check_context_parallel(model, w, d)
    if w.optimizer_in_backward and w.grad_accum > 1:
        raise InputError(Text("--optimizer-in-backward steps each parameter during backward, so it cannot "
                              "accumulate gradients: use --grad-accum 1.",
                              "--optimizer-in-backward 在反向中逐参数更新，无法累积梯度：请用 --grad-accum 1。"))


def _check_context_parallel(model: ModelArch, w: Workload, d: Deployment) -> None:
    """--cp runs attention as flash / memory-efficient kernels (torch context_parallel dispatches only those:
    'CP only supports flash attention and memory efficient attention now'; Megatron CP needs Transformer
    Engine's fused attention); Ulysses gives each rank num_heads / cp heads (DeepSpeed DistributedAttention
    scatters the head dimension), after TP's own split."""
    if not w.flash_attention:
        raise InputError(Text("--cp needs flash or memory-efficient attention: drop --no-flash-attention.",
                              "--cp 需要 flash 或 memory-efficient 注意力：请去掉 --no-flash-attention。"))
    heads = model.num_heads // (d.tp or 1)
    if d.cp_kind == "ulysses" and heads % d.cp:
        raise InputError(Text(f"--cp {d.cp} --cp-kind ulysses gives each rank heads / cp: {model.name} has {heads} "
                              "attention heads per tensor-parallel rank, not divisible by it.",
                              f"--cp {d.cp} --cp-kind ulysses 让每卡分到 heads / cp 个头：{model.name} 每个张量并行"
                              f"分片有 {heads} 个注意力头，不能被它整除。"),
                         hint=Text("Use --cp-kind ring, or a --cp that divides the heads.",
                                   "请用 --cp-kind ring，或选能整除头数的 --cp。"))


def _runtime() -> tuple[float, float, float]:
    """CUDA context, cuBLAS workspace (allocated through the caching allocator), NCCL buffers."""
    rt = engine_constants()["runtime"]
    return (float(rt["cuda_context_gib"]) * GiB, float(rt["cublas_workspace_gib"]) * GiB,
            float(rt["nccl_buffers_gib"]) * GiB)


@dataclass(frozen=True)
class _States:
    weights: float
    adapters: float
    gradients: float
    optimizer: float
    gather: float
    host: HostMemory
    head_grad: float  # the output projection's gradient, made while the loss's gradient is alive
    step_temp: float = 0.0  # the optimizer step's own intermediate (foreach AdamW)
    reducing: float = 0.0  # FSDP backward: a unit's unsharded gradient and the last unit's reduce-scatter input
    rs_stream: float = 0.0  # FSDP's sharded gradients, in blocks of its reduce-scatter stream (stream_pool)


def held_share(counts: ParamBreakdown, ep: int) -> Callable[[int], float]:
    """The share of the model one GPU holds when ZeRO shards it z ways (before TP/PP). Expert
    parallelism splits the routed experts over ep ranks and shards each rank's experts over the
    z / ep ranks that hold the same ones (Megatron-Core expert data parallel, torchtitan's EP mesh)."""
    e = counts.experts / counts.total if counts.total and ep > 1 else 0.0
    return lambda z: (1 - e) / z + e / (ep * max(1.0, z / ep))


def _states(model: ModelArch, fw: Framework, w: Workload, d: Deployment, tp: int, dp: int) -> _States:
    split = tp * d.pp
    counts = count_params(model)
    peft = w.task in ("lora", "qlora")
    p = precision(fw, w, peft, sharded=d.zero > 0 and dp > 1)
    base_fmt = "nf4" if w.task == "qlora" else ("bf16" if w.weights in ("auto", "fp8") else w.weights)
    trainable = lora_params(model, w.lora_rank, w.lora_targets) + dora_magnitude_params(model, w) if peft \
        else counts.total
    saved, sp = saved_module_params(model, w), _saved_precision(fw, w, d, dp)  # --modules-to-save copies
    base = weight_bytes(model, base_fmt).total if peft else counts.total * p.param
    if w.task == "qlora" and fw.qlora_fp32_upcast:  # the bf16 parts (embedding, head, norms) at 4 bytes
        base += 2.0 * (counts.embedding + counts.lm_head + counts.norms)
    z3, z2, z1 = (dp if d.zero >= s else 1 for s in (3, 2, 1))
    held = held_share(counts, d.ep)
    weights = base / split * held(z3)
    trained = held if not peft else (lambda z: 1.0 / z)  # adapters are not expert-parallel
    optimizer = (trainable * (p.optimizer + p.master) + saved * (sp.optimizer + sp.master)) / split * trained(z1)
    paged = 0.0
    if w.optimizer == "paged-adamw8bit":  # bnb paged states: cudaMallocManaged, outside the PyTorch
        # allocator, paged to host RAM when the GPU is full
        paged = (trainable * p.optimizer + saved * sp.optimizer) / split * trained(z1)
        optimizer -= paged
    # gradients held: the largest tensor's under optimizer-in-backward, else every trainable one's share
    grads = _largest_tensor(model, w, peft) / z2 if w.optimizer_in_backward else trainable * trained(z2)
    ds3 = _deepspeed_stage3(fw, w, d, dp)
    ds12 = _deepspeed_stage12(fw, w, d, dp)
    grad_bytes = p.param if ds3 or ds12 else p.grad  # DeepSpeed ZeRO keeps its gradients in the model dtype
    host = HostMemory(cpu_ram=paged * d.gpus)
    saved_grads = saved * sp.grad / split * trained(z2)  # every copy's gradient, also under optimizer-in-backward
    fsdp_grads = fw.sharding in ("fsdp", "fsdp2") and d.zero >= 2 and dp > 1 and not peft and d.offload == "none"
    rs_stream = grads * p.grad / split if fsdp_grads else 0.0  # the sharded gradients (see stream_pool)
    if d.offload != "none":  # the sharded gradients go down too (DeepSpeed offload_optimizer, FSDP2
        # CPUOffloadPolicy): the GPU keeps the gradient of the layer being reduced, unsharded
        moved = optimizer + (weights if d.zero == 3 else 0.0) + grads * p.grad / split + saved_grads
        saved_grads = 0.0
        host = HostMemory(cpu_ram=host.cpu_ram + (moved * d.gpus if d.offload == "cpu" else 0.0),
                          nvme=moved * d.gpus if d.offload == "nvme" else 0.0)
        optimizer, weights = 0.0, weights if d.zero < 3 else 0.0
        grads = min(grads, (counts.total - counts.embedding) / model.num_layers * d.pp)  # /split below: TP share
    gather = 0.0
    if d.zero == 3 and dp > 1 or fw.fp32_sharded_params and not peft:  # FSDP unshards two layers at a time
        # in the dtype it stores: bf16, or for QLoRA the packed 4-bit base with its scales (torchao's
        # NF4Tensor all-gathers its packed data under FSDP2: pytorch/ao torchao/dtypes/nf4tensor.py
        # fsdp_pre_all_gather; bitsandbytes' FSDP-QLoRA stores the packed weights in bf16 containers)
        per_param = weight_bytes(model, "nf4").total / counts.total if w.task == "qlora" else 2.0
        local = counts.total - counts.embedding - counts.experts * (1 - 1 / d.ep)  # EP: only this rank's experts
        gather = 2 * local / model.num_layers * per_param / tp
        if fw.pp_unsharded_fsdp and d.pp > 1 and dp > 1:  # the stage's whole share stays unsharded, and
            gather = local / d.pp * per_param / tp  # so do the gradients it accumulates over micro-batches
            grads = trainable * held(1) if w.grad_accum > 1 and not peft else grads
    # FSDP1 never reshards the root unit after forward (torch/distributed/fsdp/_runtime_utils.py,
    # _post_forward_reshard: "Do not free the root's parameters in the post-forward for FULL_SHARD"), and
    # the layer-wrapping policies leave the embedding, final norm and output projection in it: unsharded
    # from the forward to the end of backward, with the head's gradient (the root's reduce-scatter waits
    # for the embedding's, the last gradient backward makes)
    fsdp1_root = fw.sharding == "fsdp" and d.zero == 3 and dp > 1
    if fsdp1_root:
        gather += (counts.embedding + counts.lm_head) * (2.0 if peft else p.param) / tp
    # the output projection's gradient is made while the loss's tensors are alive; under optimizer-in-
    # backward too: autograd sums its per-chunk contributions in the AccumulateGrad input buffer, and the
    # post-accumulate-grad hook that steps and frees it fires only after the last chunk's backward. Under
    # FSDP the head is its own unit (torchtune custom_sharded_layers) whose gradient is reduce-scattered
    # only after that last chunk, so it is whole while the chunks are alive
    whole = d.zero == 3 and dp > 1 and w.loss == "chunked" or fsdp1_root
    # A fused loss makes the head's whole gradient in its forward: torch.zeros_like(weight) of the weight it
    # is handed (gathered, under ZeRO-3 / FSDP), filled chunk by chunk and saved for backward, so it is a new
    # tensor beside gradients accumulated over earlier micro-batches (linkedin/Liger-Kernel src/liger_kernel/
    # ops/fused_linear_cross_entropy.py@00eba634 fused_linear_cross_entropy_forward: grad_weight = torch.
    # zeros_like(weight) when the weight needs its gradient, in its dtype unless accum_dtype is asked;
    # unslothai/unsloth-zoo fused_losses UnslothFusedLoss.forward: grad_lm_head = torch.zeros_like(lm_head_weight))
    made_whole = whole or w.loss == "fused"
    head = 0.0 if peft else model.vocab_size * model.hidden_size * grad_bytes / split / (1 if made_whole else z2)
    if peft and "lm_head" in w.modules_to_save:  # the trained copy of the head: its gradient, made in the loss
        head = model.vocab_size * model.hidden_size * sp.grad / split / (1 if made_whole else z2)
    # torch.optim.AdamW's multi-tensor path (the HF Trainer's adamw_torch below transformers 4.54, or on
    # torch < 2.8) makes one intermediate the size of the second moments of a parameter group,
    # exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), alive beside the states and gradients until the
    # step's last addcdiv; every other foreach op is in place (pytorch/pytorch torch/optim/adamw.py
    # _multi_tensor_adamw, v2.1.2 line 576 to v2.6.0 line 668; torch/optim/adam.py _multi_tensor_adam,
    # which AdamW runs from v2.7: v2.7.1 line 729, v2.13 line 762)
    foreach = fw.optimizer_foreach and w.optimizer == "adamw" and not w.optimizer_in_backward and optimizer > 0
    temp = (trainable * p.optimizer + saved * sp.optimizer) / 2 / split * trained(z1) if foreach else 0.0
    if ds3:  # one sub-group at a time: its gradients' fp32 copy, and the foreach intermediate of its states
        temp = min(_DS_SUB_GROUP, trainable / split * trained(z1)) * (4.0 + (p.optimizer / 2 if foreach else 0.0))
    if ds12:  # ZeRO-1/2 steps one parameter group's partition at a time (the HF Trainer's decay group is nearly
        # all of it): its fp32 gradient copy and the foreach intermediate, beside the bf16 partition gradients;
        # ZeRO-1 has freed the gradients outside its partition by then, so only what exceeds the full ones counts
        share = trainable / split * trained(z1)
        temp = max(0.0, share * (grad_bytes + 4.0 + (p.optimizer / 2 if foreach else 0.0)) - grads * grad_bytes / split)
    # ZeRO-3 / FSDP shard the adapters with the rest of each layer's parameters (FSDP2 fully_shard and
    # FSDP1's flat parameter take every parameter of the wrapped layer, frozen or not; DeepSpeed stage 3
    # partitions all of them)
    reducing = _reducing(model, fw, w, tp, head / p.grad * split if whole else 0.0) if d.zero == 3 and dp > 1 else 0.0
    adapters = (trainable * p.param + saved * sp.param) / split * trained(z3) if peft else 0.0
    return _States(weights=weights, adapters=adapters,
                   gradients=grads * grad_bytes / split + saved_grads, optimizer=optimizer, gather=gather,
                   host=host, head_grad=head, step_temp=temp, reducing=reducing, rs_stream=rs_stream)


# DeepSpeed ZeRO-3 steps the optimizer one sub-group of each rank's partition at a time, sub_group_size
# elements (deepspeedai/DeepSpeed deepspeed/runtime/zero/config.py@v0.14.5 line 165: default 1e9; ms-swift's
# swift/llm/ds_config/zero3.json@b40f31df7 and @9dc1071aa: "sub_group_size": 1e9). A sub-group closes at the
# parameter that reaches the size (stage3.py _create_fp16_sub_groups), so the largest is a little larger.
_DS_SUB_GROUP = 1e9


def _deepspeed_stage3(fw: Framework, w: Workload, d: Deployment, dp: int) -> bool:
    """Full fine-tuning sharded by DeepSpeed ZeRO-3 on the GPU (frameworks whose --zero is DeepSpeed's:
    zero_deepspeed, or a zero* default sharding). Its bf16 engine keeps the gradient partitions in the
    model dtype (deepspeed/runtime/engine.py@v0.14.5 get_data_types, lines 930-934: grad_accum_dtype =
    the model dtype under ZeRO; zero/stage3.py grad_partitions_flat_buffer of that dtype), and its step
    (stage3.py@v0.14.5 step, line 2042: one sub-group at a time) makes the sub-group's fp32 gradients,
    flatten(averaged_gradients).to(fp32) (_prepare_fp32_grad_for_sub_group, line 1851), steps the
    wrapped optimizer on its fp32 partition (_optimizer_step) and drops them (_release_sub_group). The
    same at v0.16.5 (lines 1898, 2111). tests/test_train_memory_deepspeed_step.py replays it on CPU."""
    return fw.zero_is_deepspeed and d.zero == 3 and dp > 1 and d.offload == "none" and w.task not in ("lora", "qlora")


def _deepspeed_stage12(fw: Framework, w: Workload, d: Deployment, dp: int) -> bool:
    """Full fine-tuning sharded by DeepSpeed ZeRO-1/2 on the GPU (zero_deepspeed, or a zero* default sharding).
    Under bf16 its engine keeps gradients in the model dtype (deepspeed/runtime/engine.py@v0.16.5
    get_data_types, lines 1020-1024: grad_accum_dtype = the model dtype under zero_optimization; the same at
    v0.14.5 lines 930-934), so _do_optimizer_sanity_check (v0.16.5 lines 1319-1322) picks the ZeRO optimizer,
    not BF16_Optimizer. Stage 2 copies each reduced gradient into grads_in_partition, one flat buffer of the
    rank's partition in that dtype (zero/stage_1_and_2.py@v0.16.5 line 1361); step() (lines 1902-1933, the same
    at v0.14.5 lines 1882-1913) loops over the parameter groups, frees the gradients outside the partition,
    makes flatten(averaged_gradients[i]).to(fp32) as the fp32 partition's .grad, steps the wrapped optimizer
    on that group alone (_optimizer_step, lines 1827-1836) and drops the fp32 copy: the ZeRO-3 sub-group's
    pattern (tests/test_train_memory_deepspeed_step.py), over the group's whole partition."""
    return fw.zero_is_deepspeed and d.zero in (1, 2) and dp > 1 and d.offload == "none" \
        and w.task not in ("lora", "qlora")


def _reducing(model: ModelArch, fw: Framework, w: Workload, tp: int, head_unit: float) -> float:
    """What FSDP holds for the gradient reduction during backward, beside the activations left: the
    unit whose backward runs accumulates its unsharded gradient in the compute dtype (bf16), and the
    reduce-scatter input of the unit before it (a copy of its gradients in the reduce dtype) is kept
    until this unit's post-backward waits on it (pytorch/pytorch torch/distributed/fsdp/_fully_shard/
    _fsdp_param_group.py post_backward: comm_ctx.reduce_scatter_state, freed only at the next unit's
    reduce; FSDP1 frees an unsharded gradient only after its reduce-scatter on the post-backward
    stream). The first unit backward reduces is the output projection where it is a unit of its own
    (torchtune's custom_sharded_layers under the chunked loss). Full fine-tuning only (LoRA's gradients
    are the adapters'); frameworks whose sharding is FSDP (DeepSpeed ZeRO-3 reduces in buckets)."""
    if fw.sharding not in ("fsdp", "fsdp2") or w.task in ("lora", "qlora"):
        return 0.0
    counts = count_params(model)
    layer = (counts.total - counts.embedding - counts.lm_head) / model.num_layers
    reduce_bytes = 4.0 if fw.fp32_sharded_params else 2.0  # torchtitan: mixed_precision_reduce float32
    return (2.0 * layer + reduce_bytes * max(layer, head_unit)) / tp


def train_memory(model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
    """Per-GPU memory of training `model` as `w` on `d` (data parallel over the other GPUs)."""
    fw = find_framework(w.framework)
    _check_training(model, fw, w, d)
    tp = d.tp or 1
    # ZeRO / FSDP shard over every rank of a stage that is not TP, context-parallel ranks included:
    # torchtitan's FSDP mesh is dp_shard x cp flattened ('dp_shard_cp': torchtitan/parallelisms/
    # parallelize_llama.py@9dec370 lines 78-90),
    # Megatron-Core's distributed optimizer uses the data-parallel group with CP, DeepSpeed ZeRO the
    # sequence-data-parallel group under Ulysses
    dp = max(1, d.gpus * d.nodes // (tp * d.pp))
    if d.cp > 1:  # each rank embeds, runs its layers and takes the loss on seq_len / cp tokens of a sequence
        w = replace(w, seq_len=w.seq_len // d.cp)
    st = _states(model, fw, w, d, tp, dp)
    residual = 4.0 if w.task == "qlora" and fw.qlora_fp32_upcast else 2.0
    acts = saved_activations(model, w, full_ft=w.task not in ("lora", "qlora"), layers=model.num_layers / d.pp,
                             residual_bytes=residual)
    kept, recompute = acts.kept / tp, acts.recompute / tp  # TP + sequence parallel shard them (Korthikanti s.4.2.2)
    transient = (acts.backward_transient + _dequantized(model, w)
                 + cp_backward_transient(model, w, d.cp, d.cp_kind)) / tp  # heads and weights split by TP
    dora = dora_activations(model, w, precision(fw, w, True).param)  # estimate/peft_modules.py
    kept += dora.saved * dora_layers_kept(w, model.num_layers / d.pp) / tp
    if w.grad_ckpt not in ("none", "selective"):  # the recomputed layer saves its own and runs the norm again
        recompute, transient = recompute + dora.saved / tp, transient + dora.transient / tp
    else:  # the norm runs in the forward only, before its layer saves anything: above the kept layers by the rest
        transient += max(0.0, dora.transient - dora.saved) / tp
    in_place = fw.loss_in_place and w.loss == "full" and not w.compile
    loss = in_place_loss(model, w, fw.logits_fp32) / tp if in_place else \
        loss_bytes(model, w if fw.loss_compiled or not w.compile else replace(w, compile=False),
                   fw.loss_chunks, vocab_parallel=fw.loss_parallel and tp > 1, fp32_logits=fw.logits_fp32,
                   bf16_loss=fw.cp_loss_bf16 and d.cp > 1) / tp
    # a loop that still names its shifted logits holds them beside the loss, through backward and the step
    named = kept_logits_bytes(model, w, fw.logits_fp32) / tp if fw.loss_logits_kept else 0.0
    loss += named
    # 1F1B pipeline: the first stage runs pp forwards before its first backward, so it holds pp
    # micro-batches of its layers' activations; the last stage holds one, plus the head and the loss
    # (Korthikanti et al. 2022, s.4.2.3: "the first stage must store activations for p micro-batches").
    # The last stage also keeps every micro-batch's logits where the schedule returns them (_last_stage_
    # outputs). The worse of the two stages is the one reported (torchtitan's tables: 'Different PP ranks
    # can have different peak memory usages. We take the maximum across all GPUs.').
    # Interleaved 1F1B (v model chunks per stage) warms up further, within the step's micro-batches.
    in_flight = _first_stage_in_flight(d.pp, d.virtual_stages, w.grad_accum) if d.pp > 1 else 1.0
    first_outputs, outputs = _kept_outputs(model, fw, w, tp) if d.pp > 1 else (0.0, 0.0)
    if d.pp > 1 and fw.pp_recv_buffers:  # made once, kept across steps: no churn, like the kept outputs
        first_recv, last_recv = _recv_buffers(model, fw, w, d, tp, in_flight)
        first_outputs, outputs = first_outputs + first_recv, outputs + last_recv
    loss, named = loss + outputs, named + outputs
    context, cublas, nccl = _runtime()
    talking = d.gpus * d.nodes > 1
    persistent = st.weights + st.adapters + st.optimizer + st.gather + cublas
    carried = st.gradients if w.grad_accum > 1 else 0.0  # accumulated grads live through the next forward

    def step_phases(kept: float, loss: float, named: float) -> tuple[float, float, float]:
        beside = not carried or w.loss == "fused"  # else the head's gradient is summed into the carried one
        return (persistent + carried + kept + loss + (st.head_grad if beside else 0.0),  # the loss
                # backward: acts freed as grads grow, beside the unit being reduced
                persistent + max(carried + kept + recompute + transient, st.gradients) + st.reducing + named,
                persistent + st.gradients + st.step_temp + named)  # optimizer step

    def pool(phases: tuple[float, float, float], loss: float, outputs: float) -> tuple[float, float, float]:
        """(allocated, FSDP's stream pool, the loss's and the churn's slack) of one stage's step; `loss`
        without the kept `outputs`, which are made at one size per micro-batch and freed together: no churn."""
        allocated = max(phases)
        pooled = stream_pool(st.rs_stream, phases, allocated, fw.pp_unsharded_fsdp and d.pp > 1, carried > 0)
        churn = max(0.0, allocated - persistent - carried - outputs)
        return allocated, pooled, _LOSS_SLACK * min(loss, churn) + _OTHER_SLACK * max(0.0, churn - loss)

    phases = step_phases(kept, loss, named)
    allocated, pooled, slack = pool(phases, loss - outputs, outputs)
    if in_flight > 1:  # the first stage: in-flight micro-batches, no head, no loss; the larger figure is reported
        first = in_flight * (kept - acts.head / tp) + first_outputs
        first_phases = step_phases(first, 0.0, 0.0)
        first_pool = pool(first_phases, 0.0, first_outputs)
        counted = 1 if fw.peak_reported == "allocated" else 3  # the figure the framework logs
        if sum(first_pool[:counted]) > sum((allocated, pooled, slack)[:counted]):
            kept, loss, named, phases = first, 0.0, 0.0, first_phases
            allocated, pooled, slack = first_pool
    outside = context + (nccl if talking else 0.0)  # device memory the PyTorch pool never holds
    room = max(0.0, d.card.usable_bytes - outside - allocated)
    varied = fw.variable_length_batches and not w.packing and w.loss == "full"
    if varied:
        slack = max(slack, earlier_in_place_segments(model, w, fw.logits_fp32, tp) if in_place else
                    earlier_loss_segments(model, w, loss, tp))
    # The pool never grows past the card: before an allocation would fail, the caching allocator
    # frees its cached segments and retries (CUDACachingAllocator.cpp release_cached_blocks).
    slack = float(round(min(slack + pooled, room)))  # whole bytes: a saved plan's items add up to its totals
    reserved = allocated + slack
    device = reserved + outside
    items = [Item("weights", "weights", st.weights, WHY["weights"]),
             Item("adapters", "weights", st.adapters, WHY["adapters"]),
             Item("gradients", "gradients", st.gradients + st.reducing, WHY["gradients"]),
             # the step's own intermediate joins the states' line (during the optimizer step only)
             Item("optimizer", "optimizer", st.optimizer + st.step_temp,
                  WHY["step_temp"] if st.step_temp else WHY["optimizer"]),
             Item("activations", "activations", kept + recompute, WHY["activations"]),
             Item("logits", "activations", loss, WHY["logits"]),
             Item("zero3_gather", "overhead", st.gather, WHY["gather"]),
             Item("allocator_slack", "overhead", slack,
                  WHY["slack_varied" if varied else "slack_pool" if pooled else "slack"]),
             Item("runtime", "overhead", context + cublas + (nccl if talking else 0.0), WHY_RUNTIME)]
    breakdown = MemoryBreakdown(items=tuple(i for i in items if i.bytes > 0 or i.key == "weights"),
                                allocated_peak=allocated, reserved_peak=reserved, device_total=device,
                                framework_reports=fw.peak_reported)
    host = HostMemory(cpu_ram=st.host.cpu_ram + acts.offloaded / tp * d.gpus, nvme=st.host.nvme)
    result = MemoryResult(breakdown=breakdown, usable=d.card.usable_bytes, host=host, warnings=_warnings(w))
    if result.tensors_beside_full_pool is None:
        return result
    return replace(result, warnings=result.warnings + (_POOL_AT_CARD,))


def _dequantized(model: ModelArch, w: Workload) -> float:
    """QLoRA: the 4-bit matmul dequantizes its weight to the compute dtype, in forward and again in
    backward, and frees it after (bitsandbytes autograd/_functions.py MatMul4Bit: F.dequantize_4bit(B,
    quant_state).to(A.dtype); torchao NF4Tensor's linear_nf4: weight.to(input.dtype)): the largest
    linear's bf16 copy beside the layer's backward."""
    if w.task != "qlora":
        return 0.0
    return 2.0 * model.hidden_size * _widest_linear(model)





def _kept_outputs(model: ModelArch, fw: Framework, w: Workload, tp: int) -> tuple[float, float]:
    """(first stage, last stage): the outputs a pipeline stage keeps for the whole step where the schedule
    returns them. forward_one_chunk appends each micro-batch's output to output_chunks, which step() merges
    and returns on the last stage after the last backward and clears only when the next step starts
    (pytorch/pytorch torch/distributed/pipelining/stage.py in the v2.6.0 wheel, git 2236df17: line 703
    'self.output_chunks.append(output)' on every stage, clear_runtime_states lines 507-514; schedules.py
    PipelineScheduleSingle.step lines 478-509). The last stage detaches its outputs after their backward
    (stage.py lines 818-825, PR #138504, 2024-10-21): the data stays, not the loss's graph; PR #153383
    (2025-05-12) stopped the other stages keeping theirs. torchtitan at 9dec370 calls
    pp_schedule.step(target=labels, losses=losses) and drops what it returns (train.py@9dec370 lines
    281-292); from e5ef99aa (2025-10-22, PR #1922) it passes return_outputs=False. The first stage's
    outputs are its last layer's, in bf16 and sequence-sharded under TP (torchtitan's SequenceParallel plan:
    w2 RowwiseParallel output_layouts Shard(1)); the last stage's are the logits, bf16
    (torchtitan/models/llama/model.py@9dec370 Transformer.forward: output = self.output(h), the .float() is
    in the loss) and vocabulary-sharded under loss_parallel (ColwiseParallel output_layouts Shard(-1)).
    At each stage's peak all m micro-batches' are alive (the first stage's in flight in fwd_cache too)."""
    if not fw.pp_keeps_outputs:
        return 0.0, 0.0
    tokens = w.seq_len * w.micro_batch * w.grad_accum  # all the step's micro-batches
    logits = 2.0 * tokens * model.vocab_size
    return 2.0 * tokens * model.hidden_size / tp, logits / tp if fw.loss_parallel else logits


def _recv_buffers(model: ModelArch, fw: Framework, w: Workload, d: Deployment, tp: int,
                  in_flight: float) -> tuple[float, float]:
    """(first rank, last rank): torch pipelining's receive buffers. PipelineStage makes one buffer per
    micro-batch for the stage's input on every stage but the first (_prepare_forward_infra: 'for chunk_id in
    range(num_microbatches): ... _make_tensor_from_meta(inp, self.device)') and one per micro-batch for its
    output's gradient on every stage but the last (_prepare_backward_infra, one _create_grad_recv_info per
    mb_index), at the first step, and keeps them in args_recv_info / grad_recv_info (pytorch/pytorch
    torch/distributed/pipelining/stage.py@88fa1e71; _prepare_backward_infra's loop also in ROCm/pytorch@10b22ea5's
    Dec 2024 copy; in torch 2.13 a two-rank gloo Schedule1F1B step of 4 micro-batches leaves 4 of each:
    tests/test_train_memory_pp_recv.py). A
    stage boundary is one micro-batch's hidden states, bf16, sequence-sharded under TP's sequence parallel.
    An input buffer is also the first layer's checkpointed input while its micro-batch is in flight, which
    `kept` already counts. A rank holds v stages (loop placement): the first rank's are stage 0 (gradients
    only) and v - 1 later ones; the last rank's v - 1 earlier ones and the last stage (inputs only)."""
    m, v = w.grad_accum, max(1, d.virtual_stages)
    boundary = 2.0 * w.seq_len * w.micro_batch * model.hidden_size / (tp if fw.tp_sequence_parallel else 1)
    first_inputs = (v - 1) * m - min((v - 1) * m, max(0.0, in_flight * v - m))  # chunk 0's forwards come first
    first = boundary * (v * m + first_inputs)
    last = boundary * ((v - 1) * m + v * m - 1)  # one micro-batch in flight (v > 1: more may be, an upper bound)
    return first, last


def _first_stage_in_flight(pp: int, v: int, micro_batches: int) -> float:
    """Micro-batches of its layers the first stage holds at the end of warm-up. 1F1B: min(pp, m)
    forwards before the first backward. Interleaved (v chunks a rank, each 1/v of its layers): rank 0
    runs (v - 1) pp + 2 (pp - 1) chunk forwards first, capped at all m v of them (Megatron-LM
    forward_backward_pipelining_with_interleaving num_warmup_microbatches; pytorch/pytorch
    torch/distributed/pipelining/schedules.py _get_warmup_ops: 'We cannot have more warmup operations
    than there are number of microbatches, so cap it there'): Korthikanti's pp (1 + (pp - 1) / (pp v))
    when m is large, all m micro-batches when m = pp."""
    if v <= 1:
        return float(min(pp, micro_batches))
    return min((v - 1) * pp + 2 * (pp - 1), micro_batches * v) / v



_POOL_AT_CARD = Text("The caching allocator's pool (reserved, what nvidia-smi shows) would grow past the card here, "
                     "so it is counted at the card's size: before an allocation would fail, PyTorch frees its cached "
                     "blocks and retries, so the cache alone does not stop the job: what must fit is the "
                     "allocated peak and the CUDA context.",
                     "缓存分配器的显存池（reserved，即 nvidia-smi 所见）在此会超过显卡容量，因此按显卡容量计："
                     "分配失败前 PyTorch 会释放缓存块并重试，缓存本身不会让任务失败："
                     "必须放得下的是 allocated 峰值与 CUDA 上下文。")


_PADDING_FREE = Text("--padding-free: each micro-batch is one row of its samples' real tokens, sized here at "
                      "--micro-batch x --seq-len, the most it holds (the same tensors a padded batch of full-length "
                      "samples makes). The peak follows the micro-batch with the most real tokens: where the samples "
                      "are shorter, ask with --seq-len at that total divided by --micro-batch.",
                      "--padding-free：每个微批是一行、只含各样本的真实 token，此处按 --micro-batch × --seq-len 估算，"
                      "即该行最多容纳的量（与样本都满长时填充批次的张量相同）。峰值取决于真实 token 最多的那个微批："
                      "样本较短时，请以该总数除以 --micro-batch 作为 --seq-len。")


def _warnings(w: Workload) -> tuple[Text, ...]:
    notes: tuple[Text, ...] = (_PADDING_FREE,) if w.padding_free and not w.packing else ()
    if w.optimizer == "paged-adamw8bit":
        notes += (Text("Paged 8-bit AdamW keeps its states in CUDA unified memory (cudaMallocManaged), outside the "
                       "PyTorch allocator: they are left out of the GPU peak and counted as host RAM, since the driver "
                       "pages them out when the GPU is full (slower steps, not an OOM).",
                       "分页 8-bit AdamW 的状态位于 CUDA 统一内存（cudaMallocManaged），不在 PyTorch 分配器内："
                       "不计入显存峰值而计为主机内存，显存满时驱动会将其换出（变慢而非 OOM）。"),)
    return notes
