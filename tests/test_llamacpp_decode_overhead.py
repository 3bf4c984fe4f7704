"""llama.cpp's per-token CPU work (efficiency.toml [overheads] decode_step_s llamacpp, from
ggml-org/llama.cpp#7456) and the GGUF types' decode_bw_factor figures re-derived with it: each factor's
own llama-bench point must still come out where it was measured once that work is charged."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.estimate.links import efficiency_table
from gpuwise.service import EstimateRequest, estimate_json


def _speed(**kw: Any) -> dict[str, Any]:
    speed: dict[str, Any] = estimate_json(EstimateRequest(**kw))["speed"]
    return speed


def test_the_per_token_cpu_work_is_within_the_share_llama_cpp_7456_timed() -> None:
    """#7456: 10-15 % of a 6.10 ms token (H100 PCIe, 7B Q4_K_M with CUDA graphs, #6763) is CPU work."""
    step = float(efficiency_table()["overheads"]["decode_step_s"]["llamacpp"])
    assert 0.10 * 6.10e-3 <= step <= 0.15 * 6.10e-3
    s = _speed(model="llama-3.1-8b", card="h100-pcie", engine="llamacpp", weights="gguf:Q4_K_M", context=513,
               output_tokens=512)
    assert s["step_breakdown_s"]["overhead"] == pytest.approx(step)


@pytest.mark.parametrize(("kw", "measured"), [
    # golden_speed.toml llamacpp-llama31-8b-q4_k_m-rtx3080 (the Q4_K_M factor's point): tg 111.95 tok/s
    ({"model": "llama-3.1-8b", "card": "rtx-3080", "weights": "gguf:Q4_K_M", "context": 640,
      "output_tokens": 128}, 111.95),
    # llamacpp-llama7b-q8_0-rtx4090 (the Q8_0 factor's point): tg128 98.1 tok/s
    ({"model": "7b", "card": "rtx-4090", "weights": "gguf:Q8_0", "context": 640, "output_tokens": 128}, 98.1),
], ids=["q4_k_m-rtx3080", "q8_0-rtx4090"])
def test_each_gguf_factor_still_reproduces_its_own_point(kw: dict[str, Any], measured: float) -> None:
    s = _speed(engine="llamacpp", **kw)
    assert s["decode_tokens_per_s"] == pytest.approx(measured, rel=0.02)


def test_a_small_quantised_model_loses_a_larger_share_of_its_token_to_the_cpu() -> None:
    """The CPU work does not shrink with the bytes: it is a larger share of an 8B Q4_K_M token than of 70B's."""
    shares = []
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        s = _speed(model=model, card="h100-pcie", engine="llamacpp", weights="gguf:Q4_K_M", context=513,
                   output_tokens=512)
        shares.append(s["step_breakdown_s"]["overhead"] * s["decode_tokens_per_s"])
    assert shares[0] > 2 * shares[1] > 0
