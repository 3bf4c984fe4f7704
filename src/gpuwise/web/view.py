"""What the page shows, computed from the API's JSON objects: verdict, tables, chart data.

Pure functions over the `plan`/`estimate` dicts (no I/O, no framework), in the page's language.
"""

from __future__ import annotations

import re
from typing import Any

from gpuwise.i18n import Lang

GIB = 2**30
# Stacked memory components, in the order they are drawn (keys of the JSON `memory` object).
COMPONENTS = ("weights", "kv_cache", "activations", "gradients", "optimizer", "overhead")
CONFIG_TARGETS = ("vllm", "deepspeed", "skypilot", "k8s")  # the snippets shown for plan #1


# A flag in a message from the library names the page's field of the same name instead.
_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
_FIELD_OF_FLAG = {"gpus": "gpus", "card": "card", "context": "context", "concurrency": "concurrency",
                  "max_ttft": "max_ttft", "min_throughput": "min_throughput", "budget": "budget",
                  "min_tokens_per_s_per_user": "min_tokens_per_s_per_user", "weights": "weights",
                  "kv_dtype": "kv_dtype", "seq_len": "seq_len", "micro_batch": "micro_batch",
                  "lora_rank": "lora_rank", "tokens": "train_tokens", "provider": "provider",
                  "billing": "billing", "objective": "objective", "stage": "stage", "top": "top",
                  "allow_offload": "allow_offload", "task": "task"}


def page_words(text: str, L: dict[str, str]) -> str:
    """'add --max-ttft or --budget' -> 'add “Max time to first token (s)” or “Budget ...”': the page
    names its own fields; a flag the page has no field for stays as it is."""
    def field(m: re.Match[str]) -> str:
        key = _FIELD_OF_FLAG.get(m.group(1).replace("-", "_"))
        return f"“{L[key]}”" if key and key in L else m.group(0)

    return _FLAG.sub(field, text)


def gib(n: float, digits: int = 1) -> str:
    return f"{n / GIB:,.{digits}f}"


def num(n: float | None, digits: int = 0) -> str:
    return "–" if n is None else f"{n:,.{digits}f}"


def _zh(obj: dict[str, Any], key: str, lang: Lang) -> Any:
    """A bilingual field: `key_zh` in Chinese when present, else `key`."""
    return obj.get(key + "_zh", obj.get(key)) if lang == "zh" else obj.get(key)


def memory_bar(label: str, memory: dict[str, Any], usable: float) -> dict[str, Any]:
    """One stacked bar in GiB: the components, the rest of usable memory, and usable itself."""
    parts = {c: float(memory.get(c) or 0) for c in COMPONENTS}
    required = float(memory.get("required") or sum(parts.values()))
    parts["other"] = max(required - sum(parts.values()), 0.0)
    parts["free"] = max(usable - required, 0.0)
    return {"label": label, "parts": {k: round(v / GIB, 3) for k, v in parts.items()},
            "usable": round(usable / GIB, 3), "required": round(required / GIB, 3)}


def memory_chart(bars: list[dict[str, Any]], L: dict[str, str]) -> dict[str, Any]:
    keys = [k for k in (*COMPONENTS, "other", "free") if any(b["parts"][k] for b in bars)]
    return {"title": L["memory_chart"], "labels": [b["label"] for b in bars],
            "datasets": [{"key": k, "label": L[k + "_c"], "data": [b["parts"][k] for b in bars]}
                         for k in keys],
            "usable": {"label": L["usable_c"], "data": [b["usable"] for b in bars]}}


def _speed_value(speed: dict[str, Any]) -> float | None:
    value = speed.get("throughput_tokens_per_s", speed.get("tokens_per_s"))
    return None if value is None else float(value)


def speed_parts(speed: dict[str, Any] | None, L: dict[str, str]) -> list[str]:
    """The speed as short pieces the page may wrap between (never inside one)."""
    if not speed:
        return ["–"]
    if "throughput_tokens_per_s" in speed:
        return [L["per_user"].format(v=num(speed.get("decode_tokens_per_s"))),
                L["all_users"].format(v=num(speed["throughput_tokens_per_s"])),
                L["ttft"].format(v=num(speed.get("ttft_s"), 2))]
    return [f"{num(speed.get('tokens_per_s'))} tok/s", f"MFU {100 * float(speed.get('mfu') or 0):.0f}%"]


def speed_text(speed: dict[str, Any] | None, L: dict[str, str]) -> str:
    return " · ".join(speed_parts(speed, L))


def cost_parts(cost: dict[str, Any] | None, L: dict[str, str]) -> list[str]:
    if not cost:
        return ["–"]
    cur = "元" if cost.get("currency") == "CNY" else cost.get("currency", "")
    out = [f"{num(cost.get('per_hour'), 2)} {cur}/{L['hour']}"]
    if cost.get("per_million_tokens"):
        out.append(f"{num(cost['per_million_tokens'], 2)} {cur}/{L['mtok']}")
    if cost.get("per_run"):
        out.append(f"{num(cost['per_run'], 0)} {cur}/{L['run']}")
    return out


def cost_text(cost: dict[str, Any] | None, L: dict[str, str]) -> str:
    return " · ".join(cost_parts(cost, L))


def fixes(est: dict[str, Any], lang: Lang) -> list[dict[str, str]]:
    """Each fix in the page's words ("use 4 GPUs"), its notes, and the CLI flags as a hint only."""
    from gpuwise.fixtext import flags_of

    out = []
    for f in est.get("fixes") or []:
        notes = _zh(f, "notes", lang) or []
        words = _zh(f, "text", lang) + (f" ({'; '.join(notes)})" if notes else "")
        out.append({"words": words, "flags": flags_of(list(f["settings"].items()))})
    if not out:  # an answer from before fixes were data: the command-line words as they are
        out = [{"words": s, "flags": ""} for s in _zh(est, "suggestions", lang) or []]
    return out


def parallel_text(par: dict[str, Any]) -> str:
    bits = [f"TP{par.get('tp', 1)}", f"PP{par.get('pp', 1)}", f"DP{par.get('dp', 1)}"]
    if par.get("zero"):
        bits.append(f"ZeRO-{par['zero']}")
    if par.get("offload") not in (None, "none"):
        bits.append(f"offload {par['offload']}")
    return " ".join(bits)


def plan_rows(plan: dict[str, Any], lang: Lang, L: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for i, p in enumerate(plan.get("plans", []), 1):
        mem = p["memory"]
        gpus = f"{p['gpus']}" if p.get("nodes", 1) == 1 else f"{p['nodes']}×{p['gpus_per_node']}"
        rows.append({"rank": i, "card": p["card_name"], "card_id": p["card"], "gpus": gpus,
                     "weights": p["weights"], "parallelism": parallel_text(p.get("parallelism") or {}),
                     "memory": f"{gib(mem['required'])} / {gib(mem['usable_bytes'])} GiB",
                     "speed": speed_parts(p.get("speed"), L), "cost": cost_parts(p.get("cost"), L),
                     "reasons": [page_words(x, L) for x in _zh(p, "reasons", lang) or []]})
    return rows


def rejected_rows(plan: dict[str, Any], lang: Lang, L: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [{"card": r["card"], "gpus": r.get("gpus"), "weights": r.get("weights"),
             "reasons": [page_words(x, L or {}) for x in _zh(r, "reasons", lang) or []]}
            for r in plan.get("rejected", [])]


def pareto(points: list[dict[str, Any]]) -> list[bool]:
    """Which points no other point beats on both cost (x, lower) and speed (y, higher)."""
    return [not any(q["x"] <= p["x"] and q["y"] >= p["y"] and (q["x"] < p["x"] or q["y"] > p["y"])
                    for q in points) for p in points]


def scatter(plan: dict[str, Any], L: dict[str, str]) -> dict[str, Any]:
    points = []
    for i, p in enumerate(plan.get("plans", []), 1):
        y, cost = _speed_value(p.get("speed") or {}), p.get("cost") or {}
        if y is not None and cost.get("per_hour") is not None:
            points.append({"x": round(float(cost["per_hour"]), 3), "y": round(y, 1),
                           "label": f"#{i} {p['card_name']} ×{p['gpus']} {p['weights']}", "short": f"#{i}"})
    for point, front in zip(points, pareto(points), strict=True):
        point["front"] = front
    return {"title": L["scatter_chart"], "x": L["cost_axis"], "y": L["speed_axis"], "points": points,
            "front_label": L["pareto"], "other_label": L["other_plans"]}


def _sources(est: dict[str, Any], L: dict[str, str]) -> str:
    prov = est["provenance"]
    cal = prov["inputs"].get("calibration")
    rates = L["rates_measured"].format(file=cal["file"]) if cal else L["rates_datasheet"]
    rows = sum(len(v) for v in prov.get("ranges", {}).get("rows", {}).values())
    return L["sources"].format(rates=rates, n=rows)


def estimate_verdict(est: dict[str, Any], lang: Lang, L: dict[str, str]) -> dict[str, Any]:
    head = est["headroom_bytes"]
    what = f"{est['model']['name']} · {est['card']} × {est['gpus']} · {L.get(est['task'], est['task'])}"
    band = (est.get("ranges") or {}).get("memory.required")
    spread = f" ({gib(band['low'])}-{gib(band['high'])})" if band else ""
    detail = (f"{gib(est['memory']['required'])}{spread} GiB {L['required']} / {gib(est['usable_bytes'])} GiB "
              f"{L['usable']} {L['per_gpu']} · " +
              (f"{L['short_by']} {gib(-head)} GiB" if not est["fits"] else
               f"{L['tensor_headroom']} {gib(est['tensor_headroom_bytes'])} GiB"
               if est.get("tensor_headroom_bytes") is not None else f"{L['headroom']} {gib(head)} GiB"))
    cap = est.get("capacity")
    lines = [L["kv_capacity"].format(t=num(cap["kv_tokens"]), n=f"{int(cap['max_concurrency']):,}",
                                     x=num(cap["max_context"]))] if cap else []
    if est.get("speed"):
        lines.append(speed_text(est["speed"], L) + " · " + cost_text(est.get("cost"), L))
    lines += [page_words(x, L) for x in _zh(est, "warnings", lang) or []]
    note = _zh(est, "card_note", lang)
    lines += [note] if note else []
    lines += [_sources(est, L)] if est.get("provenance") else []
    head = L["tight"] if est.get("fit") == "tight" else L["fits"] if est["fits"] else L["no_fit"]
    return {"ok": bool(est["fits"]), "head": head, "what": what,
            "detail": detail, "lines": lines, "fixes": fixes(est, lang)}


def plan_verdict(plan: dict[str, Any], lang: Lang, L: dict[str, str]) -> dict[str, Any]:
    plans = plan.get("plans", [])
    if not plans:
        reasons = [f"{r['card']}: {'; '.join(r['reasons'])}" for r in rejected_rows(plan, lang)[:3]]
        return {"ok": False, "head": L["no_plan"], "what": plan.get("model", ""), "detail": "",
                "lines": reasons, "fixes": []}
    p = plans[0]
    mem = p["memory"]
    what = f"{p['gpus']} × {p['card_name']} · {p['weights']} · {parallel_text(p.get('parallelism') or {})}"
    detail = (f"{gib(mem['required'])} / {gib(mem['usable_bytes'])} GiB {L['per_gpu']} · "
              f"{speed_text(p.get('speed'), L)} · {cost_text(p.get('cost'), L)}")
    return {"ok": True, "head": L["best_plan"], "what": what, "detail": detail,
            "lines": [page_words(x, L) for x in _zh(p, "reasons", lang) or []], "fixes": []}


def emit_configs(plan: dict[str, Any]) -> list[dict[str, str]]:
    """The top plan as vLLM / DeepSpeed / SkyPilot / Kubernetes text, where each applies; a target
    that refuses the plan (a checkpoint not in the plan's weight format, another engine's sizing)
    gives its reason in both languages instead of text, so that the page says why it is missing."""
    plans = plan.get("plans") or []
    if not plans:
        return []
    try:
        from gpuwise.export import emit, targets_for
    except ImportError:
        return []
    from gpuwise.errors import GpuwiseError

    out = []
    for target in (t for t in CONFIG_TARGETS if t in targets_for(plans[0])):
        try:
            out.append({"target": target, "text": emit(plans[0], target)})
        except GpuwiseError as err:
            out.append({"target": target, "text": "", "refused": err.message.en, "refused_zh": err.message.zh})
    return out


def _configs_in(configs: list[dict[str, str]], lang: Lang, L: dict[str, str]) -> list[dict[str, str]]:
    """Each config with its refusal (if any) in the page's language and words (its flags named as the
    form's fields, page_words)."""
    return [{**c, "refused": page_words(c["refused_zh"] if lang == "zh" else c["refused"], L)}
            if c.get("refused") else c for c in configs]


def build_view(plan: dict[str, Any], est: dict[str, Any] | None, configs: list[dict[str, str]],
               lang: Lang, L: dict[str, str]) -> dict[str, Any]:
    bars = []
    if est is not None:
        bars.append(memory_bar(f"{est['card']} ×{est['gpus']}", est["memory"], est["usable_bytes"]))
    for i, p in enumerate(plan.get("plans", []), 1):
        bars.append(memory_bar(f"#{i} {p['card_name']} ×{p['gpus']} {p['weights']}", p["memory"],
                               p["memory"]["usable_bytes"]))
    return {
        "estimate": estimate_verdict(est, lang, L) if est is not None else None,
        "verdict": plan_verdict(plan, lang, L), "plans": plan_rows(plan, lang, L),
        "rejected": rejected_rows(plan, lang, L), "evaluated": plan.get("evaluated"),
        "stage_advice": _zh(plan, "stage_advice", lang), "configs": _configs_in(configs, lang, L),
        "charts": {"memory": memory_chart(bars, L), "scatter": scatter(plan, L)},
    }
