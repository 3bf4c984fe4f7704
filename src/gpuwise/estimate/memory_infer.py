"""Inference memory per GPU: weights, KV cache, activations and logits, runtime overhead.

Engines are modelled with their own rules: vLLM pre-allocates a KV pool out of
gpu_memory_utilization x total memory; transformers grows a cache for the batch it was given;
llama.cpp keeps `-ngl` layers on the GPU and a fixed compute buffer.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from gpuwise.catalog.arch import ModelArch, VisionProfile
from gpuwise.catalog.engines import EngineRules, engine_rules
from gpuwise.errors import InputError
from gpuwise.estimate.allocator import allocator_overhead, rotary_cache_bytes
from gpuwise.estimate.breakdown import Capacity, HostMemory, Item, MemoryBreakdown, MemoryResult
from gpuwise.estimate.constants import KV_BYTES
from gpuwise.estimate.weights import checkpoint_format, weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB, MiB

ACT_BYTES = 2.0  # activations run in bf16/fp16

WHY_WEIGHTS = Text("parameters x bytes per weight in the chosen format, split over TP x PP GPUs, as PyTorch's "
                   "caching allocator holds them (2 MiB-rounded segments) with the rotary cache",
                   "参数量 × 所选格式每参数字节数，按 TP × PP 切分到各卡；按 PyTorch 缓存分配器实际占用计"
                   "（段按 2 MiB 取整），含旋转位置编码缓存")
WHY_KV = Text("2 (K and V) x attention layers x KV heads per GPU x head_dim x bytes x tokens "
              "(MLA: one latent; sliding layers capped at the window)",
              "2（K 与 V）× 注意力层数 × 每卡 KV 头数 × head_dim × 字节数 × token 数（MLA 只存潜向量；滑动窗口层封顶）")
WHY_STATE = Text("linear-attention layers keep a fixed state per sequence (conv window + recurrent state)",
                 "线性注意力层每个序列保存固定状态（卷积窗口 + 递归状态）")
WHY_ACT = Text("peak of one forward chunk: tokens x (3 x hidden + 3 x intermediate / TP) x 2 bytes",
               "单次前向分块峰值：token 数 × (3 × hidden + 3 × intermediate / TP) × 2 字节")
WHY_LOGITS = Text("fp32 logits for the sequences being sampled: rows x vocab x 4 bytes",
                  "采样时的 fp32 logits：行数 × 词表大小 × 4 字节")
WHY_RUNTIME = Text("memory outside torch's allocator the engine charges: CUDA context, cuBLAS workspace, NCCL "
                   "buffers when GPUs talk (data/engines.toml, by engine version)",
                   "引擎计入的 torch 分配器以外的显存：CUDA 上下文、cuBLAS 工作区，多卡时另加 NCCL 缓冲"
                   "（见 data/engines.toml，按引擎版本）")


@functools.lru_cache(maxsize=256)
def _why_sampler(rows: int, per_vocab: float) -> Text:
    return Text(f"start-up profiling: the dummy sampler run over {rows} rows (max_num_seqs) x vocab x "
                f"{per_vocab:g} bytes (fp32 logits, probabilities, sort values and indices), above the forward chunk",
                f"启动显存探测：虚拟采样运行 {rows} 行（max_num_seqs）× 词表 × {per_vocab:g} 字节"
                "（fp32 logits、概率、排序值与索引），大于前向分块峰值")



WHY_HELD = Text("start-up profiling at TP > 1 (vLLM 0.2.4-0.2.6): NCCL's record_stream keeps every all-reduce "
                "input of the profiling forward cached, 2 a layer x tokens x hidden x 2 bytes",
                "TP > 1 时的启动显存探测（vLLM 0.2.4-0.2.6）：NCCL 的 record_stream 使探测前向中每次 all-reduce 的"
                "输入都留在缓存里，每层 2 次 × token 数 × hidden × 2 字节")
WHY_VISION = Text("start-up profiling of an encoder-decoder VLM (vLLM V0): one image per sequence (max_num_seqs) "
                  "through the vision tower at once, peaking in a global layer's MLP: the dense bf16 tile mask, "
                  "the pixel values twice in fp32, the patch embeddings, the kept hidden states and their "
                  "stacked copy, and fc1 beside its GELU output",
                  "编码器-解码器多模态模型的启动显存探测（vLLM V0）：每个序列（max_num_seqs）一张图同时经过视觉塔，"
                  "峰值在全局层的 MLP：稠密 bf16 分块掩码、两份 fp32 像素值、图块嵌入、保留的隐藏状态及其堆叠副本，"
                  "以及 fc1 与 GELU 输出")
WHY_RUNTIME_NVLINK = Text("memory outside torch's allocator at TP > 2 on an NVLink/NVSwitch node: NCCL's buffers for "
                          "that fabric's channels and the engine's all-reduce buffers, as logged there "
                          "(data/engines.toml non_torch_nvlink_gib / init_nvlink_gib, by engine version)",
                          "NVLink/NVSwitch 节点上 TP > 2 时 torch 分配器以外的显存：NCCL 为该互联各通道分配的缓冲区"
                          "及引擎的 all-reduce 缓冲区，按实测日志计（见 data/engines.toml non_torch_nvlink_gib / "
                          "init_nvlink_gib，按引擎版本）")
WHY_GRAPHS = Text("CUDA graphs the engine estimates and charges before sizing the KV pool (vLLM >= 0.21)",
                  "引擎在划分 KV 池之前估算并预留的 CUDA graph 显存（vLLM >= 0.21）")


def kv_element_bytes(w: Workload, model: ModelArch) -> float:
    if w.kv_dtype == "auto":
        return 4.0 if model.dtype == "float32" else 2.0
    if w.kv_dtype not in KV_BYTES:
        raise InputError(Text(f"Unknown --kv-dtype '{w.kv_dtype}': use auto, {', '.join(KV_BYTES)}.",
                              f"未知的 --kv-dtype“{w.kv_dtype}”：可用 auto、{', '.join(KV_BYTES)}。"))
    return KV_BYTES[w.kv_dtype]


def tensor_parallel_degree(d: Deployment) -> int:
    """TP degree before checking it against the model's heads."""
    return d.tp or max(1, d.gpus // d.pp)


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


def rules_for(d: Deployment) -> EngineRules:
    """The memory rules of the deployment's engine at its version (data/engines.toml)."""
    return engine_rules(d.engine, d.engine_version)


def _large(d: Deployment, rules: EngineRules) -> bool:
    return rules.is_large(d.card.name, d.card.usable_bytes / GiB)


def batched_tokens(w: Workload, d: Deployment, large: bool | None = None) -> int:
    """Tokens of the engine's largest forward (its profiling run): --max-num-batched-tokens, else
    the engine's default; V0 vLLM without chunked prefill runs a whole max_model_len. `large`:
    the engine's large-GPU verdict on the card (`_large`), where the caller has it."""
    if w.max_num_batched_tokens:
        return w.max_num_batched_tokens
    rules = rules_for(d)
    if d.engine == "transformers":
        return w.context * w.concurrency  # transformers prefills the whole batch at once
    if rules.chunked_prefill_above and w.context <= rules.chunked_prefill_above:
        return max(w.context, rules.batched_tokens_small)
    bracket = rules.bracket(d.card.usable_bytes / GiB, tensor_parallel_degree(d))
    if bracket is not None:
        return bracket[0]
    if large is None:
        large = _large(d, rules)
    return rules.batched_tokens_large if large else rules.batched_tokens_small


def max_num_seqs(w: Workload, d: Deployment, large: bool | None = None, tokens: int | None = None) -> int:
    """The engine's default sequence limit (vLLM caps it at the batched tokens). `large` and
    `tokens`: `_large` and `batched_tokens`, where the caller has them."""
    rules = rules_for(d)
    if large is None:
        large = _large(d, rules)
    seqs = w.max_num_seqs or (rules.max_num_seqs_large if large else rules.max_num_seqs_small)
    if d.engine != "vllm":
        return seqs
    return min(seqs, batched_tokens(w, d, large) if tokens is None else tokens)


def _activation_bytes(model: ModelArch, tokens: int, tp: int) -> float:
    """Largest per-layer transient of a forward over `tokens` (MLP up/gate/act dominate)."""
    inner = 3 * model.intermediate_size
    if model.moe is not None:  # fused MoE caches top-k expert intermediates per token
        moe = model.moe
        inner = max(inner if moe.dense_layers else 0,
                    3 * moe.experts_per_token * moe.expert_intermediate_size
                    + 3 * moe.num_shared_experts * moe.shared_intermediate_size)
    # hidden: the residual, the normed input and the MLP's output; intermediate: gate_up stays
    # referenced while down_proj runs on the activation (vllm llama.py LlamaMLP.forward). Logged:
    # vllm#10517 (V0, Llama-3.1-8B) peak_torch_memory - weights = 2.07 GiB at 20,000 tokens and
    # 2.99 GiB at 29,000: 111 kB a token, (3 x 4,096 + 3 x 14,336) x 2 B = 110.6 kB
    return tokens * (3 * model.hidden_size + inner / tp) * ACT_BYTES


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


def _activation_items(model: ModelArch, w: Workload, d: Deployment, tp: int) -> list[Item]:
    """Forward transients and logits. vLLM profiles the sampler after the forward: its peak is the
    larger of the forward and the dummy sampler run over max_num_seqs rows (fp32 logits, probs and
    sort buffers, engines.toml sampler_bytes_per_vocab) beside those rows' hidden states;
    transformers and llama.cpp hold the last position's fp32 logits of each sequence."""
    rules = rules_for(d)
    large = _large(d, rules)
    tokens = batched_tokens(w, d, large)
    act = _activation_bytes(model, tokens, tp)
    held = _held_allreduce_items(model, d, rules, tp, tokens)
    if rules.sampler_bytes_per_vocab <= 0:
        logits = w.concurrency * model.vocab_size * 4.0
        return [Item("forward_activations", "activations", act, WHY_ACT),
                Item("logits", "activations", logits, WHY_LOGITS), *held]
    rows = max_num_seqs(w, d, large, tokens)
    sampler = rows * (model.vocab_size * rules.sampler_bytes_per_vocab + model.hidden_size * ACT_BYTES)
    vision = vision_profile_bytes(model, rows, tp) if rules.vision_profile_per_seq else 0.0
    forward, why = (vision, WHY_VISION) if vision > act else (act, WHY_ACT)  # the encoder's forward is the larger
    return [Item("forward_activations", "activations", forward if forward >= sampler else 0.0, why),
            Item("sampler_peak", "activations", sampler if sampler > forward else 0.0,
                 _why_sampler(rows, rules.sampler_bytes_per_vocab)), *held]


def vision_profile_bytes(model: ModelArch, rows: int, tp: int) -> float:
    """The vision tower's peak during vLLM V0's encoder-decoder profile, `rows` images at once, as
    vllm/model_executor/models/mllama.py holds it (v0.6.6.post1 and v0.7.0 alike: MllamaVisionModel.
    forward, MllamaVisionEncoder, CLIPMLP): the GELU of the MLP of a gated global layer past the
    first. Live then, per image: the aspect-ratio mask (span^2 bf16, _prepare_aspect_ratio_attention_mask,
    passed to every layer); the pixel values twice in fp32 (MultiModalKwargs.as_kwargs moves the
    batch to the GPU as the processor made it, and _parse_and_validate_image_input copies it into a
    new float32 `out_images`); the patch embedding's output (`patch_embeds`, a local held to the end:
    column-parallel, its 1/TP share); `_vision_states` hidden states; fc1's output beside its
    out-of-place GELU (column-parallel: split over TP). Checked op by op under FakeTensorMode +
    MemTracker on that code path (tests/test_kv_mllama_profile.py): 36.58 GiB for Llama-3.2-11B-Vision
    at 128 images, against vllm#12126's logged 'PyTorch activation peak memory takes 36.63GiB'.
    Lines in the v0.6.6.post1 wheel: mllama.py 228 (the mask), 605 (patch_embeds), 653 (`output`),
    658 (torch.stack), 672 (the global encoder), 1209-1216 (out_images, float32); clip.py 279-280
    (fc1, GELU); multimodal/inputs.py 185 (as_kwargs: `x.to(device)`, no dtype)."""
    v = model.vision_profile
    if v is None:
        return 0.0
    mask = v.mask_span * v.mask_span * ACT_BYTES
    pixels = 2 * v.pixels * 4.0  # the as_kwargs batch and out_images, both float32
    patch = v.patches * v.hidden * ACT_BYTES / tp
    states = _vision_states(v) * v.tokens * v.hidden * ACT_BYTES
    mlp = 2 * v.tokens * v.intermediate / tp * ACT_BYTES
    return rows * (mask + pixels + patch + states + mlp)


def _vision_states(v: VisionProfile) -> int:
    """Whole hidden states (the tower's padded tokens x hidden, gathered on every rank) live at the
    GELU of a gated global layer past the first (every released mllama has 8 global layers after 32
    local ones): the local encoder's returned `output` tuple stays referenced to the end of
    MllamaVisionModel.forward (its last state and the saved_states kept in `encoder_states`),
    besides their torch.stack copy `intermediate_hidden_states`; the global encoder's input (the
    caller's `hidden_state`); the layer's input, the residual after attention and the
    post-attention LayerNorm output (held by the layer while CLIPMLP runs). The local encoder's
    last layer holds fewer: its first input, the kept states and the layer's three."""
    return 1 + 2 * v.saved_states + 1 + 3


def _held_allreduce_items(model: ModelArch, d: Deployment, rules: EngineRules, tp: int, tokens: int) -> list[Item]:
    """vLLM 0.2.4-0.2.6 at TP > 1: the profile counts reserved memory while NCCL's record_stream
    keeps each all-reduce input of the profiling forward cached (two a layer: attention and MLP
    outputs, tokens x hidden x 2 bytes each; engines.toml tp_allreduce_inputs_held)."""
    if not rules.tp_allreduce_inputs_held or tp <= 1:
        return []
    held = 2 * model.num_layers / d.pp * tokens * model.hidden_size * ACT_BYTES
    return [Item("allreduce_inputs_held", "activations", held, WHY_HELD)]


def _runtime_items(d: Deployment, rules: EngineRules, tp_pp: int) -> list[Item]:
    """Memory outside the tensors: the engine's measured non-torch share, and the CUDA graphs
    where the engine charges them before sizing its pool."""
    non_torch = (rules.non_torch_tp_gib if tp_pp > 1 else rules.non_torch_gib) * GiB
    items = [Item("runtime", "overhead", non_torch, WHY_RUNTIME)]
    if rules.cuda_graph_in_pool and rules.cuda_graph_gib:
        items.append(Item("cuda_graphs", "overhead", rules.cuda_graph_gib * GiB, WHY_GRAPHS))
    return items


def on_nvlink_fabric(d: Deployment, tp: int) -> bool:
    """A TP group of more than 2 GPUs on one NVLink/NVSwitch fabric (cards.toml interconnect
    'nvlink', the group within interconnect_max_gpus): NCCL connects each rank to several peers
    over many channels there, where 2 GPUs (one peer) or PCIe (few channels) take far less."""
    card = d.card
    return tp > 2 and card.interconnect == "nvlink" and tp <= card.interconnect_max_gpus


def card_fabric(d: Deployment) -> bool:
    """What a serving memory estimate reads of d's card beyond its memory and name (the plan's
    memory twins must agree on it): whether d's TP group is one of more than 2 GPUs on an NVLink
    fabric (`on_nvlink_fabric`), where the engines' non-torch and start-up memory differ."""
    return on_nvlink_fabric(d, tensor_parallel_degree(d))


def _runtime_on_card(part: Serving, d: Deployment) -> tuple[Item, ...]:
    """The runtime lines on d's card: the engine's non-torch memory at TP > 2 on an NVLink node
    where its rule gives one (never below the card-free figure, so `shortfall_floor` holds)."""
    rules = part.rules
    if not rules.non_torch_nvlink_gib or not on_nvlink_fabric(d, part.tp):
        return part.runtime_lines
    return tuple(replace(i, bytes=max(i.bytes, rules.non_torch_nvlink_gib * GiB), why=WHY_RUNTIME_NVLINK)
                 if i.key == "runtime" else i for i in part.runtime_lines)


@dataclass(frozen=True)
class _Budget:
    usable: float  # what weights + KV + activations + runtime may add up to
    pool: float  # the KV pool the engine pre-allocates (0: it grows a cache instead)


def engine_fraction(d: Deployment, rules: EngineRules, tp: int, mla: bool) -> float:
    """The engine's default memory fraction: SGLang >= 0.5 derives it from a reserve for
    activations and CUDA graphs; otherwise the rule's value at this TP."""
    derived = rules.reserved_fraction(d.card.usable_bytes / GiB, tp, d.pp, mla)
    return derived if derived is not None else rules.fraction_at(tp)


def _budget(d: Deployment, rules: EngineRules, fixed: float, weights: float, tp: int, mla: bool) -> _Budget:
    """Each engine's rule for its KV pool (data/engines.toml `pool`)."""
    card = d.card.usable_bytes
    if rules.pool == "total_fraction":  # vLLM: fraction of the total, less all the rest
        budget = card * d.gpu_memory_utilization
        return _Budget(budget, max(0.0, budget - fixed))
    frac = d.mem_fraction or engine_fraction(d, rules, tp, mla)
    if rules.pool == "static_fraction":  # SGLang: fraction of the memory free at start, less weights
        init = rules.init_nvlink_gib if rules.init_nvlink_gib and on_nvlink_fabric(d, tp) else rules.init_gib
        start = card - init * GiB
        pool = max(0.0, start * frac - weights)
        return _Budget(min(card, start * frac + fixed - weights), pool)
    if rules.pool == "free_fraction":  # TRT-LLM: fraction of what is still free after the profile
        free = max(0.0, card - fixed)
        return _Budget(card - (1 - frac) * free, free * frac)
    return _Budget(card, 0.0)


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


def budget_cap(rules: EngineRules, d: Deployment) -> float | None:
    """The most the engine's budget (`usable`) can be on d's card: the card, times
    --gpu-memory-utilization where the pool is a fraction of the total. None where weights are
    offloaded to fit or the budget follows a profile (TRT-LLM's free fraction)."""
    if d.offload != "none":
        return None
    if rules.pool == "total_fraction":
        return d.card.usable_bytes * d.gpu_memory_utilization
    if rules.pool in ("static_fraction", "grow"):
        return float(d.card.usable_bytes)
    return None


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
    acts = _activation_items(model, w, d, tp)
    runtime = _runtime_on_card(part, d)
    fixed = on_gpu + sum(i.bytes for i in acts) + sum(i.bytes for i in runtime)
    budget = _budget(d, rules, fixed, on_gpu, tp, model.mla is not None)
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
        capacity = _capacity(model, w, part.kv_rates, room, rules.block_size)
    else:
        capacity = _capacity(model, w, part.kv_rates, pool, rules.block_size, part.pages)
    return MemoryResult(breakdown=breakdown, usable=budget.usable, capacity=capacity, host=host)


@dataclass(frozen=True)
class HybridPages:
    """vLLM's hybrid allocator for attention + recurrent-state layers: one page size for every
    layer (attention pages of `block` tokens, at least one layer's state; the state padded up),
    layers in groups of `group_size` by the repeating pattern, one block pool for all groups."""

    block: int  # attention tokens per page
    page: float  # bytes per page per layer (per GPU)
    group_size: int  # layers per group: num_blocks = pool // page // group_size
    attention_groups: int
    state_groups: int
    state_blocks: int  # pages each state group holds per request
    log_concurrency: bool = False  # the log's token count: max concurrency x context (newer vLLM)

    @property
    def groups(self) -> int:
        return self.attention_groups + self.state_groups

    def blocks(self, pool: float) -> int:
        return int(pool // self.page // self.group_size)

    def log_tokens(self, pool: float, context: int) -> int:
        """'GPU KV cache size': the blocks shared out evenly over the groups, in tokens; newer vLLM
        prints the max concurrency at max_model_len times that length."""
        if self.log_concurrency:
            return int(self.blocks(pool) / self.blocks_per_request(context) * context)
        return self.blocks(pool) // self.groups * self.block

    def blocks_per_request(self, context: int) -> int:
        return math.ceil(context / self.block) * self.attention_groups + self.state_blocks * self.state_groups


def hybrid_pages(model: ModelArch, elem: float, share: float, rules: EngineRules) -> HybridPages | None:
    """The shared page layout where the engine has one (engines.toml hybrid_page_alignment) and
    the model mixes attention with linear-attention layers; None otherwise. The conv window is
    kept in the model's 16-bit dtype, the recurrent state at mamba_ssm_dtype (arch.LinearAttention)."""
    attn = model.count_kind("full") + model.count_kind("sliding")
    linear = model.count_kind("linear")
    if not rules.hybrid_page_alignment or model.linear is None or not attn or not linear:
        return None
    per_token = model.kv_elements_per_token_per_layer() * elem * share
    state = model.linear.state_bytes(2.0) * share
    align = rules.hybrid_page_alignment
    block = align * max(1, math.ceil(state / (align * per_token)))
    group = min(attn, linear)
    return HybridPages(block=block, page=block * per_token, group_size=group,
                       attention_groups=math.ceil(attn / group), state_groups=math.ceil(linear / group),
                       state_blocks=rules.state_blocks_per_request, log_concurrency=rules.hybrid_log_concurrency)


def _hybrid_capacity(model: ModelArch, w: Workload, pages: HybridPages, pool: float) -> Capacity:
    """Capacity under the hybrid allocator: requests take ceil(context / block) pages in each
    attention group and a fixed number in each state group, from one pool of blocks."""
    blocks = pages.blocks(pool)
    max_conc = blocks / pages.blocks_per_request(w.context)
    per_seq = blocks / w.concurrency - pages.state_blocks * pages.state_groups
    context = int(per_seq // pages.attention_groups) * pages.block if per_seq > 0 else 0
    return Capacity(kv_tokens=pages.log_tokens(pool, w.context), max_concurrency=max_conc,
                    max_context=min(context, model.max_context))


@dataclass(frozen=True)
class KvRates:
    """Bytes of one GPU's KV share (`share` of the model's): per token over every attention layer,
    per sequence of the workload's context, the fixed state per sequence, per token of one layer."""

    per_token: float
    per_seq: float
    state: float
    per_layer: float


def kv_rates(model: ModelArch, w: Workload, elem: float, share: float) -> KvRates:
    return KvRates(per_token=model.kv_bytes_per_token(elem) * share,
                   per_seq=sequence_kv_bytes(model, w.context, elem) * share,
                   state=model.state_bytes_per_sequence(elem) * share,
                   per_layer=model.kv_elements_per_token_per_layer() * elem * share)


def _capacity(model: ModelArch, w: Workload, rates: KvRates, pool: float, block: int,
              pages: HybridPages | None = None) -> Capacity:
    """KV tokens the pool holds (whole pages of `block` tokens), sequences of --context it
    serves, context at --concurrency."""
    if pages is not None:
        return _hybrid_capacity(model, w, pages, pool)
    per_token, per_seq = rates.per_token, rates.per_seq
    kv_tokens = int(pool // (per_token * block)) * block if per_token else 0
    max_conc = pool / per_seq if per_seq else float("inf")
    return Capacity(kv_tokens=kv_tokens, max_concurrency=max_conc,
                    max_context=_max_context(model, pool / w.concurrency, rates))


def _max_context(model: ModelArch, bytes_per_seq: float, rates: KvRates) -> int:
    """Longest context whose KV (+ state) fits `bytes_per_seq`, up to the model's maximum."""
    room = bytes_per_seq - rates.state
    per_layer = rates.per_layer
    full, sliding, window = model.count_kind("full"), model.count_kind("sliding"), model.sliding_window
    if room <= 0 or per_layer <= 0:
        return 0 if room <= 0 else model.max_context
    short = room / ((full + sliding) * per_layer)  # every attention layer still growing
    if not sliding or short <= window:
        return int(min(short, model.max_context))
    if not full:
        return model.max_context
    return int(min((room - sliding * window * per_layer) / (full * per_layer), model.max_context))
