"""Rental prices: shipped rows are sane and dated; quotes convert units; user rows win."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.prices import (
    BILLINGS,
    HOURS_PER_UNIT,
    REFERENCE_PROVIDER,
    load_prices,
    price_per_gpu_hour,
    providers,
)
from gpuwise.errors import DataError, UnknownNameError

OFFERS = load_prices()


pytestmark = pytest.mark.usefixtures("config_dir")  # tests/conftest.py: an empty config dir


@pytest.mark.parametrize("offer", OFFERS, ids=[f"{o.provider}-{o.card}-{o.billing}" for o in OFFERS])
def test_every_shipped_price_row_is_dated_sourced_and_names_a_known_card(offer) -> None:
    assert offer.card in load_cards().ids()
    assert 0 < offer.low <= offer.high
    assert offer.as_of.startswith("2026") and offer.source
    assert offer.billing in BILLINGS and offer.unit in HOURS_PER_UNIT


def test_price_keys_are_unique() -> None:
    keys = [o.key for o in OFFERS]
    assert len(keys) == len(set(keys))


def test_the_china_reference_covers_the_guide_cards() -> None:
    guide = {o.card for o in OFFERS if o.provider == REFERENCE_PROVIDER}
    assert {"rtx-4090", "rtx-5090", "a100-40gb-pcie", "a100-80gb-sxm", "a800-80gb-sxm",
            "h100-sxm", "h200-sxm", "l40s"} <= guide
    assert set(providers()) == {"autodl", "china-ref-2026", "gongjiyun", "runpod-community"}


def test_a_quote_is_the_middle_of_the_range_per_gpu_hour() -> None:
    quote = price_per_gpu_hour("h100-sxm")
    assert quote is not None
    assert (quote.provider, quote.currency) == (REFERENCE_PROVIDER, "CNY")
    assert (quote.low, quote.mid, quote.high) == (14, 18, 22)
    assert quote.to_dict()["per"] == "gpu_hour"


def test_a_monthly_price_is_spread_over_730_hours() -> None:
    quote = price_per_gpu_hour("rtx-4090", provider="autodl", billing="monthly")
    assert quote is not None
    assert quote.mid == pytest.approx(1052 / 730)  # ~1.44 CNY per GPU-hour, as the report says
    assert quote.hours_per_unit == 730 and quote.unit == "gpu_month"


def test_spot_and_usd_offers_are_kept_apart() -> None:
    spot = price_per_gpu_hour("rtx-4090", provider="gongjiyun", billing="spot")
    assert spot is not None and spot.mid == pytest.approx(1.19)
    usd = price_per_gpu_hour("h100-sxm", provider="runpod-community")
    assert usd is not None and usd.currency == "USD" and usd.mid == pytest.approx(2.69)


def test_without_the_reference_the_cheapest_cny_offer_is_chosen() -> None:
    quote = price_per_gpu_hour("l20")
    assert quote is not None and quote.provider == "gongjiyun" and quote.mid == pytest.approx(4.0)


def test_a_card_without_prices_has_no_quote() -> None:
    assert price_per_gpu_hour("t4") is None
    assert price_per_gpu_hour("rtx-4090", billing="weekly") is None


def test_an_unknown_provider_or_billing_suggests_close_names() -> None:
    with pytest.raises(UnknownNameError) as err:
        price_per_gpu_hour("rtx-4090", provider="autodI")
    assert "autodl" in err.value.suggestions
    with pytest.raises(UnknownNameError):
        price_per_gpu_hour("rtx-4090", billing="hourlyy")


def test_a_user_row_with_the_same_key_wins_and_new_rows_extend(config_dir: Path) -> None:
    (config_dir / "prices-mine.toml").write_text("""
schema_version = 1
[[price]]
provider = "autodl"
card = "rtx-4090"
currency = "CNY"
billing = "hourly"
unit = "gpu_hour"
low = 2.5
high = 2.5
as_of = "2026-11-02"
source = "autodl console"
[[price]]
provider = "my-cloud"
card = "h20"
currency = "CNY"
billing = "daily"
unit = "gpu_day"
low = 120
high = 144
as_of = "2026-11"
source = "quote by email"
""", encoding="utf-8")
    offers = load_prices()
    assert len(offers) == len(OFFERS) + 1
    autodl = price_per_gpu_hour("rtx-4090", provider="autodl", offers=offers)
    assert autodl is not None and autodl.mid == 2.5 and autodl.as_of == "2026-11-02"
    daily = price_per_gpu_hour("h20", provider="my-cloud", billing="daily", offers=offers)
    assert daily is not None and (daily.low, daily.high) == (5, 6)


@pytest.mark.parametrize("row,words", [
    ('low = 3\nhigh = 2', ["low (3.0) is above high (2.0)"]),
    ('low = -1\nhigh = 2', ["low", "0 or more"]),
    ('low = 1\nhigh = 2\nas_of = "last week"', ["as_of"]),
    ('low = 1\nhigh = 2\ncurrency = "rmb"', ["currency"]),
    ('low = 1\nhigh = 2\nbilling = "yearly"', ["billing", "monthly"]),
    ('low = 1\nhigh = 2\nprice = 3', ["unknown field 'price'"]),
    ('low = 1', ["missing required field 'high'"]),
], ids=["low-above-high", "negative", "bad-date", "bad-currency", "bad-billing", "unknown-key",
        "missing-high"])
def test_a_malformed_price_file_is_a_data_error_naming_the_row(tmp_path: Path, row: str,
                                                               words: list[str]) -> None:
    base = {"provider": '"x"', "card": '"rtx-4090"', "currency": '"CNY"', "billing": '"hourly"',
            "unit": '"gpu_hour"', "as_of": '"2026"', "source": '"s"'}
    given = {line.split(" = ")[0] for line in row.splitlines()}
    lines = [f"{k} = {v}" for k, v in base.items() if k not in given] + row.splitlines()
    path = tmp_path / "prices.toml"
    path.write_text("[[price]]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_prices([path])
    for word in [str(path), "rtx-4090", *words]:
        assert word in err.value.message.en


def _run(*args: str):
    from gpuwise.cli import cards_cmd

    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """gpuwise (test shell)."""

    cards_cmd.register(app)
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_cli_lists_price_rows_for_one_card() -> None:
    result = _run("prices", "4090", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    assert {r["card"] for r in data["prices"]} == {"rtx-4090"}
    assert {r["provider"] for r in data["prices"]} >= {"autodl", "gongjiyun", REFERENCE_PROVIDER}
    assert "gongjiyun" in _run("prices", "--provider", "gongjiyun", "--lang", "en").stdout


def test_cli_unknown_provider_exits_2_without_traceback() -> None:
    result = _run("prices", "--provider", "autodI", "--lang", "en")
    assert result.exit_code == 2 and "autodl" in result.output and "Traceback" not in result.output


def test_two_regions_of_one_provider_both_survive_and_the_cheapest_is_quoted(tmp_path: Path) -> None:
    row = ('[[price]]\nprovider = "aws"\ncard = "l4"\ncurrency = "USD"\nbilling = "hourly"\n'
           'unit = "gpu_hour"\nlow = {p}\nhigh = {p}\nas_of = "2026-11"\nsource = "s"\nregion = "{r}"\n')
    path = tmp_path / "prices.toml"
    path.write_text(row.format(p=0.9, r="us-west-2") + row.format(p=0.8, r="us-east-1"), encoding="utf-8")
    offers = load_prices([path])
    assert {o.region for o in offers if o.provider == "aws"} == {"us-west-2", "us-east-1"}
    cheapest = price_per_gpu_hour("l4", provider="aws", offers=offers)
    assert cheapest is not None and (cheapest.region, cheapest.mid) == ("us-east-1", 0.8)
    west = price_per_gpu_hour("l4", provider="aws", offers=offers, region="us-west-2")
    assert west is not None and west.mid == 0.9


def test_a_price_dated_to_a_month_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\nprovider = "x"\ncard = "l4"\ncurrency = "USD"\nbilling = "hourly"\n'
                    'unit = "gpu_hour"\nlow = 1\nhigh = 1\nas_of = "2026-13"\nsource = "s"\n',
                    encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_prices([path])
    assert "as_of" in err.value.message.en
