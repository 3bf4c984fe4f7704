"""Verify reports as Markdown or self-contained HTML (inline CSS, no external assets)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from gpuwise.errors import InputError
from gpuwise.i18n import Lang, Text
from gpuwise.verify.checks import GROUPS, CheckResult, group_of
from gpuwise.verify.judge import Verdict
from gpuwise.verify.nvml import is_na
from gpuwise.verify.words import fmt_value, value_words

__all__ = ["STATUS_WORDS", "fmt_value", "render_html", "render_markdown", "write_report"]

STATUS_WORDS: dict[str, Text] = {
    "pass": Text("PASS", "通过"), "warn": Text("WARN", "警告"),
    "fail": Text("FAIL", "失败"), "skipped": Text("SKIPPED", "跳过"),
    "incomplete": Text("INCOMPLETE", "未完成"),
}
_HEAD = {
    "check": Text("Check", "检查项"), "status": Text("Status", "结果"),
    "measured": Text("Measured", "实测"), "expected": Text("Expected", "期望"),
    "detail": Text("Detail", "说明"),
}


def _title(v: Verdict, lang: Lang) -> str:
    return Text("gpuwise verify: acceptance report", "gpuwise verify：验收报告").render(lang)


def _facts(v: Verdict, lang: Lang) -> list[tuple[str, str]]:
    ev = v.evidence
    names = sorted({g.name for g in ev.gpus})
    card = v.card_id or "?"
    card += "" if v.card_claimed else Text(" (recognised)", "（自动识别）").render(lang)
    rows = [
        (Text("Result", "结论"), STATUS_WORDS[v.status].render(lang)),
        (Text("Host", "主机"), ev.host), (Text("Collected", "采集时间"), ev.collected_at),
        (Text("Source / mode", "来源 / 模式"), f"{ev.source} / {ev.mode}"),
        (Text("GPUs", "GPU"), f"{len(ev.gpus)} x {' / '.join(names)}"),
        (Text("Card", "型号"), card),
        (Text("Driver / CUDA", "驱动 / CUDA"),
         f"{_plain(ev.driver_version)} / {_plain(ev.cuda_driver_version)}"),
    ]
    return [(k.render(lang), str(val)) for k, val in rows]


def _plain(value: Any) -> str:
    return "n/a" if is_na(value) else str(value)


def _grouped(v: Verdict) -> list[tuple[str, list[CheckResult]]]:
    return [(g, [c for c in v.checks if group_of(c.name) == g]) for g in GROUPS
            if any(group_of(c.name) == g for c in v.checks)]


def _sweep_rows(v: Verdict) -> list[tuple[str, str, str]]:
    run = v.evidence.allreduce
    if is_na(run):
        return []
    return [(f"{p.size_bytes / 2**20:g} MiB", f"{p.algbw_bytes_per_s / 1e9:.1f}",
             f"{p.busbw_bytes_per_s / 1e9:.1f}") for p in run.points]


def render_markdown(v: Verdict, lang: Lang = "en") -> str:
    out = [f"# {_title(v, lang)}", ""]
    out += [f"- **{k}**: {val}" for k, val in _facts(v, lang)]
    cols = [_HEAD[k].render(lang) for k in ("check", "status", "measured", "expected", "detail")]
    for group, checks in _grouped(v):
        out += ["", f"## {GROUPS[group].render(lang)}", "", "| " + " | ".join(cols) + " |",
                "|" + "---|" * len(cols)]
        for c in checks:
            cells = [c.name, STATUS_WORDS[c.status].render(lang), value_words(c.measured, c.unit, lang),
                     value_words(c.expected, c.unit, lang), c.detail.render(lang)]
            out.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    topo = v.evidence.topology
    if not is_na(topo):
        out += ["", "## " + Text("Topology (nvidia-smi topo -m)", "拓扑（nvidia-smi topo -m）").render(lang),
                "", "```", _topo_text(topo), "```"]
    sweep = _sweep_rows(v)
    if sweep:
        out += ["", "## " + Text("All-reduce sweep", "All-reduce 扫描").render(lang), "",
                "| size | algbw GB/s | busbw GB/s |", "|---|---|---|"]
        out += [f"| {a} | {b} | {c} |" for a, b, c in sweep]
    out += ["", Text("Bandwidths in GB/s (1e9 bytes/s); device copy counts read + write. "
                     "Thresholds: src/gpuwise/data/acceptance.toml.",
                     "带宽单位 GB/s（1e9 字节/秒）；显存拷贝按读+写计数。阈值见 "
                     "src/gpuwise/data/acceptance.toml。").render(lang), ""]
    return "\n".join(out)


def _topo_text(topo: Any) -> str:
    n = len(topo)
    lines = ["      " + "".join(f"GPU{j:<4}" for j in range(n))]
    lines += [f"GPU{i:<3}" + "".join(f"{c!s:<7}" for c in row) for i, row in enumerate(topo)]
    return "\n".join(lines)


_CSS = """body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.3rem .6rem;
text-align:left;vertical-align:top}th{background:#f4f4f4}.pass{color:#1a7f37;font-weight:600}
.warn{color:#9a6700;font-weight:600}.fail{color:#cf222e;font-weight:700}.skipped{color:#666}
.incomplete{color:#8250df;font-weight:700}
pre{background:#f6f8fa;padding:.6rem}"""


def render_html(v: Verdict, lang: Lang = "en") -> str:
    e = html.escape
    parts = [f"<!doctype html><html lang=\"{lang}\"><head><meta charset=\"utf-8\">",
             f"<title>{e(_title(v, lang))}</title><style>{_CSS}</style></head><body>",
             f"<h1>{e(_title(v, lang))}</h1><table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(val)}</td></tr>" for k, val in _facts(v, lang)]
    parts.append("</table>")
    heads = "".join(f"<th>{e(_HEAD[k].render(lang))}</th>"
                    for k in ("check", "status", "measured", "expected", "detail"))
    for group, checks in _grouped(v):
        parts.append(f"<h2>{e(GROUPS[group].render(lang))}</h2><table><tr>{heads}</tr>")
        for c in checks:
            parts.append(
                f"<tr><td>{e(c.name)}</td><td class=\"{c.status}\">"
                f"{e(STATUS_WORDS[c.status].render(lang))}</td><td>{e(value_words(c.measured, c.unit, lang))}"
                f"</td><td>{e(value_words(c.expected, c.unit, lang))}</td><td>{e(c.detail.render(lang))}</td></tr>")
        parts.append("</table>")
    topo = v.evidence.topology
    if not is_na(topo):
        parts.append(f"<h2>{e(Text('Topology', '拓扑').render(lang))}</h2><pre>{e(_topo_text(topo))}</pre>")
    sweep = _sweep_rows(v)
    if sweep:
        parts.append("<h2>All-reduce</h2><table><tr><th>size</th><th>algbw GB/s</th><th>busbw GB/s</th></tr>")
        parts += [f"<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td></tr>" for a, b, c in sweep]
        parts.append("</table>")
    parts += _window_html(v, lang) + _raw_html(v, lang)
    parts.append("</body></html>\n")
    return "".join(parts)


def window_rows(v: Verdict) -> list[tuple[str, ...]]:
    """Per GPU: seconds loaded, median SM clock, median/max power, max temperature, lowest link,
    burst and sustained bf16 TFLOPS (the sustained window, every GPU loaded together)."""
    load = v.evidence.load
    if is_na(load):
        return []

    def cell(value: Any, scale: float = 1.0, digits: int = 0) -> str:
        return "-" if value is None or is_na(value) else f"{float(value) / scale:.{digits}f}"

    return [(f"GPU{s.index}", cell(s.seconds), cell(s.sm_clock_median_mhz), cell(s.power_median_w),
             cell(s.power_max_w), cell(s.temperature_max_c),
             "-" if is_na(s.pcie_gen_min) else f"Gen{s.pcie_gen_min} x{s.pcie_width_min}",
             cell(s.burst_flops_per_s, 1e12), cell(s.sustained_flops_per_s, 1e12)) for s in load]


_WINDOW_HEAD = ("GPU", "s", "SM MHz (median)", "W (median)", "W (max)", "C (max)", "PCIe (min)",
                "burst TFLOPS", "sustained TFLOPS")


def _window_html(v: Verdict, lang: Lang) -> list[str]:
    e = html.escape
    rows = window_rows(v)
    if not rows:
        return []
    out = [f"<h2>{e(Text('Sustained window', '持续负载窗口').render(lang))}</h2><table><tr>"
           + "".join(f"<th>{e(h)}</th>" for h in _WINDOW_HEAD) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</table>")
    return out


def _raw_html(v: Verdict, lang: Lang) -> list[str]:
    e = html.escape
    ev = v.evidence
    out = []
    raw = ev.raw_outputs
    if not is_na(raw):
        out.append(f"<h2>{e(Text('Raw tool outputs', '原始工具输出').render(lang))}</h2>")
        out += [f"<details><summary>{e(name)}</summary><pre>{e(text)}</pre></details>"
                for name, text in sorted(raw.items())]
    integrity = "collected here" if is_na(ev.integrity) else str(ev.integrity)
    out.append(f"<p>{e(Text('Evidence integrity', '证据完整性').render(lang))}: {e(integrity)}</p>")
    return out


def write_report(v: Verdict, path: str | Path, lang: Lang = "en") -> bool:
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".md", ".markdown"):
        text = render_markdown(v, lang)
    elif suffix in (".html", ".htm"):
        text = render_html(v, lang)
    else:
        raise InputError(Text(f"Report file '{p}' must end in .md or .html.",
                              f"报告文件“{p}”的扩展名必须是 .md 或 .html。"))
    from gpuwise.safefile import write_output

    return write_output(p, text, replace=True)  # whole, never through a link; True when it replaced one
