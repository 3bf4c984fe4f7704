"""Compiled dataclass methods, cached: a cold `gpuwise estimate --json` should not spend most of its
time compiling the same `__init__`, `__repr__` and `__eq__` methods it compiled on the last run.

`dataclasses` writes each class's methods (`__init__`, `__repr__`, `__eq__`, `__hash__`, a frozen
class's `__setattr__`/`__delattr__`) as source text and runs `exec` on it; parsing and compiling that
text costs about 0.45 M instructions per field, some 250 M of a cold estimate's 590 M (measured with
valgrind's callgrind on CPython 3.11: `_PyParser_ASTFromString` + `_PyAST_Compile`).

While `compiled_dataclasses()` is active, the `exec` that `dataclasses` calls finds the text already
compiled, in a file of code objects keyed by the exact text, in the cache folder the TOML cache uses
(`gpuwise.tomlcache.cache_dir`). The class is still built by `dataclasses` itself, so `fields()`,
`replace()`, `asdict()`, frozen errors and every generated method behave as they always do:
`exec(compile(text, "<string>", "exec", dont_inherit=True), g, ns)` is what `exec(text, g, ns)`
does when called from dataclasses.py, a module without `__future__` imports. A text not in the file
is compiled as usual and added. If a later Python names its `exec` differently, nothing is
intercepted and the classes are built at the usual speed.

The file is checked before use: a header naming this format, the interpreter and its bytecode
version, then a CRC-32 of the rest. Anything that does not check out (truncated, foreign, another
Python's, not a dict of text -> code) is ignored and rewritten; the cache can make the import
faster, never different. Its code objects are trusted like the `__pycache__` files Python itself
loads: the folder belongs to the user who runs gpuwise. GPUWISE_NO_CACHE=1 turns it off.

Standard library only: every layer may use it.
"""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import sys
import zlib
from pathlib import Path
from types import CodeType
from typing import Any

from gpuwise.tomlcache import cache_dir

__all__ = ["compiled_dataclasses"]

_FORMAT = 1  # bump when the layout below changes
# The interpreter's bytecode magic: code objects are only valid for the bytecode they were compiled for.
# (read off the frozen bootstrap module: importing importlib.util for it costs 18 M instructions)
_MAGIC: bytes = getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", b"")
_HEADER = f"gpuwise-code:{_FORMAT}:{sys.implementation.cache_tag}:{marshal.version}:".encode() + _MAGIC
_MAX_ENTRIES = 4000  # past this, keep only what the last run used (old classes' texts pile up otherwise)


def _path(scope: str) -> Path:
    return cache_dir() / f"dataclass-code-{scope}-{sys.implementation.cache_tag}.marshal"


def _read(path: Path) -> dict[str, CodeType]:
    """The cached text -> code table, or {} when the file is missing or does not check out."""
    try:
        blob = path.read_bytes()
    except OSError:
        return {}
    head = len(_HEADER)
    if blob[:head] != _HEADER or len(blob) < head + 4:
        return {}
    body = blob[head + 4:]
    if int.from_bytes(blob[head:head + 4], "little") != zlib.crc32(body):
        return {}
    try:
        table = marshal.loads(body)
    except (ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and type(v) is CodeType}


def _write(path: Path, table: dict[str, CodeType]) -> None:
    try:
        body = marshal.dumps(table)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(_HEADER + zlib.crc32(body).to_bytes(4, "little") + body)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except (OSError, ValueError):
        return


class compiled_dataclasses:
    """Dataclasses defined inside this block (by the imports it runs) get their methods from the
    cache; on leaving, newly compiled texts are stored. An inner block inside an active one is a no-op.

    `scope` names the file: a command that imports torch or Rich should not make the file that a
    cold `estimate --json` reads (all of it, each run) several times larger.

    A class, not contextlib.contextmanager: importing contextlib would cost more than some of the
    classes it serves."""

    def __init__(self, scope: str) -> None:
        self._scope = scope
        self._path = Path()
        self._table: dict[str, CodeType] = {}
        self._used: dict[str, CodeType] = {}
        self._new = False
        self._active = False

    def __enter__(self) -> None:
        if os.environ.get("GPUWISE_NO_CACHE", "") not in ("", "0") or "exec" in vars(dataclasses):
            return
        if not _MAGIC or sys.implementation.cache_tag is None:  # no bytecode version to key the file by
            return
        try:
            self._path = _path(self._scope)
        except RuntimeError:  # no home folder to put the cache in (Path.home): compile as usual
            return
        self._table = _read(self._path)
        vars(dataclasses)["exec"] = self._exec  # found before builtins.exec by _create_fn
        self._active = True

    def __exit__(self, *exc: object) -> None:
        if not self._active:
            return
        self._active = False
        if vars(dataclasses).get("exec") == self._exec:
            del vars(dataclasses)["exec"]
        if self._new:  # on an exception too (SystemExit ends every command): what was compiled is sound
            merged = {**self._table, **self._used}
            _write(self._path, merged if len(merged) <= _MAX_ENTRIES else self._used)

    def _exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """builtins.exec, with a text's compiled code taken from (or added to) the cache."""
        if type(source) is not str:
            builtins.exec(source, globals, locals)  # noqa: S102 (what dataclasses asked for, unchanged)
            return
        code = self._table.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self._new = True
        self._used[source] = code
        builtins.exec(code, globals, locals)  # noqa: S102 (the text dataclasses wrote, compiled)
