"""One function per command, taking plain values named like the CLI flags.

The CLI and the web API both call these, so `--json` and the HTTP API return the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.catalog.sources import load_model
from gpuwise.errors import InputError
from gpuwise.estimate.api import Estimate, estimate
from gpuwise.estimate.workload import LORA_TARGETS, Deployment, Workload
from gpuwise.i18n import Text


@dataclass(frozen=True)
class EstimateRequest:
    """Every `gpuwise estimate` flag, with its CLI default."""

    model: str
    card: str
    gpus: int = 1
    task: str = "infer"
    weights: str = "auto"
    kv_dtype: str = "auto"
    context: int = 4096
    concurrency: int = 1
    output_tokens: int | None = None
    max_num_batched_tokens: int | None = None
    engine: str = "vllm"
    gpu_memory_utilization: float = 0.9
    tp: int = 0
    pp: int = 1
    offload: str = "none"
    cpu_offload_gb: float = 0.0
    gpu_layers: int | None = None
    margin: bool = False
    seq_len: int = 2048
    micro_batch: int = 1
    optimizer: str = "adamw"
    grad_ckpt: str = "none"
    flash_attention: bool = True
    zero: int = 0
    lora_rank: int = 16
    lora_targets: str = ",".join(LORA_TARGETS)
    nodes: int = 1
    allow_long_context: bool = False
    hub: str = "auto"
    cards_file: str | None = None
    calibration: str | None = None  # a `gpuwise verify --save` file: measured rates replace assumed ones
    provider: str | None = None
    billing: str = "hourly"
    train_tokens: float | None = None
    inter_node_gbps: float = 100.0

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _check_hub(hub: str) -> None:
    if hub not in ("auto", "hf", "modelscope"):
        raise InputError(Text(f"--hub must be auto, hf or modelscope; got '{hub}'.",
                              f"--hub 只能是 auto、hf 或 modelscope，实际为“{hub}”。"))


def build(req: EstimateRequest) -> tuple[Any, Workload, Deployment, Text | None]:
    """Resolve names and validate values into the estimate's inputs."""
    _check_hub(req.hub)
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    resolved = resolve_card(req.card, catalog)
    model = load_model(req.model, hub=req.hub)  # type: ignore[arg-type]
    targets = tuple(t.strip() for t in req.lora_targets.split(",") if t.strip())
    if targets == ("all",) or targets == ("all-linear",):
        targets = LORA_TARGETS
    w = Workload(task=req.task, weights=req.weights, kv_dtype=req.kv_dtype,  # type: ignore[arg-type]
                 context=req.context, concurrency=req.concurrency, output_tokens=req.output_tokens,
                 max_num_batched_tokens=req.max_num_batched_tokens, seq_len=req.seq_len,
                 micro_batch=req.micro_batch, optimizer=req.optimizer,  # type: ignore[arg-type]
                 grad_ckpt=req.grad_ckpt, flash_attention=req.flash_attention,  # type: ignore[arg-type]
                 lora_rank=req.lora_rank, lora_targets=targets)
    d = Deployment(card=resolved.card, gpus=req.gpus, tp=req.tp, pp=req.pp, engine=req.engine,  # type: ignore[arg-type]
                   gpu_memory_utilization=req.gpu_memory_utilization, zero=req.zero,
                   offload=req.offload, cpu_offload_gib=req.cpu_offload_gb,  # type: ignore[arg-type]
                   gpu_layers=req.gpu_layers, nodes=req.nodes, margin=req.margin)
    return model, w, d, resolved.note


def run_estimate(req: EstimateRequest) -> tuple[Estimate, Text | None]:
    from gpuwise.estimate.api import CostOptions

    model, w, d, note = build(req)
    calibration = None
    if req.calibration:
        from gpuwise.verify.calibration import load_calibration

        calibration = load_calibration(Path(req.calibration))
    opts = CostOptions(provider=req.provider, billing=req.billing, train_tokens=req.train_tokens,
                       inter_node_gbps=req.inter_node_gbps)
    return estimate(model, w, d, allow_long_context=req.allow_long_context, cost=opts,
                    calibration=calibration), note


def estimate_json(req: EstimateRequest) -> dict[str, Any]:
    """The `gpuwise estimate --json` object."""
    result, note = run_estimate(req)
    out = result.to_dict()
    if note is not None:
        out["card_note"] = note.en
        out["card_note_zh"] = note.zh
    return out


STAGES = {
    "validate": Text("validate: the cheapest card that runs the job, to prove the pipeline (a 4090-class card is fine)",
                     "验证阶段：能跑通流程的最便宜的卡（4090 级即可）"),
    "stabilise": Text("stabilise: ECC data-centre cards (A100 class) for long, unattended runs",
                      "稳定阶段：长时间无人值守运行用带 ECC 的数据中心卡（A100 级）"),
    "scale": Text("scale: ECC cards with NVLink (H100/H200 class), ranked by speed",
                  "扩展阶段：带 ECC 与 NVLink 的卡（H100/H200 级），按速度排序"),
}


@dataclass(frozen=True)
class PlanRequest:
    """Every `gpuwise plan` flag, with its CLI default."""

    model: str
    task: str = "infer"
    weights: str = "any"
    kv_dtype: str = "auto"
    context: int = 4096
    concurrency: int = 1
    output_tokens: int | None = None
    engine: str = "vllm"
    seq_len: int = 2048
    micro_batch: int = 1
    optimizer: str = "adamw"
    grad_ckpt: str = "auto"  # auto: try none, then full recomputation
    lora_rank: int = 16
    budget: float | None = None  # per hour, or per run when train_tokens is given
    min_throughput: float | None = None
    max_ttft: float | None = None
    min_tokens_per_s_per_user: float | None = None
    require: str = ""  # comma list: ecc, nvlink
    provider: str | None = None
    billing: str = "hourly"
    cards: str = ""  # comma list restricting the search
    objective: str = "cost"
    stage: str | None = None
    allow_offload: bool = False
    train_tokens: float | None = None
    inter_node_gbps: float = 100.0
    top: int = 5
    hub: str = "auto"
    cards_file: str | None = None

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _check_plan(req: PlanRequest) -> None:
    from gpuwise.errors import unknown_name

    for flag, value, choices in (("--objective", req.objective, ("cost", "speed", "cost-per-token")),
                                 ("--stage", req.stage or "validate", tuple(STAGES))):
        if value not in choices:
            raise unknown_name(Text(f"{flag} value", f"{flag} 取值"), value, choices, "gpuwise plan --help")
    for need in _split(req.require):
        if need not in ("ecc", "nvlink"):
            raise unknown_name(Text("--require value", "--require 取值"), need, ("ecc", "nvlink"), "gpuwise plan --help")
    if not 1 <= req.top <= 50:
        raise InputError(Text("--top must be between 1 and 50.", "--top 必须在 1 到 50 之间。"))


def plan_json(req: PlanRequest) -> dict[str, Any]:
    """The `gpuwise plan --json` object: ranked plans and a reason for every rejected card."""
    from gpuwise.estimate.api import CostOptions
    from gpuwise.plan.rank import SCHEMA_VERSION, plan
    from gpuwise.plan.search import Targets
    from gpuwise.plan.serialise import candidate_dict

    _check_plan(req)
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    cards = [resolve_card(n, catalog).card for n in _split(req.cards)] or list(catalog)
    model = load_model(req.model, hub=req.hub)  # type: ignore[arg-type]
    w = Workload(task=req.task, kv_dtype=req.kv_dtype, context=req.context,  # type: ignore[arg-type]
                 concurrency=req.concurrency, output_tokens=req.output_tokens, seq_len=req.seq_len,
                 micro_batch=req.micro_batch,
                 optimizer=req.optimizer, lora_rank=req.lora_rank,  # type: ignore[arg-type]
                 grad_ckpt="none" if req.grad_ckpt == "auto" else req.grad_ckpt)  # type: ignore[arg-type]
    if not w.is_training and req.context > model.max_context:
        raise InputError(Text(f"--context {req.context:,} exceeds {model.name}'s maximum of {model.max_context:,}.",
                              f"--context {req.context:,} 超过 {model.name} 的最大上下文 {model.max_context:,}。"))
    per_run = req.budget if req.train_tokens and w.is_training else None
    targets = Targets(budget_per_hour=None if per_run else req.budget, budget_per_run=per_run,
                      min_throughput=req.min_throughput, max_ttft=req.max_ttft,
                      min_tokens_per_s_per_user=req.min_tokens_per_s_per_user, require=_split(req.require),
                      objective=req.objective, stage=req.stage, allow_offload=req.allow_offload,
                      weights=req.weights,
                      grad_ckpt_options=("none", "full") if req.grad_ckpt == "auto" else (req.grad_ckpt,))
    opts = CostOptions(provider=req.provider, billing=req.billing, train_tokens=req.train_tokens,
                       inter_node_gbps=req.inter_node_gbps)
    result = plan(model, w, cards, targets, opts, top=req.top)
    return {
        "schema_version": SCHEMA_VERSION, "model": model.name, "task": req.task,
        "objective": req.objective, "stage": req.stage,
        "stage_advice": STAGES[req.stage].en if req.stage else None,
        "stage_advice_zh": STAGES[req.stage].zh if req.stage else None,
        "plans": [candidate_dict(c, model, r, req) for c, r in zip(result.plans, result.reasons, strict=True)],
        "rejected": result.rejected, "evaluated": result.evaluated,
    }


def model_json(src: str, hub: str = "auto", revision: str | None = None) -> dict[str, Any]:
    """The `gpuwise model --json` object (documented in docs/json.md)."""
    from gpuwise.catalog.params import count_params

    _check_hub(hub)
    m = load_model(src, hub=hub, revision=revision)  # type: ignore[arg-type]
    p = count_params(m)
    return {
        "schema_version": 1, "name": m.name, "model_type": m.model_type, "source": m.source,
        "approximate": m.approximate,
        "params_total": p.total, "params_active": p.active, "params": p.to_dict(),
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "num_heads": m.num_heads,
        "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim, "vocab_size": m.vocab_size,
        "layer_kinds": {k: m.count_kind(k) for k in ("full", "sliding", "linear") if m.count_kind(k)},
        "sliding_window": m.sliding_window or None,
        "attention": "mla" if m.mla else ("hybrid" if m.linear else "gqa" if m.num_kv_heads < m.num_heads else "mha"),
        "moe": None if m.moe is None else {"experts": m.moe.num_experts, "top_k": m.moe.experts_per_token,
                                           "shared_experts": m.moe.num_shared_experts},
        "kv_bytes_per_token": int(m.kv_bytes_per_token(2.0)),
        "kv_bytes_per_token_fp8": int(m.kv_bytes_per_token(1.0)),
        "state_bytes_per_sequence": int(m.state_bytes_per_sequence(2.0)),
        "max_context": m.max_context, "dtype": m.dtype,
        "quantization": None if m.quant is None else {"method": m.quant.method, "bits": m.quant.bits,
                                                      "group_size": m.quant.group_size},
        "checkpoint_bytes": m.checkpoint_bytes or None,
        "notes": [n.en for n in m.notes], "notes_zh": [n.zh for n in m.notes],
    }


def emit_json(req: PlanRequest, target: str) -> dict[str, Any]:
    """The winning plan written in `target`'s own vocabulary."""
    from gpuwise.export import emit

    result = plan_json(req)
    if not result["plans"]:
        raise InputError(Text("No plan meets the constraints, so there is nothing to export.",
                              "没有满足条件的方案，无法导出配置。"))
    return {"schema_version": 1, "target": target, "plan": result["plans"][0],
            "config": emit(result["plans"][0], target)}


def cards_json(name: str | None = None, min_memory: float | None = None, nvlink: bool | None = None,
               vendor: str | None = None, sort: str = "bandwidth") -> dict[str, Any]:
    """The `gpuwise cards --json` object: the filtered catalog, or one card with its note."""
    from gpuwise.catalog.cards import filter_cards

    catalog = load_cards(())
    if name:
        return {"schema_version": 1, **resolve_card(name, catalog).to_dict()}
    chosen = filter_cards(catalog, min_memory_gb=min_memory, nvlink=True if nvlink else None,
                          vendor=vendor, sort=sort)
    return {"schema_version": 1, "cards": [c.to_dict() for c in chosen]}
