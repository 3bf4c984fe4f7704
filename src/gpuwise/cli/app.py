"""Assemble the Typer app from the command modules and run it."""

from __future__ import annotations

import functools
from typing import Any

import typer

from gpuwise import __version__
from gpuwise.cli.common import LangOpt, set_default_lang

app = typer.Typer(
    name="gpuwise",
    help="Size, speed, cost and verify GPU servers for AI work.\n\n选卡、估显存、算速度与成本、验收服务器。",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Click's own help layout: a long flag gets its own line and the text wraps under it. Rich's
    # panels cut flag names at 80 columns (`--max-num-batched…`), which a user then cannot type.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
    lang: LangOpt = None,
) -> None:
    """gpuwise: does it fit, can it be fed, how fast, what does it cost."""
    set_default_lang(lang)


def _register() -> None:
    # Each command module adds its commands; keep one line per module.
    from gpuwise.cli import (
        cards_cmd,
        doctor_cmd,
        estimate_cmd,
        fleet_cmd,
        mig_cmd,
        model_cmd,
        place_cmd,
        plan_cmd,
        serve_cmd,
        submit_cmd,
        verify_cmd,
    )

    for module in (cards_cmd, model_cmd, estimate_cmd, plan_cmd, verify_cmd, doctor_cmd, serve_cmd):
        module.register(app)
    # issue 13: fleet, exporter, mig, place, submit, inventory
    for extra in (fleet_cmd, mig_cmd, place_cmd, submit_cmd):
        extra.register(app)


def _short_help() -> None:
    """Each command's summary in the command list is its first sentence, whole: Click would cut
    it with '...' at the terminal's width, and then wraps an explicit one instead."""
    infos: list[Any] = [*app.registered_commands, *app.registered_groups]
    for info in infos:
        if info.short_help is not None:
            continue
        doc = info.help or getattr(info.callback, "__doc__", None) or ""
        first = doc.strip().split("\n\n")[0].replace("\n", " ")
        info.short_help = first.split(". ")[0].rstrip(".") + "." if first else None


def _summaries(group: Any) -> None:
    """Below the top level too (`gpuwise fleet --help` cut its commands' summaries with '...'):
    each subcommand's first sentence, whole, and its Chinese summary for a Chinese help page."""
    from gpuwise.cli.helpfmt import SUMMARY_ZH, zh_part

    for sub in getattr(group, "commands", {}).values():
        doc = (sub.help or "").strip()
        first = doc.split("\n\n")[0].replace("\n", " ")
        if sub.short_help is None and first:
            sub.short_help = first.split(". ")[0].rstrip(".") + "."
        zh = zh_part(first)
        if sub.short_help and zh:
            SUMMARY_ZH[sub.short_help] = zh
        _summaries(sub)


@functools.cache
def command() -> Any:
    """The Click command tree, built once: every module's commands, whole summaries, cell-wrapped help."""
    from gpuwise.cli.helpfmt import use_cell_help

    _register()
    _short_help()
    built = typer.main.get_command(app)
    _summaries(built)
    use_cell_help(built)
    return built


def run(args: list[str] | None = None) -> None:
    """Run the command line; its own parse errors (a value that does not convert, an unknown flag,
    a missing value) are worded by gpuwise in the user's language, like every other user error,
    and its --help pages are in that language too."""
    import sys

    from gpuwise.cli.common import DEFAULT_LANG
    from gpuwise.cli.helpfmt import set_help_lang
    from gpuwise.cli.usage import lang_in

    words = sys.argv[1:] if args is None else args
    DEFAULT_LANG[0] = None
    set_help_lang(lang_in(words))
    try:
        code = _main(words)
    finally:  # a process runs one command; in-process callers (tests) get the defaults back
        DEFAULT_LANG[0] = None
        set_help_lang("en")
    raise SystemExit(code)


def _main(words: list[str]) -> int:
    import sys

    from typer._click import exceptions as cx

    from gpuwise.cli.usage import lang_in

    try:
        code = command().main(words, prog_name="gpuwise", standalone_mode=False)
    except cx.NoArgsIsHelpError as err:  # a bare group: its help, as Click prints it
        err.show()
        code = err.exit_code
    except cx.ClickException as err:
        from gpuwise.cli.common import report
        from gpuwise.cli.usage import as_gpuwise_error, json_in

        code = report(as_gpuwise_error(err, words, command()), json_out=json_in(words), lang=lang_in(words))
    except typer.Abort:
        sys.stderr.write(("已中止。" if lang_in(words) == "zh" else "Aborted!") + "\n")
        code = 1
    return code if isinstance(code, int) else 0
