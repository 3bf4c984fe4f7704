"""Raw evidence round-trips through JSON; calibration reads measured numbers from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.errors import DataError
from gpuwise.verify.calibration import Calibration, load_calibration
from gpuwise.verify.judge import judge
from gpuwise.verify.nvml import NotAvailable
from gpuwise.verify.raw import evidence_from_dict, evidence_to_dict, load_evidence, save_evidence
from tests.verify_fakes import FIXTURES

RAW = FIXTURES / "h100x8_raw.json"


def test_saved_evidence_loads_back_identical(tmp_path: Path) -> None:
    ev = load_evidence(RAW)
    save_evidence(ev, tmp_path / "again.json")
    assert load_evidence(tmp_path / "again.json") == ev


def test_not_available_values_are_stored_with_their_reason() -> None:
    data = evidence_to_dict(load_evidence(RAW))
    assert data["gpus"][0]["retired_pages_pending"] == {"na": "not available on this card"}
    assert data["schema_version"] == 1 and data["kind"] == "gpuwise.verify.raw"
    assert evidence_from_dict(data).gpus[0].retired_pages_pending == NotAvailable("not available on this card")


def test_a_newer_schema_version_is_refused_with_advice(tmp_path: Path) -> None:
    data = json.loads(RAW.read_text())
    data["schema_version"] = 99
    path = tmp_path / "new.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        load_evidence(path)
    assert "Upgrade gpuwise" in err.value.hint.en


def test_a_file_that_is_not_raw_evidence_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(DataError):
        load_evidence(path)
    with pytest.raises(DataError):
        load_evidence(tmp_path / "missing.json")


def test_calibration_keeps_the_slowest_gpu_per_measurement() -> None:
    cal = load_calibration(RAW)
    assert isinstance(cal, Calibration) and cal.card_id == "h100-sxm" and cal.n_gpus == 8
    assert cal.mem_bw_bytes_per_s == pytest.approx(2.95e12 * (1 - 0.004 * 7))
    assert set(cal.matmul_flops_per_s) == {"bf16", "fp16", "fp8"}
    assert cal.matmul_flops_per_s["bf16"] == pytest.approx(742e12 * (1 - 0.004 * 7))
    assert cal.pcie_h2d_bytes_per_s == pytest.approx(53.1e9 * (1 - 0.004 * 7))
    assert cal.allreduce_busbw_bytes_per_s == pytest.approx(212.6e9 * 2 * 7 / 8)
    assert cal.source == str(RAW)


def test_calibration_from_an_inventory_only_run_is_refused(tmp_path: Path) -> None:
    from dataclasses import replace

    ev = replace(load_evidence(RAW), bench=NotAvailable("not run"), allreduce=NotAvailable("x"))
    save_evidence(ev, tmp_path / "inv.json")
    with pytest.raises(DataError):
        load_calibration(tmp_path / "inv.json")


def test_judging_again_from_saved_evidence_gives_the_same_verdict() -> None:
    ev = load_evidence(RAW)
    assert judge(ev).to_dict() == judge(evidence_from_dict(evidence_to_dict(ev))).to_dict()
