"""The bounds of every number a user gives, defined once (CLI flags, web parameters, Python API).

Each bound names the request field, the flag that sets it, the kind (whole number or number),
and the closed range; every value must also be finite. `check_value` refuses one value with
a bilingual message naming the flag and the valid range; `check_request` checks every bounded
field of a service request (`service.EstimateRequest`, `service_plan.PlanRequest`) and the
relations between them (tensor x pipeline parallel degrees within the GPUs).

The ranges are wide enough for any real job and small enough that nothing absurd is computed:
the estimate library keeps its own finer rules (an output shorter than the context, a
context within the model's maximum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.errors import InputError
from gpuwise.i18n import Text

Kind = Literal["int", "float"]
MAX_TOKENS = 1 << 27  # estimate.workload.MAX_TOKENS: 134 M tokens, above any model's context
MAX_RUN_REQUESTS = 1 << 17  # prompts of one simulated benchmark run (--requests, --replay): a few seconds


@dataclass(frozen=True)
class Bound:
    """One input's type and closed range [low, high]; `low_open` makes it (low, high]."""

    field: str
    kind: Kind
    low: float
    high: float
    low_open: bool = False
    flag: str = ""  # the CLI flag; default --field-with-dashes

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.field.replace("_", "-")

    def range_text(self) -> Text:
        low, high = _fmt(self.low), _fmt(self.high)
        if self.low_open:
            return Text(f"greater than {low} and at most {high}", f"大于 {low} 且不超过 {high} 的数值")
        what = ("a whole number", "整数") if self.kind == "int" else ("a number", "数值")
        return Text(f"{what[0]} from {low} to {high}", f"{low} 到 {high} 之间的{what[1]}")

    def contains(self, value: float) -> bool:
        """Exact comparison, also for integers too large for a float."""
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high


def _b(field: str, kind: Kind, low: float, high: float, *, low_open: bool = False, flag: str = "") -> Bound:
    return Bound(field, kind, low, high, low_open, flag)


# One row per input. The CLI, the web API (web/params.py) and the service read this table.
BOUNDS: dict[str, Bound] = {b.field: b for b in (
    _b("gpus", "int", 1, 4096),  # per node; estimate.workload.Deployment allows 4096
    _b("nodes", "int", 1, 4096),
    _b("tp", "int", 0, 4096),  # 0: all the GPUs for serving, 1 for training
    _b("pp", "int", 1, 4096),
    _b("cp", "int", 1, 4096),  # training: context-parallel degree (estimate.workload.Deployment)
    _b("replicas", "int", 1, 4096),
    _b("zero", "int", 0, 3),
    _b("context", "int", 1, MAX_TOKENS),
    _b("concurrency", "int", 1, 1 << 20),
    _b("requests", "int", 1, MAX_RUN_REQUESTS),  # a finite benchmark run (service._benchmark_run)
    _b("output_tokens", "int", 1, MAX_TOKENS),
    _b("max_num_batched_tokens", "int", 1, MAX_TOKENS),
    _b("seq_len", "int", 1, MAX_TOKENS),
    _b("micro_batch", "int", 1, 1 << 16),
    _b("grad_accum", "int", 1, 1 << 20),
    _b("global_batch", "int", 1, 1 << 20),
    _b("lora_rank", "int", 1, 1 << 16),
    _b("gpu_layers", "int", 0, 1 << 16),  # llama.cpp -ngl; 999 is the usual "all layers"
    _b("top", "int", 1, 50),
    _b("gpu_memory_utilization", "float", 0.05, 1.0),
    _b("cpu_offload_gb", "float", 0, 1 << 20),
    _b("budget", "float", 0, 1e12),
    _b("min_throughput", "float", 0, 1e12),
    _b("max_ttft", "float", 0, 1e6, low_open=True),
    _b("max_seconds", "float", 0, 1e6, low_open=True),  # diffusion plan: seconds per output, at most
    _b("min_tokens_per_s_per_user", "float", 0, 1e9),
    _b("train_tokens", "float", 0, 1e18, low_open=True, flag="--tokens"),
    _b("inter_node_gbps", "float", 0, 1e6, low_open=True),
    _b("min_memory", "float", 0, 1e6),
)}


# Longest text per field: a model SRC is a preset, a hub id or a path (PATH_MAX is 4,096 bytes,
# NAME_MAX 255 per component); a card name is a few words.
TEXT_LIMITS: dict[str, tuple[str, int]] = {"model": ("SRC", 1024), "card": ("--card", 256),
                                           "deploy_model": ("--deploy-model", 1024)}
NAME_MAX = 255


def check_text(field: str, value: str) -> None:
    """A name or path no longer than its field allows (no component past NAME_MAX)."""
    flag, limit = TEXT_LIMITS[field]
    longest = max((len(part) for part in value.replace("\\", "/").split("/")), default=0)
    if len(value) > limit or (field != "card" and longest > NAME_MAX):
        raise InputError(Text(f"{flag} is {len(value):,} characters long; at most {limit:,} are allowed "
                              f"({NAME_MAX} per path component).",
                              f"{flag} 长 {len(value):,} 个字符，最多允许 {limit:,} 个"
                              f"（路径每段最多 {NAME_MAX} 个）。"))


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value) if not isinstance(value, int) else \
        (str(value) if value.bit_length() < 200 else f"a {len(str(abs(value)))}-digit number")
    return text if len(text) <= 40 else text[:37] + "..."


def out_of_range(bound: Bound, value: Any, label: str | None = None) -> InputError:
    """The standard refusal: names the flag (or `label`) and the valid range."""
    name = label or bound.flag_name
    rng = bound.range_text()
    return InputError(Text(f"{name} must be {rng.en}; got {_shown(value)}.",
                           f"{name} 必须是{' ' if rng.zh[:1].isascii() else ''}{rng.zh}，实际为 {_shown(value)}。"))


def check_value(field: str, value: object, label: str | None = None) -> float:
    """`value` as the field's kind, within its bound; anything else is an InputError."""
    bound = BOUNDS[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise out_of_range(bound, value, label)
    if bound.kind == "int" and isinstance(value, float):
        if not value.is_integer():
            raise out_of_range(bound, value, label)
        value = int(value)
    if not bound.contains(value):
        raise out_of_range(bound, value, label)
    return value


def check_fields(obj: Any) -> None:
    """Every bounded field of a request object that is set (not None)."""
    for field, bound in BOUNDS.items():
        value = getattr(obj, field, None)
        if value is not None:
            check_value(bound.field, value)
    for field in TEXT_LIMITS:
        text = getattr(obj, field, None)
        if isinstance(text, str):
            check_text(field, text)


def _relation(ok: bool, en: str, zh: str) -> None:
    if not ok:
        raise InputError(Text(en, zh))


def check_parallelism(gpus: int, nodes: int, tp: int, pp: int) -> None:
    """Tensor x pipeline parallel degrees must fit in the GPUs (all nodes together)."""
    total = gpus * nodes
    split = max(tp, 1) * pp
    _relation(split <= total,
              f"--tp {tp} x --pp {pp} needs {split:,} GPUs, more than --gpus {gpus} x --nodes {nodes} "
              f"= {total:,}: lower --tp/--pp or raise --gpus.",
              f"--tp {tp} × --pp {pp} 需要 {split:,} 张卡，超过 --gpus {gpus} × --nodes {nodes} = {total:,}："
              "请降低 --tp/--pp 或增加 --gpus。")


def check_context_parallel(gpus_total: int, tp: int, pp: int, cp: int, seq_len: int, kind: str) -> None:
    """--cp: tp x pp x cp ranks must divide the GPUs, and each rank's share of a sequence must be whole.
    Ring and all-gather CP split the sequence into 2 x cp chunks, each rank taking one from each end for a
    balanced causal mask (Megatron-LM megatron/training/utils.py get_batch_on_this_cp_rank: 'seq_len //
    (2 * cp_size)'; torch context_parallel's round-robin load balance, torch/distributed/tensor/
    experimental/_attention.py _RoundRobinLoadBalancer / ROUND_ROBIN_CYCLE = 2); Ulysses splits it in cp
    (DeepSpeed deepspeed/sequence/layer.py DistributedAttention: the all-to-all's scatter dim)."""
    if cp <= 1:
        return
    tp = max(tp, 1)  # --tp 0 (the default) is 1 for training: the product shown is the one checked
    split = tp * pp * cp
    _relation(gpus_total % split == 0,
              f"--tp {tp} x --pp {pp} x --cp {cp} = {split:,} must divide the {gpus_total:,} GPUs "
              "(the rest is data parallel).",
              f"--tp {tp} × --pp {pp} × --cp {cp} = {split:,} 必须整除 {gpus_total:,} 张卡（其余为数据并行）。")
    chunks = cp if kind == "ulysses" else 2 * cp
    _relation(seq_len % chunks == 0,
              f"--seq-len {seq_len:,} must be a multiple of {chunks:,} for --cp {cp} ({kind}: "
              f"{'one chunk per rank' if kind == 'ulysses' else 'two chunks per rank, one from each end'}).",
              f"--cp {cp}（{kind}）要求 --seq-len {seq_len:,} 是 {chunks:,} 的倍数"
              f"（{'每卡一块' if kind == 'ulysses' else '每卡两块，首尾各一'}）。")


def check_layers(pp: int, num_layers: int, model_name: str) -> None:
    """Each pipeline stage holds at least one layer."""
    _relation(pp <= num_layers,
              f"--pp {pp} is more pipeline stages than {model_name}'s {num_layers} layers.",
              f"--pp {pp} 的流水线级数超过了 {model_name} 的层数 {num_layers}。")


# The closed word choices of a request (field -> flag), each a tuple the estimate library itself
# accepts, so that a typo is refused here with close matches ("Did you mean 'lora'?") before the
# library's own plainer check. `--grad-ckpt` also takes every-N (catalog.frameworks.is_grad_ckpt),
# `--weights` any gguf:<TYPE> (its type checked by estimate.weights), a plan `auto`/`any` besides.
CHOICE_FLAGS = {"task": "--task", "engine": "--engine", "offload": "--offload", "cp_kind": "--cp-kind",
                "optimizer": "--optimizer", "loss": "--loss", "grad_ckpt": "--grad-ckpt", "hub": "--hub",
                "weights": "--weights", "kv_dtype": "--kv-dtype"}


def _choices(field: str, plan: bool) -> tuple[tuple[str, ...], bool]:
    """A field's choices, and whether a value outside them may still be valid (every-N, gguf:TYPE)."""
    from gpuwise.catalog.frameworks import LOSSES, OPTIMIZERS
    from gpuwise.catalog.sources import HUBS
    from gpuwise.estimate.constants import KV_BYTES
    from gpuwise.estimate.weights import WEIGHT_FORMATS
    from gpuwise.estimate.workload import CP_KINDS, ENGINES, OFFLOADS, TASKS

    auto = ("auto",) if plan else ()
    table: dict[str, tuple[str, ...]] = {
        "task": TASKS, "engine": ENGINES, "offload": OFFLOADS, "cp_kind": CP_KINDS, "optimizer": OPTIMIZERS,
        "loss": LOSSES, "grad_ckpt": ("none", "full", "selective", "op-sac", "every-N", *auto),
        "hub": tuple(HUBS), "weights": (*WEIGHT_FORMATS, *(("any",) if plan else ())),
        "kv_dtype": ("auto", *KV_BYTES)}
    return table[field], field in ("grad_ckpt", "weights")


def _pattern_ok(field: str, value: str) -> bool:
    from gpuwise.catalog.frameworks import is_grad_ckpt

    return is_grad_ckpt(value) if field == "grad_ckpt" else value.startswith("gguf:")


def _unknown_value(kind: Text, value: str, choices: tuple[str, ...], command: str) -> InputError:
    """errors.unknown_name's words and close matches, as the InputError a bad value of a request is
    (an UnknownNameError is a catalog name: a card, a model, a provider)."""
    from gpuwise.errors import unknown_name

    err = unknown_name(kind, value, choices, command)
    return InputError(err.message, hint=err.hint, suggestions=err.suggestions)


def check_choices(req: Any) -> None:
    """Each closed word choice of the request: an unknown one is an InputError quoting it, with close
    matches in both languages and the help command that lists them."""
    plan = hasattr(req, "objective")  # a PlanRequest: `auto` grad-ckpt, `any` weights
    command = "gpuwise plan --help" if plan else "gpuwise estimate --help"
    for field, flag in CHOICE_FLAGS.items():
        value = getattr(req, field, None)
        if not isinstance(value, str):
            continue
        choices, patterned = _choices(field, plan)
        if value in choices or (patterned and _pattern_ok(field, value)):
            continue
        raise _unknown_value(Text(f"{flag} value", f"{flag} 取值"), value, choices, command)
    _check_lora_targets(getattr(req, "lora_targets", None), command)


def _check_lora_targets(value: object, command: str) -> None:
    """--lora-targets: a comma list of LORA_TARGETS, or `all` / `all-linear` (service.build)."""
    from gpuwise.estimate.workload import LORA_TARGETS

    if not isinstance(value, str):
        return
    items = [t.strip() for t in value.split(",") if t.strip()]
    if items in (["all"], ["all-linear"]):
        return
    for item in items:
        if item not in LORA_TARGETS:
            raise _unknown_value(Text("--lora-targets module", "--lora-targets 模块"), item,
                                 (*LORA_TARGETS, "all"), command)


def check_request(req: Any) -> None:
    """The bounded fields of an EstimateRequest or PlanRequest and their closed word choices, then
    their relations."""
    check_fields(req)
    check_choices(req)
    if hasattr(req, "tp"):
        check_parallelism(req.gpus, req.nodes, req.tp, req.pp)
        check_context_parallel(req.gpus * req.nodes, req.tp, req.pp, getattr(req, "cp", 1), req.seq_len,
                               getattr(req, "cp_kind", "ring"))
    output_tokens = getattr(req, "output_tokens", None)
    if output_tokens is not None:
        _relation(output_tokens < req.context,
                  f"--output-tokens {output_tokens:,} must be smaller than --context {req.context:,} "
                  "(the context holds the prompt and the output).",
                  f"--output-tokens {output_tokens:,} 必须小于 --context {req.context:,}（上下文包含提示与输出）。")


__all__ = ["BOUNDS", "CHOICE_FLAGS", "TEXT_LIMITS", "Bound", "check_choices", "check_context_parallel",
           "check_fields", "check_layers", "check_parallelism", "check_request", "check_text", "check_value",
           "out_of_range"]
