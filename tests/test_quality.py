"""The quality-cost table: every row cited, tiers ordered, lookups forgiving only where documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuwise.catalog import quality as quality_mod
from gpuwise.catalog.gguf_reader import GGUF_BITS_PER_WEIGHT
from gpuwise.catalog.quality import (
    TIERS,
    QualityCost,
    default_ok,
    is_quantised,
    quality_cost,
    quality_rows,
)
from gpuwise.errors import DataError, GpuwiseError, InputError

ROWS = quality_rows()
GGUF_ROWS = {f: c for f, c in ROWS.items() if f.startswith("gguf:")}
_HAN = re.compile(r"[\u4e00-\u9fff]")
_SOURCE = re.compile(r"^(https?://\S+|arXiv:\d{4}\.\d{4,5}) - \S")


@pytest.mark.parametrize("fmt", sorted(ROWS))
def test_every_row_names_its_sources_and_quotes_each_one(fmt: str) -> None:
    cost = ROWS[fmt]
    assert cost.sources
    assert len(cost.quotes) == len(cost.sources)
    assert all(len(q) >= 20 for q in cost.quotes)
    assert all(_SOURCE.match(s) for s in cost.sources), cost.sources


@pytest.mark.parametrize("fmt", sorted(ROWS))
def test_every_row_speaks_both_languages(fmt: str) -> None:
    summary = ROWS[fmt].summary
    assert summary.en.strip() and not _HAN.search(summary.en)
    assert _HAN.search(summary.zh)


@pytest.mark.parametrize("fmt", sorted(f for f in ROWS if ROWS[f].tier != "lossless"))
def test_every_quantised_row_states_a_measured_figure(fmt: str) -> None:
    cost = ROWS[fmt]
    assert cost.value is not None and cost.metric and cost.model_scope
    assert any(ch.isdigit() for ch in cost.summary.en)


def test_unverified_rows_say_why() -> None:
    assert all(c.note for c in ROWS.values() if c.unverified)


def test_the_table_covers_every_format_the_tool_uses() -> None:
    wanted = {"bf16", "fp16", "fp32", "fp8", "int8", "int4", "nf4", "gguf:Q8_0", "gguf:Q6_K",
              "gguf:Q5_K_M", "gguf:Q4_K_M", "gguf:Q4_0", "gguf:Q3_K_M", "gguf:Q2_K"}
    assert wanted <= set(ROWS)


def test_bf16_is_lossless_and_fp8_near_lossless() -> None:
    assert quality_cost("bf16").tier == "lossless"
    assert quality_cost("fp8").tier == "near-lossless"
    assert default_ok("bf16") and default_ok("fp8")


@pytest.mark.parametrize("fmt", ["int4", "nf4", "int8", "gguf:Q4_K_M", "gguf:Q2_K"])
def test_four_bit_and_int8_formats_are_never_picked_by_default(fmt: str) -> None:
    assert not default_ok(fmt)


def test_tiers_run_from_best_to_worst() -> None:
    assert TIERS == ("lossless", "near-lossless", "small", "noticeable", "large")
    assert all(c.tier in TIERS for c in ROWS.values())


@pytest.mark.parametrize("name", sorted(GGUF_BITS_PER_WEIGHT))
def test_every_gguf_type_resolves_exactly_or_by_nearest_bits(name: str) -> None:
    cost = quality_cost(f"gguf:{name}")
    assert isinstance(cost, QualityCost)
    if cost.approximated_from is not None:
        assert cost.approximated_from in GGUF_ROWS
        assert cost.summary.en.startswith("Approximation:")
        assert cost.summary.zh.startswith("近似值")


def test_gguf_rows_never_get_better_as_bits_fall() -> None:
    by_bits = sorted(GGUF_ROWS, key=lambda f: -GGUF_BITS_PER_WEIGHT[f[5:]])
    ranks = [GGUF_ROWS[f].tier_rank for f in by_bits]
    assert ranks == sorted(ranks), list(zip(by_bits, ranks, strict=True))


def test_every_gguf_type_never_gets_better_as_bits_fall() -> None:
    names = sorted(GGUF_BITS_PER_WEIGHT, key=lambda n: -GGUF_BITS_PER_WEIGHT[n])
    ranks = [quality_cost(f"gguf:{n}").tier_rank for n in names]
    assert ranks == sorted(ranks)


def test_gguf_type_names_ignore_case_and_follow_llama_quantize_aliases() -> None:
    assert quality_cost("gguf:q4_k_m") == quality_cost("gguf:Q4_K_M")
    assert quality_cost("GGUF:Q4_K").format == "gguf:Q4_K_M"
    assert quality_cost("gguf:Q4_K").approximated_from is None


def test_an_unmeasured_gguf_type_borrows_the_nearest_and_says_so() -> None:
    cost = quality_cost("gguf:Q5_K_S")  # 5.52 bpw: Q5_K_M (5.68) is nearest
    assert cost.approximated_from == "gguf:Q5_K_M"
    assert cost.format == "gguf:Q5_K_S"
    assert "nearest" in cost.summary.en


def test_gguf_float_types_are_the_checkpoints_own_precision() -> None:
    assert quality_cost("gguf:F16").tier == "lossless"
    assert quality_cost("gguf:bf16").approximated_from is None
    assert not is_quantised("gguf:F16")


@pytest.mark.parametrize("fmt, quantised", [
    ("bf16", False), ("fp16", False), ("fp32", False), ("fp8", True), ("int8", True),
    ("int4", True), ("nf4", True), ("gguf:Q8_0", True), ("gguf:BF16", False),
])
def test_only_the_checkpoints_own_floats_count_as_unquantised(fmt: str, quantised: bool) -> None:
    assert is_quantised(fmt) is quantised


def test_an_unknown_format_is_a_clear_error_with_a_suggestion() -> None:
    with pytest.raises(InputError) as info:
        quality_cost("int 4")
    assert "'int 4'" in info.value.message.en
    assert "int4" in info.value.suggestions
    assert info.value.hint is not None and "gpuwise" in info.value.hint.en


def test_an_unknown_gguf_type_is_a_clear_error() -> None:
    with pytest.raises(GpuwiseError) as info:
        quality_cost("gguf:Q4_K_XL")
    assert "Q4_K_XL" in info.value.message.en
    assert info.value.suggestions


def test_a_bad_row_names_the_file_the_row_and_the_field(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "quant_quality.toml"
    bad.write_text('schema_version = 1\n[[quality]]\nformat = "fp8"\ntier = "tiny"\n'
                   'summary_en = "x"\nsummary_zh = "x"\nmetric = "x"\nvalue = 1\n'
                   'model_scope = "x"\nsources = ["arXiv:1234.56789 - t"]\nquote = ["q"]\n',
                   encoding="utf-8")
    monkeypatch.setattr(quality_mod, "QUALITY_FILE", bad)
    quality_rows.cache_clear()
    try:
        with pytest.raises(DataError) as info:
            quality_rows()
        text = info.value.message.en
        assert str(bad) in text and "row #1 (fp8)" in text and "'tier'" in text
    finally:
        quality_rows.cache_clear()


def test_a_row_without_a_quote_per_source_is_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "quant_quality.toml"
    bad.write_text('[[quality]]\nformat = "fp8"\ntier = "small"\nsummary_en = "x"\n'
                   'summary_zh = "x"\nmetric = "x"\nvalue = 1\nmodel_scope = "x"\n'
                   'sources = ["a", "b"]\nquote = ["q"]\n', encoding="utf-8")
    monkeypatch.setattr(quality_mod, "QUALITY_FILE", bad)
    quality_rows.cache_clear()
    try:
        with pytest.raises(DataError, match="one quote per source"):
            quality_rows()
    finally:
        quality_rows.cache_clear()
