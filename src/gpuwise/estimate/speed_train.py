"""Training speed that follows the work: one optimizer step, part by part.

Per micro-batch on one GPU (its TP share of its pipeline stage's layers): matmul FLOPs at a
GEMM efficiency that depends on the GEMM's shape; recompute by checkpoint policy; element-wise,
loss, dequantisation and LoRA adapter traffic at achievable memory bandwidth; tensor-parallel collectives,
partly hidden where the framework overlaps them. Per step: micro-batches x that, the pipeline
bubble, the optimizer update (memory-bound), the exposed data-parallel traffic and offload.
Constants: data/efficiency.toml [training] and each family's `train_gemm`, each with its source.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import ckpt_every, find_framework
from gpuwise.catalog.hardware import node_fabric
from gpuwise.catalog.params import ParamBreakdown, count_params
from gpuwise.estimate.activations import sdpa_kv_dim
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.links import Rates, allgather_seconds, allreduce_seconds, efficiency_table, host_memory_bandwidth
from gpuwise.estimate.memory_train import held_share
from gpuwise.estimate.train_gemm_roofline import fp8_no_gain_share, linear_shards, roofline_slowdown
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GB

ADAPTER_TASKS = ("lora", "qlora")


@dataclass(frozen=True)
class TrainSpeed:
    step_time_s: float
    tokens_per_s: float  # the whole job, real (unpadded) tokens
    mfu: float  # model FLOPs (6N + attention, N: matmul weights; 4N for adapters) / (step x bf16 peak)
    scaling_efficiency: float  # vs n x one GPU without communication or bubble
    step_breakdown_s: dict[str, float]  # adds up to step_time_s
    communication_s: dict[str, float] = field(default_factory=dict)  # totals before overlap
    inter_node_source: str = ""  # where communication_s["inter_node_gbps"] comes from (multi-node only)
    inter_node_source_zh: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class _Layout:
    tp: int
    pp: int
    dp: int  # data-parallel ranks in all
    dp_local: int  # of them inside one node
    micro_batches: int  # per optimizer step per DP rank (= the pipeline's micro-batches)
    tokens_mb: float  # tokens one GPU computes per micro-batch (padding included)
    real_share: float  # of them, real tokens


def _table() -> dict[str, Any]:
    return dict(efficiency_table()["training"])


def _layout(w: Workload, d: Deployment) -> _Layout:
    tp, pp = d.tp or 1, d.pp
    dp_local = max(1, d.gpus // (tp * pp))
    dp = max(1, d.gpus * d.nodes // (tp * pp))
    # --padding-free computes only the real tokens, as --packing does: ms-swift v3.8.0 concatenates the batch
    # into one row without pad tokens (swift/llm/template/base.py _data_collator lines 1622-1634); sized, as
    # memory_train sizes it, at micro-batch x seq-len real tokens
    unpadded = w.packing or w.padding_free or w.task == "pretrain"
    pad = 0.0 if unpadded else _table()["unpacked_pad_max"] * (1 - 1 / w.micro_batch)
    # context parallelism: a rank computes seq_len / cp tokens of each sequence; dp counts the cp ranks too
    # (each holds other tokens, all reduce gradients together: FSDP's dp_shard_cp, Megatron's DP-with-CP group)
    return _Layout(tp=tp, pp=pp, dp=dp, dp_local=dp_local, micro_batches=w.grad_accum,
                   tokens_mb=float(w.seq_len * w.micro_batch) / d.cp, real_share=1 - pad)


def gemm_efficiency(r: Rates, tokens: float, hidden: int, tp: int) -> float:
    """The large-GEMM training fraction, lower for short (few tokens) or narrow (hidden / TP) GEMMs."""
    t = _table()
    width = hidden / tp
    large = r.train_gemm or r.gemm
    return float(large * tokens / (tokens + t["gemm_tokens_half"]) * width / (width + t["gemm_width_half"]))


def _peak(d: Deployment, precision: str) -> float:
    rate = d.card.dense_tflops("fp8") if precision == "fp8" else None
    return (rate or d.card.dense_tflops("bf16") or d.card.dense_tflops("fp16") or d.card.fp32_tflops or 1.0) * 1e12


def matmul_params(p: ParamBreakdown) -> int:
    """Active weights a token multiplies by: the input embedding is a lookup (and learned positions an
    add), not a matmul; the output projection is one, tied to the embedding or not. The frameworks'
    MFU counts the same N: torchtitan's (torchtitan/models/utils.py@7238a9c5 line 454: nparams_for_matmul =
    nparams if enable_weight_tying else nparams - nparams_embedding),
    Megatron's formula counts the GEMMs and the logit layer (megatron/training/training.py
    num_floating_point_operations@d98e8a64)."""
    return p.active - p.positions - (p.embedding if p.lm_head else 0)


def _flops_per_token(model: ModelArch, w: Workload, p: ParamBreakdown) -> dict[str, float]:
    """Whole-model FLOPs per token: linear forward 2N, backward 4N (2N without weight gradients
    for a frozen base); causal attention 2 x layers x q_dim x seq forward (PaLM app. B, halved for the
    causal mask), backward 2.5 x that with flash attention (its 5 matmuls recompute S = QK^T), 2 x eager
    ([training_attention] backward_factor); recompute by policy."""
    lin_f = 2.0 * matmul_params(p)
    lin_b = (2.0 if w.task in ADAPTER_TASKS else 4.0) * matmul_params(p)
    attn_f = 2.0 * model.num_layers * model.q_dim * w.seq_len
    every = ckpt_every(w.grad_ckpt)
    if w.grad_ckpt == "selective":  # Megatron selective: core attention recomputed
        re_lin, re_attn = 0.0, attn_f
    elif w.grad_ckpt == "op-sac":  # torchtitan op SAC: every second matmul recomputed, SDPA saved
        re_lin, re_attn = 0.5 * lin_f, 0.0
    elif every:  # full (N = 1) or every Nth layer: that share's forward again
        re_lin, re_attn = lin_f / every, attn_f / every
    else:
        re_lin, re_attn = 0.0, 0.0
    attn_b = efficiency_table()["training_attention"]["backward_factor"]["flash" if w.flash_attention else "eager"]
    return {"lin": lin_f + lin_b, "attn": (1 + attn_b) * attn_f, "re_lin": re_lin, "re_attn": re_attn,
            "re_share": (re_lin + re_attn) / (lin_f + attn_f)}


def _expert_share(model: ModelArch, p: ParamBreakdown) -> float:
    """Share of the active linear FLOPs that run in routed experts."""
    if model.moe is None or not matmul_params(p):
        return 0.0
    return p.experts * model.moe.experts_per_token / model.moe.num_experts / matmul_params(p)


def _intermediate(model: ModelArch, p: ParamBreakdown) -> float:
    """Active MLP width per layer: the active MLP/expert weights over 3 x hidden (gate, up, down)."""
    mlp = p.active - p.attention - p.embedding - p.positions - p.lm_head - p.norms - p.router - p.vision
    return max(0.0, mlp) / (3 * model.hidden_size * model.num_layers)


def _traffic_per_token(model: ModelArch, w: Workload, p: ParamBreakdown, re_share: float) -> float:
    """Element-wise bytes per token over the whole model (norms, residuals, RoPE, SwiGLU; eager
    attention scores without flash attention; Float8 casts), forward + recompute + backward."""
    t = _table()
    h = model.hidden_size
    fwd = t["elementwise_bytes_per_hidden"] * h + t["elementwise_bytes_per_intermediate"] * _intermediate(model, p)
    if w.compile or find_framework(w.framework).fused_elementwise:
        fwd *= t["compile_traffic_factor"]
    if not w.flash_attention:  # counted fwd + bwd already: scale to the forward's share
        fwd += t["eager_attention_bytes_per_head_key"] * model.num_heads * w.seq_len / 3
    if w.float8:  # inputs of qkv, o, gate/up, down and their output gradients
        fwd += t["float8_cast_bytes_per_element"] * (2 * h + model.q_dim + _intermediate(model, p))
    per_layer = fwd * (1 + t["backward_traffic_factor"] + re_share)
    loss = t["loss_bytes_per_vocab"][w.loss] * model.vocab_size
    return float(per_layer * model.num_layers + loss)


def _micro_batch(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout) -> dict[str, float]:
    """One micro-batch on one GPU: compute, recompute, memory-bound and TP seconds."""
    p = count_params(model)
    f = _flops_per_token(model, w, p)
    share = lay.tokens_mb / (lay.tp * lay.pp)  # a GPU computes 1/tp of 1/pp of the model per token
    eff = gemm_efficiency(r, lay.tokens_mb, model.hidden_size, lay.tp)
    fp8 = w.float8 and d.card.dense_tflops("fp8") is not None
    # FP8 GEMMs reach a smaller share of their (doubled) peak than BF16 ones of theirs: the family's
    # gemm_fp8 / gemm ratio (efficiency.toml, [fp8]), applied to the shape-dependent training efficiency
    lin_rate = _peak(d, "fp8" if fp8 else "bf16") * eff * (r.gemm_at("fp8") / r.gemm if fp8 and r.gemm else 1.0)
    mlp = 0.0 if model.moe is not None else _intermediate(model, p)
    shards = linear_shards(model, w.framework, lay.tp, mlp)
    if fp8:  # shapes where Float8 tensorwise gains nothing run at the bf16 rate (train_gemm_roofline.py)
        small = fp8_no_gain_share(shards) * (1 - _expert_share(model, p))  # the shards: the non-expert linears
        lin_rate = 1 / ((1 - small) / lin_rate + small / (_peak(d, "bf16") * eff))
    attn_rate = _peak(d, "bf16") * eff * (_table()["flash_attention_share"] if w.flash_attention else 1.0)
    # routed experts each see only k/E of the tokens: their GEMMs are short (uniform routing)
    moe_share, eff_moe = _expert_share(model, p), eff
    if model.moe is not None:  # under EP a rank's experts take the routed tokens of all ep ranks
        routed = lay.tokens_mb * model.moe.experts_per_token / model.moe.num_experts * d.ep
        eff_moe = gemm_efficiency(r, routed, model.hidden_size, lay.tp)
    lin_rate *= 1 / ((1 - moe_share) + moe_share * eff / eff_moe)
    # each GEMM takes at least its operands' and output's bytes at achievable bandwidth (torchao's training
    # roofline, estimate/train_gemm_roofline.py): the narrow K/V shards under TP; dense MLPs only
    lin_rate /= roofline_slowdown(shards, lay.tokens_mb, lin_rate, r.mem_bw, fp8,
                                  weight_grads=w.task not in ADAPTER_TASKS)
    compute = share * (f["lin"] / lin_rate + f["attn"] / attn_rate)
    attention = share * (f["attn"] + f["re_attn"]) / attn_rate  # what context-parallel traffic can hide under
    recompute = share * (f["re_lin"] / lin_rate + f["re_attn"] / attn_rate)
    mem = share * _traffic_per_token(model, w, p, f["re_share"]) / r.mem_bw
    if w.task == "qlora":  # NF4 -> bf16 before each forward, backward and recomputed forward
        n_dequant = 2 + f["re_share"]
        mem += n_dequant * p.linear / (lay.tp * lay.pp) * _table()["dequant_bytes_per_param"] / r.mem_bw
    if fp8:  # weights cast once per micro-batch for forward and backward
        mem += 2 * p.linear / (lay.tp * lay.pp) * _table()["float8_cast_bytes_per_element"] / r.mem_bw
        mem += _float8_tp_transpose_seconds(model, w, r, lay)
    if w.task in ADAPTER_TASKS:
        mem += _adapter_seconds(model, w, d, r, lay, f["re_share"])
        re_lin = f["re_lin"] / (2.0 * matmul_params(p)) if matmul_params(p) else 0.0
        dora = _dora_seconds(model, w, d, r, lay, re_lin, lin_rate)
        compute, recompute, mem = compute + dora[0], recompute + dora[1], mem + dora[2]
        saved = _saved_module_seconds(model, w, r, lay, lin_rate)
        compute, mem = compute + saved[0], mem + saved[1]
    mem += _cp_merge_seconds(model, w, d, r, lay)
    tp_total, tp_exposed = _tp_seconds(model, w, r, lay, f["re_share"], compute + recompute)
    return {"compute": compute, "recompute": recompute, "memory_bound": mem,
            "tp_total": tp_total, "tp_comm": tp_exposed, "attention": attention}


def _float8_tp_transpose_seconds(model: ModelArch, w: Workload, r: Rates, lay: _Layout) -> float:
    """Float8 tensorwise under sequence-parallel TP with FP8 all-gathers (frameworks.toml tp_float8_allgather):
    the tensors gathered in FP8 reach every rank whole (all the micro-batch's tokens, not 1/tp of them) in
    the row-major layout of the all-gather, and each weight-gradient GEMM that reads one needs it
    transposed: one copy of every gathered tensor per backward, unlike a local cast, which writes both
    layouts at once ([training] float8_tp_transpose)."""
    if lay.tp <= 1:
        return 0.0
    fw = find_framework(w.framework)
    if not (fw.tp_sequence_parallel and fw.tp_float8_allgather):
        return 0.0
    t = _table()["float8_tp_transpose"]
    moved = t["tensors_per_layer"] * t["bytes_per_element"] * lay.tokens_mb * model.hidden_size
    return float(moved * model.num_layers / lay.pp / r.mem_bw)


@functools.lru_cache(maxsize=256)  # a pure function of the model; a LoRA plan asks it per configuration
def _adapter_widths(model: ModelArch, targets: tuple[str, ...]) -> tuple[float, float]:
    """Summed input and output widths of the adapted linears over all layers (as lora_params: MoE
    layers adapt their shared experts only)."""
    h, q, kv = model.hidden_size, model.q_dim, model.kv_dim
    d_in = d_out = 0.0
    for index in range(model.num_layers):
        inter = model.intermediate_size
        if model.is_moe_layer(index) and model.moe is not None:
            inter = model.moe.shared_intermediate_size * model.moe.num_shared_experts
        shapes = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h)}
        if inter:
            shapes |= {"gate": (h, inter), "up": (h, inter), "down": (inter, h)}
        for t in targets:
            i, o = shapes.get(t, (0, 0))
            d_in, d_out = d_in + i, d_out + o
    return d_in, d_out


def _adapter_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout, re_share: float) -> float:
    """LoRA's own work, one micro-batch on one GPU: out = base(x) + B(A(x)) x scale per adapted linear.
    A and B are rank-r GEMMs that move a whole activation for 2r FLOPs per element (memory-bound below
    r ~ the card's FLOP/byte ridge), and the scale-and-add is element-wise; fp32 adapters (PEFT under
    autocast) cast x to fp32 and back. Charged at the roofline: the larger of its FLOPs at the GEMM
    rate of an r-wide GEMM and its bytes at achievable bandwidth."""
    t = _table()["lora_bytes"]
    d_in, d_out = _adapter_widths(model, w.lora_targets)
    fused = _table()["compile_traffic_factor"] if w.compile or find_framework(w.framework).fused_elementwise else 1.0
    cast = t["fp32_cast_per_in"] if find_framework(w.framework).adapter_dtype == "fp32" else 0.0
    fwd = t["gemm_fwd_per_in"] * d_in + t["gemm_fwd_per_out"] * d_out \
        + fused * (t["combine_fwd_per_out"] * d_out + cast * d_in)
    bwd = t["gemm_bwd_per_in"] * d_in + t["gemm_bwd_per_out"] * d_out \
        + fused * (t["combine_bwd_per_out"] * d_out + (t["accumulate_bwd_per_in"] + cast) * d_in)
    share = lay.tokens_mb / (lay.tp * lay.pp)
    moved = share * ((1 + re_share) * fwd + bwd)
    flops = share * (6 + 2 * re_share) * w.lora_rank * (d_in + d_out)  # fwd 2, bwd 4, recompute 2 per weight
    rate = _peak(d, "bf16") * gemm_efficiency(r, lay.tokens_mb, w.lora_rank, 1)
    return float(max(flops / rate, moved / r.mem_bw))


@functools.lru_cache(maxsize=256)
def _dora_weights(model: ModelArch, targets: tuple[str, ...]) -> tuple[float, float]:
    """Elements of the targeted linears' weights (sum of d_in x d_out) and of their x_eye (sum of d_in x d_in),
    over all layers (peft_modules._targets: MoE layers adapt their shared experts only)."""
    from gpuwise.estimate.peft_modules import _targets

    weights = eye = 0.0
    for index in range(model.num_layers):
        for d_in, d_out in _targets(model, index, targets):
            weights, eye = weights + d_in * d_out, eye + d_in * d_in
    return weights, eye


# DoRA's work per targeted linear beyond LoRA's, peft 0.13.2 (ms-swift 3.0's pin) src/peft/tuners/lora/layer.py
# Linear.forward lines 581-593 (x cast to the fp32 adapters, then the magnitude layer's forward) and
# src/peft/tuners/lora/dora.py DoraLinearLayer.forward lines 65-91 and get_weight_norm lines 30-35, run under
# the HF Trainer's bf16 autocast (accelerate prepare_model). Counted, not fitted, bytes per element:
# per weight element, every forward (and every recomputed one), fp32 adapters: the frozen weight cast to fp32
# (weight.to, r 2 w 4), lora_B(lora_A(x_eye)) writes the d_in x d_out lora_weight (autocast bf16, w 2), scaling *
# lora_weight (r 2 w 2), weight + that (r 4 r 2 w 4), the row norm (r 4): 26; where the framework runs the base
# again (frameworks.toml dora_reruns_base), F.linear's autocast cast of the fp32 weight back to bf16 (r 4 w 2): 32.
# Per x_eye element: torch.eye writes it in fp32 (w 4), autocast casts it (r 4 w 2): 10. bf16 adapters
# (torchtune 0.6.1 torchtune/modules/peft/dora.py@bd2a0fc7 DoRALinear.forward lines 164-192: weight.to(x.dtype)
# a no-op, no autocast, the base output computed once): lora_weight w 2, scale r 2 w 2, sum r 2 r 2 w 2, norm
# r 2 = 14, x_eye w 2.
_DORA_PER_WEIGHT = {"fp32": 26.0, "bf16": 14.0}
_DORA_PER_EYE = {"fp32": 10.0, "bf16": 2.0}
_DORA_RERUN_CAST = 6.0
# per token: where the base runs again, F.linear(x, weight) is a whole GEMM of the base linear (its FLOPs at the
# GEMM rate) and autocast casts the fp32 x for it (r 4 w 2 per d_in); the products with mag_norm_scale, fp32:
# (m - 1) * base (r 2 w 4), m * lora_result (r 4 w 4), x scaling (r 4 w 4), their sum (r 8 w 4) = 34 per d_out;
# backward (no weight gradient: the frozen weight's cast copy needs none, so one GEMM for x's gradient) the
# gradient of (m - 1) * base (r 4 w 4) and its bf16 cast (r 4 w 2), of m * lora_result * scaling (r 4 w 4,
# twice), and the magnitude's through both products (mul then sum over tokens, r 4 r 2 w 4 r 4 and r 4 r 4 w 4
# r 4) = 60; bf16 adapters: the same tensors at half the bytes
_DORA_FWD_PER_IN, _DORA_FWD_PER_OUT, _DORA_BWD_PER_OUT = 6.0, 34.0, 60.0


def _dora_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout, re_lin: float,
                  lin_rate: float) -> tuple[float, float, float]:
    """DoRA (--dora), one micro-batch on one GPU: (compute, recompute, memory-bound) seconds. The weight norm
    runs in every forward whatever the batch (memory-bound: weight-sized element-wise tensors, the rank-r x_eye
    products moving more bytes than FLOPs), again in a recomputed forward; where the framework runs the base
    again (dora_reruns_base), F.linear(x, weight) is the base linear's GEMM a second time, forward and input
    gradient, and in a recomputed forward; QLoRA dequantises the base once more for the norm (peft dora.py
    line 78 dequantize_module_weight)."""
    if not w.dora or w.task not in ADAPTER_TASKS:
        return 0.0, 0.0, 0.0
    fw = find_framework(w.framework)
    dtype = "fp32" if fw.adapter_dtype == "fp32" else "bf16"
    rerun = 1.0 if fw.dora_reruns_base else 0.0
    weights, eye = _dora_weights(model, w.lora_targets)
    d_in, d_out = _adapter_widths(model, w.lora_targets)
    ranks = lay.tp * lay.pp
    share = lay.tokens_mb / ranks
    passes = 1.0 + re_lin
    per_pass = (_DORA_PER_WEIGHT[dtype] + rerun * _DORA_RERUN_CAST) * weights + _DORA_PER_EYE[dtype] * eye
    if w.task == "qlora":
        per_pass += _table()["dequant_bytes_per_param"] * weights
    half = 1.0 if dtype == "fp32" else 0.5
    per_token = passes * (rerun * _DORA_FWD_PER_IN * d_in + half * _DORA_FWD_PER_OUT * d_out) \
        + half * _DORA_BWD_PER_OUT * d_out
    moved = passes * per_pass / ranks + share * per_token
    return (rerun * share * 4.0 * weights / lin_rate, rerun * share * 2.0 * re_lin * weights / lin_rate,
            moved / r.mem_bw)


def _saved_module_seconds(model: ModelArch, w: Workload, r: Rates, lay: _Layout,
                          lin_rate: float) -> tuple[float, float]:
    """--modules-to-save, one micro-batch on one GPU: (compute, memory-bound) seconds. A trained lm_head copy
    adds its weight-gradient GEMM (2 x vocab x hidden FLOPs per token; LoRA's backward computes the input
    gradient only); a trained embed_tokens copy adds embedding_dense_backward: a fresh zeroed vocab x hidden
    gradient each backward (w 2 per element), the tokens' rows added into it (r 2 r 2 w 2 per token x hidden)
    and the result accumulated into .grad across micro-batches (r 2 r 2 w 2 per element). The copies'
    forward is the frozen originals' (peft/utils/other.py ModulesToSaveWrapper.forward runs the copy instead)."""
    if w.task not in ADAPTER_TASKS or not w.modules_to_save:
        return 0.0, 0.0
    vh = float(model.vocab_size * model.hidden_size)
    share = lay.tokens_mb / (lay.tp * lay.pp)
    compute = share * 2.0 * vh / lin_rate if "lm_head" in w.modules_to_save else 0.0
    moved = (8.0 * vh / (lay.tp * lay.pp) + 6.0 * share * model.hidden_size) \
        if "embed_tokens" in w.modules_to_save else 0.0
    return compute, moved / r.mem_bw


def _ep_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout, re_share: float,
                nic_per_gpu: float) -> float:
    """Expert parallelism, one micro-batch: every MoE layer sends each routed copy of a token to the
    rank holding its expert and back (dispatch + combine all-to-all), forward, backward and again in a
    recomputed forward; the (ep - 1)/ep share that leaves the GPU crosses NVLink within the node and
    the NICs beyond it. Charged without overlap: hiding it takes a dual-micro-batch schedule
    (DeepSeek-V3 tech report s.3.2.1) that the frameworks do not run by default."""
    if d.ep <= 1 or model.moe is None:
        return 0.0
    moe_layers = sum(1 for i in range(model.num_layers) if model.is_moe_layer(i)) / lay.pp
    msg = lay.tokens_mb * model.moe.experts_per_token * model.hidden_size * 2.0 * (d.ep - 1) / d.ep
    local = min(d.ep, lay.dp_local)  # EP ranks inside one node
    inside = (local - 1) / (d.ep - 1)
    one = msg * inside / r.link_busbw + msg * (1 - inside) / nic_per_gpu + r.link_latency
    return (4 + 2 * re_share) * moe_layers * one


def _cp_attention_shares(model: ModelArch, w: Workload) -> tuple[float, float]:
    """(forward, recomputed forward) shares of a micro-batch's attention seconds (forward, backward and
    recompute together): the ring runs inside SDPA, so a recomputed forward repeats it only where the
    checkpointing policy recomputes SDPA (full, every-N, Megatron selective; not torchtitan's op SAC)."""
    f = _flops_per_token(model, w, count_params(model))
    total = f["attn"] + f["re_attn"]
    if not total:
        return 0.0, 0.0
    fwd = f["attn"] / (1 + efficiency_table()["training_attention"]["backward_factor"][
        "flash" if w.flash_attention else "eager"])
    return fwd / total, f["re_attn"] / fwd


def _cp_merge_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout) -> float:
    """torch context_parallel (cp_kind allgather) merges the cp partial results of each attention forward
    and accumulates its gradients in fp32, outside the kernel: memory-bound seconds of one micro-batch on
    the slowest rank ([training_attention] cp_merge_bytes), again in each recomputed SDPA forward. The K/V
    elements are counted at the width SDPA gets (activations.sdpa_kv_dim: repeated to every head under torchtitan's
    repeat_kv)."""
    cp = d.cp
    if cp <= 1 or d.cp_kind != "allgather":
        return 0.0
    b = efficiency_table()["training_attention"]["cp_merge_bytes"]
    q = lay.tokens_mb * model.q_dim / lay.tp  # this rank's attention output elements, its TP heads
    kv = 2 * lay.tokens_mb * sdpa_kv_dim(model, w) / lay.tp  # its K and V elements
    fwd = q * (b["merge_step"] * (cp - 1) + b["merge_once"]) + kv * b["kv_cat_step"] * (cp - 1)
    bwd = q * (b["grad_step"] * cp + b["grad_once"]) + kv * b["kv_grad_step"] * (cp - 1)
    re_attn = _cp_attention_shares(model, w)[1]
    return float(model.num_layers / lay.pp * ((1 + re_attn) * fwd + bwd) / r.mem_bw)


def _cp_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout, attention: float,
                nic_per_gpu: float) -> tuple[float, float]:
    """Context parallelism, one micro-batch on one rank: (total, exposed) seconds of moving keys and values
    between the cp ranks of every layer, forward, backward and a recomputed forward (where the policy
    recomputes SDPA). K and V at the width SDPA gets (activations.sdpa_kv_dim). The cp ranks sit next to the TP ranks
    (torchtitan's mesh [pp, dp_replicate, dp_shard, cp, tp], parallel_dims.py@9dec370; Megatron's order
    tp-cp-ep-dp-pp): inside the node while tp x cp fits in it, else at the NIC's rate. `attention`: the
    micro-batch's attention seconds, forward, backward and recompute; each of the cp blocks is 1/cp of it.
    allgather (torch context_parallel, torch/distributed/tensor/experimental/_attention.py of Dec 2024, read in
      ROCm/pytorch@10b22ea5's copy, whose 5729657180 side has set_rotate_method (pytorch#142093, 2024-12) and
      no FlexAttention path; _templated_ring_attention / _templated_ring_attention_backward): one all-gather
      of cat(K, V) per attention forward, issued before the local block's SDPA and waited on at step 1, so
      it hides under that block only (the recomputed forward the same); the backward's all-gather hides
      under the local block's backward; the fp32 dK/dV of each of the cp steps is sent to the next rank
      (_AllToAllRotater permute_tensor) and waited on after the next step's block, the last after the loop:
      hidden under one block's backward each, the last exposed;
    ring (Transformer Engine / ring-flash-attention): cp - 1 passes of the local K/V forward, cp - 1 of
      K/V and cp - 1 of dK/dV (fp32 in ring-flash-attention) backward, each sent while the current block
      computes: hidden under the attention;
    ulysses (DeepSpeed deepspeed/sequence/layer.py DistributedAttention): all-to-alls of q, k, v before
      the attention and of its output after, the same for their gradients, each rank keeping 1/cp of what
      it holds; synchronous, not overlapped."""
    cp = d.cp
    if cp <= 1:
        return 0.0, 0.0
    bw = r.link_busbw if lay.tp * cp <= d.gpus else min(r.link_busbw, nic_per_gpu)
    lat = r.link_latency
    kv = lay.tokens_mb * sdpa_kv_dim(model, w) * 2.0 / lay.tp  # bf16 K (or V) of this rank's tokens, its TP heads
    q = lay.tokens_mb * model.q_dim * 2.0 / lay.tp
    layers = model.num_layers / lay.pp
    fwd_share, re_attn = _cp_attention_shares(model, w)
    if d.cp_kind == "allgather":
        gather = allgather_seconds(2 * kv * cp, cp, bw, lat)  # the whole sequence's K and V
        dkv = lat + 2 * 2 * kv / bw  # fp32 dK and dV to the next rank, each step
        fwd_block = attention * fwd_share / layers / cp  # one layer's local block, forward
        bwd_block = fwd_block * efficiency_table()["training_attention"]["backward_factor"][
            "flash" if w.flash_attention else "eager"]
        total = layers * ((2 + re_attn) * gather + cp * dkv)
        exposed = layers * ((1 + re_attn) * max(0.0, gather - fwd_block) + max(0.0, gather - bwd_block)
                            + (cp - 1) * max(0.0, dkv - bwd_block) + dkv)
        return total, exposed
    if d.cp_kind == "ring":
        passes = (cp - 1) * ((1 + re_attn) * 2 * kv + 2 * kv + 2 * 2 * kv)  # K/V fwd (+recompute), bwd; fp32 dK/dV
        total = layers * ((cp - 1) * (3 + re_attn) * lat + passes / bw)
        return total, max(0.0, total - attention)
    moved = (2 * q + 2 * kv) * (cp - 1) / cp  # q, k, v in and the output back, per direction
    total = layers * (2 + re_attn) * (4 * lat + moved / bw)
    return total, total


def _tp_seconds(model: ModelArch, w: Workload, r: Rates, lay: _Layout, re_share: float,
                busy: float) -> tuple[float, float]:
    """Megatron TP: 2 all-reduces of the activations per layer forward, 2 backward, 2 more for a
    recomputed forward, each stage over its own layers only; the framework may hide a share."""
    if lay.tp <= 1:
        return 0.0, 0.0
    msg = lay.tokens_mb * model.hidden_size * 2.0  # bf16 hidden state per token
    count = (4 + 2 * re_share) * model.num_layers / lay.pp
    t = _table()
    total = count * _tp_exchange_seconds(w, r, lay, msg)
    overlap = float(t["tp_overlap"].get(w.framework, 0.0)) if w.tp_overlap else 0.0
    if w.framework in t["tp_overlap_needs_compile"] and not w.compile:
        overlap = 0.0
    return total, max(total - overlap * busy, (1 - overlap) * total)


def _tp_exchange_seconds(w: Workload, r: Rates, lay: _Layout, msg: float) -> float:
    """One all-reduce's worth of TP traffic. Under sequence parallel (frameworks.toml
    tp_sequence_parallel) it is an all-gather and a reduce-scatter, which NCCL runs at the ring bus
    bandwidth (NVLS speeds up all-reduce only); with Float8 tensorwise linears the all-gathers carry
    FP8 (1 byte of the 2: tp_float8_allgather)."""
    fw = find_framework(w.framework)
    if not fw.tp_sequence_parallel:
        return allreduce_seconds(msg, lay.tp, r.allreduce, r.link_latency)
    gathered = msg / 2 if w.float8 and fw.tp_float8_allgather else msg
    return allgather_seconds(gathered, lay.tp, r.link_busbw, r.link_latency) \
        + allgather_seconds(msg, lay.tp, r.link_busbw, r.link_latency)


def _trainable(model: ModelArch, w: Workload) -> int:
    from gpuwise.estimate.memory_train import lora_params

    if w.task in ADAPTER_TASKS:  # with DoRA's magnitudes and the --modules-to-save copies (peft_modules)
        from gpuwise.estimate.peft_modules import dora_magnitude_params, saved_module_params

        return lora_params(model, w.lora_rank, w.lora_targets) + dora_magnitude_params(model, w) \
            + saved_module_params(model, w)
    return count_params(model).total


def _optimizer_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout) -> float:
    """The update reads and writes every state of the parameters this GPU holds (ZeRO >= 1 shards
    them over DP); with CPU/NVMe offload the CPU does it (counted under offload)."""
    if d.offload != "none":
        return 0.0
    t = _table()
    share = held_share(count_params(model), d.ep) if w.task not in ADAPTER_TASKS else (lambda z: 1.0 / z)
    held = _trainable(model, w) / (lay.tp * lay.pp) * share(lay.dp if d.zero >= 1 else 1)
    return float(held * (t["optimizer_bytes_per_param"][w.optimizer] + t["grad_clip_bytes_per_param"]) / r.mem_bw)


def _dp_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout,
                inter_node_gbps: float) -> tuple[float, bool]:
    """Data-parallel traffic per step, and whether it recurs every micro-batch (ZeRO-3/FSDP:
    all-gather weights for forward and backward, reduce-scatter grads, each micro-batch; ZeRO 0-2:
    one gradient all-reduce per step, NVLS where the node has it). Across nodes the ring runs at
    the slower of NVLink and the node's NICs (nccl-tests PERFORMANCE.md bus bandwidth)."""
    if lay.dp <= 1:
        return 0.0, False
    fw = find_framework(w.framework)
    grad_bytes = 4.0 if w.task in ADAPTER_TASKS or fw.grads_dtype == "fp32" else 2.0
    trainable = _trainable(model, w) / (lay.tp * lay.pp)
    if w.task in ADAPTER_TASKS and w.modules_to_save:  # the copies' gradients are in the model's bf16 (peft_modules)
        from gpuwise.estimate.peft_modules import saved_module_params

        trainable -= saved_module_params(model, w) / (lay.tp * lay.pp) * (1 - 2.0 / grad_bytes)
    nic = inter_node_gbps / 8 * GB
    nodes = max(1, lay.dp // lay.dp_local)
    if d.zero == 3:
        p = count_params(model)  # EP: a rank gathers only its own experts (over the ranks that share them)
        # the base is sharded even when frozen (LoRA under FSDP): gathered for forward and backward in
        # the dtype it is stored in (bf16; QLoRA's packed NF4 with its scales, as memory_train's gather)
        per_param = weight_bytes(model, "nf4").total / p.total if w.task == "qlora" else 2.0
        weights = (p.total - p.experts * (1 - 1 / d.ep)) / (lay.tp * lay.pp) * per_param
        local = 2 * allgather_seconds(weights, lay.dp_local, r.link_busbw, r.link_latency) \
            + allgather_seconds(trainable * grad_bytes, lay.dp_local, r.link_busbw, r.link_latency)
        inter = (nodes - 1) / nodes * (2 * weights + trainable * grad_bytes) / nic
        return max(local, inter), True
    busbw = r.allreduce if d.zero == 0 else r.link_busbw  # ZeRO-1/2: reduce-scatter + all-gather
    local = allreduce_seconds(trainable * grad_bytes, lay.dp_local, busbw, r.link_latency)
    inter = 2 * (nodes - 1) / nodes * trainable * grad_bytes / nic
    return max(local, inter), False


def _offload_seconds(model: ModelArch, w: Workload, d: Deployment, r: Rates, lay: _Layout,
                     busy_mb: float) -> float:
    """ZeRO-Offload: grads down and weights up over PCIe (2 + 2 bytes per parameter) plus CPU Adam;
    activation offload: saved tensors down and back each micro-batch, partly under compute."""
    links = efficiency_table()["links"]
    t = 0.0
    if d.offload != "none":
        n = count_params(model).total / max(1, d.gpus)
        bw = float(links["nvme_gbps"]) * GB if d.offload == "nvme" else r.pcie_h2d
        adam = float(efficiency_table()["overheads"]["cpu_adam_bytes_per_param"])  # the node's ranks share it
        t += 4.0 * n / bw + count_params(model).total / d.nodes * adam / host_memory_bandwidth(d.card)
    if w.activation_offload:
        per_hidden = _table()["offload_bytes_per_hidden"]["none" if w.grad_ckpt == "none" else "checkpointed"]
        moved = 2 * lay.tokens_mb * model.hidden_size * per_hidden * model.num_layers / (lay.tp * lay.pp)
        t += lay.micro_batches * max(0.0, moved / r.pcie_h2d - _table()["fsdp_overlap"] * busy_mb)
    return t


def pipeline_bubble(pp: int, micro_batches: int, virtual_stages: int = 1) -> float:
    """Idle share of a 1F1B pipeline: (pp - 1) / (m + pp - 1); interleaving v virtual stages per GPU
    divides the warm-up and cool-down by v (Narayanan et al. 2021, s.2.2)."""
    idle = (pp - 1) / virtual_stages
    return idle / (micro_batches + idle)


def train_speed(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates,
                inter_node_gbps: float | None = None) -> TrainSpeed:
    """Step time, tokens/s and MFU of one optimizer step over all GPUs (micro-batch x accumulation
    x DP ranks), with the step broken into the parts that add up to it. Without inter_node_gbps the
    nodes talk over the card's platform reference fabric (data/form_factors.toml)."""
    fabric_source = Text("--inter-node-gbps", "--inter-node-gbps")
    if not inter_node_gbps:
        inter_node_gbps, fabric_source = node_fabric(d.card)
    lay = _layout(w, d)
    mb = _micro_batch(model, w, d, r, lay)
    m = lay.micro_batches
    ep_mb = _ep_seconds(model, w, d, r, lay, _flops_per_token(model, w, count_params(model))["re_share"],
                        inter_node_gbps / 8 * GB / max(1, d.gpus))
    busy_mb = mb["compute"] + mb["recompute"] + mb["memory_bound"]
    cp_total, cp_mb = _cp_seconds(model, w, d, r, lay, mb["attention"], inter_node_gbps / 8 * GB / max(1, d.gpus))
    stage_mb = busy_mb + mb["tp_comm"] + ep_mb + cp_mb
    bubble = (d.pp - 1) / d.virtual_stages * stage_mb if d.pp > 1 else 0.0  # interleaving: 1/v the bubble
    dp_total, per_mb = _dp_seconds(model, w, d, r, lay, inter_node_gbps)
    table = efficiency_table()
    if per_mb:  # FSDP prefetch: each micro-batch's gathers and scatters hide under its own compute
        dp_total *= m
        dp_exposed = max(0.0, dp_total - _table()["fsdp_overlap"] * busy_mb * m)
    else:  # bucketed all-reduce under the last micro-batch's backward (~2/3 of its compute)
        dp_exposed = max(0.0, dp_total - table["overheads"]["dp_overlap"] * busy_mb * 2 / 3)
    parts = {"compute": m * mb["compute"], "recompute": m * mb["recompute"],
             "memory_bound": m * mb["memory_bound"] + _optimizer_seconds(model, w, d, r, lay),
             "tp_comm": m * mb["tp_comm"], "ep_comm": m * ep_mb, "dp_comm_exposed": dp_exposed, "pp_bubble": bubble,
             "offload": _offload_seconds(model, w, d, r, lay, busy_mb)}
    if d.cp > 1:
        parts["cp_comm"] = m * cp_mb
    step = sum(parts.values())
    tokens_step = lay.tokens_mb * lay.real_share * m * lay.dp
    p = count_params(model)
    attn = 6 * model.num_layers * model.q_dim * w.seq_len  # 12 x layers x q_dim x seq / 2 (causal)
    model_flops = (4 if w.task in ADAPTER_TASKS else 6) * matmul_params(p) + attn
    if w.task in ADAPTER_TASKS and "lm_head" in w.modules_to_save:  # the trained head's weight gradient
        model_flops += 2 * model.vocab_size * model.hidden_size
    n_gpus = d.gpus * d.nodes
    return TrainSpeed(step_time_s=step, tokens_per_s=tokens_step / step,
                      mfu=tokens_step * model_flops / (step * n_gpus * _peak(d, "bf16")),
                      scaling_efficiency=(m * busy_mb + parts["memory_bound"] - m * mb["memory_bound"]) / step,
                      step_breakdown_s=parts,
                      communication_s={"dp_total": dp_total, "dp_exposed": dp_exposed,
                                       "tp_total": m * mb["tp_total"], "tp_exposed": m * mb["tp_comm"],
                                       **({"cp_total": m * cp_total, "cp_exposed": m * cp_mb} if d.cp > 1 else {}),
                                       "inter_node_gbps": float(inter_node_gbps) if d.nodes > 1 else 0.0},
                      inter_node_source=fabric_source.en if d.nodes > 1 else "",
                      inter_node_source_zh=fabric_source.zh if d.nodes > 1 else "")
