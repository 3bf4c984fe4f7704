"""`--help` that fits the terminal in both languages.

Click wraps help text by character count, so a line holding Chinese (two cells a character)
runs past the edge, and it never breaks between two Chinese characters. This formatter wraps
by terminal cells and breaks between CJK characters as well as at spaces; the layout is
otherwise Click's own (a long flag gets its own line, never a cut name).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# A CJK character is a token of its own (with the punctuation that may not start or end a line
# stuck to it); any other run of non-space characters is a word.
_CJK = "\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef"
_OPEN = "（「『【《“‘"
_CLOSE = "。，、；：！？）」』】》”’,.;:!?)"  # ASCII ones too: "关, packing" never starts a line with ","
# A short bracketed tag without spaces ('[默认：auto]', '[必填]') is one piece: never '[' / '必填]'.
_TOKEN = re.compile(f"\\[[^\\]\\s]{{1,24}}\\][{_CLOSE}]*|"
                    f"[{_OPEN}]*(?![{_OPEN}{_CLOSE}])[{_CJK}][{_CLOSE}]*|[{_OPEN}]*[^\\s{_CJK}]+[{_CLOSE}]*")
_HAS_CJK = re.compile(f"[{_CJK}]")


def cells(text: str) -> int:
    """Terminal cells: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def has_cjk(text: str) -> bool:
    return _HAS_CJK.search(text) is not None


def longest_token(text: str) -> int:
    """Cells of the widest piece a line may not break inside: a word, or a CJK character with the
    punctuation stuck to it."""
    return max((cells(m.group()) for m in _TOKEN.finditer(text)), default=0)


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """Greedy wrap of one paragraph by cells; `first`/`rest` are the line prefixes."""
    lines: list[str] = []
    line, used = first, cells(first)
    empty = True
    for match in _TOKEN.finditer(text):
        token = match.group()
        gap = (not empty and match.start() > 0 and text[match.start() - 1].isspace())
        sep = " " if gap else ""
        need = cells(sep) + cells(token)
        if not empty and used + need > width:
            lines.append(line.rstrip())
            line, used, sep = rest, cells(rest), ""
        line += sep + token
        used += cells(sep) + cells(token)
        empty = False
    lines.append(line.rstrip())
    return lines


def line_spans(text: str, width: int, indent: int = 0) -> list[tuple[int, int]]:
    """Where one line of text breaks at `width` cells: (start, end) of each line, the spaces at a
    break left out; lines after the first are `indent` cells narrower."""
    spans: list[tuple[int, int]] = []
    lead = len(text) - len(text.lstrip())  # the first line keeps its own indentation
    start, end = (0, lead) if lead else (-1, -1)
    used, room = cells(text[:lead]), width
    for match in _TOKEN.finditer(text):
        gap = 0 if start < 0 or match.start() == end else cells(text[end:match.start()])
        need = cells(match.group())
        if start >= 0 and used + gap + need > room:
            spans.append((start, end))
            start, used, room = -1, 0, max(width - indent, 1)
            gap = 0
        if start < 0:
            start = match.start()
        used += gap + need
        end = match.end()
    spans.append((max(start, 0), max(end, 0)))
    return spans


def wrap_paragraphs(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """Paragraphs (blank-line separated) wrapped one by one, a blank line between them."""
    out: list[str] = []
    for n, para in enumerate(p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()):
        if n:
            out.append("")
        out += wrap(" ".join(para.split()), width, first if n == 0 else rest, rest)
    return out


# The language of help pages: set once by the command line (gpuwise.cli.app.run) from --lang
# or the locale. A help page in Chinese shows the Chinese of option help written in English
# only (help_zh.HELP_ZH), each command's Chinese summary in a command list, and Click's
# headings in Chinese; help written in both languages inline shows its Chinese only (the whole
# of it from help_zh.INLINE_ZH where the inline Chinese is a shorter gloss).
_LANG: list[str] = ["en"]
SUMMARY_ZH: dict[str, str] = {}  # a command's English summary -> its Chinese one


def set_help_lang(lang: str) -> None:
    _LANG[0] = lang


def zh_part(text: str) -> str | None:
    """The Chinese sentences a bilingual help text ends with ('Serve the web page. 启动网页。' ->
    '启动网页。'), from the start of the sentence holding its first Chinese character."""
    first = _HAS_CJK.search(text)
    if first is None:
        return None
    start = max(text.rfind(". ", 0, first.start()) + 2, text.rfind("\n", 0, first.start()) + 1, 0)
    return text[start:].strip() or None


def in_chinese(text: str) -> str:
    """A help text on a Chinese page: written in both languages inline, its whole Chinese
    (help_zh.INLINE_ZH by its English half, else its Chinese half); else as it is."""
    from gpuwise.cli.help_zh import INLINE_ZH

    zh = zh_part(text)
    if zh is None:
        return text
    english = text[:len(text.rstrip()) - len(zh)].strip()
    return INLINE_ZH.get(" ".join(english.split()), zh)


def _in_lang(desc: str) -> str:
    """An option's or command's help in the help page's language."""
    if _LANG[0] != "zh":
        return desc
    from gpuwise.cli.help_zh import EXTRA_ZH, HELP_ZH

    # Typer writes the help, two spaces, then its extras: '[default: 1]', '[required]'
    base, sep, extra = ("", "", desc) if desc.startswith("[") else desc.partition("  [")
    extra = sep.strip() + extra if sep else extra
    for en, zh in EXTRA_ZH:
        extra = extra.replace(en, zh)
    if not has_cjk(base):
        base = HELP_ZH.get(base, SUMMARY_ZH.get(base, base))
    else:  # help written in both languages: its Chinese only
        base = in_chinese(base)
    return f"{base}  {extra}".strip() if extra else base


def _write_heading(self: Any, heading: str) -> None:
    from gpuwise.cli.help_zh import HEADINGS_ZH

    word = HEADINGS_ZH.get(heading, heading) if _LANG[0] == "zh" else heading
    self.write(f"{'':>{self.current_indent}}{word}{'：' if _LANG[0] == 'zh' else ':'}\n")


def _write_usage(self: Any, prog: str, args: str = "", prefix: str | None = None) -> None:
    base: Any = type(self).__mro__[1]  # the formatter class CellFormatter extends
    base.write_usage(self, prog, args, prefix if prefix is not None or _LANG[0] != "zh" else "用法：")


def _write_text(self: Any, text: str) -> None:
    indent = " " * self.current_indent
    if _LANG[0] == "zh":
        text = in_chinese(text)
    self.write("\n".join(wrap_paragraphs(text, self.width, indent, indent)) + "\n")


def _write_dl(self: Any, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
    rows = list(rows)
    first_col = min(max((cells(r[0]) for r in rows), default=0), col_max) + col_spacing
    for term, desc in rows:
        self.write(f"{'':>{self.current_indent}}{term}")
        if not desc:
            self.write("\n")
            continue
        if cells(term) <= first_col - col_spacing:
            self.write(" " * (first_col - cells(term)))
        else:
            self.write("\n" + " " * (first_col + self.current_indent))
        pad = " " * (first_col + self.current_indent)
        lines = wrap_paragraphs(_in_lang(desc), max(self.width - first_col - self.current_indent, 10))
        self.write("\n".join([lines[0], *(pad + line if line else "" for line in lines[1:])]) + "\n")


def context_class(base: type[Any]) -> type[Any]:
    """A subclass of Click's (or Typer's vendored Click's) Context whose help wraps by cells.
    Built with type(): the base is whichever Click the running Typer uses."""
    formatter = type("CellFormatter", (base.formatter_class,), {
        "write_text": _write_text, "write_dl": _write_dl, "write_heading": _write_heading,
        "write_usage": _write_usage})
    return type("CellContext", (base,), {"formatter_class": formatter})


def use_cell_help(command: Any) -> None:
    """Give a built Click command tree (the root and every subcommand) the cell-wrapping help."""
    command.context_class = context_class(type(command).context_class)
    for sub in getattr(command, "commands", {}).values():
        use_cell_help(sub)
