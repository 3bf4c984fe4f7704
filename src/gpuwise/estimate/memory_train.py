"""Training memory per GPU: weights, gradients, optimizer states, activations, logits.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, s.3.1): mixed-precision AdamW
keeps 2 + 2 + 12 = 16 bytes per trainable parameter (bf16 weights and grads; fp32 master,
momentum and variance); ZeRO-1/2/3 shard optimizer, then gradients, then weights over the
data-parallel ranks. Activations follow Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", s.4.1), generalised to GQA and gated MLPs.
"""

from __future__ import annotations

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.params import count_params
from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import HostMemory, Item, MemoryBreakdown, MemoryResult
from gpuwise.estimate.constants import runtime_overhead_bytes
from gpuwise.estimate.memory_infer import WHY_RUNTIME
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text

# Optimizer bytes per trainable parameter beyond the weights and gradients themselves.
# AdamW: fp32 master + m + v = 12 (ZeRO paper, K = 12). 8-bit Adam: master + two 1-byte states
# (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization"). SGD with momentum:
# master + momentum. Adafactor: master + factored second moments (rows + cols, ~0).
_OPTIMIZER_BYTES = {"adamw": 12.0, "adamw8bit": 6.0, "paged-adamw8bit": 6.0, "sgd": 8.0, "adafactor": 4.0}
_MASTER = 4.0  # the fp32 master copy inside those figures (absent when adapters train in fp32)
# fp32 logits for the loss: bf16 logits kept in the model output (2) + fp32 log-softmax saved
# for backward (4) + fp32 gradient of the logits (4): transformers LlamaForCausalLM + F.cross_entropy.
_LOGIT_BYTES = 10.0

WHY = {
    "weights": Text("bf16 compute weights (QLoRA: NF4 base), sharded by ZeRO-3 and TP",
                    "bf16 计算权重（QLoRA 为 NF4 基座），由 ZeRO-3 与 TP 切分"),
    "adapters": Text("LoRA adapters r x (d_in + d_out) per target module, kept in fp32",
                     "LoRA 适配器：每个目标模块 r × (d_in + d_out)，以 fp32 保存"),
    "gradients": Text("gradients of the trainable parameters (bf16; fp32 for adapters), sharded by ZeRO-2+",
                      "可训练参数的梯度（bf16；适配器为 fp32），ZeRO-2 起切分"),
    "optimizer": Text("optimizer states (+ fp32 master weights) per trainable parameter, sharded by ZeRO-1+",
                      "每个可训练参数的优化器状态（含 fp32 主权重），ZeRO-1 起切分"),
    "activations": Text("per layer: 2sbh inputs + q, k, v, attention output, MLP gate/up/act/down inputs "
                        "x 2 bytes (Korthikanti et al. 2022); full checkpointing keeps only layer inputs",
                        "每层：输入 2sbh + q、k、v、注意力输出、MLP 中间量 × 2 字节（Korthikanti 等 2022）；全重计算只保留每层输入"),
    "logits": Text("loss logits: seq x batch x vocab x 10 bytes (bf16 logits, fp32 log-softmax, fp32 grad)",
                   "损失 logits：序列 × 批 × 词表 × 10 字节（bf16 logits、fp32 log-softmax、fp32 梯度）"),
    "gather": Text("ZeRO-3 all-gather buffers: the current and prefetched layer in bf16",
                   "ZeRO-3 全收集缓冲：当前层与预取层的 bf16 权重"),
}


def lora_params(model: ModelArch, rank: int, targets: tuple[str, ...]) -> int:
    """r x (d_in + d_out) per targeted linear per layer (PEFT LoraLayer A: d_in x r, B: r x d_out).
    In MoE layers gate/up/down adapt the shared experts only (routed experts are left frozen)."""
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


def _layer_activation_bytes(model: ModelArch, w: Workload) -> float:
    """Activation bytes one layer saves for backward (16-bit), per micro-batch."""
    sb = w.seq_len * w.micro_batch
    h = model.hidden_size
    attn = 2 * sb * h + 2 * sb * (model.q_dim + 2 * model.kv_dim) + 2 * sb * model.q_dim
    if w.flash_attention or w.grad_ckpt == "selective":
        attn += 4 * sb * model.num_heads  # fp32 log-sum-exp per head and token
    else:
        attn += 5 * model.num_heads * w.seq_len * sb  # softmax, scores and mask: 5as^2b
    inter, k = model.intermediate_size, 1
    if model.moe is not None:
        inter, k = model.moe.expert_intermediate_size, model.moe.experts_per_token
        k_shared = model.moe.num_shared_experts * model.moe.shared_intermediate_size
        inter_total = k * inter + k_shared
    else:
        inter_total = inter
    per_inter = 8 if model.gated_mlp else 4  # gate, up, act(gate), down input / fc, act
    mlp = 2 * sb * h + per_inter * sb * inter_total
    norms = model.norms_per_layer * 2 * sb * h
    return float(attn + mlp + norms)


def _activations(model: ModelArch, w: Workload, tp: int, pp: int) -> float:
    layers = model.num_layers / pp
    one = _layer_activation_bytes(model, w)
    if w.grad_ckpt == "full":  # keep each layer's input; recompute one layer at a time
        total = layers * 2 * w.seq_len * w.micro_batch * model.hidden_size + one
    else:
        total = layers * one
    return total / tp  # tensor + sequence parallel shard every activation (Korthikanti s.4.2.2)


def _check_training(w: Workload, d: Deployment) -> None:
    if d.offload != "none" and d.zero == 0:
        raise InputError(Text("--offload needs ZeRO: DeepSpeed offloads optimizer states from stage 1 on.",
                              "--offload 需要 ZeRO：DeepSpeed 从 stage 1 起才能卸载优化器状态。"),
                         hint=Text("Add --zero 2 (or --zero 3 to offload the weights too).",
                                   "请加上 --zero 2（或 --zero 3 以同时卸载权重）。"))
    if w.task == "qlora" and d.zero == 3:
        raise InputError(Text("QLoRA's 4-bit base is not sharded by ZeRO-3 here; use --zero 0-2.",
                              "QLoRA 的 4-bit 基座不支持在此以 ZeRO-3 切分；请用 --zero 0–2。"))


def train_memory(model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
    """Per-GPU memory of training `model` as `w` on `d` (data parallel over the other GPUs)."""
    _check_training(w, d)
    tp = d.tp or 1
    dp = max(1, d.gpus * d.nodes // (tp * d.pp))
    split = tp * d.pp
    params = count_params(model).total
    peft = w.task in ("lora", "qlora")
    base_fmt = "nf4" if w.task == "qlora" else ("bf16" if w.weights == "auto" else w.weights)
    trainable = lora_params(model, w.lora_rank, w.lora_targets) if peft else params
    base = weight_bytes(model, base_fmt).total if peft else params * 2.0
    grad_b, opt_b = (4.0, _OPTIMIZER_BYTES[w.optimizer] - _MASTER) if peft else (2.0, _OPTIMIZER_BYTES[w.optimizer])
    z3, z2, z1 = (dp if d.zero >= s else 1 for s in (3, 2, 1))
    weights = base / split / z3
    optimizer = trainable * opt_b / split / z1
    host = HostMemory()
    if d.offload != "none":
        moved = optimizer + (weights if d.zero == 3 else 0.0)
        host = HostMemory(cpu_ram=moved * d.gpus if d.offload == "cpu" else 0.0,
                          nvme=moved * d.gpus if d.offload == "nvme" else 0.0)
        optimizer, weights = 0.0, weights if d.zero < 3 else 0.0
    gather = 0.0
    if d.zero == 3 and dp > 1:
        gather = 2 * (params - count_params(model).embedding) / model.num_layers * 2.0 / tp
    items = [Item("weights", "weights", weights, WHY["weights"]),
             Item("adapters", "weights", trainable * 4.0 / split if peft else 0.0, WHY["adapters"]),
             Item("gradients", "gradients", trainable * grad_b / split / z2, WHY["gradients"]),
             Item("optimizer", "optimizer", optimizer, WHY["optimizer"]),
             Item("activations", "activations", _activations(model, w, tp, d.pp), WHY["activations"]),
             Item("logits", "activations",
                  w.seq_len * w.micro_batch * model.vocab_size * _LOGIT_BYTES / tp, WHY["logits"]),
             Item("zero3_gather", "overhead", gather, WHY["gather"]),
             Item("runtime", "overhead", runtime_overhead_bytes(d.gpus * d.nodes > 1), WHY_RUNTIME)]
    breakdown = MemoryBreakdown(items=tuple(i for i in items if i.bytes > 0 or i.key == "weights"))
    return MemoryResult(breakdown=breakdown, usable=d.card.usable_bytes, host=host)
