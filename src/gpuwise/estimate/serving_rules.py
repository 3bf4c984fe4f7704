"""The engine's rules as they apply to one serving deployment, and the peak of its profiling run.

Holds: the engine's memory rules at its version (`rules_for`), the TP degree, the tokens and
sequences of the engine's largest forward (its start-up profiling run: `batched_tokens`,
`max_num_seqs`), that run's transient peak (forward activations, the sampler, an encoder-decoder
VLM's vision tower, the all-reduce inputs NCCL keeps), and whether a TP group sits on an NVLink
fabric. It imports only catalog, errors, i18n, units, estimate.breakdown and estimate.workload;
never the KV pool (estimate/kv_pool.py), the assembly of the MemoryResult (estimate/memory_infer.py),
plan, cli or web.
"""

from __future__ import annotations

import functools

from gpuwise.catalog.arch import ModelArch, VisionProfile
from gpuwise.catalog.engines import EngineRules, engine_rules
from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import Item
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["activation_items", "batched_tokens", "card_fabric", "max_num_seqs", "on_nvlink_fabric",
           "rules_for", "tensor_parallel", "tensor_parallel_degree", "vision_profile_bytes"]

ACT_BYTES = 2.0  # activations run in bf16/fp16
WHY_ACT = Text("peak of one forward chunk: tokens x (3 x hidden + 3 x intermediate / TP) x 2 bytes",
               "单次前向分块峰值：token 数 × (3 × hidden + 3 × intermediate / TP) × 2 字节")
WHY_LOGITS = Text("fp32 logits for the sequences being sampled: rows x vocab x 4 bytes",
                  "采样时的 fp32 logits：行数 × 词表大小 × 4 字节")


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


def tensor_parallel_degree(d: Deployment) -> int:
    """TP degree before checking it against the model's heads."""
    return d.tp or max(1, d.gpus // d.pp)


def tensor_parallel(model: ModelArch, d: Deployment) -> int:
    """TP degree for serving: all GPUs of a pipeline stage unless --tp says otherwise."""
    tp = tensor_parallel_degree(d)
    if model.num_heads % tp:
        raise InputError(Text(
            f"--tp {tp} does not divide the {model.num_heads} attention heads of {model.name}.",
            f"--tp {tp} 无法整除 {model.name} 的 {model.num_heads} 个注意力头。"),
            hint=Text("Use a TP degree that divides the head count (1, 2, 4, 8...).",
                      "请使用能整除头数的 TP（1、2、4、8……）。"))
    return tp


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


def activation_items(model: ModelArch, w: Workload, d: Deployment, tp: int) -> list[Item]:
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
