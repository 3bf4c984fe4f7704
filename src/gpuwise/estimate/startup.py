"""The start-up lines a serving engine would print for an estimate: its KV pool in its own words.

vLLM V1 logs "Available KV cache memory", "GPU KV cache size: N tokens" and "Maximum concurrency
for C tokens per request: X.XXx" (vllm/v1/worker/gpu_worker.py, vllm/v1/core/kv_cache_utils.py);
V0 logs "# GPU blocks: N, # CPU blocks: M" (vllm/executor, swap_space 4 GiB); SGLang "KV Cache is
allocated. #tokens: N, K size: X GB, V size: X GB" and "max_total_num_tokens=N" (GB = 1 << 30);
TensorRT-LLM "[MemUsageChange] Allocated X GiB for max tokens in paged KV cache (N)."
The weights line comes last: V0 "Loading model weights took X GB" (model_runner.py@v0.6.6, bytes
/ 2**30), V1 "Model loading took X GiB" (gpu_model_runner.py, vLLM 0.8.5 in PR #17122's sample),
SGLang "Load weight end. ... mem usage=X GB." (model_runner.py load_model, GB = 1 << 30).
"""

from __future__ import annotations

from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.kv_pool import HybridPages, engine_fraction, hybrid_pages, kv_element_bytes, kv_share
from gpuwise.estimate.serving_rules import batched_tokens, max_num_seqs, rules_for, tensor_parallel
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.units import GiB, MiB

V0_SWAP_SPACE_GIB = 4  # vLLM V0 --swap-space default (CPU blocks)


def _vllm_lines(w: Workload, pool: float, tokens: int, block: int, per_token: float, v0: bool,
                pages: HybridPages | None = None) -> list[str]:
    concurrency = tokens / w.context if w.context else 0.0
    if pages is not None:  # hybrid: requests hold pages per group, not tokens / context
        hybrid = pages.blocks(pool) / pages.blocks_per_request(w.context)
        setting = f"Setting attention block size to {pages.block} tokens to ensure that attention page size"
        return [f"{setting} is >= mamba page size.",
                f"Available KV cache memory: {pool / GiB:.2f} GiB",
                f"GPU KV cache size: {tokens:,} tokens",
                f"Maximum concurrency for {w.context:,} tokens per request: {hybrid:.2f}x"]
    if v0:
        cpu_blocks = int(V0_SWAP_SPACE_GIB * GiB // (per_token * block)) if per_token else 0
        return [f"# GPU blocks: {tokens // block}, # CPU blocks: {cpu_blocks}",
                f"Maximum concurrency for {w.context} tokens per request: {concurrency:.2f}x"]
    return [f"Available KV cache memory: {pool / GiB:.2f} GiB",
            f"GPU KV cache size: {tokens:,} tokens",
            f"Maximum concurrency for {w.context:,} tokens per request: {concurrency:.2f}x"]


def _weights_line(log_style: str, weights: float) -> list[str]:
    """The engine's line for the weights it loaded (per GPU), as it prints it."""
    if log_style == "vllm-v0":
        return [f"Loading model weights took {weights / GiB:.4f} GB"]
    if log_style == "vllm-v1":
        return [f"Model loading took {weights / GiB:.4f} GiB"]
    if log_style == "sglang":
        return [f"Load weight end. mem usage={weights / GiB:.2f} GB."]
    return []


def _sglang_lines(model: ModelArch, w: Workload, d: Deployment, tokens: int, per_token: float) -> list[str]:
    chunk = batched_tokens(w, d)
    running = max_num_seqs(w, d)
    if model.mla is not None:  # one latent per token: SGLang's MLA pool prints one size
        size = f"KV size: {tokens * per_token / GiB:.2f} GB"
    else:
        size = f"K size: {tokens * per_token / 2 / GiB:.2f} GB, V size: {tokens * per_token / 2 / GiB:.2f} GB"
    summary = (f"max_total_num_tokens={tokens}, chunked_prefill_size={chunk}, "
               f"max_running_requests={running}, context_len={w.context}")
    return [f"KV Cache is allocated. #tokens: {tokens}, {size}", summary]


def _llamacpp_lines(model: ModelArch, w: Workload, d: Deployment) -> list[str]:
    """`-ngl` layers on the GPU (of n_layer + 1: the output layer counts), KV buffers per device
    (each layer's KV lives where the layer runs)."""
    layers = model.num_layers + 1
    on_gpu = layers if d.gpu_layers is None else min(max(d.gpu_layers, 0), layers)
    share = min(on_gpu, model.num_layers) / model.num_layers
    kv = model.kv_bytes_for_context(w.context, kv_element_bytes(w, model)) * w.concurrency
    lines = [f"load_tensors: offloaded {on_gpu}/{layers} layers to GPU",
             f"llama_kv_cache: CUDA0 KV buffer size = {kv * share / MiB:8.2f} MiB"]
    if share < 1:
        lines.append(f"llama_kv_cache:        CPU KV buffer size = {kv * (1 - share) / MiB:8.2f} MiB")
    return lines


def startup(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult) -> dict[str, Any] | None:
    """The engine's rule set and the lines it would print; None for engines without a pool."""
    rules = rules_for(d)
    if rules.log_style == "none" or mem.capacity is None:
        return None
    if rules.log_style == "llamacpp":
        return {"rules": rules.id, "engine": rules.engine, "version": d.engine_version or f">= {rules.from_version}",
                "n_ubatch": batched_tokens(w, d), "lines": _llamacpp_lines(model, w, d),
                "sources": list(rules.sources)}
    tp = tensor_parallel(model, d)
    per_token = model.kv_bytes_per_token(kv_element_bytes(w, model)) * kv_share(model, tp) / d.pp
    pool, tokens = mem.breakdown.kv_pool, mem.capacity.kv_tokens
    if rules.log_style in ("vllm-v0", "vllm-v1"):
        pages = hybrid_pages(model, kv_element_bytes(w, model), kv_share(model, tp) / d.pp, rules)
        lines = _vllm_lines(w, pool, tokens, rules.block_size, per_token, rules.log_style == "vllm-v0", pages)
        fraction = d.gpu_memory_utilization
    elif rules.log_style == "sglang":
        lines = _sglang_lines(model, w, d, tokens, per_token)
        fraction = d.mem_fraction or engine_fraction(d, rules, tp, model.mla is not None)
    else:
        lines = [f"[MemUsageChange] Allocated {pool / GiB:.2f} GiB for max tokens in paged KV cache ({tokens})."]
        fraction = d.mem_fraction or rules.fraction_at(tp)
    lines += _weights_line(rules.log_style, sum(i.bytes for i in mem.breakdown.items if i.key == "weights"))
    return {"rules": rules.id, "engine": rules.engine, "version": d.engine_version or f">= {rules.from_version}",
            "memory_fraction": fraction, "max_num_seqs": max_num_seqs(w, d),
            "max_num_batched_tokens": batched_tokens(w, d), "block_size": rules.block_size,
            "lines": lines, "sources": list(rules.sources)}


__all__ = ["startup"]
