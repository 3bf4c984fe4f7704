"""`estimate --calibration raw.json`: measured rates replace the catalog's assumed fractions."""

from __future__ import annotations

from gpuwise.service import EstimateRequest, estimate_json

RAW = "tests/fixtures/verify/h100x8_raw.json"


def test_a_verify_result_changes_the_speed_and_says_so() -> None:
    base = estimate_json(EstimateRequest(model="llama-3.1-8b", card="H100-SXM"))
    cal = estimate_json(EstimateRequest(model="llama-3.1-8b", card="H100-SXM", calibration=RAW))
    assert cal["calibrated"] and not base["calibrated"]
    assert cal["speed"]["decode_tokens_per_s"] != base["speed"]["decode_tokens_per_s"]
    assert any(RAW in w for w in cal["warnings"])


def test_a_training_run_gets_a_time_and_a_cost() -> None:
    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="H100-SXM", task="full", gpus=8, zero=3,
                                      train_tokens=1e9))
    assert r["cost"]["per_run"] > 0 and r["cost"]["run_hours"] > 0
