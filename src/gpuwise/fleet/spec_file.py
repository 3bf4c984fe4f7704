"""What the fleet commands' input files share: a bounded TOML read and the unknown-key check.

`gpuwise mig`, `place` and `submit` each read a small TOML file the user wrote; it goes through
gpuwise.safefile like every other reader (size counted while reading, FIFOs and devices refused,
nesting and number length bounded, NaN refused), with errors naming the file."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError, close_matches
from gpuwise.i18n import Text

__all__ = ["MAX_SPEC_BYTES", "check_keys", "read_spec"]

MAX_SPEC_BYTES = 1 << 20  # a services, pipeline or job file is a few hundred bytes

Bad = Callable[[str, str, str], DataError]


def read_spec(path: Path, what: Text) -> dict[str, Any]:
    from gpuwise.safefile import read_toml

    return read_toml(path, MAX_SPEC_BYTES, what)


def check_keys(origin: str, where: str, row: Mapping[str, Any], known: Iterable[str], bad: Bad) -> None:
    """The first key of `row` not in `known` is refused, with the nearest known key suggested."""
    names = list(known)
    for key in row:
        if key not in names:
            near = close_matches(key, names)
            tip = f" Did you mean '{near[0]}'?" if near else ""
            prefix = f"{where}: " if where else ""
            raise bad(origin, f"{prefix}unknown key '{key}'.{tip}",
                      f"{where + '：' if where else ''}未知的键“{key}”。{tip}")
