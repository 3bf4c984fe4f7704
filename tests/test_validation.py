"""The validation table (validation/points) and its gate: the schema refuses bad points, the
must-pass points hold, the gate catches a broken constant, and estimates carry the fitted bands."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from benchmarks.validation.fit import coverage, fit_cells, residuals
from benchmarks.validation.gate import gate_failures
from benchmarks.validation.score import score, summarise
from benchmarks.validation.table import TABLE, TableError, load_points

from gpuwise.estimate.links import efficiency_table
from gpuwise.service import EstimateRequest, estimate_json

GOOD = '''
schema_version = 1
[[point]]
id = "p1"
metric = "weights"
value = 14.99
unit = "GiB"
source = "https://example.org/log"
quote = "Loading model weights took 14.99 GiB"
stack = "vllm"
stack_version = "0.6.4"
card = "h100-sxm"
card_as_written = "NVIDIA H100 80GB HBM3"
model_as_written = "meta-llama/Llama-3.1-8B-Instruct"
settings = "TP 1, bf16"
request = { model = "llama-3.1-8b", card = "h100-sxm" }
'''


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_table_has_150_points_over_12_card_types_with_their_sources() -> None:
    points = load_points()
    assert len(points) >= 150
    cards = Counter(p.card for p in points if p.card)
    assert len(cards) >= 12, cards
    consumer = {"rtx-4090", "rtx-4090d", "rtx-3090", "rtx-5090", "l20", "h20", "a800-80gb-sxm",
                "a800-80gb-pcie", "l40s"}
    assert len(consumer & set(cards)) >= 4
    assert all(p.source and p.quote.strip() and p.settings for p in points)


@pytest.mark.parametrize(("change", "message"), [
    (("value = 14.99", "value = -1.0"), "positive finite"),
    (("value = 14.99", "value = nan"), "positive finite"),
    (('metric = "weights"', 'metric = "wieghts"'), "is not one of"),
    (('unit = "GiB"', 'unit = "tok/s"'), "does not measure"),
    (('settings = "TP 1, bf16"', 'settings = "TP 1, bf16"\nmissing = "no preset"'), "not both"),
    (('request = { model = "llama-3.1-8b", card = "h100-sxm" }',
      'request = { model = "llama-3.1-8b", card = "h100-sxm", contxt = 4 }'), "not EstimateRequest fields"),
    (('request = { model = "llama-3.1-8b", card = "h100-sxm" }',
      'request = { model = "llama-3.1-8b", card = "h100-sxm" }\nmust_pass = true'), "needs a tolerance"),
])
def test_the_schema_refuses_a_bad_point(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    with pytest.raises(TableError, match=message):
        load_points([_write(tmp_path, GOOD.replace(*change))])


def test_ids_are_unique_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "b.toml").write_text(GOOD, encoding="utf-8")
    with pytest.raises(TableError, match="already used"):
        load_points(sorted(tmp_path.glob("*.toml")))


MUST_PASS = [p for p in load_points() if p.must_pass]


@pytest.mark.parametrize("point", MUST_PASS, ids=lambda p: p.id)
def test_a_must_pass_point_stays_inside_its_tolerance(point: object) -> None:
    s = score(point)  # type: ignore[arg-type]
    assert s.predicted is not None, s.error
    assert s.passes, f"{s.predicted:.4g} vs {s.point.value:.4g} ({s.rel_error:+.1%}, allowed {s.point.tolerance:.0%})"


def test_the_gate_fails_when_a_constant_is_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [p for p in load_points([TABLE / "llamacpp_speed.toml"]) if p.expressible]
    good = [score(p) for p in points]
    baseline = {m: s.to_dict() for m, s in summarise(good).items()}
    cells = fit_cells(residuals(good))
    assert gate_failures(good, summarise(good), coverage(residuals(good), cells), baseline) == []
    for family in efficiency_table().values():  # every card "reaches" twice its achievable bandwidth
        if isinstance(family, dict) and "bw" in family:
            monkeypatch.setitem(family, "bw", family["bw"] * 2)
    broken = [score(p) for p in points]
    failures = gate_failures(broken, summarise(broken), coverage(residuals(broken), cells), baseline)
    assert any(f.startswith("decode_tok_s: median_abs_pct") for f in failures), failures


def test_an_estimate_carries_bands_that_hold_the_estimate() -> None:
    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="rtx-4090", context=8192, concurrency=4))
    assert r["fit"] in ("fits", "tight")
    for path in ("memory.required", "capacity.kv_tokens", "speed.decode_tokens_per_s", "speed.ttft_s",
                 "speed.throughput_tokens_per_s"):
        band = r["ranges"][path]
        section, key = path.split(".")
        value = r[section][key]
        assert band["low"] <= value * (1 + 1e-5) and value <= band["high"] * (1 + 1e-5), (path, band, value)
        assert math.isfinite(band["low"]) and band["low"] > 0
    training = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="lora"))
    assert {"memory.required", "speed.tokens_per_s", "speed.step_time_s"} <= set(training["ranges"])


def test_the_verdict_is_tight_when_only_the_top_of_the_band_overflows() -> None:
    def at(seq_len: int) -> dict[str, object]:
        return estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", task="lora", seq_len=seq_len))
    verdicts = {at(n)["fit"] for n in (2048, 8192, 16384, 24576, 32768, 65536)}
    assert {"fits", "does_not_fit"} <= verdicts
    first = at(2048)
    top = first["ranges"]["memory.required"]["high"]  # type: ignore[index]
    assert (top > first["usable_bytes"]) == (first["fit"] == "tight")  # type: ignore[operator]


def test_every_value_says_where_it_came_from() -> None:
    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm"))
    prov = r["provenance"]
    kinds = {"datasheet", "measured", "fitted", "formula", "constant"}
    assert all(v["kind"] in kinds for v in prov["inputs"].values())
    for path, value in prov["values"].items():
        assert value["kind"] in kinds, path
        assert set(value.get("inputs", [])) <= set(prov["inputs"]), path
    assert {"usable_bytes", "memory.weights", "memory.required", "speed", "capacity", "cost"} <= set(prov["values"])
    assert prov["inputs"]["card_bandwidth"]["source"]
    if r["ranges"]:
        fitted = {b["fitted"] for b in r["ranges"].values()}
        assert fitted <= set(prov["ranges"]["rows"])
        assert all(prov["ranges"]["rows"][k] for k in fitted)


def test_the_vllm_default_on_h100_reports_the_logged_weights_and_kv_pool() -> None:
    # vLLM on one H100 SXM, Llama-3.1-8B, gpu_memory_utilization 0.9, 16k context: the first
    # round's done-when figures, weights 14.99 GiB (2 %) and KV pool 51.4 GiB (8 %).
    r = estimate_json(EstimateRequest(model="llama-3.1-8b", card="H100-SXM", engine="vllm",
                                      gpu_memory_utilization=0.9, context=16000))
    assert r["memory"]["weights"] / 2**30 == pytest.approx(14.99, rel=0.02)
    assert r["memory"]["kv_pool"] / 2**30 == pytest.approx(51.4, rel=0.08)
