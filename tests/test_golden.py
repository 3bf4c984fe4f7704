"""Golden tests: estimates against published measurements (tests/golden/*.toml cites each one,
with the quoted log line or table). Tolerances are per check in benchmarks/accuracy.py:
weights 2-3 %, vLLM KV pool 10 %, decode/training speed 30 %."""

from __future__ import annotations

import pytest
from benchmarks.accuracy import CHECKS, Check, evaluate


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: f"{c.case}:{c.quantity}")
def test_estimate_matches_the_published_measurement(check: Check) -> None:
    predicted, measured, err = evaluate(check)
    assert abs(err) <= check.tolerance, f"predicted {predicted:.4g} vs measured {measured:.4g} ({err:+.1%})"


def test_the_done_when_vllm_setting_reports_weights_and_kv_pool_within_tolerance() -> None:
    # Issue [1 of 4]: weights within 2 % of vLLM's 14.99 GiB, KV pool within 8 % of 51.4 GiB.
    from gpuwise.service import EstimateRequest, estimate_json

    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="H100-SXM", engine="vllm",
                                      gpu_memory_utilization=0.9, context=16000))
    assert r["memory"]["weights"] / 2**30 == pytest.approx(14.99, rel=0.02)
    assert r["memory"]["kv_pool"] / 2**30 == pytest.approx(51.4, rel=0.08)
