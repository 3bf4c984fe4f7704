"""A `Plan` to its JSON object and back (`gpuwise plan --save plan.json`, `--emit T --from plan.json`).

Reading checks every field a deployment depends on and turns a wrong type or an inconsistent
count into an InputError that names the key: the file may have been edited by hand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import Item, MemoryBreakdown
from gpuwise.estimate.cost import Cost
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.i18n import Text
from gpuwise.plan.value import PLAN_SCHEMA_VERSION, TRAIN_TASKS, CardFacts, Plan
from gpuwise.textsafe import clean_text

__all__ = ["plan_from_dict", "plan_to_dict"]

TASKS = ("infer", *TRAIN_TASKS)
OFFLOADS = ("none", "cpu", "nvme")


def _texts(items: tuple[Text, ...], key: str) -> dict[str, list[str]]:
    return {key: [t.en for t in items], f"{key}_zh": [t.zh for t in items]}


def plan_to_dict(p: Plan) -> dict[str, Any]:
    memory: dict[str, Any] = dict(p.breakdown.to_dict()) if p.breakdown else {}
    memory.update(usable_bytes=round(p.usable_bytes), fits=True, fit="tight" if p.tight else "fits",
                  share_of_usable=round(p.memory_share, 4), near_limit=p.memory_share > NEAR_LIMIT or p.tight)
    if p.required_high is not None:
        memory["required_high"] = round(p.required_high)
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "card": p.card, "card_name": p.card_name,
        "gpus": p.gpus_total, "gpus_total": p.gpus_total, "gpus_per_node": p.gpus_per_node,
        "nodes": p.nodes, "replicas": p.replicas, "weights": p.weights,
        "quantization": p.quantization, "deploy_model": p.deploy_model,
        "parallelism": {"engine": p.engine, "tp": p.tp, "pp": p.pp, "dp": p.dp,
                        "replicas": p.replicas, "zero": p.zero, "fsdp": p.fsdp,
                        "offload": p.offload, "cpu_offload_gb": round(p.cpu_offload_gb, 1)},
        "memory": memory,
        "speed": p.speed.to_dict() if p.speed else None,
        "ranges": {path: {"low": low, "high": high, "fitted": key} for path, low, high, key in p.ranges},
        "cost": p.cost.to_dict() if p.cost else None,
        **_texts(p.reasons, "reasons"),
        **_texts(p.notes, "notes"),
        "quality": None if p.quality is None else {"summary": p.quality.en, "summary_zh": p.quality.zh,
                                                    "sources": list(p.quality_sources)},
        "objective": p.objective,
        "workload": {"task": p.task, "model": p.model, "source": p.source, "hf_id": p.deploy_model,
                     "context": p.context, "concurrency": p.concurrency, "kv_dtype": p.kv_dtype,
                     "gpu_memory_utilization": p.gpu_memory_utilization,
                     "max_num_batched_tokens": p.max_num_batched_tokens, "seq_len": p.seq_len,
                     "micro_batch": p.micro_batch, "grad_accum": p.grad_accum,
                     "global_batch": p.global_batch if p.training else None,
                     "grad_ckpt": p.grad_ckpt, "optimizer": p.optimizer, "lora_rank": p.lora_rank,
                     "framework": p.framework, "loss": p.loss, "activation_offload": p.activation_offload,
                     "optimizer_in_backward": p.optimizer_in_backward, "packing": p.packing,
                     "compile": p.compile, "float8": p.float8, "dora": p.dora,
                     "modules_to_save": list(p.modules_to_save), "padding_free": p.padding_free,
                     "script": p.script, "workdir": p.workdir},
        "card_info": p.card_facts.to_dict(),
        "mig_profile": p.mig_profile, "spot": p.spot, "image": p.image,
    }


# A plan above this share of usable memory per GPU is flagged: fragmentation, a longer prompt
# than planned or a framework upgrade can tip it over (the estimate's own error is a few %).
NEAR_LIMIT = 0.95


# ---------------------------------------------------------------- reading back

def _bad(key: str, value: Any, want_en: str, want_zh: str) -> InputError:
    shown = clean_text(repr(value), limit=80)
    return InputError(Text(f"Plan key '{key}' must be {want_en}; got {shown}.",
                           f"计划中的“{key}”必须是{want_zh}，实际为 {shown}。"),
                      hint=Text("Regenerate it with `gpuwise plan --save plan.json`.",
                                "请用 `gpuwise plan --save plan.json` 重新生成。"))


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
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 1 << 27:
        raise _bad(key, value, f"an integer >= {low}", f"不小于 {low} 的整数")
    return value


def _num(d: Mapping[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = d.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
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
    return clean_text(value, limit=500)


def _text_list(d: Mapping[str, Any], key: str) -> tuple[Text, ...]:
    en, zh = d.get(key) or [], d.get(f"{key}_zh") or []
    if not isinstance(en, list) or not isinstance(zh, list):
        raise _bad(key, en, "a list of strings", "字符串列表")
    zh = zh + en[len(zh):]
    return tuple(Text(clean_text(str(a), 500), clean_text(str(b), 500)) for a, b in zip(en, zh, strict=False))


def _card(d: Mapping[str, Any]) -> CardFacts:
    info = _section(d, "card_info")
    profiles = info.get("mig_profiles") or []
    if not isinstance(profiles, list) or not all(isinstance(x, str) for x in profiles):
        raise _bad("card_info.mig_profiles", profiles, "a list of strings", "字符串列表")
    return CardFacts(
        id=_str(d, "card", None) or "gpu", name=_str(d, "card_name", "") or "",
        vendor=_str(info, "vendor", "nvidia") or "nvidia",
        software=_str(info, "software", "cuda", ("cuda", "rocm", "cann")) or "cuda",
        memory_gb=_num(info, "memory_gb", 0.0, 0.0, 1e5), bf16=info.get("bf16") is not False,
        compute_capability=_str(info, "compute_capability", None),
        skypilot_name=_str(info, "skypilot_name", None),
        ray_accelerator_type=_str(info, "ray_accelerator_type", None),
        k8s_product=_str(info, "k8s_product", None), mig_profiles=tuple(clean_text(x) for x in profiles),
        interconnect=_str(info, "interconnect", "none") or "none", linked=bool(info.get("linked", False)))


def _breakdown(mem: Mapping[str, Any]) -> MemoryBreakdown | None:
    items = mem.get("items")
    if not isinstance(items, list):
        return None
    out = []
    for i in items:
        if not isinstance(i, Mapping):
            raise _bad("memory.items", i, "objects", "对象")
        out.append(Item(key=_str(i, "name", "") or "", component=_str(i, "component", "overhead") or "",
                        bytes=_num(i, "bytes", 0.0, 0.0, 1e18),
                        why=Text(_str(i, "why", "") or "", _str(i, "why_zh", "") or "")))
    return MemoryBreakdown(items=tuple(out), kv_pool=_num(mem, "kv_pool", 0.0, 0.0, 1e18),
                           allocated_peak=_num(mem, "allocated_peak", 0.0, 0.0, 1e18),
                           reserved_peak=_num(mem, "reserved_peak", 0.0, 0.0, 1e18),
                           device_total=_num(mem, "device_total", 0.0, 0.0, 1e18),
                           framework_reports=_str(mem, "framework_reports", "") or "")


def _typed(cls: Any, d: Any) -> Any:
    """An InferSpeed / TrainSpeed / Cost from its to_dict(); None when absent or partial."""
    if not isinstance(d, Mapping):
        return None
    names = {f.name for f in fields(cls)}
    kw = {k: v for k, v in d.items() if k in names}
    if "low_high_per_hour" in kw and isinstance(kw["low_high_per_hour"], list):
        kw["low_high_per_hour"] = tuple(kw["low_high_per_hour"])
    try:
        return cls(**kw)
    except TypeError:
        return None


def _counts(d: Mapping[str, Any], par: Mapping[str, Any], training: bool) -> dict[str, int]:
    nodes = _int(d, "nodes", 1) or 1
    per_node = _int(d, "gpus_per_node", None)
    total = _int(d, "gpus_total", None) or _int(d, "gpus", per_node * nodes if per_node else 1) or 1
    per_node = per_node or total // nodes
    replicas = _int(d, "replicas", None) or _int(par, "replicas", 1) or 1
    tp, pp = _int(par, "tp", None) or 0, _int(par, "pp", 1) or 1
    if not tp:
        tp = max(1, total // (pp * replicas)) if not training else 1
    dp = _int(par, "dp", None) or (replicas if not training else max(1, total // (tp * pp)))
    if per_node * nodes != total or (not training and tp * pp * replicas != total) \
            or (training and tp * pp * dp != total):
        raise InputError(Text(
            f"The plan's GPU counts disagree: gpus {total}, gpus_per_node {per_node}, nodes {nodes}, "
            f"replicas {replicas}, tp {tp}, pp {pp}, dp {dp}.",
            f"计划中的卡数互相矛盾：gpus {total}，gpus_per_node {per_node}，nodes {nodes}，"
            f"replicas {replicas}，tp {tp}，pp {pp}，dp {dp}。"))
    return {"gpus_total": total, "gpus_per_node": per_node, "nodes": nodes, "replicas": replicas,
            "tp": tp, "pp": pp, "dp": dp}


def _quantization(d: Mapping[str, Any], task: str, model: str, deploy: str, weights: str) -> str | None:
    """The format the plan's checkpoint still needs (Plan.quantization), checked against the rest of
    the plan: only the plan's own weight format, never on a training plan, and for a catalog preset
    deployed as its own checkpoint recomputed from the preset, so an old or edited plan that says
    null cannot export a 16-bit checkpoint for int4 sizing (the exporters refuse it instead)."""
    said = _str(d, "quantization", None)
    if said is not None and (said != weights or task in TRAIN_TASKS):
        want = "null" if task in TRAIN_TASKS else f"null or the plan's weights ({weights})"
        want_zh = "null" if task in TRAIN_TASKS else f"null 或方案的权重格式（{weights}）"
        raise _bad("quantization", said, want, want_zh)
    if task in TRAIN_TASKS:
        return None
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.weights import checkpoint_format, pending_format

    preset = find_preset(model)
    if preset is None or preset.hf_id != deploy:  # a hub model or a --deploy-model: the file's word
        return said
    return pending_format(checkpoint_format(preset.arch()), weights)


def plan_from_dict(d: Any) -> Plan:
    """Check a plan object (as `plan_to_dict` writes it) and build the Plan; InputError if bad."""
    if not isinstance(d, Mapping):
        raise _bad("plan", type(d).__name__, "a JSON object", "JSON 对象")
    if isinstance(d.get("plans"), list):  # a whole `gpuwise plan --json` object: its best plan
        if not d["plans"]:
            raise InputError(Text("The file holds no plan (nothing met the constraints).",
                                  "文件中没有方案（没有满足条件的配置）。"))
        d = d["plans"][0]
        if not isinstance(d, Mapping):
            raise _bad("plans[0]", d, "an object", "对象")
    par, work, mem = _section(d, "parallelism"), _section(d, "workload"), _section(d, "memory")
    task = _str(work, "task", "infer", TASKS) or "infer"
    model = _str(work, "model", None) or _str(work, "hf_id", None)
    if not model:
        raise _bad("workload.model", None, "a model name", "模型名")
    zero = _int(par, "zero", 0, low=0) or 0
    if zero > 3:
        raise _bad("parallelism.zero", zero, "0, 1, 2 or 3", "0、1、2 或 3")
    peft = _peft_knobs(work, task)
    deploy = _str(d, "deploy_model", None) or _str(work, "hf_id", None) or model
    weights = _str(d, "weights", "auto") or "auto"
    quality = _section(d, "quality")
    sources = quality.get("sources") or []
    return Plan(
        card_facts=_card(d), **_counts(d, par, task in TRAIN_TASKS), task=task, model=model,
        deploy_model=deploy, weights=weights, zero=zero, fsdp=bool(par.get("fsdp", False)),
        offload=_str(par, "offload", "none", OFFLOADS) or "none",
        cpu_offload_gb=_num(par, "cpu_offload_gb", 0.0, 0.0, 1e6), engine=_str(par, "engine", None),
        quantization=_quantization(d, task, model, deploy, weights), source=_str(work, "source", "") or "",
        context=_int(work, "context", None), concurrency=_int(work, "concurrency", None),
        kv_dtype=_str(work, "kv_dtype", "auto") or "auto",
        gpu_memory_utilization=_num(work, "gpu_memory_utilization", 0.9, 0.05, 1.0),
        max_num_batched_tokens=_int(work, "max_num_batched_tokens", None),
        seq_len=_int(work, "seq_len", None), micro_batch=_int(work, "micro_batch", 1) or 1,
        grad_accum=_int(work, "grad_accum", 1) or 1, grad_ckpt=_str(work, "grad_ckpt", "none") or "none",
        optimizer=_str(work, "optimizer", "adamw") or "adamw", lora_rank=_int(work, "lora_rank", None),
        framework=_str(work, "framework", "hf") or "hf",
        loss=_str(work, "loss", "full", ("full", "chunked", "fused")) or "full",
        activation_offload=_flag(work, "activation_offload"),
        optimizer_in_backward=_flag(work, "optimizer_in_backward"), packing=_flag(work, "packing"),
        compile=_flag(work, "compile"), float8=_flag(work, "float8"), dora=peft[0], modules_to_save=peft[1],
        padding_free=_flag(work, "padding_free"),
        mig_profile=_str(d, "mig_profile", None), spot=_spot(d), image=_str(d, "image", None),
        script=_str(work, "script", None), workdir=_str(work, "workdir", None),
        objective=_str(d, "objective", "cost") or "cost", breakdown=_breakdown(mem),
        usable_bytes=_num(mem, "usable_bytes", 0.0, 0.0, 1e18),
        required_high=_num(mem, "required_high", 0.0, 0.0, 1e18) if "required_high" in mem else None,
        ranges=_ranges(_section(d, "ranges")),
        speed=_typed(TrainSpeed if task in TRAIN_TASKS else InferSpeed, d.get("speed")),
        cost=_typed(Cost, d.get("cost")), reasons=_text_list(d, "reasons"), notes=_text_list(d, "notes"),
        quality=Text(_str(quality, "summary", "") or "", _str(quality, "summary_zh", "") or "")
        if quality.get("summary") else None,
        quality_sources=tuple(clean_text(str(s), 500) for s in sources) if isinstance(sources, list) else (),
    )


def _ranges(section: Mapping[str, Any]) -> tuple[tuple[str, float, float, str], ...]:
    """Bands read back: each finite, positive and low <= high, or the plan is refused."""
    out = []
    for path, band in section.items():
        where = f"ranges.{clean_text(str(path), 80)}"
        if not isinstance(band, Mapping):
            raise _bad(where, band, "an object {low, high, fitted}", "对象 {low, high, fitted}")
        low, high = _num(band, "low", 0.0, 0.0, 1e18), _num(band, "high", 0.0, 0.0, 1e18)
        if not 0 < low <= high:
            raise _bad(where, [low, high], "0 < low <= high", "0 < low <= high")
        out.append((clean_text(str(path), 80), low, high, clean_text(str(band.get("fitted", "")), 80)))
    return tuple(out)


def _flag(section: Mapping[str, Any], key: str) -> bool:
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise _bad(f"workload.{key}", value, "true or false", "true 或 false")
    return value


def _peft_knobs(work: Mapping[str, Any], task: str) -> tuple[bool, tuple[str, ...]]:
    """dora and modules_to_save read back: a boolean, a list of the known modules each
    named once, and the two LoRA knobs only on a LoRA plan (an export would set what was never sized)."""
    from gpuwise.estimate.workload import MODULES_TO_SAVE

    saved = work.get("modules_to_save") or []
    if not isinstance(saved, list) or not all(isinstance(m, str) and m in MODULES_TO_SAVE for m in saved) \
            or len(set(saved)) != len(saved):
        raise _bad("workload.modules_to_save", saved, f"a list of distinct names from {', '.join(MODULES_TO_SAVE)}",
                   f"由 {', '.join(MODULES_TO_SAVE)} 组成、不重复的列表")
    dora = _flag(work, "dora")
    if (dora or saved) and task not in ("lora", "qlora"):
        raise _bad("workload.task", task, "lora or qlora with dora / modules_to_save",
                   "lora 或 qlora（使用 dora / modules_to_save 时）")
    return dora, tuple(saved)


def _spot(d: Mapping[str, Any]) -> bool:
    """Spot/preemptible billing (抢占式), when the plan's cost says so."""
    cost = _section(d, "cost")
    billing = cost.get("billing") or d.get("billing")
    return bool(d.get("spot") or cost.get("spot") or billing in ("spot", "preemptible"))
