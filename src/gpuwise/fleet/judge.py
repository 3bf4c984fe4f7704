"""Judge nodes against the fleet: per group (card type x GPU count), per metric, the median.

Pure: no I/O. A node is suspect when any metric is more than `suspect_below` under its
group's median, even where the datasheet check passed it: healthy GPUs of one SKU differ
by a few per cent, so a node 7% under its peers has a fault the datasheet cannot see.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.fleet.nodes import NodeResult
from gpuwise.fleet.rules import FleetRules, Metric, load_rules
from gpuwise.i18n import Text

__all__ = ["FLEET_SCHEMA_VERSION", "Cell", "FleetGroup", "FleetReport", "MetricTable", "judge_fleet"]

FLEET_SCHEMA_VERSION = 1
CellStatus = Literal["ok", "suspect", "not_measured", "no_fleet"]


@dataclass(frozen=True)
class Cell:
    host: str
    value: float | None
    ratio: float | None  # value / group median
    status: CellStatus

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "value": self.value, "ratio_to_median":
                None if self.ratio is None else round(self.ratio, 4), "status": self.status}


@dataclass(frozen=True)
class MetricTable:
    metric: Metric
    median: float | None  # None: fewer than min_nodes measured it
    cells: tuple[Cell, ...]

    @property
    def outliers(self) -> tuple[str, ...]:
        return tuple(c.host for c in self.cells if c.status == "suspect")

    def to_dict(self) -> dict[str, Any]:
        m = self.metric
        return {"check": m.check, "unit": m.unit, "label": m.label.en, "label_zh": m.label.zh,
                "median": None if self.median is None else round(self.median, 3), "outliers": list(self.outliers),
                "nodes": [c.to_dict() for c in self.cells]}


@dataclass(frozen=True)
class FleetGroup:
    key: str  # "8 x h100-sxm"
    nodes: tuple[NodeResult, ...]
    tables: tuple[MetricTable, ...]
    notes: tuple[Text, ...]

    def suspects(self) -> tuple[str, ...]:
        hosts = {h for t in self.tables for h in t.outliers}
        return tuple(n.host for n in self.nodes if n.host in hosts)

    def to_dict(self) -> dict[str, Any]:
        suspects = set(self.suspects())
        return {"group": self.key, "card": self.nodes[0].card, "gpus_per_node": self.nodes[0].gpu_count,
                "nodes": [{"host": n.host, "origin": n.origin, "verify_status": n.status,
                           "fleet_status": "suspect" if n.host in suspects else "ok"} for n in self.nodes],
                "metrics": [t.to_dict() for t in self.tables],
                "notes": [x.en for x in self.notes], "notes_zh": [x.zh for x in self.notes]}


@dataclass(frozen=True)
class FleetReport:
    groups: tuple[FleetGroup, ...]
    suspect_below: float
    notes: tuple[Text, ...] = ()

    @property
    def failed(self) -> tuple[str, ...]:
        return tuple(n.host for g in self.groups for n in g.nodes if n.status == "fail")

    @property
    def incomplete(self) -> tuple[str, ...]:
        """Nodes whose own acceptance could not see everything: never counted as passed."""
        return tuple(n.host for g in self.groups for n in g.nodes if n.status == "incomplete")

    @property
    def suspects(self) -> tuple[str, ...]:
        return tuple(h for g in self.groups for h in g.suspects())

    @property
    def ok(self) -> bool:
        """False when a node fails or could not complete its own acceptance, or stands out below its fleet."""
        return not self.failed and not self.suspects and not self.incomplete

    @property
    def nodes(self) -> tuple[NodeResult, ...]:
        return tuple(n for g in self.groups for n in g.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": FLEET_SCHEMA_VERSION, "kind": "gpuwise.fleet",
                "status": "pass" if self.ok else "fail" if self.failed or self.suspects else "incomplete",
                "suspect_below": self.suspect_below,
                "nodes": len(self.nodes), "failed": list(self.failed), "suspects": list(self.suspects),
                "incomplete": list(self.incomplete),
                "notes": [x.en for x in self.notes], "notes_zh": [x.zh for x in self.notes],
                "groups": [g.to_dict() for g in self.groups]}


def _table(metric: Metric, nodes: Sequence[NodeResult], rules: FleetRules) -> MetricTable:
    values = {n.host: n.measured(metric.check) for n in nodes}
    present = [v for v in values.values() if v is not None and v > 0]
    median = statistics.median(present) if len(present) >= rules.min_nodes else None
    cells = []
    for n in nodes:
        v = values[n.host]
        if v is None:
            cells.append(Cell(n.host, None, None, "not_measured"))
        elif median is None:
            cells.append(Cell(n.host, v, None, "no_fleet"))
        else:
            ratio = v / median
            cells.append(Cell(n.host, v, ratio, "suspect" if ratio < 1 - rules.suspect_below else "ok"))
    return MetricTable(metric, median, tuple(cells))


def _unique_hosts(nodes: Sequence[NodeResult]) -> tuple[tuple[NodeResult, ...], tuple[Text, ...]]:
    """Two files from one host name: keep both, told apart by their file, and say so."""
    seen: dict[str, int] = {}
    for n in nodes:
        seen[n.host] = seen.get(n.host, 0) + 1
    dupes = sorted(h for h, k in seen.items() if k > 1)
    if not dupes:
        return tuple(nodes), ()
    from dataclasses import replace

    out = tuple(replace(n, host=f"{n.host} ({n.origin})") if n.host in dupes else n for n in nodes)
    note = Text(f"Host names seen in more than one file: {', '.join(dupes)} (each shown with its file).",
                f"多个文件中出现了同一主机名：{', '.join(dupes)}（各自标注文件名）。")
    return out, (note,)


def _group(key: str, nodes: Sequence[NodeResult], rules: FleetRules) -> FleetGroup:
    nodes, notes = _unique_hosts(nodes)
    tables = tuple(t for t in (_table(m, nodes, rules) for m in rules.metrics)
                   if any(c.value is not None for c in t.cells))
    if len(nodes) < rules.min_nodes:
        notes += (Text(f"Only {len(nodes)} node(s) of {key}: at least {rules.min_nodes} are needed for "
                       "a fleet median, so these are judged against the datasheet alone.",
                       f"{key} 只有 {len(nodes)} 个节点：至少 {rules.min_nodes} 个才能取机群中位数，"
                       "因此只按规格判断。"),)
    return FleetGroup(key, tuple(nodes), tables, notes)


def judge_fleet(nodes: Sequence[NodeResult], rules: FleetRules | None = None) -> FleetReport:
    """Group nodes by card type and GPU count, and mark each metric's outliers."""
    rules = rules or load_rules()
    groups: dict[str, list[NodeResult]] = {}
    for n in nodes:
        groups.setdefault(n.group, []).append(n)
    notes: tuple[Text, ...] = ()
    if len(groups) > 1:
        keys = "; ".join(sorted(groups))
        notes = (Text(f"The files hold {len(groups)} kinds of node ({keys}): each kind is compared "
                      "only with its own.", f"这些文件包含 {len(groups)} 种节点（{keys}）：每种只与同种比较。"),)
    return FleetReport(tuple(_group(k, v, rules) for k, v in sorted(groups.items())),
                       rules.suspect_below, notes)
