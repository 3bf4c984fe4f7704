"""`gpuwise estimate ... --json` without Typer or Rich: a script calling gpuwise in a loop pays
for the estimate, not for building the whole command tree (Typer, Click, Rich and their imports
are most of a cold start).

Only a plain, well-formed `estimate --json` takes this path. Anything else (a flag this table
does not know, a value that does not convert, --help, --plot) returns False and the full Typer
command runs, so every message and exit code stays Typer's. tests/test_cli_fast.py checks that
the flags read off EstimateRequest are exactly the Typer command's options and that both paths print the same JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Sequence
from typing import Any, Literal

Kind = Literal["int", "float", "str", "flag", "bool"]

# Fields whose flag is not `--` + the field name with dashes, and fields no flag sets.
_RENAMED = {"prices_file": "--prices", "cards_file": "--cards", "train_tokens": "--tokens"}
NOT_FLAGS = frozenset({"model"})
# Accepted and ignored here: --json is what brought us here, --lang only words human output.
_NO_VALUE = {"--json"}
_IGNORED_VALUE = {"--lang"}


@functools.cache
def flags() -> dict[str, tuple[str, Kind]]:
    """flag -> (EstimateRequest field, kind), read off the request dataclass: "flag" is a switch
    that sets True (a bool defaulting to False), "bool" a --x/--no-x pair."""
    from gpuwise.service import EstimateRequest

    out: dict[str, tuple[str, Kind]] = {}
    for f in dataclasses.fields(EstimateRequest):
        if f.name in NOT_FLAGS:
            continue
        hint = str(f.type)
        kind: Kind = ("int" if hint.startswith("int") else "float" if hint.startswith("float") else
                      ("flag" if hint == "bool" and f.default is False else "bool") if hint.startswith("bool")
                      else "str")
        out[_RENAMED.get(f.name, "--" + f.name.replace("_", "-"))] = (f.name, kind)
    return out


def parse(args: Sequence[str]) -> dict[str, Any] | None:
    """EstimateRequest keyword arguments from `estimate`'s arguments, or None to defer to Typer."""
    out: dict[str, Any] = {}
    model: str | None = None
    items = list(args)
    i = 0
    while i < len(items):
        word = items[i]
        i += 1
        if word == "--":
            return None  # rare: leave the edge cases of option parsing to Click
        if not word.startswith("--"):
            if word.startswith("-") or model is not None:
                return None
            model = word
            continue
        name, eq, inline = word.partition("=")
        if name in _NO_VALUE and not eq:
            continue
        table = flags()
        negated = name.startswith("--no-") and name[5:] != "" and table.get("--" + name[5:], ("", "str"))[1] == "bool"
        field, kind = table.get("--" + name[5:] if negated else name, ("", "str"))
        if name in _IGNORED_VALUE or field:
            if kind in ("flag", "bool"):
                if eq:
                    return None
                out[field] = not negated
                continue
            if not eq:
                if i >= len(items):
                    return None
                inline, i = items[i], i + 1
            if name in _IGNORED_VALUE:
                if inline not in ("en", "zh"):
                    return None  # Typer's path refuses it with the valid list
                continue
            value = _convert(inline, kind)
            if value is None:
                return None
            out[field] = value
            continue
        return None
    if model is None or "card" not in out:
        return None
    return {"model": model, **out}


def _convert(text: str, kind: Kind) -> Any:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            value = float(text)
            return value if math.isfinite(value) else None  # NaN/inf: Typer's path words the error
    except ValueError:
        return None
    return text


def estimate_json_fast(args: Sequence[str]) -> int | None:
    """Print the estimate's JSON and return the exit code, or None when Typer must run instead."""
    from gpuwise.codecache import compiled_dataclasses

    with compiled_dataclasses("estimate-json"):  # the imports below define some 50 dataclasses
        return _estimate_json(args)


def _estimate_json(args: Sequence[str]) -> int | None:
    fields = parse(args)
    if fields is None:
        return None
    from gpuwise.errors import GpuwiseError
    from gpuwise.jsonable import dumps
    from gpuwise.service import EstimateRequest, estimate_json

    try:
        result: Any = estimate_json(EstimateRequest(**fields))
        code = 0
    except GpuwiseError as err:
        result, code = err.to_dict(), err.exit_code
    sys.stdout.write(dumps(result, indent=2) + "\n")  # strict JSON, as every --json
    return code
