"""Rendering of diffusion (image / video) estimates and plans, and the shell words of their fixes.
`gpuwise estimate` and `gpuwise plan` call these when the model is a diffusion pipeline."""

from __future__ import annotations

from typing import Any

from gpuwise.cli.common import Column, dropped_note, fit_table, fmt_gib, money, per_hour, reasons_of, safe, say
from gpuwise.i18n import Lang, Text
from gpuwise.units import GiB

_NAMES = {"text_encoding": ("text encoding", "文本编码"), "activations": ("denoiser activations", "去噪激活"),
          "vae_decode": ("VAE decode", "VAE 解码"), "runtime": ("CUDA context + workspaces", "CUDA 上下文与工作区")}
_OS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}
_PHASES = {"encode": ("text encoding", "文本编码"), "denoise": ("denoising", "去噪"),
           "decode": ("VAE decode", "VAE 解码")}


def fix_words(changes: list[dict[str, str]]) -> str:
    """A fix as the flags that make it: `--offload model --weights fp8`."""
    out = []
    for ch in changes:
        action, value = ch["action"], ch["value"]
        if action in ("vae_tiling", "te_cpu"):
            out.append("--" + action.replace("_", "-"))
        elif action == "runtime":
            out.append("--runtime comfyui --offload lowvram")
        else:
            out.append(f"--{action.replace('_', '-')} {value}")
    return " ".join(out)


def _offload(mode: str, lang: Lang) -> str:
    from gpuwise.diffusion.job import OFFLOAD_WORDS

    words = OFFLOAD_WORDS.get(mode)
    return words.render(lang) if words is not None else mode


def _secs(v: float) -> str:
    return f"{v:,.1f} s" if v < 600 else f"{v / 60:,.1f} min"


def render_diffusion(r: dict[str, Any], lang: Lang) -> None:
    """A diffusion estimate: the title, the memory table (fit to the terminal, Chinese wrapped
    between characters), then the verdict, speed, cost, notes and fixes, each wrapped by cells."""
    from rich.console import Console

    zh = lang == "zh"
    c = Console(highlight=False)
    j, m = r["job"], r["memory"]
    size = f"{j['width']}x{j['height']}" + (f"x{j['frames']}f" if j["frames"] > 1 else "")
    steps = f"{j['steps']} 步" if zh else f"{j['steps']} steps"
    title = f"{r['model']['name']} · {r['card_name']} · {size} · {steps} · {_offload(j['offload'], lang)}"
    peak = _PHASES[m["peak_phase"]]
    say(c, f"[bold]{safe(title)}[/]" + (f"（峰值阶段：{peak[1]}）" if zh else f" (peak: {peak[0]})"))
    columns = [Column(Text("component", "项目")), Column(Text("memory", "显存"), right=True, whole=True),
               Column(Text("why", "依据"), keep=1)]
    rows: list[list[Any]] = []
    for item in m["items"]:
        label = _NAMES.get(item["name"], (item["name"], item["name"]))[1 if zh else 0]
        rows.append([label, fmt_gib(item["bytes"]), item["why_zh" if zh else "why"]])
    rows.append(["合计（需要）" if zh else "required", fmt_gib(m["required"]), ""])
    rows.append(["可用" if zh else "usable", fmt_gib(r["usable_bytes"]), _OS.get(r["os"], str(r["os"]))])
    table, dropped = fit_table(c, columns, rows, lang)
    c.print(table)
    note = dropped_note(dropped, lang)
    if note:
        say(c, f"[dim]{safe(note)}[/]")
    _diffusion_lines(c, r, lang)


def _diffusion_lines(c: Any, r: dict[str, Any], lang: Lang) -> None:
    zh, m, sp = lang == "zh", r["memory"], r["speed"]
    phases = " · ".join(f"{_PHASES[k][1 if zh else 0]} {fmt_gib(v)}" for k, v in m["phases"].items())
    say(c, ("各阶段：" if zh else "phases: ") + phases)
    if m.get("reserved_peak", 0) > m.get("allocated_peak", 0):
        say(c, f"PyTorch 缓存分配器峰值约 {fmt_gib(m['reserved_peak'])}（张量 {fmt_gib(m['allocated_peak'])}；"
               "显存充裕时 nvidia-smi 还会多显示这部分缓存，紧张时它会先释放缓存再重试）" if zh else
               f"allocator pool at the peak ~{fmt_gib(m['reserved_peak'])} (tensors {fmt_gib(m['allocated_peak'])}; "
               "nvidia-smi shows the cache too while memory is plentiful, PyTorch frees it before an OOM)")
    head = r["headroom_bytes"]
    say(c, (f"[bold green]{'放得下' if zh else 'FITS'}[/] — {'余量' if zh else 'headroom'} {fmt_gib(head)}")
        if r["fits"] else (f"[bold red]{'放不下' if zh else 'DOES NOT FIT'}[/] — "
                           f"{'还差' if zh else 'short by'} {fmt_gib(-head)}"))
    per = "每个视频" if zh and r["task"] == "video" else "每张图" if zh else f"per {r['task']}"
    say(c, f"{per} {_secs(sp['seconds_per_output'])} · " + (
        f"每步 {sp['step_s']:,.2f} s · 文本编码 {sp['text_encoders_s']:,.2f} s · VAE 解码 {sp['vae_decode_s']:,.2f} s"
        f" · 卸载传输 {sp['offload_transfer_s']:,.1f} s · 去噪约 {sp['achieved_tflops']:,.0f} TFLOPS" if zh else
        f"step {sp['step_s']:,.2f} s · text encoders {sp['text_encoders_s']:,.2f} s · VAE decode "
        f"{sp['vae_decode_s']:,.2f} s · offload transfers {sp['offload_transfer_s']:,.1f} s · denoiser at "
        f"{sp['achieved_tflops']:,.0f} TFLOPS"))
    cost = r.get("cost")
    if cost and cost.get("per_output") is not None:
        cur = cost["currency"]
        source = (f"（{safe(cost['provider'])}，{safe(cost['as_of'])}）" if zh else
                  f" ({safe(cost['provider'])}, {safe(cost['as_of'])})")
        say(c, f"{cost['per_hour']:,.2f} {per_hour(cur, lang)} · {per} {cost['per_output']:,.4f} "
               f"{money(cur, lang)}{source}")
    if m.get("host_ram"):
        say(c, ("需要主机内存 " if zh else "host RAM needed ") + fmt_gib(m["host_ram"]))
    if r.get("failure"):
        say(c, "[yellow]![/] " + safe(r["failure_zh" if zh else "failure"]), indent=2)
    for note in r.get("notes_zh" if zh else "notes", []) + ([r["card_note_zh" if zh else "card_note"]]
                                                            if r.get("card_note") else []):
        say(c, "[dim]" + safe(note) + "[/]")
    if r["fixes"]:
        say(c, "可以这样放下（按速度排序）：" if zh else "It would fit with (fastest first):")
        for f in r["fixes"]:
            sep = "，" if zh else ", "
            say(c, f"  • {safe(fix_words(f['changes']))} → {fmt_gib(f['required_bytes'])}{sep}"
                   f"{_secs(f['seconds_per_output'])}", indent=4)


def render_diffusion_plan(r: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console

    zh = lang == "zh"
    c = Console(highlight=False)
    j = r["job"]
    size = f"{j['width']}x{j['height']}" + (f"x{j['frames']}f" if j["frames"] > 1 else "")
    steps = f"{j['steps']} 步" if zh else f"{j['steps']} steps"
    target = f" · ≤ {r['max_seconds']:,.3g} s" if r.get("max_seconds") else ""
    ranked = ("方案排名（按" + ("成本" if r["objective"] == "cost" else "速度") + "）" if zh else
              f"ranked by {r['objective']}")
    title = f"{r['model']} · {size} · {steps}{target} · {ranked}"
    if r["plans"]:
        columns = [Column(Text("#", "#")), Column(Text("card", "显卡")), Column(Text("weights", "权重")),
                   Column(Text("offload", "卸载"), keep=2), Column(Text("memory GiB", "显存 GiB"), right=True),
                   Column(Text("per output", "每个输出"), right=True),
                   Column(Text("cost / output", "每个输出成本"), right=True, keep=1)]
        rows = []
        for i, p in enumerate(r["plans"], 1):
            cost, per = p.get("cost") or {}, p.get("per_output_cost")
            offload = _offload(p["job"]["offload"], lang)
            tiling = ("，VAE 分块" if zh else " + VAE tiling") if p["job"]["vae_tiling"] else ""
            rows.append([str(i), p["card_name"], p["job"]["weights"], offload + tiling,
                         f"{p['memory']['required'] / GiB:,.1f} / {p['usable_bytes'] / GiB:,.1f}",
                         _secs(p["speed"]["seconds_per_output"]),
                         f"{per:,.4f} {money(cost.get('currency', ''), lang)}" if per is not None else "–"])
        table, dropped = fit_table(c, columns, rows, lang, title=title)
        c.print(table)
        note = dropped_note(dropped, lang)
        if note:
            say(c, f"[dim]{safe(note)}[/]")
    else:  # said first, not an empty table: the reasons below are why
        say(c, f"[bold]{safe(title)}[/]")
        say(c, "[red]" + ("没有满足条件的方案。" if zh else "No plan meets the constraints.") + "[/]")
    for p in r["plans"][:1]:
        say(c, "[bold]" + ("理由：" if zh else "why: ") + "[/]" + safe(reasons_of(p, zh)))
        c.print("[bold]diffusers:[/]")
        c.print(p["exports"]["diffusers"], markup=False, highlight=False)
        say(c, "[bold]ComfyUI:[/] " + safe(p["exports"]["comfyui"]))
    if r["rejected"]:
        say(c, "[bold]" + ("落选原因：" if zh else "why not:") + "[/]")
        for x in r["rejected"]:
            say(c, f"  {safe(x['card'])}: " + safe(reasons_of(x, zh)), indent=4)


def render_diffusion_model(s: dict[str, Any], lang: Lang) -> None:
    """`gpuwise model` for a diffusion pipeline: each component with its class and count."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    zh = lang == "zh"
    c = Console(highlight=False)
    roles = {"text_encoder": ("text encoder", "文本编码器"), "denoiser": ("denoiser", "去噪模型"),
             "vae": ("VAE", "VAE")}
    t = Table(title=escape(f"{s['name']} ({s['task']}, {s['cfg']} guidance)"))
    for en, zh_head in (("component", "组件"), ("class", "类"), ("role", "作用")):
        t.add_column(zh_head if zh else en)
    t.add_column("参数量" if zh else "params", justify="right")
    for comp in s["components"]:
        approx = " ≈" if comp["approximate"] else ""
        t.add_row(comp["name"], comp["class"], roles[comp["role"]][1 if zh else 0], f"{comp['params']:,}{approx}")
    t.add_row("[bold]" + ("合计" if zh else "total") + "[/]", "", "", f"[bold]{s['params_total']:,}[/]")
    c.print(t)
    for p in s["published"]:
        kind = ("精确" if zh else "exact") if p["exact"] else ("名义" if zh else "nominal")
        c.print(f"[dim]{'公开' if zh else 'published'} {p['component']}: {p['params']:,} ({kind}) — "
                f"{escape(p['source'])}[/]")
    for note in s.get("notes_zh" if zh else "notes", []):
        c.print("[yellow]![/] " + escape(note))


def vision_line(r: dict[str, Any], lang: Lang) -> str | None:
    """A vision-language estimate's image tokens: '1 image 1280x720 -> 728x1288, 1,198 tokens ...'."""
    v = r.get("vision")
    if not v:
        return None
    zh = lang == "zh"
    size = f"{v['resized_width']}x{v['resized_height']}"
    return ((f"图像：{v['images']} 张，缩放到 {size}，共 {v['image_tokens']:,} 个 token"
             f"（上下文 {v['text_context']:,} → "
             f"{v['context_with_images']:,}）· 视觉编码 {v['encoder_s'] * 1e3:,.0f} ms") if zh else
            (f"images: {v['images']} resized to {size}, {v['image_tokens']:,} tokens (context {v['text_context']:,} -> "
             f"{v['context_with_images']:,}) · vision encoder {v['encoder_s'] * 1e3:,.0f} ms"))
