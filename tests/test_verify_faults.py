"""The fault-injection suite: every fault in tests/fixtures/verify/faults.toml is caught by its
check at its severity, and no healthy variant fails (benchmarks/verify_faults.py prints the table)."""

from __future__ import annotations

import json

import pytest
from benchmarks.verify_faults import FIXTURES, Outcome, apply, load_scenarios, main, run_one

SCENARIOS = load_scenarios()
FAULTS = [s for s in SCENARIOS if s["kind"] == "fault"]
HEALTHY = [s for s in SCENARIOS if s["kind"] == "healthy"]


def test_the_suite_has_at_least_40_faults_and_10_healthy_variants_with_unique_ids() -> None:
    assert len(FAULTS) >= 40 and len(HEALTHY) >= 10
    ids = [s["id"] for s in SCENARIOS]
    assert len(ids) == len(set(ids))
    assert all(s.get("source") and s.get("what") for s in SCENARIOS)


@pytest.mark.parametrize("scenario", FAULTS, ids=[s["id"] for s in FAULTS])
def test_every_fault_is_detected_at_its_severity(scenario: dict[str, object]) -> None:
    outcome = run_one(scenario)
    assert outcome.got == outcome.expected, outcome
    assert outcome.ok, outcome  # and the overall verdict is at least that severe
    assert (outcome.exit_code != 0) == (outcome.overall in ("fail", "incomplete"))


@pytest.mark.parametrize("scenario", HEALTHY, ids=[s["id"] for s in HEALTHY])
def test_no_healthy_variant_fails(scenario: dict[str, object]) -> None:
    outcome = run_one(scenario)
    assert outcome.overall in ("pass", "warn") and outcome.exit_code == 0, outcome


@pytest.mark.parametrize("scenario", FAULTS, ids=[s["id"] for s in FAULTS])
def test_every_fault_really_edits_the_evidence(scenario: dict[str, object]) -> None:
    base = json.loads((FIXTURES / str(scenario.get("base", "h100x8_raw.json"))).read_text())
    assert apply(scenario) != base


def test_a_fault_with_the_wrong_expected_severity_counts_as_missed() -> None:
    wrong = dict(FAULTS[0], severity="warn")
    assert not run_one(wrong).ok
    assert not Outcome("x", "healthy", "", None, None, None, "fail", 1).ok


def test_the_script_exits_zero_and_prints_the_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert f"faults detected {len(FAULTS)} of {len(FAULTS)}" in out
    assert f"false alarms 0 of {len(HEALTHY)} healthy variants" in out
