"""Card catalog: every row is sane and sourced; names resolve; user files override; the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpuwise.catalog.card_schema import CARD_FIELDS, META_FIELDS
from gpuwise.catalog.cards import (
    PRECISIONS,
    filter_cards,
    load_cards,
    normalize,
    resolve_card,
    strip_prefixes,
)
from gpuwise.errors import DataError, InputError, UnknownNameError
from gpuwise.units import GiB

CATALOG = load_cards()
CARDS = list(CATALOG)
ids = [c.id for c in CARDS]


pytestmark = pytest.mark.usefixtures("config_dir")  # tests/conftest.py: an empty config dir


# ------------------------------------------------------------------ every card

@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_every_card_has_bandwidth_memory_and_a_source(card) -> None:
    assert card.mem_bw_gbps > 0
    assert card.memory_gb > 0
    assert card.sources and all(s.strip() for s in card.sources)


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_dense_rates_never_exceed_sparse_rates(card) -> None:
    for dense, sparse in (("bf16_dense_tflops", "bf16_sparse_tflops"),
                          ("fp8_dense_tflops", "fp8_sparse_tflops"),
                          ("int8_dense_tops", "int8_sparse_tops")):
        d, s = getattr(card, dense), getattr(card, sparse)
        if d is not None and s is not None:
            assert d <= s, f"{card.id}: {dense} {d} > {sparse} {s}"


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_fp8_is_at_least_as_fast_as_bf16(card) -> None:
    if card.bf16_dense_tflops is not None and card.fp8_dense_tflops is not None:
        assert card.bf16_dense_tflops <= card.fp8_dense_tflops


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_cuda_memory_is_a_little_less_than_the_marketed_size_read_as_gib(card) -> None:
    # Marketed "80GB" HBM is 80 GiB of DRAM; CUDA shows ~79.1 GiB (more than 80e9 B = 74.5 GiB),
    # so the ceiling is the marketed number read as GiB, the floor the 1/16 that GDDR ECC reserves.
    assert 0.9 * card.memory_gb <= card.memory_cuda_gib < card.memory_gb
    assert card.usable_bytes == int(card.memory_cuda_gib * GiB)


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_provenance_lists_name_real_spec_fields(card) -> None:
    for name in (*card.derived, *card.unverified):
        assert name in CARD_FIELDS and name not in META_FIELDS
    assert card.provenance("id") == "official"


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_links_are_consistent(card) -> None:
    if card.interconnect == "none":
        assert card.interconnect_bw_gbps == 0 and card.interconnect_max_gpus == 1
    else:
        assert card.interconnect_bw_gbps > 0 and card.interconnect_max_gpus >= 2
    assert card.has_nvlink == (card.nvlink_gen is not None)


@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_every_id_and_alias_resolves_to_its_own_card(card) -> None:
    for name in (card.id, card.name, *card.aliases):
        assert resolve_card(name, CATALOG).card.id == card.id, name


def test_no_two_cards_share_a_lookup_key() -> None:
    seen: dict[str, str] = {}
    for card in CARDS:
        for name in (card.id, card.name, *card.aliases):
            key = strip_prefixes(normalize(name))
            assert seen.setdefault(key, card.id) == card.id, f"{name!r}: {seen[key]} vs {card.id}"


def test_the_catalog_covers_the_research_table_and_china_market_boards() -> None:
    research = Path(__file__).resolve().parents[2] / "shared" / "research" / "cards-reference.csv"
    if research.is_file():
        import csv

        with research.open(encoding="utf-8") as fh:
            wanted = {row["id"] for row in csv.DictReader(fh)}
        assert wanted <= set(ids)
    assert {"rtx-4090d", "rtx-4090-48gb", "h20", "l20", "a800-80gb-sxm", "h800-sxm"} <= set(ids)
    assert CATALOG.get("rtx-4090-48gb").verification == "unverified"


def test_geforce_cards_have_no_pcie_peer_to_peer() -> None:
    for card_id in ("rtx-4090", "rtx-5090"):
        assert CATALOG.get(card_id).pcie_p2p is False


def test_a100_has_no_fp8_and_h100_rates_are_dense() -> None:
    assert CATALOG.get("a100-80gb-sxm").dense_tflops("fp8") is None
    h100 = CATALOG.get("h100-sxm")
    assert h100.dense_tflops("bf16") == pytest.approx(989.4)
    assert h100.bf16_sparse_tflops == pytest.approx(2 * 989.4, rel=1e-3)
    assert CATALOG.get("rtx-4090").dense_tflops("bf16") == pytest.approx(165.2)
    assert [CATALOG.get("h200-sxm").dense_tflops(p) is not None for p in PRECISIONS].count(True) == 6


def test_an_unknown_precision_is_a_clear_error() -> None:
    with pytest.raises(InputError):
        CATALOG.get("h100-sxm").dense_tflops("fp12")  # type: ignore[arg-type]


def test_l40s_keeps_nvidias_published_figure_and_flags_it() -> None:
    l40s = CATALOG.get("l40s")
    assert l40s.bf16_dense_tflops == pytest.approx(362.05)
    assert l40s.provenance("bf16_dense_tflops") == "unverified"


def test_h200_memory_matches_what_cuda_reports() -> None:
    assert CATALOG.get("h200-sxm").memory_cuda_gib == pytest.approx(139.8)
    assert CATALOG.get("h200-sxm").provenance("memory_cuda_gib") == "official"
    assert CATALOG.get("h200-nvl").provenance("memory_cuda_gib") == "derived"


def test_loading_the_shipped_catalog_again_is_instant() -> None:
    start = time.perf_counter()
    for _ in range(100):
        load_cards()
    assert (time.perf_counter() - start) / 100 < 0.005


# ------------------------------------------------------------------ names

@pytest.mark.parametrize("name,card_id", [
    ("4090", "rtx-4090"), ("RTX4090", "rtx-4090"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("a100-80g", "a100-80gb-sxm"), ("A100-SXM-80GB", "a100-80gb-sxm"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"), ("A100 80GB PCIe", "a100-80gb-pcie"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"), ("h100", "h100-sxm"), ("H100-SXM", "h100-sxm"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("H200-SXM", "h200-sxm"), ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H200 NVL", "h200-nvl"), ("l40s", "l40s"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"), ("4090D", "rtx-4090d"), ("4090 48G", "rtx-4090-48gb"),
    ("Tesla T4", "t4"), ("AMD Instinct MI300X", "mi300x"), ("昇腾910B", "ascend-910b"),
])
def test_names_resolve_generously(name: str, card_id: str) -> None:
    assert resolve_card(name, CATALOG).card.id == card_id


@pytest.mark.parametrize("name,card_id", [
    ("A100", "a100-80gb-sxm"), ("H100", "h100-sxm"), ("H200", "h200-sxm"), ("A800", "a800-80gb-sxm"),
])
def test_an_ambiguous_name_gets_its_default_and_a_bilingual_note(name: str, card_id: str) -> None:
    resolved = resolve_card(name, CATALOG)
    assert resolved.card.id == card_id
    assert resolved.note is not None
    assert card_id in resolved.note.en and card_id in resolved.note.zh
    assert resolved.to_dict()["note"]["zh"] == resolved.note.zh


def test_an_exact_name_gets_no_note() -> None:
    assert resolve_card("NVIDIA H200", CATALOG).note is None
    assert resolve_card("h100-sxm", CATALOG).note is None


def test_a_typo_suggests_the_card_meant() -> None:
    with pytest.raises(UnknownNameError) as err:
        resolve_card("H10O", CATALOG)
    assert "H100" in err.value.suggestions
    assert "gpuwise cards" in err.value.hint.en
    with pytest.raises(InputError):
        resolve_card("  ", CATALOG)


# ------------------------------------------------------------------ user files

def test_a_user_row_overrides_field_by_field_and_a_new_id_extends(config_dir: Path) -> None:
    (config_dir / "cards.toml").write_text("""
schema_version = 1
[[card]]
id = "rtx-4090"
tdp_w = 400
[[card]]
id = "my-card"
name = "My Card"
vendor = "nvidia"
architecture = "Ada"
form_factor = "pcie"
aliases = ["mine"]
memory_gb = 48
memory_cuda_gib = 47.0
mem_bw_gbps = 900
family = "ada-dc"
sources = ["my own measurement"]
""", encoding="utf-8")
    catalog = load_cards()
    rtx = catalog.get("rtx-4090")
    assert rtx.tdp_w == 400 and rtx.mem_bw_gbps == 1008
    assert rtx.provenance("tdp_w") == "user" and rtx.provenance("mem_bw_gbps") == "official"
    assert resolve_card("mine", catalog).card.software == "cuda"
    assert len(catalog) == len(CATALOG) + 1
    assert load_cards().get("rtx-4090").tdp_w == 400  # read again, not stale
    (config_dir / "cards.toml").unlink()
    assert load_cards().get("rtx-4090").tdp_w == 450  # the shipped catalog was not modified


@pytest.mark.parametrize("body,words", [
    ('[[card]]\nid = "rtx-4090"\ninterconnect_bw_gbps = -5', ["interconnect_bw_gbps", "rtx-4090",
                                                              "0 or more"]),
    ('[[card]]\nid = "rtx-4090"\ntdp_w = 0', ["tdp_w", "greater than 0"]),
    ('[[card]]\nid = "rtx-4090"\nmem_bw_gbps = "fast"', ["mem_bw_gbps", "a number"]),
    ('[[card]]\nid = "rtx-4090"\ntdpw = 400', ["tdpw", "unknown field", "tdp_w"]),
    ('[[card]]\nid = "new-card"\nname = "X"', ["new-card", "missing required field"]),
    ('[[card]]\nid = "rtx-4090"\nvendor = "intel"', ["vendor", "nvidia"]),
    ('[[card]]\nid = "rtx-4090"\nunverified = ["speed"]', ["speed"]),
    ('[[card]]\nid = "rtx-4090"\nform_factor = "pcie-dekstop"', ["form_factor", "pcie-dekstop",
                                                               "form_factors.toml", "pcie-desktop"]),
    ('[[card]]\nid = "rtx-4090"\nmax_gpus_per_node = 0', ["max_gpus_per_node", "greater than 0"]),
    ('[[ambiguous]]\nnames = ["x"]\ndefault = "nope"\ncandidates = []', ["nope"]),
    ('[[card]\nid =', ["not valid TOML"]),
    ('schema_version = 2', ["schema_version"]),
], ids=["negative", "zero-power", "wrong-type", "unknown-key", "missing-required", "bad-choice",
        "bad-provenance", "unknown-form-factor", "zero-gpus-per-node", "ambiguous-to-nowhere",
        "not-toml", "future-schema"])
def test_a_malformed_user_file_is_a_data_error_naming_file_card_and_field(
        tmp_path: Path, body: str, words: list[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_cards([path])
    for word in [str(path), *words]:
        assert word in err.value.message.en
    assert err.value.message.zh


def test_a_missing_extra_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        load_cards([tmp_path / "nope.toml"])


# ------------------------------------------------------------------ filter

def test_filters_pick_big_nvlink_cards_fastest_memory_first() -> None:
    chosen = filter_cards(CATALOG, min_memory_gb=48, nvlink=True)
    assert chosen and all(c.memory_gb >= 48 and c.has_nvlink for c in chosen)
    assert [c.mem_bw_gbps for c in chosen] == sorted((c.mem_bw_gbps for c in chosen), reverse=True)
    assert "rtx-4090" not in [c.id for c in chosen]
    assert {c.vendor for c in filter_cards(CATALOG, vendor="amd")} == {"amd"}


def test_sorting_by_price_puts_unpriced_cards_last() -> None:
    from gpuwise.catalog.prices import price_per_gpu_hour

    chosen = filter_cards(CATALOG, sort="price")
    mids = [getattr(price_per_gpu_hour(c.id), "mid", None) for c in chosen]
    priced = [m for m in mids if m is not None]
    assert chosen[0].id == "rtx-4090" and priced == sorted(priced)
    assert mids[len(priced):] == [None] * (len(mids) - len(priced))
    names = [c.name.lower() for c in filter_cards(CATALOG, sort="name")]
    assert names == sorted(names)


def test_bad_filter_values_are_clear_errors() -> None:
    with pytest.raises(UnknownNameError):
        filter_cards(CATALOG, vendor="intel")
    with pytest.raises(UnknownNameError):
        filter_cards(CATALOG, sort="speed")
    with pytest.raises(InputError):
        filter_cards(CATALOG, min_memory_gb=-1)


# ------------------------------------------------------------------ CLI

def _app() -> typer.Typer:
    from gpuwise.cli import cards_cmd

    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """gpuwise (test shell)."""

    cards_cmd.register(app)
    return app


def _run(*args: str):
    return CliRunner().invoke(_app(), list(args), env={"COLUMNS": "220"})


def test_cli_lists_every_card_with_bilingual_headers() -> None:
    en, zh = _run("cards", "--lang", "en"), _run("cards", "--lang", "zh")
    assert en.exit_code == 0 and zh.exit_code == 0
    assert "h100-sxm" in en.stdout and "rtx-4090" in en.stdout and "bandwidth" in en.stdout
    assert "带宽" in zh.stdout


def test_cli_shows_one_card_as_json_with_its_note() -> None:
    result = _run("cards", "H200", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["id"] == "h200-sxm"
    assert data["memory_cuda_gib"] == pytest.approx(139.8)
    assert "h200-sxm" in data["note"]["en"]


def test_cli_filters_big_nvlink_cards() -> None:
    data = json.loads(_run("cards", "--min-memory", "48", "--nvlink", "--json").stdout)
    got = [c["id"] for c in data["cards"]]
    assert data["schema_version"] == 1 and "h100-sxm" in got and "l40s" not in got


def test_cli_detail_view_marks_provenance_and_lists_sources() -> None:
    result = _run("cards", "4090D", "--lang", "en")
    assert result.exit_code == 0
    assert "147.1*" in result.stdout and "425?" in result.stdout and "hmc-tech.com" in result.stdout


def test_cli_unknown_card_exits_2_with_a_suggestion_and_no_traceback() -> None:
    result = _run("cards", "H10O", "--lang", "en")
    assert result.exit_code == 2
    assert "Unknown card 'H10O'" in result.output and "H100" in result.output
    assert "Traceback" not in result.output
    as_json = _run("cards", "H10O", "--json")
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["error"] == "UnknownNameError"


def test_cli_reads_extra_card_files(tmp_path: Path) -> None:
    extra = tmp_path / "extra.toml"
    extra.write_text('[[card]]\nid = "l40s"\ntdp_w = 300\n', encoding="utf-8")
    data = json.loads(_run("cards", "l40s", "--cards", str(extra), "--json").stdout)
    assert data["tdp_w"] == 300 and data["user_fields"] == ["tdp_w"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[card]]\nid = "l40s"\ntdp_w = -1\n', encoding="utf-8")
    result = _run("cards", "--cards", str(bad))
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_every_family_has_achievable_fractions_when_that_table_is_present() -> None:
    import tomllib

    table = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "data" / "efficiency.toml"
    if not table.is_file():
        pytest.skip("efficiency.toml not written yet")
    families = tomllib.loads(table.read_text(encoding="utf-8"))
    assert {c.family for c in CARDS} <= set(families)
