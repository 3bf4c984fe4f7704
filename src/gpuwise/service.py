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

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def build(req: EstimateRequest) -> tuple[Any, Workload, Deployment, Text | None]:
    """Resolve names and validate values into the estimate's inputs."""
    if req.hub not in ("auto", "hf", "modelscope"):
        raise InputError(Text(f"--hub must be auto, hf or modelscope; got '{req.hub}'.",
                              f"--hub 只能是 auto、hf 或 modelscope，实际为“{req.hub}”。"))
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    resolved = resolve_card(req.card, catalog)
    model = load_model(req.model, hub=req.hub)  # type: ignore[arg-type]
    targets = tuple(t.strip() for t in req.lora_targets.split(",") if t.strip())
    if targets == ("all",) or targets == ("all-linear",):
        targets = LORA_TARGETS
    w = Workload(task=req.task, weights=req.weights, kv_dtype=req.kv_dtype,  # type: ignore[arg-type]
                 context=req.context, concurrency=req.concurrency,
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
    model, w, d, note = build(req)
    return estimate(model, w, d, allow_long_context=req.allow_long_context), note


def estimate_json(req: EstimateRequest) -> dict[str, Any]:
    """The `gpuwise estimate --json` object."""
    result, note = run_estimate(req)
    out = result.to_dict()
    if note is not None:
        out["card_note"] = note.en
        out["card_note_zh"] = note.zh
    return out
