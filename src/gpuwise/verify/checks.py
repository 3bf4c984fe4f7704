"""The unit of a verdict: `CheckResult`, and the thresholds data it is judged against."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from gpuwise.errors import DataError
from gpuwise.i18n import Text

__all__ = [
    "EXIT_CODES",
    "GROUPS",
    "STATUS_ORDER",
    "CheckResult",
    "Status",
    "Thresholds",
    "group_of",
    "incomplete",
    "load_data",
    "load_thresholds",
    "ratio_status",
    "worst",
]

# skipped: not applicable here (no ECC on GeForce, one GPU has no all-reduce).
# incomplete: should have been seen and was not (a crash-free timeout, a hang, missing
# evidence): it never counts as a pass. fail outranks it: a seen fault is a fault.
Status = Literal["pass", "warn", "fail", "skipped", "incomplete"]
STATUS_ORDER: dict[str, int] = {"pass": 0, "skipped": 1, "warn": 2, "incomplete": 3, "fail": 4}

# `gpuwise verify` exit codes. 2 (bad input) and 3 (no GPU or driver) come from errors.py.
EXIT_CODES: dict[str, int] = {"pass": 0, "warn": 0, "fail": 1, "incomplete": 4}

# Check names start with their group; the report orders and titles groups by this.
GROUPS: dict[str, Text] = {
    "inventory": Text("Inventory", "清单"),
    "health": Text("Health", "健康"),
    "links": Text("Links", "互联"),
    "load": Text("Sustained load", "持续负载"),
    "performance": Text("Performance", "性能"),
    "peers": Text("Peers (each GPU vs the node median)", "同机对比（各 GPU 对比中位数）"),
    "host": Text("Host", "主机"),
    "software": Text("Software", "软件"),
}


def group_of(name: str) -> str:
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class CheckResult:
    """One verdict: what was measured, what was expected, and why it passed or not.

    `measured` and `expected` are numbers or short strings in `unit`; `detail` says in
    words what happened and, for warn/fail/skipped, what to do about it.
    """

    name: str
    status: Status
    measured: float | int | str | None
    expected: float | int | str | None
    unit: str
    detail: Text

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": group_of(self.name), "status": self.status,
                "measured": self.measured, "expected": self.expected, "unit": self.unit,
                "detail": self.detail.en, "detail_zh": self.detail.zh}


def skipped(name: str, why: Text, unit: str = "") -> CheckResult:
    return CheckResult(name, "skipped", None, None, unit, why)


def incomplete(name: str, why: Text, unit: str = "") -> CheckResult:
    return CheckResult(name, "incomplete", None, None, unit, why)


def worst(statuses: Sequence[Status]) -> Status:
    if not statuses:
        return "pass"
    top = max(statuses, key=lambda s: STATUS_ORDER[s])
    return "pass" if top == "skipped" else top


def ratio_status(ratio: float, pass_ratio: float, fail_ratio: float) -> Status:
    if ratio >= pass_ratio:
        return "pass"
    return "fail" if ratio < fail_ratio else "warn"


@dataclass(frozen=True)
class Thresholds:
    """acceptance.toml, read once. Every number cites its source in the file."""

    raw: dict[str, Any]

    def get(self, table: str, key: str) -> Any:
        try:
            return self.raw[table][key]
        except KeyError as exc:
            raise DataError(Text(f"acceptance.toml lacks [{table}] {key}.",
                                 f"acceptance.toml 缺少 [{table}] {key}。")) from exc

    def per_lane_gbps(self, gen: int) -> float | None:
        value = self.raw["pcie_bw"]["per_lane_gbps"].get(str(gen))
        return float(value) if value is not None else None

    def allreduce_references(self) -> list[dict[str, Any]]:
        return list(self.raw["allreduce"].get("reference", []))

    def cuda_min_driver(self, cuda: str) -> str | None:
        value = self.raw["cuda_min_driver"].get(cuda)
        return str(value) if value is not None else None


@lru_cache(maxsize=8)
def load_data(name: str) -> dict[str, Any]:
    """One of verify's data files (acceptance.toml, verify_*.toml), schema_version 1."""
    text = resources.files("gpuwise.data").joinpath(name).read_text("utf-8")
    raw = tomllib.loads(text)
    if raw.get("schema_version") != 1:
        raise DataError(Text(f"{name} has an unknown schema_version.",
                             f"{name} 的 schema_version 未知。"))
    return raw


@lru_cache(maxsize=1)
def load_thresholds() -> Thresholds:
    return Thresholds(load_data("acceptance.toml"))
