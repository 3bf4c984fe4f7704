"""`gpuwise verify` and `gpuwise doctor` from the command line, as a user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verify_fakes import FIXTURES

RAW = FIXTURES / "h100x8_raw.json"
no_gpu = pytest.mark.skipif(shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists(),
                            reason="this machine has an NVIDIA driver")


def gpuwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True,
                          timeout=300, check=False, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "LANG": "C.UTF-8"})


@no_gpu
def test_verify_without_a_gpu_exits_non_zero_with_a_clear_message_and_no_traceback() -> None:
    out = gpuwise("verify")
    assert out.returncode == 3
    assert "No NVIDIA GPU or driver found" in out.stderr and "gpuwise doctor" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@no_gpu
def test_verify_json_without_a_gpu_says_the_same_in_json() -> None:
    out = gpuwise("verify", "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 3 and data["error"] == "NoDeviceError"
    assert "No NVIDIA GPU or driver found" in data["message"]


@no_gpu
def test_doctor_without_a_gpu_explains_why() -> None:
    out = gpuwise("doctor", "--lang", "en")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "No NVIDIA driver" in out.stdout or "No NVIDIA device" in out.stdout
    data = json.loads(gpuwise("doctor", "--json").stdout)
    assert data["kind"] == "gpuwise.doctor" and data["ok"] is False


def test_verify_from_the_healthy_fixture_passes_and_exits_zero(tmp_path: Path) -> None:
    out = gpuwise("verify", "--from", str(RAW), "--card", "H100-SXM", "--gpus", "8",
                  "--report", str(tmp_path / "r.md"), "--lang", "en")
    assert out.returncode == 0, out.stderr
    assert "performance.mem_bw" in out.stdout and "0 failed" in out.stdout
    report = (tmp_path / "r.md").read_text()
    assert report.startswith("# gpuwise verify") and "| links.nvlink | PASS |" in report


def test_verify_from_with_a_failing_contract_exits_one_and_writes_html(tmp_path: Path) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text('card = "H100-SXM"\ncount = 8\nmin_mem_bw_gbps = 4000\n')
    out = gpuwise("verify", "--from", str(RAW), "--contract", str(contract), "--json",
                  "--report", str(tmp_path / "r.html"), "--save", str(tmp_path / "raw.json"))
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["status"] == "fail"
    assert any(c["name"] == "performance.mem_bw" and c["status"] == "fail" for c in data["checks"])
    page = (tmp_path / "r.html").read_text()
    assert "<style>" in page and "http" not in page.split("</style>")[0]
    assert json.loads((tmp_path / "raw.json").read_text())["schema_version"] == 1


def test_verify_in_chinese_renders_chinese_details() -> None:
    out = gpuwise("verify", "--from", str(RAW), "--lang", "zh")
    assert out.returncode == 0 and "通过" in out.stdout


def test_a_misspelt_card_is_a_user_error_not_a_traceback() -> None:
    out = gpuwise("verify", "--from", str(RAW), "--card", "H100-SMX")
    assert out.returncode == 2 and "Did you mean" in out.stderr and "Traceback" not in out.stderr


def test_a_report_with_an_unknown_extension_is_refused_before_any_work() -> None:
    out = gpuwise("verify", "--from", str(RAW), "--report", "r.pdf")
    assert out.returncode == 2 and ".md or .html" in out.stderr
