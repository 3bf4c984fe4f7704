"""The words on screen for `gpuwise verify`: the checks as a table, or, on a terminal too narrow
for the explanation beside the numbers, each check on one line with its explanation under it.

The checks carry their measured and expected values as numbers or short English words in a unit
("8 GPUs", "on", "idle"); in Chinese the unit and the common words are said in Chinese
(gpuwise.verify.words, shared with the Markdown and HTML reports; the JSON keeps them as they are)."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Lang, Text
from gpuwise.verify.words import value_words

__all__ = ["render", "value_words"]

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skipped": "dim",
         "incomplete": "bold magenta"}
# Where the evidence came from and how long the run was (raw.Evidence source and mode).
_HOW = {"fixture": Text("fixture", "样例数据"), "nvml": Text("nvml", "NVML 实测"),
        "nvidia-smi": Text("nvidia-smi", "nvidia-smi 数据"), "quick": Text("quick", "快速"),
        "full": Text("full", "完整"), "inventory": Text("inventory", "仅清单")}
# Below this many cells the explanation column wraps a sentence into a tall thin block.
MIN_DETAIL_CELLS = 32


def render(verdict: Any, lang: Lang) -> None:
    from rich.console import Console
    from rich.text import Text as RichText

    from gpuwise.cli.common import Column, dropped_note, fit_table, say
    from gpuwise.verify.checks import GROUPS, group_of
    from gpuwise.verify.report import STATUS_WORDS

    console = Console(highlight=False)
    ev = verdict.evidence
    names = " / ".join(sorted({g.name for g in ev.gpus}))
    how = ", ".join(_HOW.get(w, Text(w, w)).render(lang) for w in (ev.source, ev.mode))
    say(console, f"[bold]gpuwise verify[/] {_safe(ev.host)} - {len(ev.gpus)} x {_safe(names)}"
                 + (f"（{_safe(how.replace(', ', '，'))}）" if lang == "zh" else f" ({_safe(how)})"))
    checks = [c for group in GROUPS for c in verdict.checks if group_of(c.name) == group]
    columns = [Column(Text("Check", "检查项")), Column(Text("Status", "结果"), whole=True),
               Column(Text("Measured", "实测"), right=True), Column(Text("Expected", "期望"), keep=1, right=True),
               Column(Text("Detail", "说明"))]
    rows = [[c.name, RichText(STATUS_WORDS[c.status].render(lang), style=STYLE[c.status]),
             value_words(c.measured, c.unit, lang), value_words(c.expected, c.unit, lang), c.detail.render(lang)]
            for c in checks]
    # a table that fits the terminal: no check name cut mid-word (gpuwise.cli.common.fit_table)
    table, dropped = fit_table(console, columns, rows, lang)
    detail_width = table.columns[-1].width if hasattr(table, "columns") and table.columns else 0
    if dropped or (detail_width or 0) < MIN_DETAIL_CELLS:
        _render_lines(console, rows, lang)
    else:
        console.print(table)
        note = dropped_note(dropped, lang)
        if note is not None:
            console.print(note, style="dim", markup=False)
    counts = verdict.counts()
    summary = Text(f"{counts['fail']} failed, {counts['incomplete']} incomplete, {counts['warn']} warnings, "
                   f"{counts['pass']} passed, {counts['skipped']} skipped.",
                   f"{counts['fail']} 项失败，{counts['incomplete']} 项未完成，{counts['warn']} 项警告，"
                   f"{counts['pass']} 项通过，{counts['skipped']} 项跳过。")
    word = STATUS_WORDS[verdict.status].render(lang)
    say(console, f"[{STYLE[verdict.status]}]{word}[/]{'：' if lang == 'zh' else ': '}{summary.render(lang)}")


def _render_lines(console: Any, rows: list[list[Any]], lang: Lang) -> None:
    """One line a check (name, status, measured, expected), its explanation indented under it."""
    from rich.markup import escape

    from gpuwise.cli.common import say
    from gpuwise.cli.helpfmt import cells

    name_w = max(cells(str(r[0])) for r in rows)
    status_w = max(cells(r[1].plain) for r in rows)
    expect = "期望：" if lang == "zh" else "Expected: "  # the table's own header word
    for name, status, measured, expected, detail in rows:
        pad = " " * (name_w - cells(str(name)) + 2)
        spaces = " " * (status_w - cells(status.plain) + 2)
        opened, closed = ("（", "）") if lang == "zh" else (" (", ")")
        value = escape(measured) + ("" if expected == "-" else f"[dim]{opened}{expect}{escape(expected)}{closed}[/]")
        say(console, f"{escape(str(name))}{pad}[{status.style}]{escape(status.plain)}[/]{spaces}{value}",
            indent=name_w + status_w + 4)
        say(console, "    " + escape(detail), indent=4)


def _safe(text: object) -> str:
    from gpuwise.cli.common import safe

    return safe(text)
