"""What every command shares: --json, --lang, error handling and number formatting."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang, Text, pick_lang
from gpuwise.jsonable import dumps
from gpuwise.textsafe import printable

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (stable schema).")]
LangOpt = Annotated[
    str | None,
    typer.Option("--lang", help="Language of human output: zh or en (default: from the locale)."),
]


# A --lang given before the command (`gpuwise --lang zh plan ...`, `gpuwise fleet --lang zh ...`):
# the language of a command that has no --lang of its own; cli.app.run clears it for each run.
DEFAULT_LANG: list[str | None] = [None]


def set_default_lang(flag: str | None) -> None:
    """The root's and groups' --lang: checked now, used by every command that has none of its own."""
    if flag is not None:
        lang_of(flag)
        DEFAULT_LANG[0] = flag


def lang_of(flag: str | None, json_out: bool = False) -> Lang:
    flag = flag if flag is not None else DEFAULT_LANG[0]
    if flag is not None and flag.lower() not in ("zh", "en", "zh-cn", "zh_cn", "cn"):
        # worded in the locale's language (GPUWISE_LANG, LANG...): the flag that was to choose it is the typo
        fail(GpuwiseError(Text(f"Unknown language '{flag}': use zh or en.",
                               f"未知语言“{flag}”：请用 zh 或 en。")), json_out=json_out, lang=pick_lang(None))
    return pick_lang(flag)


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj, indent=2) + "\n")  # strict JSON: never NaN or Infinity


def fail(err: GpuwiseError, *, json_out: bool, lang: Lang) -> NoReturn:
    """Report a user error: JSON on stdout with --json, else a message on stderr; exit non-zero."""
    raise typer.Exit(report(err, json_out=json_out, lang=lang))


def report(err: GpuwiseError, *, json_out: bool, lang: Lang) -> int:
    """Print a user error (JSON on stdout with --json, else a message on stderr); its exit status."""
    if json_out:
        print_json(err.to_dict())
    else:
        from rich.console import Console
        from rich.markup import escape

        console = Console(stderr=True, highlight=False)
        label = "[bold red]错误：[/]" if lang == "zh" else "[bold red]error:[/] "
        # wrapped by cells, between Chinese characters too (Rich alone would break at spaces only)
        say(console, label + escape(printable(err.message.render(lang))))
        if err.hint is not None:
            say(console, escape(printable(err.hint.render(lang))))
    return err.exit_code


def run_command(json_out: bool, lang_flag: str | None,
                compute: Callable[[], Any], render: Callable[[Any, Lang], None]) -> None:
    """Compute, then print JSON or the human rendering; user errors never become tracebacks."""
    lang = lang_of(lang_flag, json_out)
    try:
        result = compute()
    except GpuwiseError as err:
        fail(err, json_out=json_out, lang=lang)
    if json_out:
        print_json(result)
    else:
        render(result, lang)


def run_command_with_status(json_out: bool, lang_flag: str | None, compute: Callable[[], Any],
                            render: Callable[[Any, Lang], None], status: Callable[[Any], int]) -> None:
    """`run_command`, then exit with `status(result)` when it is not 0 (e.g. `plan` when no plan
    meets the constraints: the answer is printed, and scripts see the failure)."""
    kept: list[Any] = []

    def keep() -> Any:
        kept.append(compute())
        return kept[0]

    run_command(json_out, lang_flag, keep, render)
    code = status(kept[0])
    if code:
        raise typer.Exit(code)


def fmt_gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / 2**30:,.{digits}f} GiB"


def fmt_count(n: float) -> str:
    """8030261248 -> '8.03 B'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:,.2f} {suffix}"
    return f"{n:,.0f}"


# ------------------------------------------------------------------ words and units for people

TASK_NAMES: dict[str, Text] = {
    "infer": Text("inference", "推理"), "full": Text("full fine-tune", "全参微调"),
    "lora": Text("LoRA fine-tune", "LoRA 微调"), "qlora": Text("QLoRA fine-tune", "QLoRA 微调"),
    "pretrain": Text("pre-training", "预训练"),
}


def task_name(task: str, lang: Lang) -> str:
    name = TASK_NAMES.get(task)
    return name.render(lang) if name is not None else task


def money(currency: str, lang: Lang) -> str:
    """'CNY' in English, '元' in Chinese (any other code as it is)."""
    from gpuwise.catalog.prices import currency_word

    return currency_word(currency, lang)


def per_hour(currency: str, lang: Lang) -> str:
    """'CNY/h' or '元/时'."""
    return f"{money(currency, lang)}/时" if lang == "zh" else f"{currency}/h"


def fmt_hours(hours: float, lang: Lang, band: dict[str, float] | None = None) -> str:
    """2.51 -> '2.5 h' / '2.5 小时'; minutes under an hour, days past 48 h; a band in the same unit."""
    zh = lang == "zh"
    scale, unit = ((1 / 24, "天" if zh else "days") if hours >= 48 else
                   (60.0, "分钟" if zh else "min") if hours < 1 else (1.0, "小时" if zh else "h"))
    digits = 0 if scale == 60.0 else 1
    shown = f"{hours * scale:,.{digits}f}"
    if band:
        shown += f" ({band['low'] * scale:,.{digits}f}-{band['high'] * scale:,.{digits}f})"
    return f"{shown} {unit}"


def on_off(value: object, lang: Lang) -> str:
    if not isinstance(value, bool):
        return str(value)
    return ("开" if value else "关") if lang == "zh" else ("on" if value else "off")


def safe(text: object) -> str:
    """Outside text (model names from files, hub ids) as Rich markup that prints it literally:
    `[link=...]` stays text and control characters never reach the terminal."""
    from rich.markup import escape

    return escape(printable(str(text)))


def reasons_of(row: dict[str, Any], zh: bool) -> str:
    """A plan row's reasons as one phrase: joined with ； in Chinese, "; " in English."""
    return ("；" if zh else "; ").join(row["reasons_zh" if zh else "reasons"])


def say(console: Any, markup: str, indent: int = 0) -> None:
    """Print one line of Rich markup wrapped by terminal cells, breaking between Chinese characters
    as well as at spaces (Rich breaks only at spaces, so a long Chinese phrase jumps whole to the
    next line and leaves a ragged gap). Styles survive the wrap; later lines are indented."""
    from rich.text import Text as RichText

    from gpuwise.cli.helpfmt import line_spans

    text = RichText.from_markup(markup)
    for n, (start, end) in enumerate(line_spans(text.plain, int(console.width), indent)):
        line = text[start:end]
        # only a word wider than the line itself (a long URL) is left for Rich to fold: cropping it
        # (no_wrap) would lose its end
        console.print(RichText(" " * indent) + line if n and indent else line, overflow="fold", soft_wrap=False)


# ------------------------------------------------------------------ tables that fit the terminal

@dataclass(frozen=True)
class Column:
    """One table column. `keep` 0 is never dropped; a narrow terminal drops the highest first."""

    head: Text
    keep: int = 0
    right: bool = False
    whole: bool = False  # its cells never wrap: lower-value columns go first to make room


def fit_table(console: Any, columns: Sequence[Column], rows: Sequence[Sequence[Any]], lang: Lang, *,
              title: str | None = None) -> tuple[Any, list[str]]:
    """A table that fits `console.width` without splitting a word.

    Each column needs at least its longest word and at most its longest cell. Low-value columns
    are dropped (highest `keep` first) until the minimums fit; the width left over goes to the
    columns in proportion to what they lack, and every width is fixed so Rich never squeezes a
    column below its longest word. Cells are plain text (never markup). Returns the table and the
    names of the dropped columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text as RichText

    from gpuwise.cli.helpfmt import cells as cell_width
    from gpuwise.cli.helpfmt import has_cjk, longest_token

    heads = [RichText(col.head.render(lang)) for col in columns]
    # a str is plain text (never markup); a rich Text (a styled status word) is kept as it is
    cells = [[cell if isinstance(cell, RichText) else RichText(printable(str(cell))) for cell in row]
             for row in rows]
    wide = console.options.update_width(100_000)
    lows, body, highs = [], [], []  # longest word; longest body cell; longest cell or header
    for i, head in enumerate(heads):
        at_head = head.__rich_measure__(console, wide)
        measured = [row[i].__rich_measure__(console, wide) for row in cells]
        # Chinese breaks between characters: its narrowest is its widest character with the
        # punctuation that sticks to it, not the whole run between two spaces (Rich's word)
        lows.append(max([at_head.minimum, *(longest_token(row[i].plain) if has_cjk(row[i].plain) else m.minimum
                                            for row, m in zip(cells, measured, strict=True))]))
        body.append(max([lows[i], *(m.maximum for m in measured)]))
        highs.append(max(body[i], at_head.maximum))
    shown = list(range(len(columns)))

    def room() -> int:  # the width the cells may use: separators and padding take 3 per column
        return int(console.width) - 3 * len(shown) + 1

    def need() -> int:
        return sum(body[i] if columns[i].whole else lows[i] for i in shown)

    while need() > room():
        droppable = [i for i in shown if columns[i].keep > 0]
        if not droppable:
            # still too wide with one word a line: one block per row instead of a table
            return _stacked(console, [columns[i].head.render(lang) for i in range(len(columns))], cells, title), []
        shown.remove(max(droppable, key=lambda i: (columns[i].keep, i)))
    widths = {i: body[i] if columns[i].whole and need() <= room() else lows[i] for i in shown}
    spare = max(0, room() - sum(widths.values()))
    for target in (body, highs):  # rows on one line first, then headers
        wanting = sorted(shown, key=lambda i: target[i] - widths[i])  # the cheapest to make whole first
        for n, i in enumerate(wanting):
            lack = max(0, target[i] - widths[i])
            if lack <= spare:
                widths[i], spare = widths[i] + lack, spare - lack
                continue
            rest = [j for j in wanting[n:] if target[j] > widths[j]]
            total = sum(target[j] - widths[j] for j in rest)
            shares = {j: spare * (target[j] - widths[j]) // total for j in rest}
            for j in rest:
                widths[j] += shares[j]
            widths[rest[-1]] += spare - sum(shares.values())  # the rounding remainder
            spare = 0
            break
    if title is not None:  # a title wider than the table would wrap inside it: widen the first column
        table_width = sum(widths.values()) + 3 * len(shown) - 1
        widths[shown[0]] += max(0, min(cell_width(printable(title)), int(console.width)) - table_width)
    table = Table(title=None if title is None else RichText(printable(title)),
                  box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, padding=(0, 1))
    for i in shown:
        table.add_column(heads[i], justify="right" if columns[i].right else "left",
                         width=widths[i], overflow="fold")
    for row in cells:
        table.add_row(*(_wrapped(row[i], widths[i]) for i in shown))
    dropped = [columns[i].head.render(lang) for i in range(len(columns)) if i not in shown]
    return table, dropped


def _wrapped(cell: Any, width: int) -> Any:
    """A cell holding Chinese broken into lines of `width` cells between characters as well as at
    spaces (Rich would move a whole run to the next line, then cut it anywhere)."""
    from rich.text import Text as RichText

    from gpuwise.cli.helpfmt import cells, has_cjk, line_spans

    plain = cell.plain
    if not has_cjk(plain) or cells(plain) <= width:
        return cell

    return RichText("\n").join(cell[start:end] for start, end in line_spans(plain, width))


def _stacked(console: Any, heads: Sequence[str], cells: Sequence[Sequence[Any]], title: str | None) -> Any:
    """Rows as blocks: the first cell as a heading, then one 'column: value' line per other cell,
    wrapped by terminal cells (for a terminal too narrow for the table's words side by side)."""
    from rich.console import Group
    from rich.text import Text as RichText

    from gpuwise.cli.helpfmt import line_spans

    width = int(console.width)
    lines: list[Any] = [RichText(printable(title), style="bold")] if title else []
    for row in cells:
        lines.append(RichText.assemble(row[0], style="bold"))
        for head, cell in zip(heads[1:], row[1:], strict=False):
            text = RichText.assemble(f"  {head}: ", cell)
            for n, (start, end) in enumerate(line_spans(text.plain, width, 4)):
                lines.append(text[start:end] if n == 0 else RichText("    ") + text[start:end])
    return Group(*lines)


DROPPED_NOTE = Text("Not shown at this width: {names} (widen the terminal or use --json).",
                    "终端较窄，未显示：{names}（加宽终端或用 --json 查看）。")


def dropped_note(dropped: Sequence[str], lang: Lang) -> str | None:
    if not dropped:
        return None
    return DROPPED_NOTE.render(lang).format(names=("、" if lang == "zh" else ", ").join(dropped))


# The LoRA-variant and padding-free flags estimate and plan share (one text: both --help pages and help_zh agree)
DoraOption = Annotated[
    bool, typer.Option("--dora", help="LoRA as DoRA (PEFT use_dora): a trained magnitude per output row and "
                                      "the merged weight's norm in every forward.")
]
ModulesToSaveOption = Annotated[
    str,
    typer.Option("--modules-to-save",
                 help="Comma list of embed_tokens,lm_head trained in full beside LoRA (PEFT modules_to_save; "
                      "needed for new special tokens)."),
]
PaddingFreeOption = Annotated[
    bool | None,
    typer.Option("--padding-free/--no-padding-free",
                 help="Concatenate a micro-batch's samples into one unpadded row (flash-attention varlen; "
                      "ms-swift --padding_free, TRL padding_free). Sized at --micro-batch x --seq-len tokens, "
                      "the most the row holds."),
]
