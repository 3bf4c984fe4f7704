"""What a training step keeps for backward: saved tensors per layer, per checkpointing policy, and the loss.

Bytes per micro-batch on one GPU (before tensor parallel), with sb = seq_len x micro_batch tokens.
Every term names the op that saves it; the eager terms were checked against PyTorch's own
MemTracker on a tiny Llama (tests/test_train_memory_cpu.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import ckpt_every, find_framework
from gpuwise.estimate.workload import Workload

# torchtitan op-level SAC saves the outputs of aten.mm, SDPA and reduce-scatter, "except every second mm"
# (pytorch/torchtitan@cfb93265 torchtitan/distributed/activation_checkpoint.py, _apply_op_sac: the mm
# counter lives in a `meta` dict made afresh per checkpointed forward, so mm 1, 3, 5, 7 of every layer
# are saved: wq, wv, w1 and w2 in torchtitan's Llama, whose FeedForward calls w1, w3, w2).
# Float8 linears keep them too: torchao's Float8Linear calls torch.mm on Float8Tensor operands
# (pytorch/ao@0afa4c1 torchao/float8/float8_linear.py matmul_with_hp_or_float8_args.forward) and the
# subclass turns aten.mm into torch._scaled_mm (float8_ops.py, @implements([aten.mm.default])) only after
# the checkpoint's TorchDispatchMode, which takes precedence over tensor subclasses, has counted and
# saved the aten.mm (tests/test_train_memory_sac.py runs the policy on such a subclass); torchtitan's
# 2024-12 tables agree: FSDP + compile 77.0 GiB, + Float8 76.8 (benchmarks/llama3_h100_202412_torchtitan.md).
_OP_SAC_SAVED_MMS = ("q", "v", "gate", "down")


@dataclass(frozen=True)
class LayerSaved:
    """Bytes one transformer layer saves for backward with nothing recomputed, and the parts
    that the policies treat apart."""

    total: float
    core_attention: float  # SDPA log-sum-exp (flash) or the s^2 softmax (eager): what Megatron recomputes
    op_sac: float  # what torchtitan's op-level SAC keeps of this layer (input included)


def _norm_bytes(model: ModelArch, w: Workload, sbh: float, trainable: bool) -> float:
    """One norm. LayerNorm is one aten op (native_layer_norm saves its bf16 input + fp32 mean/rstd).
    Eager RMSNorm (HF LlamaRMSNorm, torchtune RMSNorm) saves the fp32 upcast x.float() (pow and mul
    both keep it: 4 bytes), the fp32 rsqrt per token, and, only when its weight trains, the bf16 normed
    tensor that `weight * x` needs for the weight's gradient. Compiled or fused kernels (Liger, Unsloth,
    inductor) keep the bf16 input and rstd."""
    rows = sbh / model.hidden_size  # tokens
    if model.norm_bias or w.compile:
        return 2 * sbh + 8 * rows
    return 4 * sbh + 4 * rows + (2 * sbh if trainable else 0.0)


def sdpa_kv_dim(model: ModelArch, w: Workload) -> int:
    """Width of the K and V that SDPA is handed, so saves for backward and context parallelism gathers:
    the model's KV width, or the query width where the model code repeats K/V to every query head first
    (frameworks.toml sdpa_repeats_kv; torchtitan 9dec370 torchtitan/models/llama/model.py lines 201-202,
    repeat_kv = unsqueeze, expand, reshape: the reshape of the expanded tensor is a contiguous copy).
    The un-repeated K/V are saved by nothing: the expand and the copy keep only sizes (torch
    derivatives.yaml: expand's backward is sum_to_size, clone's the gradient itself) and RoPE's complex
    multiply keeps only freqs_cis, which needs no gradient (tests/test_train_memory_repeat_kv.py measures
    it under MemTracker: K and V at n_heads, nothing more; compiled, AOTAutograd's partitioner saves the
    repeated ones too, SDPA being an op inductor calls with its inputs as they are)."""
    return model.q_dim if find_framework(w.framework, w.task).sdpa_repeats_kv else model.kv_dim


def _attention(model: ModelArch, w: Workload, index: int, sb: int) -> tuple[float, float]:
    """(saved by the attention block without its norm, the core-attention part of it)."""
    h = model.hidden_size
    if model.mla is not None:
        m = model.mla
        q = model.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
        k, v = q, model.num_heads * m.v_head_dim
        out = v
        # latents: q_a and kv_a outputs go through their RMSNorm (fp32 copy, 4) and on into q_b / kv_b (2)
        latents = 6 * sb * (m.q_lora_rank + m.kv_lora_rank) + 2 * sb * m.qk_rope_head_dim
    else:
        q, latents = model.q_dim, 0
        k = v = sdpa_kv_dim(model, w)  # as SDPA is handed them (repeated to the query heads: torchtitan 2024-12)
        out = q
    qkv_in = 2 * sb * h  # the normed input, saved once for q/k/v (or for their LoRA A matrices)
    sdpa = 2 * sb * (q + k + v) + 2 * sb * out  # SDPA keeps q, k, v after RoPE and its output (o_proj's input)
    if w.flash_attention:
        core = 4.0 * sb * model.num_heads  # flash / mem-efficient: fp32 log-sum-exp per head and token
    else:
        # eager attention: fp32 softmax (4) + its bf16 copy for the PV matmul (2) per score; sliding
        # layers score only the window
        window = model.sliding_window if model.kinds[index] == "sliding" and model.sliding_window else w.seq_len
        core = 6.0 * model.num_heads * sb * min(w.seq_len, window)
    extra = 0.0
    if model.qk_norm:  # per-head RMSNorm on q and k: their fp32 copies (k before any repeat)
        extra += 4 * sb * (q + (k if model.mla is not None else model.kv_dim))
    if model.attn_output_gate:  # sigmoid gate output and the gated product
        extra += 4 * sb * q
    return qkv_in + sdpa + core + latents + extra, core


def _mlp(model: ModelArch, index: int, sb: int) -> float:
    """Dense SwiGLU: the normed input (2sbh) + gate, up, SiLU(gate) and down's input, 2 bytes each
    (8 sb i); a plain MLP keeps fc1's output and the activation (4 sb i). MoE: the router's fp32
    softmax (4 sb E), and per routed slot (k per token) the gathered token copy, the expert's own
    SwiGLU terms and its output kept by the routing-weight multiply (HF Mixtral/Qwen-MoE loop)."""
    h = model.hidden_size
    per_inter = 8 if model.gated_mlp else 4
    if model.moe is None or not model.is_moe_layer(index):
        return 2 * sb * h + per_inter * sb * model.intermediate_size
    moe = model.moe
    routed = moe.experts_per_token * (2 * sb * h + per_inter * sb * moe.expert_intermediate_size + 2 * sb * h)
    shared = per_inter * sb * moe.shared_intermediate_size * moe.num_shared_experts
    return 2 * sb * h + 4 * sb * moe.num_experts + routed + shared


def _float8_saving(model: ModelArch, sb: int) -> float:
    """Assumption (torchao float8 training under torch.compile): the inputs that only the linear layers
    keep are saved as fp8 (1 byte) instead of bf16: the two normed inputs and down_proj's input."""
    return 2 * sb * model.hidden_size * 1 + sb * model.intermediate_size * 1


def layer_saved(model: ModelArch, w: Workload, index: int, *, full_ft: bool) -> LayerSaved:
    sb = w.seq_len * w.micro_batch
    sbh = float(sb * model.hidden_size)
    attn, core = _attention(model, w, index, sb)
    norms = model.norms_per_layer * _norm_bytes(model, w, sbh, trainable=full_ft)
    total = attn + _mlp(model, index, sb) + norms
    if w.task in ("lora", "qlora"):  # each adapter's B saves A's output: sb x r, 2 bytes, per target
        total += 2.0 * sb * w.lora_rank * len(w.lora_targets)
    if w.float8:
        total -= _float8_saving(model, sb)
    dims = {"q": model.q_dim, "v": model.kv_dim, "gate": model.intermediate_size, "down": model.hidden_size}
    # under torch.compile the SAC region is one AOTAutograd graph whose partitioner saves only what the
    # backward reads; the down projection's output only feeds the residual add, whose backward needs no
    # input, so it is not saved, while eager SAC caches every MUST_SAVE output whether backward reads
    # it or not (pytorch/pytorch torch/utils/checkpoint.py _CachingTorchDispatchMode: outputs of MUST_SAVE
    # / PREFER_SAVE ops go to `storage`); 2 sbh a layer, 4.0 GiB over Llama-3.1-8B's 32 layers at 2 x 8192
    # against torchtitan's 5.0-5.4 GiB compile saving (benchmarks/llama3_h100_202412_torchtitan.md)
    saved_mms = tuple(n for n in _OP_SAC_SAVED_MMS if not (w.compile and n == "down"))
    mms = sum(2.0 * sb * dims[name] for name in saved_mms)  # bf16 outputs, Float8 linears' too
    # op-SAC: the layer input (checkpoint), SDPA's output and log-sum-exp, and the odd mm outputs. K/V
    # repeated before SDPA are not among them: torchtitan 9dec370's _save_list (torchtitan/parallelisms/
    # parallelize_llama.py lines 214-223: aten.mm, SDPA flash / efficient, reduce_scatter_tensor, abs, max)
    # keeps SDPA's outputs, not its inputs, and the repeat's copy is recomputed with the rest of the layer
    # (in `total`, hence in the one recomputed layer)
    op_sac = 2 * sbh + 2.0 * sb * model.q_dim + 4.0 * sb * model.num_heads + mms
    return LayerSaved(total=total, core_attention=core, op_sac=min(op_sac, total))


@functools.lru_cache(maxsize=256)
def _layers_saved(model: ModelArch, w: Workload, full_ft: bool) -> tuple[LayerSaved, ...]:
    """Every layer's saved tensors; cached because a training plan asks the same workload of every
    card and GPU count (only the parallelism and checkpointing choices around it change)."""
    return tuple(layer_saved(model, w, i, full_ft=full_ft) for i in range(model.num_layers))


@dataclass(frozen=True)
class SavedActivations:
    """Saved activations of all layers on one GPU, the transient of one recomputed layer, and what
    activation offloading moved to host RAM."""

    kept: float
    recompute: float
    offloaded: float = 0.0
    head: float = 0.0  # of `kept`, what only the last pipeline stage holds (final norm, head input)
    backward_transient: float = 0.0  # beside the saved tensors, at the peak of one layer's backward


def saved_activations(model: ModelArch, w: Workload, *, full_ft: bool, layers: float,
                      residual_bytes: float = 2.0) -> SavedActivations:
    """Per checkpointing policy, for `layers` layers on this pipeline stage. `residual_bytes`: the
    residual stream's element size (4 where the embedding was upcast to fp32: PEFT's k-bit prep)."""
    n = max(1, round(layers))
    per = _layers_saved(model, w, full_ft)[:n]
    sbh = residual_bytes * w.seq_len * w.micro_batch * model.hidden_size  # a checkpointed layer's input
    biggest = max(p.total for p in per)
    every = ckpt_every(w.grad_ckpt)
    if w.grad_ckpt == "none":
        kept, recompute, ckpts = sum(p.total for p in per), 0.0, 0.0
    elif w.grad_ckpt == "selective":  # Megatron: recompute core attention only
        kept, recompute, ckpts = sum(p.total - p.core_attention for p in per), 0.0, 0.0
    elif w.grad_ckpt == "op-sac":
        kept, recompute, ckpts = sum(p.op_sac for p in per), biggest, sum(p.op_sac for p in per)
    else:  # full (every 1) or every-N: layers N, 2N, ... keep their input only (torchtitan _apply_layer_sac)
        checkpointed = n // every
        full = [p.total for i, p in enumerate(per) if (i + 1) % every != 0]
        kept, recompute, ckpts = sum(full) + checkpointed * sbh, biggest, checkpointed * sbh
    head = _head(model, w, full_ft)
    kept += head
    transient = 0.0 if w.flash_attention else _eager_backward_transient(per, w.grad_ckpt == "selective")
    if not w.activation_offload:
        return SavedActivations(kept=kept, recompute=recompute, head=head, backward_transient=transient)
    # torchtune OffloadActivations: saved tensors go to pinned host RAM as they are made and come
    # back one layer ahead of backward; the GPU keeps about two layers in flight
    on_gpu = 2 * (ckpts / n if ckpts else biggest)
    moved = max(0.0, kept - on_gpu)
    return SavedActivations(kept=kept - moved, recompute=recompute, offloaded=moved, head=min(head, kept - moved),
                            backward_transient=transient)


def _eager_backward_transient(per: tuple[LayerSaved, ...], recomputed_core: bool) -> float:
    """Eager attention's backward holds score-sized gradients beside the fp32 probabilities it saved
    (transformers LlamaAttention eager: softmax(..., dtype=float32).to(query.dtype), then the PV matmul;
    6 bytes a score saved). PV's backward writes the bf16 gradient of the probabilities (2) and frees
    their bf16 copy; ToCopyBackward makes its fp32 copy (4) before the bf16 one goes; the softmax's
    backward (CUDA, half_to_float) reads that beside the saved output (4) and writes the bf16 gradient
    of the scores (2): 10 bytes a score at either step, 4 over the saved 6 (tests/test_train_memory_eager.py
    measures it with PyTorch's MemTracker). Megatron-style selective recompute saved none of the 6 and
    makes them again first: 10 in all. Flash / memory-efficient attention keeps no scores: 0."""
    core = max((p.core_attention for p in per), default=0.0)
    return core * (10.0 if recomputed_core else 4.0) / 6.0


def _head(model: ModelArch, w: Workload, full_ft: bool) -> float:
    """The final norm (outside any checkpoint) and the output projection's input when its weight trains."""
    sbh = float(w.seq_len * w.micro_batch * model.hidden_size)
    head_input = 2 * sbh if full_ft and w.loss != "fused" else 0.0
    return _norm_bytes(model, w, sbh, trainable=full_ft) + head_input


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def kept_logits_bytes(model: ModelArch, w: Workload, fp32_logits: bool) -> float:
    """The shifted logits a training loop still names after the loss, alive through backward and the
    optimizer step: torchtune's recipes before 'del logits' (pytorch/torchtune recipes/
    full_finetune_distributed.py@135cf2ef lines 492-502: logits = logits[..., :-1, :].contiguous();
    logits = logits.transpose(1, 2); loss = self._loss_fn(logits, labels); loss.backward(), then
    self._optimizer.step(), with no del; the fix, '# free logits otherwise it peaks backward memory /
    del logits', came in #1046, 2024-06-04, lora_finetune_distributed, and #1235, 2024-07-28, the
    others). A contiguous copy in the dtype the model hands the loss (fp32 under logits_fp32: 4 bytes a
    logit). tests/test_train_memory_kept_logits.py measures the recipe's sequence under MemTracker:
    16.3 bytes a logit at the peak without the del, 12.3 with it. Only the full (unchunked) loss has
    the name; chunked and fused losses never make whole logits."""
    if w.loss != "full":
        return 0.0
    return (4.0 if fp32_logits else 2.0) * w.seq_len * w.micro_batch * model.vocab_size


def loss_bytes(model: ModelArch, w: Workload, chunks: int, vocab_parallel: bool = False,
               fp32_logits: bool = False, bf16_loss: bool = False) -> float:
    """Peak bytes of the loss, forward or backward, whichever is larger (they do not coexist).

    full (transformers loss_utils.ForCausalLMLoss @d0fed636, with F.cross_entropy = log_softmax +
      nll_loss): forward holds the bf16 logits (2), the fp32 upcast (4) and log_softmax's fp32 output
      (4) = 10 bytes per logit; the Trainer drops the outputs before backward, which holds the saved
      log-probs (4), nll's dense fp32 gradient (4) and log_softmax's fp32 input gradient (4) = 12.
    chunked (torchtune CEWithChunkedOutputLoss @ce5433b0: the output projection per chunk, the list of
      bf16 chunks kept until the recipe's `del logits`, F.cross_entropy(chunk.float()) per chunk):
      eager, autograd saves every chunk's fp32 log-probs: 2 + 4 + 4/n forward, 4 + 10/n backward;
      compiled (the recipe compiles compute_cross_entropy, whose .float() is inside the compiled
      function), AOTAutograd's min-cut partitioner keeps the bf16 chunk and per-row statistics
      (a reduction's output is 4x smaller than its input, so it is saved, not recomputed) and inductor
      recomputes the softmax inside the one kernel that writes the chunk's bf16 gradient; the one-hot
      of nll_loss_backward is a scatter into zeros, which inductor rewrites as a pointwise select
      (pytorch/pytorch torch/_inductor/fx_passes/post_grad.py scatter_upon_const_tensor; config.py
      optimize_scatter_upon_const_tensor, default "1": "lower this pattern to a pointwise kernel for more
      fusion opportunities and saving memory footprint"): 2 + 2/n (one chunk's bf16 gradient).
    full under torch.compile, the same kernels on one chunk: the logits as the model hands them to the
      loss (bf16: 2; fp32 where the model upcasts outside the compiled loss, torchtune's
      TransformerDecoder `self.output(h).float()`: 4) and a gradient of that dtype: 4, or 8 with fp32
      logits. torchtitan compiles cross_entropy_loss (.float() inside) on its own:
      torchtitan/components/loss.py@e7c0cae9 build_cross_entropy_loss, since 2024-10-22 except
      2024-12-18 to 2025-02-20, when it was turned off; HF computes the loss (ForCausalLMLoss, whose
      upcast is inside) in the compiled forward.
    full, vocabulary-parallel (tensor parallelism with DTensor's loss_parallel, torchtitan's default under
      TP: pytorch/pytorch torch/distributed/tensor/parallel/loss.py, _log_softmax and
      _nll_loss_and_log_softmax_backward): forward keeps the fp32 input, x - max and the result
      beside the bf16 logits (2 + 4 + 4 + 4 = 14); backward holds the saved log-probs, grad_input =
      torch.zeros_like(x), torch.exp(x) and their sum ('return (grad_input + torch.exp(x)) * grad_output'):
      4 x 4 = 16 bytes per logit of this rank's vocabulary shard.
    full on bf16 logits (`bf16_loss`: ms-swift's sequence-parallel loss, CrossEntropyLoss(reduction='none')
      on outputs.logits as the model returns them, swift/trainers/sequence_parallel/ulysses.py@70ec3155d
      loss_scale_sp_func, utils.py@v3.8.0 lines 123-149; the model got no labels, so no upcast): log_softmax
      and its gradients in bf16: forward the logits and the log-probs (2 + 2), backward the saved log-probs,
      nll's dense gradient and log_softmax's input gradient (2 + 2 + 2) = 6 bytes per logit.
    fused (Liger FusedLinearCrossEntropy; Unsloth and Cut Cross Entropy are assumed no larger): no full
      logits; a bf16 logits chunk of next_pow2(ceil(tokens / ceil(V / h))) rows, and the gradient of
      the hidden states (2 sbh) that it keeps for backward.
    """
    tokens = w.seq_len * w.micro_batch
    v = model.vocab_size
    logits = float(tokens * v)
    if w.loss == "fused":
        rows = _next_pow2(-(-tokens // -(-v // model.hidden_size)))
        return 2.0 * min(rows, tokens) * v + 2.0 * tokens * model.hidden_size
    if w.loss == "chunked":
        n = max(1, chunks)
        per = 2 + 2 / n if w.compile else max(6 + 4 / n, 4 + 10 / n)
        return logits * per
    if w.compile:  # the logits held and their gradient, in the dtype the model hands the loss
        return logits * (8.0 if fp32_logits else 4.0)
    if bf16_loss:
        return logits * 6.0
    return logits * (16.0 if vocab_parallel else 12.0)


def cp_backward_transient(model: ModelArch, w: Workload, cp: int, kind: str) -> float:
    """What context parallelism adds beside one layer's attention backward, on one rank (before TP),
    for `w` holding the rank's own share of the sequence (seq_len / cp tokens). Per local token:
    allgather (torch context_parallel's default rotate method _RotateMethod.ALL_GATHER, torchtitan;
      pytorch/pytorch torch/distributed/tensor/experimental/_attention.py@0123248a, in torch 2.13
      _context_parallel/_attention.py, _templated_ring_attention_backward): the layer's K and V all-gathered
      for the whole sequence (_AllGatherRotater: one all-gather of cat(k, v), bf16: 4 kv x cp), grad_query/
      key/value accumulated in fp32 (convert_to_f32: zeros_like(..., dtype=accum_dtype)), the load-balanced
      steps' _partial_update making a new fp32 copy beside the old (torch.cat of the chunks), the fp32 dK/dV
      passed on by the ALL_TO_ALL rotater (the cat sent and the permute_tensor received) and each step's bf16
      gradients from the SDPA backward op: 4 kv x cp + max(10 q + 28 kv, 6 q + 38 kv) at the peak, as
      replaying the function itself under MemTracker on a fake process group measures it
      (tests/test_train_cp_memory.py, within 5 % at 1, 2, 4 and 8 query heads per KV head; the second
      moment is the higher one below 2.5 query heads per KV head: MHA, or K/V repeated to the query heads);
    ring (ring-flash-attention ring_flash_attn.py ring_flash_attn_backward, the scheme of Megatron's
      Transformer Engine p2p CP and ms-swift's ring attention): the next K and V received (bf16: 4 kv),
      the block dq/dk/dv buffers (bf16: 2 (q + 2 kv)), dq/dk/dv accumulated in fp32 (4 (q + 2 kv)) and
      the next dk/dv received (fp32: 8 kv);
    ulysses (DeepSpeed deepspeed/sequence/layer.py DistributedAttention, _SeqAllToAll): attention
      runs on the whole sequence for heads / cp, the same bytes as the local tokens' all heads, so what
      it saves is the rank's share; backward's all-to-alls write the gradients of q, k and v into new
      buffers beside the ones the attention backward made (2 (q + 2 kv)).
    kv is the width SDPA is handed (sdpa_kv_dim): torch's context_parallel gathers, passes and accumulates
    SDPA's own inputs, so K/V repeated to the query heads first (torchtitan 2024-12) count at q_dim.
    Flash / memory-efficient attention only (torch CP: 'CP only supports flash attention and memory
    efficient attention now')."""
    if cp <= 1:
        return 0.0
    tokens = float(w.seq_len * w.micro_batch)
    q, kv = model.q_dim, sdpa_kv_dim(model, w)  # K/V as SDPA is handed them, repeated or not
    if kind == "allgather":
        per_token = 4.0 * kv * cp + max(10.0 * q + 28.0 * kv, 6.0 * q + 38.0 * kv)
    elif kind == "ring":
        per_token = 6.0 * q + 24.0 * kv
    else:
        per_token = 2.0 * (q + 2.0 * kv)
    return tokens * per_token
