"""Weight-only Marlin prefill: vLLM's Marlin methods run the prompt's GEMMs through Marlin too, whose
plateau (efficiency.toml marlin_peak_share) caps them until the kernel's 2025 rework (marlin_prefill_before)."""

from __future__ import annotations

import pytest

from gpuwise.estimate.links import efficiency_table
from gpuwise.service import EstimateRequest, estimate_json


def _prefill_s(**kw: object) -> float:
    base: dict[str, object] = {"model": "llama-3.1-8b", "card": "a100-80gb-sxm", "context": 2100,
                               "output_tokens": 100, "concurrency": 1}
    speed = estimate_json(EstimateRequest(**{**base, **kw}))["speed"]  # type: ignore[arg-type]
    return 2000 / float(speed["prefill_tokens_per_s"])


def test_an_fp8_checkpoint_on_an_a100_prefills_at_marlins_plateau_in_vllm_0_5() -> None:
    """A 2,000-token prompt is FLOP-bound: under fp8_marlin (W8A16) its linear FLOPs run at 0.45 of the
    16-bit peak instead of cuBLAS's 0.85 share, attention (a few % of the FLOPs here) at the prefill rate."""
    share = float(efficiency_table()["overheads"]["marlin_peak_share"])
    slow = _prefill_s(weights="fp8", engine_version="0.5.4") / _prefill_s(weights="bf16", engine_version="0.5.4")
    assert 0.85 / share * 0.93 < slow < 0.85 / share


def test_the_reworked_marlin_and_w8a8_cards_keep_the_prefill_share() -> None:
    """From vLLM 0.9 (PR #16850's large-batch rework), on an unversioned (newest) request, and on an H100
    (FP8 tensor cores: W8A8, not Marlin), the prefill is not capped at Marlin's plateau."""
    bf16 = _prefill_s(weights="bf16", engine_version="0.9.1")
    assert _prefill_s(weights="fp8", engine_version="0.9.1") == pytest.approx(bf16, rel=1e-9)
    assert _prefill_s(weights="fp8") == pytest.approx(_prefill_s(weights="bf16"), rel=1e-9)
    h100 = {"card": "h100-sxm", "engine_version": "0.5.4"}
    assert _prefill_s(weights="fp8", **h100) < _prefill_s(weights="bf16", **h100)


def test_the_plateau_version_is_a_version_the_engine_rules_can_read() -> None:
    from gpuwise.catalog.engines import version_key

    table = efficiency_table()["overheads"]["marlin_prefill_before"]
    assert table and all(version_key(str(v)) is not None for v in table.values())
