"""Parsed TOML data files, cached: a cold `gpuwise estimate` should not spend most of its time in
tomllib re-reading the same catalog files (cards.toml alone is 2,000+ lines).

A file's parsed document is kept as `marshal` bytes in the user's cache folder
($GPUWISE_CACHE_DIR, else $XDG_CACHE_HOME/gpuwise, else ~/.cache/gpuwise), keyed by the file's
absolute path and checked against that path, its size and modification time, so an edited file is parsed
again. marshal only rebuilds plain values (dict, list, str, numbers, bool, None); a document
holding TOML dates is simply not cached. Each entry starts with a CRC-32 of the rest, so a flipped
bit is a miss, never a changed number. Any cache problem (unwritable folder, a truncated, damaged or
foreign file) falls back to parsing: the cache can only make a load faster, never different.
GPUWISE_NO_CACHE=1 turns it off.

Standard library only: every layer may use it.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "load_toml"]

_FORMAT = 3  # bump when the layout below changes (2: a CRC-32 before the marshal data; 3: keys interned)
_TAG = f"{_FORMAT}:{sys.version_info[0]}.{sys.version_info[1]}:{marshal.version}"


def cache_dir() -> Path:
    env = os.environ.get("GPUWISE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "gpuwise"


def _entry(path: Path) -> Path:
    # zlib's crc32, not hashlib (whose import costs more than the lookup saves); the entry holds the
    # full path too, so two paths sharing a name only miss, never mix
    return cache_dir() / f"toml-{zlib.crc32(str(path).encode('utf-8')):08x}-{len(str(path))}.marshal"


def load_toml(path: Path | str, parse: Callable[[Path], dict[str, Any]] | None = None) -> dict[str, Any]:
    """`parse(path)` (default: `tomllib.load`), served from the cache when the file has not changed.

    Raises what `parse` raises (for the default, TOMLDecodeError and OSError), like a plain load."""
    source = Path(path)
    off = os.environ.get("GPUWISE_NO_CACHE", "") not in ("", "0")
    try:
        st = source.stat()
    except OSError:  # let the parser say what is wrong with the file, in its words
        return parse(source) if parse is not None else _plain(source)
    key = str(source.absolute())
    stamp = (_TAG, key, st.st_size, st.st_mtime_ns)
    try:
        entry = None if off else _entry(Path(key))
    except RuntimeError:  # no home folder to put the cache in (Path.home): parse each time
        entry = None
    if entry is not None:
        kept = _read(entry, stamp)
        if kept is not None:
            return kept
    doc: dict[str, Any] = _interned(parse(source) if parse is not None else _plain(source))
    if entry is not None:
        _store(entry, stamp, doc)
    return doc


def _interned(obj: Any) -> Any:
    """`obj` with every table key interned (sys.intern), in a fresh load as in a cached one.

    A row often becomes keyword arguments (`Card(**values)`); CPython matches a keyword to a
    parameter by identity first and by string comparison only when that fails, so 44 fields
    from parser-made strings cost some 240 k instructions per Card and interned ones 80 k.
    marshal keeps the interning and writes a repeated key once."""
    if isinstance(obj, dict):
        return {sys.intern(k) if type(k) is str else k: _interned(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_interned(v) for v in obj]
    return obj


def _read(entry: Path, stamp: tuple[str, str, int, int]) -> dict[str, Any] | None:
    """The document an entry holds for exactly this stamp, or None (missing, damaged, stale, foreign)."""
    try:
        blob = entry.read_bytes()
        body = memoryview(blob)[4:]
        if len(blob) < 4 or int.from_bytes(blob[:4], "little") != zlib.crc32(body):
            return None
        kept = marshal.loads(body)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == stamp and isinstance(kept[1], dict):
        return kept[1]
    return None


def _plain(path: Path) -> dict[str, Any]:
    import tomllib  # a cache hit never needs the parser

    with path.open("rb") as fh:
        return tomllib.load(fh)


def _store(entry: Path, stamp: tuple[str, str, int, int], doc: dict[str, Any]) -> None:
    try:
        blob = marshal.dumps((stamp, doc))
    except ValueError:  # a TOML date or time: not a plain value, parse it each time
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        tmp.write_bytes(zlib.crc32(blob).to_bytes(4, "little") + blob)
        os.replace(tmp, entry)  # atomic: a concurrent reader sees the old entry or the new one
    except OSError:
        return
