"""How `gpuwise estimate` reads on screen: the verdict, the memory table, speed, cost and the
fixes, in English or Chinese, from the estimate's JSON object (the same one `--json` prints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.cli.common import (
    Column,
    fit_table,
    fmt_gib,
    fmt_hours,
    money,
    on_off,
    per_hour,
    safe,
    say,
    task_name,
)
from gpuwise.i18n import Lang, Text

_LABELS = {
    "weights": ("weights", "权重"), "kv_cache": ("KV cache", "KV 缓存"),
    "sequence_state": ("sequence state", "序列状态"), "forward_activations": ("activations", "激活"),
    "logits": ("logits", "logits"), "runtime": ("CUDA context + workspaces", "CUDA 上下文与工作区"),
    "adapters": ("LoRA adapters", "LoRA 适配器"), "gradients": ("gradients", "梯度"),
    "optimizer": ("optimizer states", "优化器状态"), "activations": ("activations", "激活"),
    "zero3_gather": ("ZeRO-3 gather buffers", "ZeRO-3 收集缓冲"),
    "allocator_slack": ("allocator cache (reserved - allocated)", "分配器缓存（保留 - 已分配）"),
    "sampler_peak": ("sampler profiling peak", "采样器探测峰值"), "cuda_graphs": ("CUDA graphs", "CUDA graph"),
    "allreduce_inputs_held": ("all-reduce inputs NCCL keeps (vLLM 0.2.4-0.2.6)",
                              "NCCL 保留的 all-reduce 输入（vLLM 0.2.4-0.2.6）"),
}


def render_estimate(r: dict[str, Any], lang: Lang, explain: bool = False) -> None:
    from rich.console import Console

    zh = lang == "zh"
    c = Console(highlight=False)
    m = r["memory"]
    title = " · ".join([r["model"]["name"], f"{r['card']} × {r['gpus']}", task_name(r["task"], lang),
                        *([r["engine"]] if r.get("engine") else [])]) + ("（每卡）" if zh else " (per GPU)")
    columns = [Column(Text("component", "项目")), Column(Text("memory", "显存"), right=True)]
    if explain:
        columns.append(Column(Text("why", "依据")))
    rows: list[list[str]] = []
    for item in m["items"]:
        label = _LABELS.get(item["name"], (item["name"], item["name"]))[1 if zh else 0]
        rows.append([label, fmt_gib(item["bytes"]), *([item["why_zh" if zh else "why"]] if explain else [])])
    pad = [""] if explain else []
    if "kv_pool" in m:
        engine = safe(r.get("engine") or "vllm")
        rows.append([f"{engine} KV 池" if zh else f"{engine} KV pool", fmt_gib(m["kv_pool"]), *pad])
    rows.append(["合计（需要）" if zh else "required",
                 fmt_gib(m["required"]) + _band(r, "memory.required", lambda v: f"{v / 2**30:,.2f}"), *pad])
    rows.append(["可用" if zh else "usable", fmt_gib(r["usable_bytes"]), *pad])
    table, _ = fit_table(c, columns, rows, lang, title=title)
    c.print(table)
    _render_verdict(c, r, lang)


def _band(r: dict[str, Any], path: str, fmt: Callable[[float], str]) -> str:
    """' (low-high)' for a number that has an 80 % band, else ''."""
    b = r.get("ranges", {}).get(path)
    return f" ({fmt(b['low'])}-{fmt(b['high'])})" if b else ""


def _n(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.3g}"


def _int(v: float) -> str:
    """Whole sequences: 109.47 concurrent sequences is 109."""
    return f"{int(v):,}"


def _ms(v: float) -> str:
    return f"{v * 1e3:,.0f}" if v >= 0.1 else f"{v * 1e3:,.3g}"


def _verdict_line(r: dict[str, Any], zh: bool) -> str:
    head = r["headroom_bytes"]
    if r.get("tensor_headroom_bytes") is not None:  # the caching pool fills the card: the tensors' headroom
        head = r["tensor_headroom_bytes"]
    top = r.get("ranges", {}).get("memory.required")
    if r.get("fit") == "tight" and top:
        return (f"[bold yellow]{'勉强放得下' if zh else 'TIGHT'}[/] — "
                + (f"按估算余量 {fmt_gib(head)}，但按 80% 区间上限（{fmt_gib(top['high'], 1)}）放不下" if zh else
                   f"fits at the estimate (headroom {fmt_gib(head)}), not at the top of its 80 % range "
                   f"({fmt_gib(top['high'], 1)})"))
    if r["fits"] and r.get("tensor_headroom_bytes") is not None:
        left = fmt_gib(head)
        return (f"[bold green]放得下[/] — 张量之外余 {left}；缓存池会占满显卡" if zh else
                f"[bold green]FITS[/] — the tensors leave {left}; the caching pool fills the card")
    if r["fits"]:
        return f"[bold green]{'放得下' if zh else 'FITS'}[/] — {'余量' if zh else 'headroom'} {fmt_gib(head)}"
    return f"[bold red]{'放不下' if zh else 'DOES NOT FIT'}[/] — {'还差' if zh else 'short by'} {fmt_gib(-head)}"


def _speed_lines(r: dict[str, Any], lang: Lang) -> list[str]:
    """Speed and cost in words, each number with its 80 % band."""
    zh = lang == "zh"
    sp, cost = r.get("speed"), r.get("cost") or {}
    out = []
    if sp and "decode_tokens_per_s" in sp:
        out.append(("速度：每用户解码 {d} token/s{db} · 总吞吐 {t} token/s{tb}" if zh else
                    "speed: {d} tok/s per user{db} · {t} tok/s in all{tb}")
                   .format(d=_n(sp["decode_tokens_per_s"]), db=_band(r, "speed.decode_tokens_per_s", _n),
                           t=_n(sp["throughput_tokens_per_s"]),
                           tb="" if sp.get("run_requests") else _band(r, "speed.throughput_tokens_per_s", _n)))
        if sp.get("run_requests"):  # --requests: a finite run's throughput, its ramp and drain included
            out.append(("压测：{n} 个请求同时发出，共 {s:,.1f} 秒（总吞吐含排队与收尾）" if zh else
                        "benchmark run: {n} prompts sent at once take {s:,.1f} s "
                        "(the throughput counts its ramp and drain)")
                       .format(n=f"{sp['run_requests']:,}", s=sp["run_seconds"]))
        out.append(("延迟：首 token {f} ms{fb} · 每 token {p} ms{pb}" if zh else
                    "latency: first token {f} ms{fb} · {p} ms per token{pb}")
                   .format(f=_ms(sp["ttft_s"]), fb=_band(r, "speed.ttft_s", _ms),
                           p=_ms(sp["tpot_s"]), pb=_band(r, "speed.tpot_s", _ms)))
    elif sp:
        out.append(("训练：{t} token/s{tb} · 每步 {s} 秒{sb} · MFU {m}{mb}" if zh else
                    "training: {t} tok/s{tb} · {s} s per step{sb} · MFU {m}{mb}")
                   .format(t=_n(sp["tokens_per_s"]), tb=_band(r, "speed.tokens_per_s", _n),
                           s=f"{sp['step_time_s']:,.3g}", sb=_band(r, "speed.step_time_s", lambda v: f"{v:,.3g}"),
                           m=f"{sp['mfu']:.0%}", mb=_band(r, "speed.mfu", lambda v: f"{v:.0%}")))
        gbps = (sp.get("communication_s") or {}).get("inter_node_gbps")
        if gbps:
            out.append(("节点间网络：每节点 {g:,.0f} Gb/s（{s}；可用 --inter-node-gbps 修改）" if zh else
                        "between nodes: {g:,.0f} Gb/s per node ({s}; set --inter-node-gbps)")
                       .format(g=gbps, s=safe(sp.get("inter_node_source_zh" if zh else "inter_node_source")
                                             or "--inter-node-gbps")))
    if cost:
        cur = cost["currency"]
        low_high = cost.get("low_high_per_hour")
        money_line = (("成本：{h} {u}" if zh else "cost: {h} {u}")
                      .format(h=f"{cost['per_hour']:,.2f}", u=per_hour(cur, lang))
                      + (f" ({low_high[0]:,.2f}-{low_high[1]:,.2f})" if low_high and low_high[0] != low_high[1]
                         else ""))
        if cost.get("per_million_tokens") is not None:
            money_line += (" · 每百万 token {v} {c}{b}" if zh else " · {v} {c} per million tokens{b}").format(
                v=f"{cost['per_million_tokens']:,.2f}", c=money(cur, lang),
                b=_band(r, "cost.per_million_tokens", lambda v: f"{v:,.2f}"))
        out.append(money_line)
        if cost.get("per_run") is not None:
            hours = cost.get("run_hours")
            out.append(("整次训练：{v} {c}{b}" if zh else "the whole run: {v} {c}{b}").format(
                v=f"{cost['per_run']:,.0f}", c=money(cur, lang),
                b=_band(r, "cost.per_run", lambda v: f"{v:,.0f}"))
                + ("" if hours is None else ("，用时 {t}" if zh else " in {t}").format(
                    t=fmt_hours(hours, lang, r.get("ranges", {}).get("cost.run_hours")))))
        out.append(("价格来源：{p}（{a}）" if zh else "price: {p} ({a})").format(
            p=safe(cost["provider"]), a=safe(cost["as_of"])))
    return out


def _sources_line(r: dict[str, Any], zh: bool) -> str | None:
    prov = r.get("provenance")
    if not prov:
        return None
    inputs = prov["inputs"]
    rates = (("实测 {s}" if zh else "measured in {s}").format(s=safe(inputs["calibration"]["file"]))
             if "calibration" in inputs else ("数据手册 × data/efficiency.toml" if zh else
                                              "datasheet x data/efficiency.toml"))
    rows = sum(len(v) for v in prov.get("ranges", {}).get("rows", {}).values())
    band = (("区间按 {n} 个公开实测拟合（validation/）" if zh else "ranges fitted on {n} published measurements "
             "(validation/)").format(n=rows) if rows else ("无拟合区间" if zh else "no fitted ranges"))
    return ("依据：显存为公式（模型配置 + 显卡手册）· 速度为公式（{r}）· {b}" if zh else
            "sources: memory is a formula (model config + card datasheet) · speed a formula ({r}) · {b}"
            ).format(r=rates, b=band)


def _framework_line(r: dict[str, Any], lang: Lang) -> str | None:
    fw = r.get("framework")
    if not fw:
        return None
    zh = lang == "zh"
    shown = ("，" if zh else ", ").join(f"{k.replace('_', '-')} {on_off(v, lang)}"
                                       for k, v in fw["knobs"].items() if k in fw["defaults_applied"])
    line = (f"框架：{safe(fw['name'])}（{safe(fw['version'])}）的默认设置（{shown}）；可用对应参数覆盖" if zh else
            f"framework: {safe(fw['name'])} ({safe(fw['version'])}) defaults ({shown}); flags override them")
    if fw.get("chosen_by_default"):
        reason = fw.get("default_reason") or ""
        reason_zh = _REASONS_ZH.get(reason, reason)  # a reason with no Chinese yet is shown as it is
        line += (f"；未指定 --framework，按本任务的默认框架计算（{safe(reason_zh)}）" if zh and reason else
                 "；未指定 --framework，按本任务的默认框架计算" if zh else
                 f"; chosen because no --framework was given ({safe(reason)})")
    return line


# frameworks.toml `default_reason` (English) in Chinese, so both languages say why the default was chosen
_REASONS_ZH = {
    "the plain Trainer: no framework-specific kernels, recompute or packing assumed":
        "即普通的 Trainer：不假定框架特有的算子、重计算或样本拼接",
    "the fine-tuning recipe the guides teach: the HF Trainer with gradient checkpointing on, as LLaMA-Factory, "
    "ms-swift, TRL's SFTTrainer and Unsloth all default to":
        "即各教程所教的微调做法：开启梯度检查点的 HF Trainer，LLaMA-Factory、ms-swift、TRL 的 SFTTrainer "
        "与 Unsloth 默认都是如此",
}


_PEAK_NAMES = {"allocated": ("allocated", "已分配"), "reserved": ("reserved", "已保留"),
               "nvidia-smi": ("device total", "设备总量")}


def _peaks_line(r: dict[str, Any], zh: bool) -> str | None:
    """Training: the allocator's peaks beside the device total, and which one the framework logs."""
    m, fw = r["memory"], r.get("framework")
    if not fw or not m.get("allocated_peak"):
        return None
    shows = _PEAK_NAMES.get(fw["peak_reported"])
    name = safe(fw["name"])
    said = ((f"；{name} 日志显示的是{shows[1]}" if zh else f"; {name}'s logs show {shows[0]}")
            if shows else ("；该框架不打印峰值" if zh else f"; {name} prints no peak"))
    return ((f"峰值：已分配 {fmt_gib(m['allocated_peak'])}（max_memory_allocated）· 已保留 "
             f"{fmt_gib(m['reserved_peak'])} · 设备总量 {fmt_gib(m['device_total'])}（nvidia-smi）") if zh else
            (f"peak: allocated {fmt_gib(m['allocated_peak'])} (max_memory_allocated) · reserved "
             f"{fmt_gib(m['reserved_peak'])} · device total {fmt_gib(m['device_total'])} (nvidia-smi)")) + said


def _capacity_line(r: dict[str, Any], zh: bool) -> str | None:
    cap = r.get("capacity")
    if not cap:
        return None
    return (("KV 容量 {t} token{tb} · 该上下文下最多并发 {n} 路{nb} · 该并发下最长上下文 {x}{xb}" if zh else
             "KV capacity {t} tokens{tb} · at most {n} sequences at this context{nb} · at most {x} tokens "
             "of context at this concurrency{xb}")
            .format(t=f"{cap['kv_tokens']:,}", n=_int(cap["max_concurrency"]), x=f"{cap['max_context']:,}",
                    tb=_band(r, "capacity.kv_tokens", _n), nb=_band(r, "capacity.max_concurrency", _int),
                    xb=_band(r, "capacity.max_context", _n)))


def _startup_line(r: dict[str, Any], zh: bool) -> str | None:
    boot = r.get("engine_startup")
    if not boot:
        return None
    said = " · ".join(safe(line) for line in boot["lines"])
    link = r.get("speed") or {}
    if link.get("collective_busbw_bytes_per_s"):  # the all-reduce bandwidth the speeds assumed
        said += f" · all-reduce: {link['collective_path']} {link['collective_busbw_bytes_per_s'] / 1e9:.0f} GB/s"
    return (f"{boot['engine']} 启动时将打印（规则 {boot['rules']}）：{said}" if zh else
            f"{boot['engine']} would print at start-up (rules {boot['rules']}): {said}")


def _render_verdict(c: Any, r: dict[str, Any], lang: Lang) -> None:
    zh = lang == "zh"
    line = _framework_line(r, lang)
    if line:
        say(c, f"[dim]{line}[/]")
    peaks = _peaks_line(r, zh)
    if peaks:
        say(c, peaks)
    say(c, _verdict_line(r, zh))
    for line in [_capacity_line(r, zh), _startup_line(r, zh), *_speed_lines(r, lang)]:
        if line:
            say(c, line)
    sources = _sources_line(r, zh)
    if sources:
        say(c, f"[dim]{sources}[/]")
    host = r.get("host", {})
    if host.get("cpu_ram") or host.get("nvme"):
        say(c, ("需要主机内存 {a} · NVMe {b}" if zh else "host RAM needed {a} · NVMe {b}")
                .format(a=fmt_gib(host["cpu_ram"]), b=fmt_gib(host["nvme"])))
    if "margin" in r:
        mg = r["margin"]
        ok = ("满足" if zh else "met") if mg["meets"] else ("不满足" if zh else "not met")
        say(c, ("在线服务 2 倍经验法则：需 {n}（{ok}）" if zh else "online-serving x2 rule: needs {n} ({ok})")
                .format(n=fmt_gib(mg["required_bytes"]), ok=ok))
    for key in ("card_note", "warnings"):
        values = r.get(key + ("_zh" if zh else ""))
        for v in ([values] if isinstance(values, str) else values or []):
            say(c, f"[yellow]![/] {safe(v)}", indent=2)
    fixes = r.get("suggestions_zh" if zh else "suggestions") or []
    if fixes:
        say(c, "可以这样放下：" if zh else "It would fit if you:")
        for f in fixes:
            say(c, f"  • {safe(f)}", indent=4)


def render_diffusion_estimate(r: dict[str, Any], lang: Lang) -> None:
    from gpuwise.cli.image_cmd import render_diffusion

    render_diffusion(r, lang)


def render_with_images(r: dict[str, Any], lang: Lang, explain: bool) -> None:
    """An LLM estimate, plus the image tokens of a vision-language model shown images."""
    render_estimate(r, lang, explain)
    if r.get("vision"):
        from rich.console import Console

        from gpuwise.cli.image_cmd import vision_line

        say(Console(highlight=False), safe(vision_line(r, lang)))  # wrapped by cells, like every line
