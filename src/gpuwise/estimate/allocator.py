"""Weights as PyTorch's CUDA caching allocator holds them on one GPU.

An engine creates each parameter with torch.empty on the GPU, one tensor after another, so the
memory the weights take is what the caching allocator hands out, not the sum of the tensors:
tensors of 10 MiB and more get a segment rounded up to 2 MiB, those between 1 and 10 MiB are cut
from 20 MiB segments, small ones from 2 MiB segments (c10/cuda/CUDACachingAllocator.cpp). A
block keeps the rounding when the rest is too small to split off; a split-off rest stays
reserved but unallocated. vLLM counts the weights as allocated bytes, SGLang as the free memory
they took (reserved); `held_bytes` gives both.

Checked against the engines' logs (no fitting): DeepSeek-R1-Distill-Qwen-14B at TP 2 allocates
13.9495 GiB here where vLLM logs 'Loading model weights took 13.9476 GB' (vllm#13061), against
13.756 GiB of tensors; Llama-3.1-8B 14.9888 (logged 14.9888); QwQ-32B at TP 4 reserves 15.50
GiB where SGLang logs 'mem usage=15.54 GB' (15.26 GiB of tensors).
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch

# c10/cuda/CUDACachingAllocator.cpp (pytorch@001074d, unchanged since torch 1.x):
MIN_BLOCK = 512  # kMinBlockSize: all sizes are rounded to at least 512 bytes
SMALL_SIZE = 1 << 20  # kSmallSize: largest "small" allocation is 1 MiB
SMALL_BUFFER = 2 << 20  # kSmallBuffer: "small" allocations are packed in 2 MiB blocks
LARGE_BUFFER = 20 << 20  # kLargeBuffer: "large" allocations may be packed in 20 MiB blocks
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: allocations between 1 and 10 MiB may use kLargeBuffer
ROUND_LARGE = 2 << 20  # kRoundLarge: round up large allocations to 2 MiB
VOCAB_PADDING = 64  # vLLM / SGLang vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE (pad_vocab_size)
FP8_BLOCK_SCALE_BYTES = 4  # block-wise FP8 keeps one fp32 weight_scale_inv per block


@dataclass(frozen=True)
class Held:
    """Bytes of a sequence of tensors once the allocator holds them."""

    tensors: int  # the tensors' own bytes
    allocated: int  # blocks handed out (torch.cuda.memory_allocated)
    reserved: int  # segments taken from CUDA (torch.cuda.memory_reserved after empty_cache)


def _round(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)  # round_size


def _segment(size: int) -> int:
    if size <= SMALL_SIZE:  # get_allocation_size
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def held_bytes(sizes: tuple[int, ...]) -> Held:
    """Allocate `sizes` in order, none freed (a model's parameters): best fit among the free
    rests, else a new segment; a rest is split off when it is at least 512 bytes (small pool)
    or above 1 MiB (large pool), as should_split does."""
    free: dict[bool, list[int]] = {True: [], False: []}  # free block sizes by pool (small?), sorted
    allocated = reserved = 0
    for raw in sizes:
        size = _round(raw)
        small = size <= SMALL_SIZE
        pool = free[small]
        at = bisect.bisect_left(pool, size)
        if at < len(pool):
            block = pool.pop(at)
        else:
            block = _segment(size)
            reserved += block
        rest = block - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:
            bisect.insort(pool, rest)
            block = size
        allocated += block
    return Held(tensors=sum(sizes), allocated=allocated, reserved=reserved)


def _linear(rows: int, cols: int, elem: float, block: int) -> list[int]:
    """A linear layer's weight (rows x cols at `elem` bytes) and its block scales, if any."""
    out = [int(rows * cols * elem)]
    if block:
        out.append(math.ceil(rows / block) * math.ceil(cols / block) * FP8_BLOCK_SCALE_BYTES)
    return out


def _mlp(model: ModelArch, inner: int, tp: int, elem: float, block: int) -> list[int]:
    h = model.hidden_size
    up = (2 if model.gated_mlp else 1) * inner // tp  # gate and up merged (MergedColumnParallelLinear)
    return [*_linear(up, h, elem, block), *_linear(h, inner // tp, elem, block)]


def _layer(model: ModelArch, index: int, tp: int, elem: float, block: int, rope: int) -> list[int]:
    """One decoder layer's tensors on one TP rank, in the order the engine creates them:
    attention (qkv merged, o), the rotary cache once (after the first attention), the MLP or
    the fused experts, the norms."""
    h, hd = model.hidden_size, model.head_dim
    q = model.num_heads // tp * hd * (2 if model.attn_output_gate else 1)
    kv = max(model.num_kv_heads // tp, 1) * hd  # KV heads replicated past num_kv_heads ranks
    out = _linear(q + 2 * kv, h, elem, block)
    if model.qkv_bias:
        out.append((q + 2 * kv) * 2)
    out += _linear(h, model.num_heads // tp * hd, elem, block)
    if model.qk_norm:
        out += [hd * 2, hd * 2]
    if index == 0 and rope:
        out.append(rope)
    moe = model.moe
    if moe is None or not model.is_moe_layer(index):
        out += _mlp(model, model.intermediate_size, tp, elem, block)
    else:
        e, inner = moe.num_experts, moe.expert_intermediate_size
        out.append(e * h * 2)  # router, 16-bit, replicated
        up = (2 if model.gated_mlp else 1) * inner // tp
        out += [int(e * up * h * elem), int(e * h * (inner // tp) * elem)]  # FusedMoE w13 and w2
        if block:
            out += [e * math.ceil(up / block) * math.ceil(h / block) * FP8_BLOCK_SCALE_BYTES,
                    e * math.ceil(h / block) * math.ceil(inner // tp / block) * FP8_BLOCK_SCALE_BYTES]
        if moe.num_shared_experts:
            out += _mlp(model, moe.num_shared_experts * moe.shared_intermediate_size, tp, elem, block)
    return out + [h * 2] * model.norms_per_layer


def rotary_cache_bytes(model: ModelArch, rope_bytes: float) -> int:
    """RotaryEmbedding's cos_sin_cache: max_position_embeddings x head_dim at `rope_bytes`."""
    return int(model.max_context * model.head_dim * rope_bytes)


def weight_tensors(model: ModelArch, elem: float, tp: int, rope_bytes: float) -> tuple[int, ...] | None:
    """One TP rank's weight tensors in creation order (embedding, layers, final norm, LM head),
    the linear weights at `elem` bytes, 16-bit elsewhere, with a max_position x head_dim rotary
    cache at `rope_bytes` an element; None for what this does not lay out (MLA, linear
    attention, learned positions, weights of under a byte)."""
    if model.mla is not None or model.linear is not None or model.learned_positions or elem < 1:
        return None
    if model.num_heads % tp:
        return None
    block = model.quant.block[0] if model.quant is not None and elem == 1 else 0
    vocab = -(-model.vocab_size // VOCAB_PADDING) * VOCAB_PADDING // tp
    embed = vocab * model.hidden_size * 2
    rope = rotary_cache_bytes(model, rope_bytes)
    out = [embed]
    for index in range(model.num_layers):
        out += _layer(model, index, tp, elem, block, rope)
    out.append(model.hidden_size * 2)
    if not model.tie_embeddings:
        out.append(embed)
    return tuple(out)


@functools.lru_cache(maxsize=512)
def allocator_overhead(model: ModelArch, elem: float, tp: int, rope_bytes: float, reserved: bool) -> float:
    """Bytes the allocator holds beyond the tensors of one TP rank (the rotary cache included):
    allocated, or reserved where the engine counts free memory; 0 where `weight_tensors` has no
    layout."""
    sizes = weight_tensors(model, elem, tp, rope_bytes)
    if sizes is None:
        return 0.0
    held = held_bytes(sizes)
    return float((held.reserved if reserved else held.allocated) - held.tensors
                 + rotary_cache_bytes(model, rope_bytes))
