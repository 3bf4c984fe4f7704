"""The `gpuwise` command. Typer and Rich are imported here and below, never by the library."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from gpuwise.codecache import compiled_dataclasses

    args = sys.argv[1:]
    # The scripted path: no Typer, no Rich (GPUWISE_FULL_CLI=1 forces the full command, for tests).
    if args[:1] == ["estimate"] and "--json" in args and not os.environ.get("GPUWISE_FULL_CLI"):
        from gpuwise.cli.fast import estimate_json_fast

        code = estimate_json_fast(args[1:])
        if code is not None:
            import gc

            gc.freeze()  # exiting: the interpreter's last collection need not walk the whole heap (18 M instructions)
            raise SystemExit(code)
    with compiled_dataclasses("cli"):  # Typer, Rich and the command's modules: dozens of dataclasses
        from gpuwise.cli.app import run

        run()
