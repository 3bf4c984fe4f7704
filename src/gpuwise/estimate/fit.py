"""When a job does not fit: the nearest changes that would make it fit, each re-estimated."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import Framework, find_framework
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text

MemoryFn = Callable[[ModelArch, Workload, Deployment], MemoryResult]
Change = tuple[Text, Workload, Deployment]


def _infer_changes(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult) -> Iterator[Change]:
    rep = dataclasses.replace
    for fmt in ("fp8", "int4"):
        if w.weights not in (fmt, "int4", "nf4") and not w.weights.startswith("gguf"):
            yield Text(f"store the weights as {fmt} (--weights {fmt})",
                       f"权重改用 {fmt}（--weights {fmt}）"), rep(w, weights=fmt), d
    if w.kv_dtype not in ("fp8", "int8", "q4_0", "q8_0"):
        yield Text("use an FP8 KV cache (--kv-dtype fp8)", "KV 缓存改用 FP8（--kv-dtype fp8）"), \
            rep(w, kv_dtype="fp8"), d
    if w.weights.startswith("gguf") or d.engine == "llamacpp" or d.card.max_gpus_per_node == 1:
        yield from _llamacpp_changes(model, w, d)  # one card that cannot be joined by another
    for gpus in (2, 4, 8):
        if d.gpus < gpus <= d.card.max_gpus_per_node and model.num_heads % gpus == 0:
            yield Text(f"use {gpus} GPUs with tensor parallel (--gpus {gpus})",
                       f"用 {gpus} 张卡做张量并行（--gpus {gpus}）"), w, rep(d, gpus=gpus, tp=0)
    cap = mem.capacity
    # a shorter context must still hold the requested output (--output-tokens < --context)
    if cap is not None and max(0, w.output_tokens or 0) < cap.max_context < w.context:
        yield Text(f"shorten the context to {cap.max_context:,} tokens (--context {cap.max_context})",
                   f"把上下文缩短到 {cap.max_context:,} token（--context {cap.max_context}）"), \
            rep(w, context=cap.max_context), d
    if cap is not None and 1 <= int(cap.max_concurrency) < w.concurrency:
        n = int(cap.max_concurrency)
        yield Text(f"serve at most {n} sequences at once (--concurrency {n})",
                   f"并发降到 {n}（--concurrency {n}）"), rep(w, concurrency=n), d
    if d.offload == "none":
        yield Text("offload weights to CPU RAM (--offload cpu; slow: streamed over PCIe every step)",
                   "把部分权重卸载到内存（--offload cpu；每步经 PCIe 传输，较慢）"), w, rep(d, offload="cpu")


def _llamacpp_changes(model: ModelArch, w: Workload, d: Deployment) -> Iterator[Change]:
    """llama.cpp on one card: a smaller GGUF type, or some layers on the CPU (-ngl)."""
    rep = dataclasses.replace
    for quant in ("gguf:Q4_K_M", "gguf:Q3_K_M"):
        if w.weights != quant:
            yield Text(f"use a smaller GGUF quant (--weights {quant}; see its quality cost)",
                       f"换用更小的 GGUF 量化（--weights {quant}；注意质量代价）"), \
                rep(w, weights=quant), rep(d, engine="llamacpp")
    gguf = w.weights if w.weights.startswith("gguf") else "gguf:Q4_K_M"
    for share in (3, 2):  # keep 3/4, then 1/2 of the layers on the GPU
        layers = model.num_layers * share // 4
        yield Text(f"run {model.num_layers - layers} of {model.num_layers} layers on the CPU with llama.cpp "
                   f"(--engine llamacpp --weights {gguf} --gpu-layers {layers}; slower: those layers run "
                   "at host memory speed)",
                   f"用 llama.cpp 把 {model.num_layers} 层中的 {model.num_layers - layers} 层放到 CPU 上"
                   f"（--engine llamacpp --weights {gguf} --gpu-layers {layers}；这些层以内存带宽运行，较慢）"), \
            rep(w, weights=gguf), rep(d, engine="llamacpp", gpu_layers=layers)


def _in_words(fw: Framework, key: str, flag: str) -> str:
    """The gpuwise flag, and how the framework itself spells the switch when it has one."""
    own = getattr(fw, key, None)
    return f"{flag}; in {fw.name}: {own}" if own else flag


def _train_changes(model: ModelArch, w: Workload, d: Deployment) -> Iterator[Change]:
    rep = dataclasses.replace
    fw = find_framework(w.framework)
    if w.grad_ckpt != "full":
        how = _in_words(fw, "fix_checkpointing", "--grad-ckpt full")
        yield Text(f"turn on full activation checkpointing ({how})", f"开启完整激活重计算（{how}）"), \
            rep(w, grad_ckpt="full"), d
    if w.loss != "fused":
        how = _in_words(fw, "fix_fused_loss", "--loss fused")
        yield Text(f"use a fused linear cross-entropy, which never holds the logits ({how})",
                   f"改用融合的线性交叉熵，不再保存 logits（{how}）"), rep(w, loss="fused"), d
    if not w.activation_offload:
        how = _in_words(fw, "fix_activation_offload", "--activation-offload")
        yield Text(f"offload saved activations to CPU RAM ({how}; slower)",
                   f"把保存的激活卸载到内存（{how}；较慢）"), rep(w, activation_offload=True), d
    if w.micro_batch > 1:
        yield Text("use micro-batch 1 with gradient accumulation (--micro-batch 1)",
                   "用 micro-batch 1 加梯度累积（--micro-batch 1）"), rep(w, micro_batch=1), d
    if w.optimizer == "adamw":
        how = _in_words(fw, "fix_8bit_optimizer", "--optimizer paged-adamw8bit")
        yield Text(f"use a paged 8-bit AdamW ({how})", f"改用分页 8-bit AdamW（{how}）"), \
            rep(w, optimizer="paged-adamw8bit"), d
    for gpus in (2, 4, 8):
        if d.gpus < gpus <= d.card.max_gpus_per_node and w.task != "qlora":
            how = _in_words(fw, "fix_sharding", f"--gpus {gpus} --zero 3")
            yield Text(f"shard with ZeRO-3 / FSDP over {gpus} GPUs ({how})",
                       f"用 ZeRO-3 / FSDP 切分到 {gpus} 张卡（{how}）"), w, rep(d, gpus=gpus, zero=3)
    if w.task in ("full", "pretrain"):
        yield Text("fine-tune with LoRA instead (--task lora)", "改用 LoRA 微调（--task lora）"), rep(w, task="lora"), d
    if w.task in ("full", "pretrain", "lora"):
        yield Text("use QLoRA on a 4-bit base (--task qlora)", "改用 4-bit 基座的 QLoRA（--task qlora）"), \
            rep(w, task="qlora"), rep(d, zero=min(d.zero, 2))
    if d.offload == "none" and w.task != "qlora":
        how = _in_words(fw, "fix_optimizer_offload", "--zero 3 --offload cpu")
        yield Text(f"offload optimizer and weights to CPU RAM ({how})",
                   f"把优化器状态与权重卸载到内存（{how}）"), w, rep(d, zero=3, offload="cpu")


def suggest_fixes(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult,
                  memory_fn: MemoryFn, limit: int = 4) -> tuple[Text, ...]:
    """Up to `limit` single changes that make the job fit, nearest first."""
    changes = _train_changes(model, w, d) if w.is_training else _infer_changes(model, w, d, mem)
    found: list[Text] = []
    for text, w2, d2 in changes:
        try:
            result = memory_fn(model, w2, d2)
        except GpuwiseError:
            continue
        if result.fits:
            found.append(text)
        if len(found) >= limit:
            break
    return tuple(found)
