"""The fleet report's words, shared by the terminal table and the HTML page."""

from __future__ import annotations

from gpuwise.fleet.judge import Cell, FleetReport
from gpuwise.i18n import Lang, Text

__all__ = ["CELL_WORDS", "cell_ratio", "cell_value", "summary"]

CELL_WORDS: dict[str, Text] = {
    "ok": Text("ok", "正常"), "suspect": Text("SUSPECT", "可疑"),
    "not_measured": Text("not measured", "未测"), "no_fleet": Text("too few nodes", "节点太少"),
}


def cell_value(c: Cell) -> str:
    if c.value is None:
        return "-"
    return f"{c.value:,.1f}"


def cell_ratio(c: Cell) -> str:
    return "-" if c.ratio is None else f"{c.ratio - 1:+.1%}"


def summary(r: FleetReport, lang: Lang) -> str:
    n, bad, sus = len(r.nodes), r.failed, r.suspects
    text = Text(f"{n} nodes in {len(r.groups)} group(s): {len(bad)} failed their own acceptance, "
                f"{len(sus)} suspect (over {r.suspect_below:.0%} below the fleet median)",
                f"{n} 个节点，{len(r.groups)} 组：{len(bad)} 个未通过自身验收，{len(sus)} 个可疑"
                f"（比机群中位数低 {r.suspect_below:.0%} 以上）")
    names = dict.fromkeys(bad + sus)
    if lang == "zh":
        return text.render(lang) + (f"：{'、'.join(names)}。" if names else "。")
    return text.render(lang) + (f": {', '.join(names)}." if names else ".")
