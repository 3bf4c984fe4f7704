"""data/fleet.toml: which verify checks a fleet compares, and how far below the median is suspect."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text

__all__ = ["FleetRules", "Metric", "load_rules"]


@dataclass(frozen=True)
class Metric:
    """One fleet metric: the `measured` value of one verify check."""

    check: str
    unit: str
    label: Text
    prometheus: str


@dataclass(frozen=True)
class FleetRules:
    suspect_below: float  # fraction under the group median that makes a node suspect
    min_nodes: int  # smallest group with a median worth comparing with
    metrics: tuple[Metric, ...]

    def metric(self, check: str) -> Metric | None:
        return next((m for m in self.metrics if m.check == check), None)


def _bad(what: str) -> DataError:
    return DataError(Text(f"data/fleet.toml: {what}", f"data/fleet.toml：{what}"))


def _metric(row: Any) -> Metric:
    keys = ("check", "unit", "label_en", "label_zh", "prometheus")
    if not isinstance(row, dict) or any(not isinstance(row.get(k), str) for k in keys):
        raise _bad(f"every [[metric]] needs string fields {', '.join(keys)}; got {row!r}")
    return Metric(row["check"], row["unit"], Text(row["label_en"], row["label_zh"]), row["prometheus"])


def parse_rules(raw: dict[str, Any]) -> FleetRules:
    if raw.get("schema_version") != 1:
        raise _bad("unknown schema_version")
    below, min_nodes = raw.get("suspect_below"), raw.get("min_nodes")
    if not isinstance(below, float) or not 0 < below < 1:
        raise _bad(f"suspect_below must be a fraction between 0 and 1, got {below!r}")
    if not isinstance(min_nodes, int) or min_nodes < 2:
        raise _bad(f"min_nodes must be a whole number >= 2, got {min_nodes!r}")
    metrics = tuple(_metric(r) for r in raw.get("metric", []))
    if not metrics:
        raise _bad("no [[metric]] rows")
    return FleetRules(below, min_nodes, metrics)


@lru_cache(maxsize=1)
def load_rules() -> FleetRules:
    import tomllib

    text = resources.files("gpuwise.data").joinpath("fleet.toml").read_text("utf-8")
    return parse_rules(tomllib.loads(text))
