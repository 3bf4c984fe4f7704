"""Read a plan dict (the output of `gpuwise plan --json`) into one checked, frozen view.

The exporters only present a plan; they never size it. This module takes what they need,
fills in the documented defaults for missing optional keys, and turns a wrong type or an
inconsistent value into an InputError. `gpus` is the total over all nodes (as in
`estimate.workload.Deployment`); each node gets `gpus / nodes`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import InputError
from gpuwise.i18n import Text

__all__ = ["TRAIN_TASKS", "Plan", "parse_plan", "slug"]

TRAIN_TASKS = ("full", "lora", "qlora", "pretrain")
TASKS = ("infer", *TRAIN_TASKS)
OFFLOADS = ("none", "cpu", "nvme")


def _bad(key: str, value: Any, want_en: str, want_zh: str) -> InputError:
    return InputError(Text(f"Plan key '{key}' must be {want_en}; got {value!r}.",
                           f"计划中的“{key}”必须是{want_zh}，实际为 {value!r}。"),
                      hint=Text("Regenerate it with `gpuwise plan --json`.",
                                "请用 `gpuwise plan --json` 重新生成。"))


def _section(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = d.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _bad(key, value, "an object", "对象")
    return value


def _int(d: Mapping[str, Any], key: str, default: int | None, low: int = 1) -> int | None:
    value = d.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(key, value, f"an integer >= {low}", f"不小于 {low} 的整数")
    return value


def _num(d: Mapping[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = d.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise _bad(key, value, f"a number in [{low}, {high}]", f"[{low}, {high}] 之间的数")
    return float(value)


def _str(d: Mapping[str, Any], key: str, default: str | None,
         choices: tuple[str, ...] = ()) -> str | None:
    value = d.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or (choices and value not in choices):
        want = " | ".join(choices) if choices else "a string"
        raise _bad(key, value, want, " | ".join(choices) if choices else "字符串")
    return value


def slug(text: str, limit: int = 40) -> str:
    """A DNS-1123 label (Kubernetes names, SkyPilot and dstack run names)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return s or "gpuwise"


@dataclass(frozen=True)
class Plan:
    """Everything an exporter reads from a plan, with defaults filled in."""

    card: str
    card_name: str
    gpus: int
    nodes: int
    weights: str
    engine: str | None
    tp: int
    pp: int
    dp: int
    zero: int
    fsdp: bool
    offload: str
    cpu_offload_gb: float
    task: str
    model: str
    hf_id: str
    context: int | None
    concurrency: int | None
    kv_dtype: str
    gpu_memory_utilization: float
    max_num_batched_tokens: int | None
    micro_batch: int
    grad_accum: int
    grad_ckpt: str
    card_info: Mapping[str, Any]
    mig_profile: str | None
    spot: bool
    image: str | None

    @property
    def training(self) -> bool:
        return self.task in TRAIN_TASKS

    @property
    def gpus_per_node(self) -> int:
        return self.gpus // self.nodes

    @property
    def name(self) -> str:
        return slug(self.model)

    def info_str(self, key: str) -> str | None:
        value = self.card_info.get(key)
        return value if isinstance(value, str) and value else None


def parse_plan(d: Any) -> Plan:
    """Check a plan dict and fill in defaults; raise InputError on a malformed one."""
    if not isinstance(d, Mapping):
        raise _bad("plan", type(d).__name__, "a JSON object", "JSON 对象")
    par, work = _section(d, "parallelism"), _section(d, "workload")
    nodes = _int(d, "nodes", 1) or 1
    per_node = _int(d, "gpus_per_node", None)
    gpus = _int(d, "gpus", per_node * nodes if per_node else 1) or 1
    if gpus % nodes or (per_node and per_node * nodes != gpus):
        extra = f", gpus_per_node {per_node}" if per_node else ""
        raise InputError(Text(f"The plan's GPU counts do not divide evenly: gpus {gpus}, "
                              f"nodes {nodes}{extra}.",
                              f"计划中的卡数无法按节点均分：gpus {gpus}，nodes {nodes}{extra}。"))
    task = _str(work, "task", "infer", TASKS) or "infer"
    model = _str(work, "model", None) or _str(work, "hf_id", None)
    if not model:
        raise _bad("workload.model", None, "a model name", "模型名")
    zero = _int(par, "zero", 0, low=0) or 0
    if zero > 3:
        raise _bad("parallelism.zero", zero, "0, 1, 2 or 3", "0、1、2 或 3")
    return Plan(
        card=_str(d, "card", "gpu") or "gpu", card_name=_str(d, "card_name", "") or "",
        gpus=gpus, nodes=nodes, weights=_str(d, "weights", "auto") or "auto",
        engine=_str(par, "engine", None), tp=_int(par, "tp", None) or 0,
        pp=_int(par, "pp", 1) or 1, dp=_int(par, "dp", 1) or 1, zero=zero,
        fsdp=bool(par.get("fsdp", False)), offload=_str(par, "offload", "none", OFFLOADS) or "none",
        cpu_offload_gb=_num(par, "cpu_offload_gb", 0.0, 0.0, 1e6), task=task, model=model,
        hf_id=_str(work, "hf_id", None) or model, context=_int(work, "context", None),
        concurrency=_int(work, "concurrency", None), kv_dtype=_str(work, "kv_dtype", "auto") or "auto",
        gpu_memory_utilization=_num(work, "gpu_memory_utilization", 0.9, 0.05, 1.0),
        max_num_batched_tokens=_int(work, "max_num_batched_tokens", None),
        micro_batch=_int(work, "micro_batch", 1) or 1, grad_accum=_int(work, "grad_accum", 1) or 1,
        grad_ckpt=_str(work, "grad_ckpt", "none") or "none", card_info=_section(d, "card_info"),
        mig_profile=_str(d, "mig_profile", None), spot=_spot(d),
        image=_str(d, "image", None),
    )


def _spot(d: Mapping[str, Any]) -> bool:
    """Spot/preemptible billing (抢占式), when the plan's cost says so."""
    cost = _section(d, "cost")
    billing = cost.get("billing") or d.get("billing")
    return bool(cost.get("spot") or d.get("spot") or billing in ("spot", "preemptible"))
