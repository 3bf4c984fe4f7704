"""Read integers out of a component's config.json; a bad value is a DataError naming the key."""

from __future__ import annotations

from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text

_MAX = 1 << 24  # larger than any width, depth or vocabulary in a real config


def _bad(key: str, value: object) -> DataError:
    return DataError(Text(f"config.json: '{key}' should be a non-negative integer, got {value!r:.40}.",
                          f"config.json：“{key}”应为非负整数，实际为 {value!r:.40}。"))


def _as_int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX:
        raise _bad(key, value)
    return value


def cfg_int(cfg: dict[str, Any], key: str, default: int | None = None) -> int:
    """cfg[key] as an integer; `default` when absent (or null); DataError when absent without one."""
    value = cfg.get(key)
    if value is None:
        if default is None:
            raise DataError(Text(f"config.json has no '{key}'.", f"config.json 缺少“{key}”。"))
        return default
    return _as_int(key, value)


def cfg_ints(cfg: dict[str, Any], key: str) -> list[int]:
    value = cfg.get(key)
    if not isinstance(value, list) or not value:
        raise DataError(Text(f"config.json: '{key}' should be a list of integers, got {value!r:.40}.",
                             f"config.json：“{key}”应为整数列表，实际为 {value!r:.40}。"))
    return [_as_int(key, v) for v in value]


def cfg_float(cfg: dict[str, Any], key: str, default: float) -> float:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < _MAX:
        raise DataError(Text(f"config.json: '{key}' should be a positive number, got {value!r:.40}.",
                             f"config.json：“{key}”应为正数，实际为 {value!r:.40}。"))
    return float(value)
