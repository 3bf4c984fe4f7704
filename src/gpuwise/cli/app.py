"""Assemble the Typer app from the command modules and run it."""

from __future__ import annotations

import typer

from gpuwise import __version__

app = typer.Typer(
    name="gpuwise",
    help="Size, speed, cost and verify GPU servers for AI work. 选卡、估显存、算速度与成本、验收服务器。",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """gpuwise: does it fit, can it be fed, how fast, what does it cost."""


def _register() -> None:
    # Each command module adds its commands; keep one line per module.
    from gpuwise.cli import (
        cards_cmd,
        doctor_cmd,
        estimate_cmd,
        model_cmd,
        plan_cmd,
        serve_cmd,
        verify_cmd,
    )

    for module in (cards_cmd, model_cmd, estimate_cmd, plan_cmd, verify_cmd, doctor_cmd, serve_cmd):
        module.register(app)


def run() -> None:
    _register()
    app()
