"""`gpuwise prices import`: SkyPilot, gpuhunt and plain CSV files become price rows that
`load_prices` reads back; every skipped row says why; hostile cells cannot break the TOML."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpuwise.catalog.prices import (
    STALE_PRICE_DAYS,
    PriceOffer,
    load_prices,
    price_age_days,
    price_per_gpu_hour,
    prices_toml,
    toml_string,
)
from gpuwise.catalog.prices_import import (
    MAX_IMPORT_BYTES,
    PriceImport,
    clean_text,
    import_prices,
    parse_prices,
)
from gpuwise.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "prices"
SKYPILOT = FIXTURES / "skypilot_aws_vms.csv"
GPUHUNT = FIXTURES / "gpuhunt_aws.csv"
PLAIN = FIXTURES / "plain.csv"
PLAIN_HEADER = "provider,card,billing,price,as_of,currency,unit,region,source,note\n"


pytestmark = pytest.mark.usefixtures("config_dir")  # tests/conftest.py: an empty config dir


def _by(result: PriceImport, card: str, billing: str = "hourly", region: str = "us-east-1") -> PriceOffer:
    found = [o for o in result.offers if (o.card, o.billing, o.region) == (card, billing, region)]
    assert len(found) == 1, [o.key for o in result.offers]
    return found[0]


def _key(offer: PriceOffer) -> tuple[str, str, str, str]:
    return offer.key


def _plain(text: str, **kwargs: object) -> PriceImport:
    return parse_prices(PLAIN_HEADER + text, file="mine.csv", as_of="2026-11-01", **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ age

@pytest.mark.parametrize("as_of,days", [("2026-11-20", 10), ("2026-11", 29), ("2026", 333),
                                        ("2026-12-15", -15)],
                         ids=["full-date", "month-counts-from-the-1st", "year-counts-from-1-january",
                              "future"])
def test_a_price_age_counts_from_the_oldest_day_its_date_can_mean(as_of: str, days: int) -> None:
    assert price_age_days(as_of, datetime.date(2026, 11, 30)) == days


def test_the_shipped_year_level_reference_is_stale_after_half_a_year() -> None:
    quote = price_per_gpu_hour("h100-sxm")
    assert quote is not None and quote.as_of == "2026"
    assert quote.age_days(datetime.date(2026, 6, 29)) < STALE_PRICE_DAYS < quote.age_days(datetime.date(2026, 7, 1))


@pytest.mark.parametrize("bad", ["last week", "2026-13", "2026-02-30", ""])
def test_an_impossible_date_has_no_age(bad: str) -> None:
    with pytest.raises(InputError):
        price_age_days(bad, datetime.date(2026, 1, 1))


# ------------------------------------------------------------------ SkyPilot

def test_skypilot_prices_are_per_gpu_with_spot_rows_and_regions_kept_apart() -> None:
    result = import_prices(SKYPILOT, provider="aws", as_of="2026-11-20")
    assert result.format == "skypilot" and result.as_of_from == "flag"
    a100 = _by(result, "a100-40gb-sxm")
    assert a100.low == a100.high == pytest.approx(32.7726 / 8)  # p4d.24xlarge: 8 GPUs per instance
    assert (a100.provider, a100.currency, a100.unit, a100.as_of) == ("aws", "USD", "gpu_hour", "2026-11-20")
    assert "p4d.24xlarge" in a100.source and "SkyPilot" in a100.source
    assert _by(result, "a100-40gb-sxm", "spot").low == pytest.approx(11.5702 / 8)  # cheaper of two zones
    assert _by(result, "a10g", region="us-west-2").low == pytest.approx(1.006)
    assert _by(result, "a10g", "spot", "us-west-2").low == pytest.approx(0.4387)
    assert not [o for o in result.offers if o.card == "a100-80gb-sxm" and o.billing == "spot"]  # no SpotPrice


def test_skypilot_without_a_provider_is_called_skypilot() -> None:
    result = import_prices(SKYPILOT, as_of="2026-11-20")
    assert {o.provider for o in result.offers} == {"skypilot"}


def test_dearer_rows_with_one_key_are_merged_into_the_cheapest_and_counted() -> None:
    result = import_prices(SKYPILOT, as_of="2026-11-20")
    a10g = _by(result, "a10g")
    assert a10g.low == pytest.approx(1.006) and "cheapest of 2 rows" in a10g.note  # g5.xlarge < g5.2xlarge
    assert result.merged == 4  # a10g hourly + spot (g5.2xlarge), a100 hourly + spot (second zone)
    assert len({o.key for o in result.offers}) == len(result.offers)


def test_memory_picks_the_variant_and_the_remaining_form_factor_guess_is_said_aloud() -> None:
    result = import_prices(SKYPILOT, as_of="2026-11-20")
    cards = result.per_card()
    assert cards["a100-40gb-sxm"] == 2 and cards["a100-80gb-sxm"] == 1  # 40960 MiB / "A100-80GB"
    assert cards["h100-sxm"] == 1 and cards["v100-sxm2-16gb"] == 2  # 81920 / 16384 MiB
    assumed = {(a.name, a.card) for a in result.assumptions}
    assert ("A100", "a100-40gb-sxm") in assumed and ("H100", "h100-sxm") in assumed
    h100 = _by(result, "h100-sxm")
    assert "h100-pcie" in h100.note and "form factor" in h100.note
    assert all(a.text.zh for a in result.assumptions)


def test_every_skypilot_row_is_imported_counted_or_skipped_with_a_bilingual_reason() -> None:
    result = import_prices(SKYPILOT, as_of="2026-11-20")
    assert result.no_accelerator == 1  # m5.large
    reasons = {s.name: s for s in result.skipped}
    assert set(reasons) == {"Inferentia2", "A100"}
    assert reasons["Inferentia2"].line == 11 and "not a card in the catalog" in reasons["Inferentia2"].reason.en
    assert reasons["A100"].line == 13 and "no memory size" in reasons["A100"].reason.en
    assert "a100-40gb-pcie" in reasons["A100"].candidates
    assert all(s.reason.zh and s.reason.zh != s.reason.en for s in result.skipped)


def test_a_card_map_chooses_the_card_for_an_ambiguous_name() -> None:
    result = import_prices(SKYPILOT, as_of="2026-11-20", card_map=["H100=h100-pcie", "A100=a100-40gb-pcie"])
    assert _by(result, "h100-pcie").low == pytest.approx(98.32 / 8)
    assert "h100-sxm" not in result.per_card() and not any(s.name == "A100" for s in result.skipped)
    with pytest.raises(InputError):
        import_prices(SKYPILOT, as_of="2026-11-20", card_map=["H100"])
    with pytest.raises(InputError):
        import_prices(SKYPILOT, as_of="2026-11-20", card_map=["H100=H100"])  # itself ambiguous


# ------------------------------------------------------------------ gpuhunt

def test_gpuhunt_rows_use_gpu_memory_to_tell_a100s_apart_and_spot_decides_billing() -> None:
    result = import_prices(GPUHUNT, as_of="2026-11-20")
    assert result.format == "gpuhunt" and {o.provider for o in result.offers} == {"gpuhunt"}
    assert _by(result, "a100-40gb-sxm").low == pytest.approx(32.7726 / 8)
    assert _by(result, "a100-40gb-sxm", "spot").low == pytest.approx(11.5702 / 8)
    assert _by(result, "a100-80gb-sxm").low == pytest.approx(40.9657 / 8)
    assert _by(result, "t4").low == pytest.approx(0.526)  # the cheaper of g4dn.xlarge / 2xlarge
    assert result.no_accelerator == 1 and {s.name for s in result.skipped} == {"K80", "A100"}
    ambiguous = next(s for s in result.skipped if s.name == "A100")
    assert ambiguous.line == 10 and "no memory size" in ambiguous.reason.en


def test_without_a_date_imported_rows_take_the_file_modification_date(tmp_path: Path) -> None:
    copy = tmp_path / "aws.csv"
    copy.write_bytes(GPUHUNT.read_bytes())
    stamp = datetime.datetime(2026, 3, 14, 12, 0).timestamp()
    os.utime(copy, (stamp, stamp))
    result = import_prices(copy)
    assert result.as_of_from == "file-mtime" and result.as_of == "2026-03-14"
    assert {o.as_of for o in result.offers} == {"2026-03-14"}


# ------------------------------------------------------------------ plain CSV

def test_plain_csv_rows_resolve_card_names_and_keep_their_own_dates_and_units() -> None:
    result = import_prices(PLAIN)
    assert result.format == "csv" and result.as_of_from == "rows"
    monthly = _by(result, "rtx-4090", "monthly", "beijing-b")
    assert (monthly.provider, monthly.unit, monthly.low, monthly.as_of) == ("autodl", "gpu_month", 1052, "2026-11-02")
    assert _by(result, "rtx-4090", region="").currency == "CNY"  # the default currency
    assert _by(result, "rtx-4090", "spot", "").low == 1.19  # the cheaper of two rows
    h20 = _by(result, "h20", "daily", "cn-north-1")
    assert (h20.currency, h20.unit) == ("CNY", "gpu_day")
    assert {s.name: s.line for s in result.skipped} == {"A100": 6, "Z9000": 7}


@pytest.mark.parametrize("row,words", [
    ("x,rtx-4090,hourly,nan,2026-11,,,,,", ["line 2", "'price'", "NaN"]),
    ("x,rtx-4090,hourly,inf,2026-11,,,,,", ["line 2", "'price'", "infinity"]),
    ("x,rtx-4090,hourly,-1,2026-11,,,,,", ["line 2", "'price'", "0 or more"]),
    ("x,rtx-4090,hourly,two,2026-11,,,,,", ["line 2", "'price'", "number"]),
    ("x,rtx-4090,yearly,1,2026-11,,,,,", ["'billing'", "monthly"]),
    ("x,rtx-4090,hourly,1,2026-11,,gpu_year,,,", ["'unit'", "gpu_month"]),
    ("x,rtx-4090,hourly,1,soon,,,,,", ["'as_of'", "YYYY"]),
    ("x,rtx-4090,hourly,1,2026-11,rmb1,,,,", ["'currency'"]),
    (",rtx-4090,hourly,1,2026-11,,,,,", ["'provider'"]),
], ids=["nan", "inf", "negative", "text", "billing", "unit", "date", "currency", "no-provider"])
def test_a_bad_cell_is_an_input_error_naming_file_line_and_column(row: str, words: list[str]) -> None:
    with pytest.raises(InputError) as err:
        _plain(row + "\n", fmt="csv")
    for word in ["mine.csv", *words]:
        assert word in err.value.message.en
    assert err.value.message.zh != err.value.message.en


def test_nan_in_a_skypilot_price_is_refused() -> None:
    text = SKYPILOT.read_text(encoding="utf-8").replace("0.8048", "NaN")
    with pytest.raises(InputError) as err:
        parse_prices(text, file="vms.csv", as_of="2026-11-01")
    assert "line 10" in err.value.message.en and "'Price'" in err.value.message.en


def test_a_zero_price_or_an_empty_price_is_skipped_with_a_reason() -> None:
    result = _plain("x,rtx-4090,hourly,0,2026-11,,,,,\n")
    assert not result.offers and "0" in result.skipped[0].reason.en
    sky = SKYPILOT.read_text(encoding="utf-8").replace("0.8048,0.3194", ",0.3194")
    result = parse_prices(sky, file="vms.csv", as_of="2026-11-01")
    assert any(s.line == 10 and "on-demand" in s.reason.en for s in result.skipped)
    assert _by(result, "l4", "spot").low == pytest.approx(0.3194)


# ------------------------------------------------------------------ bad files

@pytest.mark.parametrize("text,words", [
    ("", ["matches no price format"]),
    ('{"prices": [1, 2]}\n', ["matches no price format"]),
    ("a,b,c\n1,2,3\n", ["matches no price format", "a, b, c"]),
], ids=["empty", "json", "other-csv"])
def test_a_file_that_is_no_price_csv_says_which_columns_it_has(text: str, words: list[str]) -> None:
    with pytest.raises(InputError) as err:
        parse_prices(text, file="x.csv", as_of="2026")
    for word in words:
        assert word in err.value.message.en


def test_a_forced_format_names_the_missing_columns() -> None:
    with pytest.raises(InputError) as err:
        import_prices(GPUHUNT, fmt="skypilot", as_of="2026-11-01")
    assert "InstanceType" in err.value.message.en and "line 1" in err.value.message.en
    with pytest.raises(InputError):
        import_prices(GPUHUNT, fmt="excel", as_of="2026-11-01")


def test_binary_huge_fifo_and_missing_files_are_refused(tmp_path: Path) -> None:
    binary = tmp_path / "x.csv"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    huge = tmp_path / "huge.csv"
    with huge.open("wb") as fh:
        fh.truncate(MAX_IMPORT_BYTES + 1)  # sparse: costs no disk
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for path, word in [(binary, "UTF-8"), (huge, "larger than"), (fifo, "not a regular file"),
                       (tmp_path / "none.csv", "Cannot read")]:
        with pytest.raises(InputError) as err:
            import_prices(path, as_of="2026")
        assert word in err.value.message.en and str(path) in err.value.message.en


def test_a_bad_date_or_currency_flag_is_refused() -> None:
    with pytest.raises(InputError):
        import_prices(SKYPILOT, as_of="20261101")
    with pytest.raises(InputError):
        import_prices(SKYPILOT, as_of="2026-11-01", currency="dollars")


# ------------------------------------------------------------------ hostile strings and TOML

def test_toml_string_escapes_quotes_backslashes_and_control_characters() -> None:
    nasty = 'a"b\\c\nd\te\x00f\x7f\u2028g"""'
    doc = tomllib.loads(f"x = {toml_string(nasty)}\n")
    assert doc["x"] == nasty


def test_clean_text_removes_control_and_format_characters() -> None:
    assert clean_text("evil\n\r\x00cloud\u202e\u2028x") == "evil cloud x"
    assert len(clean_text("x" * 1000)) == 200


def test_a_hostile_provider_and_region_cannot_break_the_toml(tmp_path: Path) -> None:
    row = '"evil""\ncloud]]\n[[price]]",rtx-4090,hourly,2,2026-11,,,"cn-""north""\n1",s\\rc,"note\x07"\n'
    result = _plain(row)
    offer = result.offers[0]
    assert offer.provider == 'evil" cloud]] [[price]]' and offer.region == 'cn-"north" 1'
    assert offer.source == "s\\rc" and offer.note == "note"
    path = tmp_path / "prices-evil.toml"
    path.write_text(prices_toml(result.offers, ['comment with\nnewline "quote"']), encoding="utf-8")
    loaded = [o for o in load_prices([path]) if o.origin == str(path)]
    assert [dataclasses.replace(o, origin="") for o in loaded] == list(result.offers)


@pytest.mark.parametrize("path", [SKYPILOT, GPUHUNT, PLAIN], ids=["skypilot", "gpuhunt", "csv"])
def test_imported_rows_read_back_identically_through_load_prices(path: Path, tmp_path: Path) -> None:
    result = import_prices(path, as_of="2026-11-20")
    out = tmp_path / "prices-round-trip.toml"
    out.write_text(prices_toml(result.offers), encoding="utf-8")
    loaded = [dataclasses.replace(o, origin="") for o in load_prices([out]) if o.origin == str(out)]
    assert sorted(loaded, key=_key) == sorted(result.offers, key=_key)  # a shipped key keeps its place


# ------------------------------------------------------------------ CLI

def _cli(*args: str) -> Result:
    from gpuwise.cli import app as app_module

    if not app_module.app.registered_commands:
        app_module._register()
    return CliRunner().invoke(app_module.app, list(args), env={"COLUMNS": "200"})


def test_cli_import_writes_the_config_file_that_prices_then_lists(config_dir: Path) -> None:
    result = _cli("prices", "import", str(SKYPILOT), "--provider", "aws", "--as-of", "2026-11-20",
                  "--lang", "en")
    assert result.exit_code == 0, result.output
    written = config_dir / "prices-aws.toml"
    assert written.is_file() and "Wrote" in result.output and str(written) in result.output
    assert "a100-40gb-sxm" in result.output and "Inferentia2" in result.output
    assert "2026-11-20" in result.output
    listed = json.loads(_cli("prices", "l4", "--provider", "aws", "--json").stdout)
    assert {(r["billing"], r["region"]) for r in listed["prices"]} == {("hourly", "us-east-1"),
                                                                       ("spot", "us-east-1")}


def test_cli_import_json_reports_rows_skips_and_the_date_source(config_dir: Path) -> None:
    result = _cli("prices", "import", str(GPUHUNT), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "gpuhunt" and data["as_of_from"] == "file-mtime"
    assert data["written"] == str(config_dir / "prices-gpuhunt.toml")
    assert data["per_card"]["t4"] == 1 and data["skipped_no_accelerator"] == 1
    assert {s["name"] for s in data["skipped"]} == {"K80", "A100"}
    assert all(s["reason_zh"] for s in data["skipped"])


def test_cli_import_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "mine.toml"
    assert _cli("prices", "import", str(PLAIN), "--out", str(out)).exit_code == 0
    again = _cli("prices", "import", str(PLAIN), "--out", str(out), "--lang", "en")
    assert again.exit_code == 2 and "already exists" in again.output and "--force" in again.output
    assert "Traceback" not in again.output
    assert _cli("prices", "import", str(PLAIN), "--out", str(out), "--force").exit_code == 0


def test_cli_import_of_a_bad_file_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(PLAIN_HEADER + "x,rtx-4090,hourly,nan,2026-11,,,,,\n", encoding="utf-8")
    result = _cli("prices", "import", str(bad), "--lang", "en")
    assert result.exit_code == 2 and "NaN" in result.output and "Traceback" not in result.output
    result = _cli("prices", "import", str(bad), "--json")
    assert result.exit_code == 2 and json.loads(result.stdout)["error"] == "InputError"


def test_bare_prices_still_lists_with_its_options() -> None:
    data = json.loads(_cli("prices", "--json").stdout)
    assert data["schema_version"] == 1 and len(data["prices"]) == len(load_prices())
    one = json.loads(_cli("prices", "4090", "--provider", "autodl", "--json").stdout)
    assert {(r["provider"], r["card"]) for r in one["prices"]} == {("autodl", "rtx-4090")}
