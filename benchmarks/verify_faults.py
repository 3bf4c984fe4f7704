"""Fault injection for `gpuwise verify`: detection and false-alarm counts.

Each scenario in tests/fixtures/verify/faults.toml is an edit of recorded healthy evidence
(h100x8_raw.json by default). A fault is detected when its check reaches exactly the expected
status and the overall verdict is at least that severe; a healthy variant is a false alarm
when the overall verdict is fail or incomplete. Run from the repository root:

    python -m benchmarks.verify_faults            # the table and the counts
    python -m benchmarks.verify_faults --json     # the same as JSON

Exit status 0 when every fault is detected and no healthy variant failed, else 1.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.verify.checks import STATUS_ORDER
from gpuwise.verify.contract import parse_contract
from gpuwise.verify.judge import Claim, judge
from gpuwise.verify.raw import evidence_from_dict
from gpuwise.verify.raw_schema import check_measurements

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "verify"
SCENARIOS = FIXTURES / "faults.toml"
NULL = "<null>"

__all__ = ["Outcome", "apply", "load_scenarios", "run", "run_one"]


@dataclass(frozen=True)
class Outcome:
    id: str
    kind: str  # "fault" or "healthy"
    what: str
    check: str | None
    expected: str | None
    got: str | None  # the check's status
    overall: str
    exit_code: int

    @property
    def ok(self) -> bool:
        if self.kind == "healthy":
            return self.overall in ("pass", "warn")
        assert self.expected is not None
        return self.got == self.expected and STATUS_ORDER[self.overall] >= STATUS_ORDER[self.expected]


def load_scenarios(path: Path = SCENARIOS) -> list[dict[str, Any]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [dict(s, kind="fault") for s in data.get("fault", [])] + \
           [dict(s, kind="healthy") for s in data.get("healthy", [])]


def _plain(value: Any) -> Any:
    if value == NULL:
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _set(node: Any, keys: list[str], value: Any) -> None:
    key, rest = keys[0], keys[1:]
    targets = range(len(node)) if key == "*" else [int(key) if isinstance(node, list) else key]
    for k in targets:
        if rest:
            _set(node[k], rest, value)
        else:
            node[k] = copy.deepcopy(value)


def _keep(data: dict[str, Any], n: int) -> None:
    data["gpus"] = data["gpus"][:n]
    kept = {g["index"] for g in data["gpus"]}
    buses = {str(g.get("pci_bus_id", "")).lower()[-12:] for g in data["gpus"]}
    for key in ("bench", "load"):
        if isinstance(data.get(key), list):
            data[key] = [r for r in data[key] if r["index"] in kept]
    if isinstance(data.get("cuda_devices"), list):
        data["cuda_devices"] = [d for d in data["cuda_devices"] if d["pci_bus_id"].lower()[-12:] in buses]
    for key in ("topology", "p2p"):
        if isinstance(data.get(key), list):
            data[key] = [row[:n] for row in data[key][:n]] if n > 1 else {"na": "one GPU: no pairs"}
    if n < 2:
        data["allreduce"] = {"na": "one GPU"}
    elif isinstance(data.get("allreduce"), dict) and "n_gpus" in data["allreduce"]:
        data["allreduce"]["n_gpus"] = n


def apply(scenario: dict[str, Any]) -> dict[str, Any]:
    """The evidence dict of a scenario: its base with keep, truncate and set applied."""
    base = FIXTURES / scenario.get("base", "h100x8_raw.json")
    data: dict[str, Any] = json.loads(base.read_text(encoding="utf-8"))
    data.pop("content_sha256", None)  # a scenario is a deliberate edit: drop the saved hash
    if "keep" in scenario:
        _keep(data, int(scenario["keep"]))
    for path, n in scenario.get("truncate", {}).items():
        node: Any = data
        for key in path.split("."):
            node = node[int(key) if isinstance(node, list) else key]
        del node[int(n):]
    for path, value in scenario.get("set", {}).items():
        _set(data, path.split("."), _plain(value))
    return data


def _claim(scenario: dict[str, Any]) -> Claim:
    contract = scenario.get("contract")
    return Claim(card=scenario.get("card"), count=scenario.get("count"),
                 contract=parse_contract(contract, origin=f"{scenario['id']} contract") if contract else None)


def run_one(scenario: dict[str, Any]) -> Outcome:
    ev = evidence_from_dict(apply(scenario), origin=scenario["id"])
    check_measurements(ev, scenario["id"])
    verdict = judge(ev, _claim(scenario))
    name = scenario.get("check")
    got = next((c.status for c in verdict.checks if c.name == name), None) if name else None
    return Outcome(scenario["id"], scenario["kind"], scenario.get("what", ""), name,
                   scenario.get("severity"), got, verdict.status, verdict.exit_code)


def run(path: Path = SCENARIOS) -> list[Outcome]:
    return [run_one(s) for s in load_scenarios(path)]


def _table(outcomes: list[Outcome]) -> str:
    lines = [f"{'scenario':34} {'check':26} {'expected':10} {'got':10} {'overall':10} exit  result",
             "-" * 106]
    for o in outcomes:
        result = ("detected" if o.ok else "MISSED") if o.kind == "fault" else ("ok" if o.ok else "FALSE ALARM")
        lines.append(f"{o.id:34} {o.check or '(overall)':26} {o.expected or 'pass/warn':10} "
                     f"{o.got or '-':10} {o.overall:10} {o.exit_code:<5} {result}")
    return "\n".join(lines)


def _summary(outcomes: list[Outcome]) -> dict[str, Any]:
    faults = [o for o in outcomes if o.kind == "fault"]
    healthy = [o for o in outcomes if o.kind == "healthy"]
    by: dict[str, dict[str, int]] = {}
    for o in faults:
        row = by.setdefault(o.expected or "?", {"faults": 0, "detected": 0})
        row["faults"] += 1
        row["detected"] += int(o.ok)
    return {"faults": len(faults), "detected": sum(o.ok for o in faults), "by_severity": by,
            "healthy": len(healthy), "false_alarms": sum(not o.ok for o in healthy)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    outcomes = run()
    summary = _summary(outcomes)
    if args.json:
        print(json.dumps({"summary": summary, "scenarios": [o.__dict__ for o in outcomes]}, indent=2))
    else:
        print(_table(outcomes))
        print()
        for severity, row in sorted(summary["by_severity"].items()):
            print(f"{severity:10} detected {row['detected']} of {row['faults']}")
        print(f"faults detected {summary['detected']} of {summary['faults']}; "
              f"false alarms {summary['false_alarms']} of {summary['healthy']} healthy variants")
    return 0 if summary["detected"] == summary["faults"] and not summary["false_alarms"] else 1


if __name__ == "__main__":
    sys.exit(main())
