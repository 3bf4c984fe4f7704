"""What every command shares: --json, --lang, error handling and number formatting."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang, Text, pick_lang
from gpuwise.jsonable import json_default
from gpuwise.textsafe import printable

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (stable schema).")]
LangOpt = Annotated[
    str | None,
    typer.Option("--lang", help="Language of human output: zh or en (default: from the locale)."),
]


def lang_of(flag: str | None) -> Lang:
    if flag is not None and flag.lower() not in ("zh", "en", "zh-cn", "zh_cn", "cn"):
        fail(GpuwiseError(Text(f"Unknown language '{flag}': use zh or en.",
                               f"未知语言“{flag}”：请用 zh 或 en。")), json_out=False, lang="en")
    return pick_lang(flag)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, default=json_default) + "\n")


def fail(err: GpuwiseError, *, json_out: bool, lang: Lang) -> NoReturn:
    """Report a user error: JSON on stdout with --json, else a message on stderr; exit non-zero."""
    if json_out:
        print_json(err.to_dict())
    else:
        from rich.console import Console
        from rich.markup import escape

        console = Console(stderr=True, highlight=False)
        label = "错误" if lang == "zh" else "error"
        console.print(f"[bold red]{label}:[/] {escape(printable(err.message.render(lang)))}", markup=True)
        if err.hint is not None:
            console.print(printable(err.hint.render(lang)), markup=False)
    raise typer.Exit(err.exit_code)


def run_command(json_out: bool, lang_flag: str | None,
                compute: Callable[[], Any], render: Callable[[Any, Lang], None]) -> None:
    """Compute, then print JSON or the human rendering; user errors never become tracebacks."""
    lang = lang_of(lang_flag)
    try:
        result = compute()
    except GpuwiseError as err:
        fail(err, json_out=json_out, lang=lang)
    if json_out:
        print_json(result)
    else:
        render(result, lang)


def fmt_gib(n_bytes: float, digits: int = 2) -> str:
    return f"{n_bytes / 2**30:,.{digits}f} GiB"


def fmt_count(n: float) -> str:
    """8030261248 -> '8.03 B'."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= size:
            return f"{n / size:,.2f} {suffix}"
    return f"{n:,.0f}"
