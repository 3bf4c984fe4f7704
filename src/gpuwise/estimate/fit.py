"""When a job does not fit: the nearest changes that would make it fit, each re-estimated.

A fix is data: the action, the settings it changes (Workload/Deployment names, never a flag) and
the words for it in both languages. The shells word it (gpuwise.fixtext: `--gpus 4` on the
command line, "use 4 GPUs" on the page).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.frameworks import Framework, find_framework
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.fixtext import with_flags
from gpuwise.i18n import Text

MemoryFn = Callable[[ModelArch, Workload, Deployment], MemoryResult]
FitsFn = Callable[[ModelArch, Workload, Deployment], bool]  # memory_fn(...).fits, perhaps sooner
Action = Literal["weights", "kv_dtype", "gpus", "context", "concurrency", "offload", "llamacpp", "grad_ckpt",
                 "loss", "activation_offload", "micro_batch", "optimizer", "shard", "task"]
Setting = tuple[str, Any]


@dataclass(frozen=True)
class Fix:
    """One change that makes the job fit."""

    action: Action
    settings: tuple[Setting, ...]  # what to set, by Workload/Deployment field name
    words: Text  # "use 4 GPUs with tensor parallel": no flag
    caveat: Text | None = None  # "slower: those layers run at host memory speed"
    native: Text | None = None  # the training framework's own switch for it

    @property
    def notes(self) -> tuple[Text, ...]:
        return tuple(n for n in (self.native, self.caveat) if n is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "settings": dict(self.settings), "text": self.words.en,
                "text_zh": self.words.zh, "notes": [n.en for n in self.notes],
                "notes_zh": [n.zh for n in self.notes]}


Change = tuple[Fix, Workload, Deployment]

# The changed workloads and deployments, by value: a plan asks the same change of many cards, and
# `dataclasses.replace` validates every field again. Cleared when full.
_CHANGED: dict[tuple[object, ...], Any] = {}


def _rep(obj: Any, **change: Any) -> Any:
    """`dataclasses.replace(obj, **change)`, made once per value."""
    key = (obj, *change.items())
    found = _CHANGED.get(key)
    if found is None:
        if len(_CHANGED) >= 4096:
            _CHANGED.clear()
        found = _CHANGED[key] = dataclasses.replace(obj, **change)
    return found


def _infer_changes(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult) -> Iterator[Change]:
    rep = _rep
    for fmt in ("fp8", "int4"):
        if w.weights not in (fmt, "int4", "nf4") and not w.weights.startswith("gguf"):
            yield Fix("weights", (("weights", fmt),), Text(f"store the weights as {fmt}", f"权重改用 {fmt}")), \
                rep(w, weights=fmt), d
    if w.kv_dtype not in ("fp8", "int8", "q4_0", "q8_0"):
        yield Fix("kv_dtype", (("kv_dtype", "fp8"),), Text("use an FP8 KV cache", "KV 缓存改用 FP8")), \
            rep(w, kv_dtype="fp8"), d
    if w.weights.startswith("gguf") or d.engine == "llamacpp" or d.card.max_gpus_per_node == 1:
        yield from _llamacpp_changes(model, w, d)  # one card that cannot be joined by another
    for gpus in (2, 4, 8):
        if d.gpus < gpus <= d.card.max_gpus_per_node and model.num_heads % gpus == 0:
            yield Fix("gpus", (("gpus", gpus),), Text(f"use {gpus} GPUs with tensor parallel",
                                                      f"用 {gpus} 张卡做张量并行")), w, rep(d, gpus=gpus, tp=0)
    cap = mem.capacity
    # a shorter context must still hold the requested output (--output-tokens < --context)
    if cap is not None and max(0, w.output_tokens or 0) < cap.max_context < w.context:
        yield Fix("context", (("context", cap.max_context),),
                  Text(f"shorten the context to {cap.max_context:,} tokens",
                       f"把上下文缩短到 {cap.max_context:,} token")), rep(w, context=cap.max_context), d
    if cap is not None and 1 <= int(cap.max_concurrency) < w.concurrency:
        n = int(cap.max_concurrency)
        yield Fix("concurrency", (("concurrency", n),), Text(f"serve at most {n} sequences at once",
                                                             f"并发降到 {n}")), rep(w, concurrency=n), d
    if d.offload == "none":
        yield Fix("offload", (("offload", "cpu"),), Text("offload weights to CPU RAM", "把部分权重卸载到内存"),
                  caveat=Text("slow: streamed over PCIe every step", "每步经 PCIe 传输，较慢")), \
            w, rep(d, offload="cpu")


def _llamacpp_changes(model: ModelArch, w: Workload, d: Deployment) -> Iterator[Change]:
    """llama.cpp on one card: a smaller GGUF type, or some layers on the CPU (-ngl)."""
    rep = _rep
    for quant in ("gguf:Q4_K_M", "gguf:Q3_K_M"):
        if w.weights != quant:
            yield Fix("weights", (("weights", quant),), Text("use a smaller GGUF quant", "换用更小的 GGUF 量化"),
                      caveat=Text("see its quality cost", "注意质量代价")), \
                rep(w, weights=quant), rep(d, engine="llamacpp")
    gguf = w.weights if w.weights.startswith("gguf") else "gguf:Q4_K_M"
    for share in (3, 2):  # keep 3/4, then 1/2 of the layers on the GPU
        layers = model.num_layers * share // 4
        on_cpu = model.num_layers - layers
        yield Fix("llamacpp", (("engine", "llamacpp"), ("weights", gguf), ("gpu_layers", layers)),
                  Text(f"run {on_cpu} of {model.num_layers} layers on the CPU with llama.cpp",
                       f"用 llama.cpp 把 {model.num_layers} 层中的 {on_cpu} 层放到 CPU 上"),
                  caveat=Text("slower: those layers run at host memory speed", "这些层以内存带宽运行，较慢")), \
            rep(w, weights=gguf), rep(d, engine="llamacpp", gpu_layers=layers)


def _native(fw: Framework, key: str) -> Text | None:
    """How the framework itself spells the switch, when it has one."""
    own = getattr(fw, key, None)
    return Text(f"in {fw.name}: {own}", f"{fw.name} 中为 {own}") if own else None


def _train_changes(model: ModelArch, w: Workload, d: Deployment) -> Iterator[Change]:
    rep = _rep
    fw = find_framework(w.framework)
    if w.grad_ckpt != "full":
        yield Fix("grad_ckpt", (("grad_ckpt", "full"),), Text("turn on full activation checkpointing",
                                                              "开启完整激活重计算"),
                  native=_native(fw, "fix_checkpointing")), rep(w, grad_ckpt="full"), d
    if w.loss != "fused":
        yield Fix("loss", (("loss", "fused"),), Text("use a fused linear cross-entropy, which never holds the logits",
                                                     "改用融合的线性交叉熵，不再保存 logits"),
                  native=_native(fw, "fix_fused_loss")), rep(w, loss="fused"), d
    if not w.activation_offload:
        yield Fix("activation_offload", (("activation_offload", True),),
                  Text("offload saved activations to CPU RAM", "把保存的激活卸载到内存"),
                  caveat=Text("slower", "较慢"), native=_native(fw, "fix_activation_offload")), \
            rep(w, activation_offload=True), d
    if w.micro_batch > 1:
        yield Fix("micro_batch", (("micro_batch", 1),), Text("use micro-batch 1 with gradient accumulation",
                                                             "用 micro-batch 1 加梯度累积")), rep(w, micro_batch=1), d
    if w.optimizer == "adamw":
        yield Fix("optimizer", (("optimizer", "paged-adamw8bit"),),
                  Text("use a paged 8-bit AdamW", "改用分页 8-bit AdamW"),
                  native=_native(fw, "fix_8bit_optimizer")), rep(w, optimizer="paged-adamw8bit"), d
    for gpus in (2, 4, 8):  # the GPUs it has already, when they only replicate the model, then more
        if (d.gpus < gpus or d.gpus == gpus and d.zero < 3) and gpus <= d.card.max_gpus_per_node \
                and w.task != "qlora":
            yield Fix("shard", (("gpus", gpus), ("zero", 3)), Text(f"shard with ZeRO-3 / FSDP over {gpus} GPUs",
                                                                    f"用 ZeRO-3 / FSDP 切分到 {gpus} 张卡"),
                      native=_native(fw, "fix_sharding")), w, rep(d, gpus=gpus, zero=3)
    if w.task in ("full", "pretrain"):
        yield Fix("task", (("task", "lora"),), Text("fine-tune with LoRA instead", "改用 LoRA 微调")), \
            rep(w, task="lora"), d
    if w.task in ("full", "pretrain", "lora"):
        yield Fix("task", (("task", "qlora"),), Text("use QLoRA on a 4-bit base", "改用 4-bit 基座的 QLoRA")), \
            rep(w, task="qlora"), rep(d, zero=min(d.zero, 2))
    if d.offload == "none" and w.task != "qlora":
        yield Fix("offload", (("zero", 3), ("offload", "cpu")),
                  Text("offload optimizer and weights to CPU RAM", "把优化器状态与权重卸载到内存"),
                  native=_native(fw, "fix_optimizer_offload")), w, rep(d, zero=3, offload="cpu")


def find_fixes(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult,
               memory_fn: MemoryFn, limit: int = 4, fits_fn: FitsFn | None = None) -> tuple[Fix, ...]:
    """Up to `limit` single changes that make the job fit, nearest first. `fits_fn`: whether a
    change fits, as `memory_fn(...).fits` says (a caller that can tell sooner)."""
    changes = _train_changes(model, w, d) if w.is_training else _infer_changes(model, w, d, mem)
    found: list[Fix] = []
    for fix, w2, d2 in changes:
        try:
            fits = fits_fn(model, w2, d2) if fits_fn is not None else memory_fn(model, w2, d2).fits
        except GpuwiseError:
            continue
        if fits:
            found.append(fix)
        if len(found) >= limit:
            break
    return tuple(found)


def command_line_words(fix: Fix) -> Text:
    """The fix as the command line says it: the words, then its flags and notes in brackets."""
    return with_flags(fix.words, fix.settings, *fix.notes)


def suggest_fixes(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult,
                  memory_fn: MemoryFn, limit: int = 4, fits_fn: FitsFn | None = None) -> tuple[Text, ...]:
    """`find_fixes` in the command line's words (what `suggestions` in the JSON has always held)."""
    return tuple(command_line_words(f) for f in find_fixes(model, w, d, mem, memory_fn, limit, fits_fn))
