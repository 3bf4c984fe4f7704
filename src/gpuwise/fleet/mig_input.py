"""The services file `gpuwise mig` reads (TOML): an optional card and [[service]] rows."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError
from gpuwise.fleet.mig_fit import ServiceSpec
from gpuwise.fleet.spec_file import check_keys, read_spec
from gpuwise.i18n import Text

__all__ = ["MAX_SERVICES", "load_services", "parse_services"]

MAX_SERVICES = 64  # 7 slices x 8 GPUs of a node is 56; more is not one plan
_INTS = {"context": (1, 10_485_760), "concurrency": (1, 4096)}
_FLOATS = ("min_tokens_per_s", "max_ttft_s")


def _bad(origin: str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{origin}: {en}", f"{origin}：{zh}"),
                     hint=Text("See README (gpuwise mig) for the services file.",
                               "服务文件格式见 README（gpuwise mig）。"))


def _value(origin: str, where: str, key: str, v: Any) -> Any:
    if key in _INTS:
        lo, hi = _INTS[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise _bad(origin, f"{where}: {key} must be a whole number from {lo} to {hi:,}, got {v!r}.",
                       f"{where}：{key} 必须是 {lo} 到 {hi:,} 的整数，实际为 {v!r}。")
        return v
    if key in _FLOATS:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1e9:
            raise _bad(origin, f"{where}: {key} must be a positive number, got {v!r}.",
                       f"{where}：{key} 必须是正数，实际为 {v!r}。")
        return float(v)
    if not isinstance(v, str) or not v.strip() or len(v) > 500:
        raise _bad(origin, f"{where}: {key} must be a short string, got {v!r}.",
                   f"{where}：{key} 必须是短字符串，实际为 {v!r}。")
    return v.strip()


def _service(origin: str, i: int, row: Any) -> ServiceSpec:
    where = f"[[service]] #{i + 1}"
    if not isinstance(row, dict):
        raise _bad(origin, f"{where} is not a table.", f"{where} 不是表。")
    check_keys(origin, where, row, [f.name for f in fields(ServiceSpec)], _bad)
    if "model" not in row:
        raise _bad(origin, f"{where} has no model.", f"{where} 缺少 model。")
    values = {k: _value(origin, where, k, v) for k, v in row.items()}
    values.setdefault("name", f"{values['model']}-{i + 1}")
    return ServiceSpec(**values)


def parse_services(doc: dict[str, Any], origin: str) -> tuple[str | None, tuple[ServiceSpec, ...]]:
    extra = set(doc) - {"card", "service", "schema_version"}
    if extra:
        raise _bad(origin, f"unknown top-level key(s): {', '.join(sorted(extra))}.",
                   f"未知的顶层键：{', '.join(sorted(extra))}。")
    rows = doc.get("service", [])
    if not isinstance(rows, list) or len(rows) > MAX_SERVICES:
        raise _bad(origin, f"[[service]] must be a list of at most {MAX_SERVICES} tables.",
                   f"[[service]] 必须是至多 {MAX_SERVICES} 个表的列表。")
    services = tuple(_service(origin, i, r) for i, r in enumerate(rows))
    names = [s.name for s in services]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _bad(origin, f"service names used twice: {', '.join(dupes)}.", f"服务名重复：{', '.join(dupes)}。")
    card = doc.get("card")
    return (_value(origin, "top", "card", card) if card is not None else None), services


def load_services(path: Path) -> tuple[str | None, tuple[ServiceSpec, ...]]:
    doc = read_spec(path, Text("services file", "服务文件"))
    return parse_services(doc, str(path))
