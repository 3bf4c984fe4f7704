"""The fleet report as one self-contained HTML page (inline CSS, no external assets)."""

from __future__ import annotations

import html

from gpuwise.fleet.judge import FleetGroup, FleetReport
from gpuwise.fleet.words import CELL_WORDS, cell_ratio, cell_value, summary
from gpuwise.i18n import Lang, Text

__all__ = ["render_fleet_html"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.3rem .6rem;
text-align:left}th{background:#f4f4f4}.ok{color:#1a7f37}.suspect{color:#cf222e;font-weight:700}
.pass{color:#1a7f37}.warn{color:#9a6700}.fail{color:#cf222e;font-weight:700}.not_measured,.no_fleet{color:#666}"""


def _group(g: FleetGroup, lang: Lang) -> list[str]:
    e = html.escape
    out = [f"<h2>{e(g.key)}</h2>"]
    out += [f"<p>{e(n.render(lang))}</p>" for n in g.notes]
    status_head = Text("Own acceptance", "自身验收").render(lang)
    out.append(f"<table><tr><th>{e(Text('Node', '节点').render(lang))}</th><th>{e(status_head)}</th></tr>")
    out += [f"<tr><td>{e(n.host)}</td><td class=\"{e(n.status)}\">{e(n.status)}</td></tr>" for n in g.nodes]
    out.append("</table>")
    heads = (Text("Node", "节点"), Text("Value", "数值"), Text("vs median", "相对中位数"), Text("Fleet", "机群"))
    for t in g.tables:
        median = "-" if t.median is None else f"{t.median:,.1f}"
        out.append(f"<h3>{e(t.metric.label.render(lang))} ({e(t.metric.unit)}), "
                   f"{e(Text('median', '中位数').render(lang))} {e(median)}</h3><table><tr>"
                   + "".join(f"<th>{e(h.render(lang))}</th>" for h in heads) + "</tr>")
        for c in t.cells:
            out.append(f"<tr><td>{e(c.host)}</td><td>{e(cell_value(c))}</td><td>{e(cell_ratio(c))}</td>"
                       f"<td class=\"{c.status}\">{e(CELL_WORDS[c.status].render(lang))}</td></tr>")
        out.append("</table>")
    return out


def render_fleet_html(r: FleetReport, lang: Lang = "en") -> str:
    e = html.escape
    title = Text("gpuwise fleet report", "gpuwise 机群验收报告").render(lang)
    head = (f"<!doctype html><html lang=\"{lang}\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1><p>{e(summary(r, lang))}</p>")
    parts = [head]
    parts += [f"<p>{e(n.render(lang))}</p>" for n in r.notes]
    for g in r.groups:
        parts += _group(g, lang)
    parts.append("</body></html>\n")
    return "".join(parts)
