"""The evidence bundle: raw evidence with a content hash, verdict, reports, SHA256SUMS."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from gpuwise.verify.judge import Claim, judge
from gpuwise.verify.raw import load_evidence
from tests.verify_fakes import FIXTURES

RAW = FIXTURES / "h100x8_raw.json"


def evidence_check(path: Path) -> str:
    verdict = judge(load_evidence(path), Claim(card="H100-SXM", count=8))
    return next(c.status for c in verdict.checks if c.name == "inventory.evidence")


def test_the_saved_fixture_carries_a_hash_that_verifies() -> None:
    assert load_evidence(RAW).integrity == "verified" and evidence_check(RAW) == "pass"


def test_an_edit_after_saving_is_flagged(tmp_path: Path) -> None:
    data = json.loads(RAW.read_text())
    data["bench"][0]["mem_bw_bytes_per_s"] = 3.3e12  # a flattering edit
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(data))
    assert load_evidence(path).integrity == "edited" and evidence_check(path) == "warn"
    del data["content_sha256"]
    path.write_text(json.dumps(data))
    assert evidence_check(path) == "skipped"


def test_the_bundle_holds_every_file_with_matching_sums(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    run = subprocess.run([sys.executable, "-m", "gpuwise", "verify", "--from", str(RAW), "--card", "H100-SXM",
                          "--bundle", str(out), "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"raw.json", "verdict.json", "report.md", "report.html"}
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert load_evidence(out / "raw.json").integrity == "verified"
    assert json.loads((out / "verdict.json").read_text())["status"] == "pass"
    page = (out / "report.html").read_text()
    assert "Sustained window" in page and "nvidia-smi topo -m" in page and "NV18" in page
