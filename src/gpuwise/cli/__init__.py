"""The `gpuwise` command. Typer and Rich are imported here and below, never by the library."""

from __future__ import annotations


def main() -> None:
    from gpuwise.cli.app import run

    run()
