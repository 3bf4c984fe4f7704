"""Turn HTTP query strings and JSON bodies into the service's request objects.

Parameters are named like the CLI flags (`max-ttft` or `max_ttft`) and are read generically
from the request dataclass's fields, so a new `gpuwise plan` flag works here without edits.
Every value is type-checked and bounded; unknown names are rejected with the valid list.
No web framework is imported here, so this module is tested without a server.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.bounds import BOUNDS as INPUT_BOUNDS
from gpuwise.bounds import out_of_range
from gpuwise.errors import InputError, close_matches
from gpuwise.i18n import Text

Kind = Literal["int", "float", "bool", "str"]

# Bounds per parameter: the one table in gpuwise.bounds, shared with the CLI and the service.
BOUNDS: dict[str, tuple[float, float]] = {name: (b.low, b.high) for name, b in INPUT_BOUNDS.items()}
DEFAULT_INT_BOUNDS = (0, 1_000_000)  # a numeric field not listed above
DEFAULT_FLOAT_BOUNDS = (0.0, 1e16)
MAX_STR = 256  # model ids, card lists, enum words
MAX_CONFIG_BYTES = 64 * 1024  # a pasted config.json (real ones are a few KiB)
# Fields that name files on the server: never settable over HTTP. A request dataclass can
# also mark one with `field(metadata={"path": True})`.
_SERVER_PATH = re.compile(r"(_file|_files|_path|_dir|_dirs)$")
SERVER_PATH_FIELDS = frozenset({"calibration", "contract", "prices", "from_file", "save", "report",
                                "output", "plot"})
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# A local path would let a caller read files on the server; hub ids and presets are fine.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


class UnknownParameterError(InputError):
    """A parameter name the endpoint does not take (HTTP 422, with the valid names)."""

    def __init__(self, names: list[str], valid: Iterable[str]) -> None:
        self.valid = sorted(valid)
        matches = tuple(m for n in names for m in close_matches(n, self.valid, n=2))
        quoted = ", ".join(f"'{n}'" for n in names)
        msg = Text(f"Unknown parameter {quoted}.", f"未知参数 {quoted}。")
        if matches:
            alt = ", ".join(f"'{m}'" for m in matches)
            msg = msg + Text(f" Did you mean {alt}?", f"您是否想输入 {alt}？")
        hint = Text("Valid parameters: " + ", ".join(self.valid) + ".",
                    "可用参数：" + "、".join(self.valid) + "。")
        super().__init__(msg, hint=hint, suggestions=matches)

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "valid": self.valid}


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    optional: bool
    default: Any
    bounds: tuple[float, float] | None = None
    max_len: int = MAX_STR
    allow_object: bool = False  # a JSON object in a body is taken as its JSON text

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of this parameter, for the OpenAPI document."""
        base: dict[str, Any] = {"type": {"int": "integer", "float": "number", "bool": "boolean",
                                         "str": "string"}[self.kind]}
        if self.bounds is not None:
            base["minimum"], base["maximum"] = self.bounds
        if self.kind == "str":
            base["maxLength"] = self.max_len
        if self.default is not None and self.default is not inspect.Parameter.empty:
            base["default"] = self.default
        return {"anyOf": [base, {"type": "null"}]} if self.optional else base


@dataclass(frozen=True)
class Spec:
    """What one endpoint accepts: its parameters, alternative names, and required ones."""

    params: tuple[Param, ...]
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def required(self) -> list[str]:
        return [p.name for p in self.params if p.default is inspect.Parameter.empty]

    def get(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def _kind(annotation: Any) -> tuple[Kind, bool]:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    parts = {p.strip() for p in str(text).split("|")}
    optional = "None" in parts or "Optional" in str(text)
    for kind in ("bool", "int", "float", "str"):
        if kind in parts:
            return kind, optional
    return "str", optional


def _param(name: str, annotation: Any, default: Any) -> Param:
    kind, optional = _kind(annotation)
    bounds = BOUNDS.get(name)
    if bounds is None and kind in ("int", "float"):
        bounds = DEFAULT_INT_BOUNDS if kind == "int" else DEFAULT_FLOAT_BOUNDS
    return Param(name, kind, optional, default, bounds)


def spec_from_dataclass(cls: type, aliases: Mapping[str, str] | None = None,
                        extra: Iterable[Param] = ()) -> Spec:
    """Every field of a request dataclass, except those naming server files."""
    params = []
    for f in dataclasses.fields(cls):
        if is_server_path(f.name) or f.metadata.get("path"):
            continue
        missing = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        params.append(_param(f.name, f.type, inspect.Parameter.empty if missing else f.default))
    return Spec((*params, *extra), aliases or {})


def spec_from_function(fn: Callable[..., Any], skip: Iterable[str] = ()) -> Spec:
    """Every keyword of a service function (for `cards_json`)."""
    params = [_param(p.name, p.annotation, p.default) for p in inspect.signature(fn).parameters.values()
              if p.name not in set(skip) and not is_server_path(p.name)]
    return Spec(tuple(params))


def is_server_path(name: str) -> bool:
    return name in SERVER_PATH_FIELDS or bool(_SERVER_PATH.search(name))


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _bad(name: str, en: str, zh: str) -> InputError:
    return InputError(Text(f"Parameter '{name}': {en}", f"参数“{name}”：{zh}"))


MAX_NUMBER_CHARS = 100  # digits of one number in a query or body: a 64-bit integer has 20


def _number(p: Param, value: Any) -> int | float:
    """A number within the parameter's bound; huge integers compare exactly (no float overflow)."""
    if isinstance(value, (bool, dict, list)) or value is None:
        raise _bad(p.name, f"expected a number, got {str(value)[:40]!r}.", f"应为数字，实际为 {str(value)[:40]!r}。")
    try:
        number: int | float
        if isinstance(value, str) and len(value.strip()) > MAX_NUMBER_CHARS:
            bound = INPUT_BOUNDS.get(p.name)
            if bound is not None and value.strip().lstrip("+-").isdigit():
                raise out_of_range(bound, value, f"Parameter '{p.name}'")
            raise ValueError
        if p.kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            number = int(value)
        else:
            number = float(value)
    except (TypeError, ValueError, OverflowError):
        want = "a whole number" if p.kind == "int" else "a number"
        raise _bad(p.name, f"expected {want}, got {str(value)[:40]!r}.",
                   f"应为{'整数' if p.kind == 'int' else '数字'}，实际为 {str(value)[:40]!r}。") from None
    bound = INPUT_BOUNDS.get(p.name)
    if bound is not None and p.bounds == (bound.low, bound.high):
        if not bound.contains(number):
            raise out_of_range(bound, value, f"Parameter '{p.name}'")
        return number
    low, high = p.bounds or (-math.inf, math.inf)
    if (isinstance(number, float) and not math.isfinite(number)) or not low <= number <= high:
        raise _bad(p.name, f"must be between {_fmt(low)} and {_fmt(high)}, got {str(value)[:40]}.",
                   f"必须在 {_fmt(low)} 到 {_fmt(high)} 之间，实际为 {str(value)[:40]}。")
    return number


def coerce(p: Param, value: Any) -> Any:
    """One raw value (query text or JSON value) as the parameter's type, within bounds."""
    if isinstance(value, list) and p.kind == "str":  # JSON ["h100", "4090"] = "h100,4090"
        if not all(isinstance(v, str) for v in value):
            raise _bad(p.name, "expected text or a list of text.", "应为文本或文本列表。")
        value = ",".join(value)
    if value is None or (isinstance(value, str) and value.strip() == ""):
        if p.optional:
            return None
        if p.default is not inspect.Parameter.empty:
            return p.default  # an empty form field means "the default"
        raise _bad(p.name, "a value is required.", "必须给出取值。")
    if p.kind == "bool":
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in _TRUE or word in _FALSE:
            return word in _TRUE
        raise _bad(p.name, f"expected true or false, got {str(value)[:40]!r}.",
                   f"应为 true 或 false，实际为 {str(value)[:40]!r}。")
    if p.kind in ("int", "float"):
        return _number(p, value)
    if isinstance(value, dict) and p.allow_object:
        value = json.dumps(value)
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise _bad(p.name, "expected text.", "应为文本。")
    text = str(value).strip()
    if len(text) > p.max_len:
        raise _bad(p.name, f"longer than {p.max_len:,} characters.", f"超过 {p.max_len:,} 个字符。")
    return text


def canonical(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def collect(items: Iterable[tuple[str, Any]], spec: Spec, *, strict: bool = True) -> dict[str, Any]:
    """Name -> raw value, with aliases resolved; repeated text values join with commas."""
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for raw_name, value in items:
        name = canonical(raw_name)
        name = spec.aliases.get(name, name)
        p = spec.get(name)
        if p is None:
            unknown.append(raw_name)
            continue
        if name in out and p.kind == "str" and isinstance(value, str) and isinstance(out[name], str):
            out[name] = f"{out[name]},{value}"
        elif name in out:
            raise _bad(name, "given twice.", "重复给出。")
        else:
            out[name] = value
    if unknown and strict:
        raise UnknownParameterError(unknown, [*spec.names, *spec.aliases])
    return out


def parse(items: Iterable[tuple[str, Any]], spec: Spec, *, strict: bool = True) -> dict[str, Any]:
    """Validated keyword arguments: every given value coerced; missing required ones rejected."""
    raw = collect(items, spec, strict=strict)
    missing = [n for n in spec.required if n not in raw or raw[n] in (None, "")]
    if missing:
        names = ", ".join(missing)
        raise InputError(Text(f"Missing required parameter: {names}.", f"缺少必需参数：{names}。"))
    by_name = {p.name: p for p in spec.params}  # collect() kept only names the spec has
    return {name: coerce(by_name[name], value) for name, value in raw.items()}


def check_model_source(src: str) -> None:
    """Refuse local paths: over HTTP a model is a preset, a size like 7b, or a hub id."""
    from gpuwise.catalog.presets import find_preset

    if find_preset(src) is not None:
        return
    looks_local = src.startswith(("/", "~", ".", "\\")) or ":" in src or "\\" in src
    segments = src.split("/")
    if looks_local or any(s in (".", "..") for s in segments) or (
            "/" in src and not _HUB_ID.match(src)) or _exists(src):
        raise InputError(Text(f"Model '{src}' looks like a local path; the web API takes a preset, a "
                              "size like 7b, a Hugging Face/ModelScope id, or a pasted config.json.",
                              f"模型“{src}”看起来是本地路径；网页接口只接受预设名、"
                              "7b 这样的规模、Hugging Face/ModelScope 模型 id，或粘贴的 config.json。"))


def _exists(src: str) -> bool:
    try:
        return Path(src).exists()
    except (OSError, ValueError):
        return False
