"""Reading and checking gpuwise's TOML data files (ours and the user's).

Every problem becomes a `DataError` that names the file, the row and the field, so a
typo in `~/.config/gpuwise/cards.toml` reads as a sentence, never as a traceback.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.errors import DataError, close_matches
from gpuwise.i18n import Text

SCHEMA_VERSION = 1

Kind = Literal["str", "float", "int", "bool", "strlist"]

_KIND_TEXT: dict[Kind, Text] = {
    "str": Text("a string", "字符串"),
    "float": Text("a number", "数字"),
    "int": Text("a whole number", "整数"),
    "bool": Text("true or false", "true 或 false"),
    "strlist": Text("a list of strings", "字符串列表"),
}


@dataclass(frozen=True)
class FieldSpec:
    """What one field of a data row may hold."""

    kind: Kind
    required: bool = False
    choices: tuple[str, ...] = ()
    positive: bool = False  # must be > 0 (numbers are always >= 0)


def config_dir() -> Path:
    """The user's gpuwise folder: $GPUWISE_CONFIG_DIR, else ~/.config/gpuwise."""
    env = os.environ.get("GPUWISE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".config" / "gpuwise"


def data_error(path: Path | str, where: Text, en: str, zh: str) -> DataError:
    return DataError(Text(f"{path}: {where.en}: {en}", f"{path}：{where.zh}：{zh}"),
                     hint=Text("Fix or remove that file; docs/data-schema.md describes the format.",
                               "请修改或删除该文件；格式见 docs/data-schema.md。"))


MAX_DATA_FILE_BYTES = 16 * 2**20  # the shipped cards.toml is under 200 KiB; a price export a few MiB


def read_toml(path: Path) -> dict[str, Any]:
    """Parse one TOML data file (bounded: gpuwise.safefile) and check its schema_version.

    `nan` and `inf` are refused: no field of a data file means "not a number"."""
    from gpuwise.tomlcache import load_toml

    def parse(p: Path) -> dict[str, Any]:
        from gpuwise.safefile import read_bytes  # on a cache miss only: its import compiles 5 patterns

        return loads_data_toml(read_bytes(p, MAX_DATA_FILE_BYTES, Text("data file", "数据文件")), p)

    doc = load_toml(path, parse)  # the bounded parse, served from the cache while the file is unchanged
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise data_error(path, Text("schema_version", "schema_version"),
                         f"gpuwise reads schema_version {SCHEMA_VERSION}, the file says {version!r}.",
                         f"gpuwise 只读取 schema_version {SCHEMA_VERSION}，文件中为 {version!r}。")
    return doc


def loads_data_toml(raw: bytes | str, path: Path | str) -> dict[str, Any]:
    """TOML text of a data file, bounded in depth and number length, NaN and infinity refused."""
    from gpuwise.safefile import loads_toml

    return loads_toml(raw, path)


def table_rows(doc: Mapping[str, Any], key: str, path: Path, allowed: set[str]) -> list[Any]:
    """The `[[key]]` rows of a document; unknown top-level keys are an error."""
    for name in doc:
        if name not in allowed:
            raise data_error(path, Text("top level", "顶层"),
                             f"unknown key '{name}' (expected {', '.join(sorted(allowed))}).",
                             f"未知的键“{name}”（可用：{', '.join(sorted(allowed))}）。")
    rows = doc.get(key, [])
    if not isinstance(rows, list):
        raise data_error(path, Text(key, key), f"'{key}' must be written as [[{key}]] tables.",
                         f"“{key}”应写成 [[{key}]] 表。")
    return rows


def id_rows(path: Path, key: str, specs: Mapping[str, FieldSpec],
            kind: Text) -> Iterator[tuple[Text, dict[str, Any]]]:
    """Each `[[key]]` row of a data file keyed by `id`, checked against `specs`, with the place
    errors should name ("stack 'cuda'", "stack #2"); an id seen twice is an error."""
    doc = read_toml(path)
    seen: set[str] = set()
    for i, row in enumerate(table_rows(doc, key, path, {"schema_version", key})):
        row_id = row.get("id") if isinstance(row, dict) else None
        where = Text(f"{kind.en} '{row_id}'", f"{kind.zh}“{row_id}”") if isinstance(row_id, str) \
            else Text(f"{kind.en} #{i + 1}", f"第 {i + 1} 个{kind.zh}")
        values = check_row(row, specs, path=path, where=where, require=True)
        if values["id"] in seen:
            raise data_error(path, where, "the id appears twice.", "id 重复出现。")
        seen.add(values["id"])
        yield where, values


def check_row(row: Any, specs: Mapping[str, FieldSpec], *, path: Path, where: Text,
              require: bool) -> dict[str, Any]:
    """Validate one row against `specs`; returns the values normalised (lists -> tuples, int -> float)."""
    if not isinstance(row, dict):
        raise data_error(path, where, "each row must be a table.", "每一行必须是一个表。")
    out: dict[str, Any] = {}
    for name, value in row.items():
        spec = specs.get(name)
        if spec is None:
            close = ", ".join(f"'{m}'" for m in close_matches(name, specs))
            raise data_error(path, where,
                             f"unknown field '{name}'." + (f" Did you mean {close}?" if close else ""),
                             f"未知字段“{name}”。" + (f"您是否想写 {close}？" if close else ""))
        out[name] = _check_value(value, spec, path=path, where=where, name=name)
    if require:
        for name, spec in specs.items():
            if spec.required and name not in out:
                raise data_error(path, where, f"missing required field '{name}'.",
                                 f"缺少必填字段“{name}”。")
    return out


def _check_value(value: Any, spec: FieldSpec, *, path: Path, where: Text, name: str) -> Any:
    fine = _plainly_fine(value, spec)
    if fine is not _NOT_PLAIN:
        return fine
    ok, converted = _convert(value, spec.kind)
    problem = _problem(value, converted, spec) if ok else (
        f"must be {_KIND_TEXT[spec.kind].en}, got {value!r}.", f"应为{_KIND_TEXT[spec.kind].zh}，实际为 {value!r}。")
    if problem is None:
        return converted
    # words only on the way out: a cold start checks ~2,700 values that are fine
    here = Text(f"{where.en}, field '{name}'", f"{where.zh}的字段“{name}”")
    raise data_error(path, here, *problem)


_NOT_PLAIN = object()


def _plainly_fine(value: Any, spec: FieldSpec) -> Any:
    """The converted value when it is one of the common, valid cases (what `_convert` and
    `_problem` would accept, decided in a few comparisons: a cold start checks ~2,800 values),
    else _NOT_PLAIN and the full checks decide."""
    kind, t = spec.kind, type(value)
    if kind == "float" and (t is float or t is int):
        number = float(value)
        return number if 0.0 <= number < math.inf and (number > 0.0 or not spec.positive) else _NOT_PLAIN
    if kind == "str" and t is str:
        return value if not spec.choices or value in spec.choices else _NOT_PLAIN
    if kind == "int" and t is int:
        return value if value > 0 or (value == 0 and not spec.positive) else _NOT_PLAIN
    if kind == "bool" and t is bool:
        return value
    if kind == "strlist" and t is list and all(type(v) is str for v in value):
        return tuple(value)
    return _NOT_PLAIN


def _problem(value: Any, converted: Any, spec: FieldSpec) -> tuple[str, str] | None:
    """What is wrong with a converted value (English, Chinese), or None."""
    number = isinstance(converted, (int, float)) and not isinstance(converted, bool)
    if number and isinstance(converted, float) and not math.isfinite(converted):
        return f"must be a finite number, got {value!r}.", f"应为有限的数值，实际为 {value!r}。"
    if number and (converted < 0 or (spec.positive and converted == 0)):
        bound, bound_zh = ("greater than 0", "大于 0") if spec.positive else ("0 or more", "不小于 0")
        return f"must be {bound}, got {value!r}.", f"应{bound_zh}，实际为 {value!r}。"
    if spec.choices and isinstance(converted, str) and converted not in spec.choices:
        options = ", ".join(spec.choices)
        return f"must be one of {options}, got {value!r}.", f"应为 {options} 之一，实际为 {value!r}。"
    return None


def _convert(value: Any, kind: Kind) -> tuple[bool, Any]:
    if kind == "str":
        return isinstance(value, str), value
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return ok, tuple(value) if ok else value


_AS_OF = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def is_as_of(value: str) -> bool:
    """An `as_of` date: YYYY, YYYY-MM or YYYY-MM-DD (as precise as the source is)."""
    return bool(_AS_OF.match(value))


def read_json_object(path: Path, max_bytes: int, what: str) -> dict[str, Any]:
    """A JSON object from a local regular file of at most `max_bytes` (counted while reading),
    bounded in depth and number length; anything else is a DataError naming the file."""
    from gpuwise.safefile import read_json_object as read_bounded

    return read_bounded(path, max_bytes, what)
