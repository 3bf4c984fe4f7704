"""Load and check the validation table (validation/README.md describes a point)."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmarks.validation.metrics import METRICS, UNITS
from gpuwise.service import EstimateRequest

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "validation" / "points"
REQUIRED = ("id", "metric", "value", "unit", "source", "quote", "stack", "stack_version", "card_as_written",
            "model_as_written", "settings")
OPTIONAL = ("card", "derived", "request", "must_pass", "tolerance", "missing", "note")
REQUEST_FIELDS = frozenset(f.name for f in fields(EstimateRequest))


class TableError(ValueError):
    """A point that breaks the schema: the message names the file and the point."""


@dataclass(frozen=True)
class Point:
    id: str
    file: str
    metric: str
    value: float  # in the metric's canonical unit (metrics.UNITS)
    stack: str
    stack_version: str
    card: str
    source: str
    quote: str
    settings: str
    derived: str
    request: dict[str, Any] = field(default_factory=dict)
    must_pass: bool = False
    tolerance: float | None = None
    missing: str = ""

    @property
    def expressible(self) -> bool:
        return not self.missing


def _check(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise TableError(f"{where}: {message}")


def _point(raw: dict[str, Any], file: str) -> Point:
    where = f"{file} point {raw.get('id', '?')!r}"
    for key in REQUIRED:
        _check(key in raw and raw[key] not in ("", None), where, f"'{key}' is required")
    unknown = set(raw) - set(REQUIRED) - set(OPTIONAL)
    _check(not unknown, where, f"unknown keys {sorted(unknown)}")
    metric = METRICS.get(raw["metric"])
    _check(metric is not None, where, f"metric {raw['metric']!r} is not one of {sorted(METRICS)}")
    assert metric is not None
    unit = UNITS.get(raw["unit"])
    _check(unit is not None and unit[0] == metric.unit, where,
           f"unit {raw['unit']!r} does not measure {metric.name} ({metric.unit})")
    assert unit is not None
    value = raw["value"]
    _check(isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0,
           where, "value must be a positive finite number")
    request = dict(raw.get("request", {}))
    missing = str(raw.get("missing", ""))
    _check(bool(request) != bool(missing), where, "give either a request or what is missing, not both or neither")
    bad = set(request) - REQUEST_FIELDS
    _check(not bad, where, f"request keys {sorted(bad)} are not EstimateRequest fields")
    if request:
        _check("model" in request and "card" in request, where, "a request needs model and card")
        _check(request.get("card") == raw.get("card"), where, "request card and card differ")
        training = request.get("task", "infer") != "infer"
        _check(metric.training is None or metric.training == training, where,
               f"{metric.name} needs a {'training' if metric.training else 'serving'} request")
    must_pass = bool(raw.get("must_pass", False))
    tolerance = raw.get("tolerance")
    _check(not must_pass or isinstance(tolerance, int | float), where, "must_pass needs a tolerance")
    return Point(id=raw["id"], file=file, metric=metric.name, value=float(value) * unit[1], stack=raw["stack"],
                 stack_version=str(raw["stack_version"]), card=str(raw.get("card", "")), source=raw["source"],
                 quote=raw["quote"], settings=raw["settings"], derived=str(raw.get("derived", "")),
                 request=request, must_pass=must_pass,
                 tolerance=float(tolerance) if tolerance is not None else None, missing=missing)


def load_points(paths: Iterable[Path] | None = None) -> list[Point]:
    """Every point of the given files (default: validation/points/*.toml), ids unique."""
    files = sorted(paths) if paths is not None else sorted(TABLE.glob("*.toml"))
    points: list[Point] = []
    seen: dict[str, str] = {}
    for path in files:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        _check(data.get("schema_version") == 1, path.name, "schema_version = 1 is required")
        for raw in data.get("point", []):
            p = _point(raw, path.name)
            _check(p.id not in seen, f"{path.name} point {p.id!r}", f"id already used in {seen.get(p.id)}")
            seen[p.id] = path.name
            points.append(p)
    return points
