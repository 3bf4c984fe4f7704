"""The price rows a plan reads: one tuple while no price file changes, a new one the moment one does
(a server keeps answering from the user's latest prices), and quotes from it the same as from a list."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuwise.catalog.prices import load_prices, price_offers, price_per_gpu_hour

ROW = """schema_version = 1
[[price]]
provider = "my-cloud"
card = "rtx-4090"
currency = "CNY"
billing = "hourly"
unit = "gpu_hour"
low = {low}
high = {high}
as_of = "2026-11-02"
source = "my console"
"""


pytestmark = pytest.mark.usefixtures("config_dir")  # tests/conftest.py: an empty config dir


def test_the_same_tuple_while_no_file_changes(config_dir: Path) -> None:
    (config_dir / "prices-mine.toml").write_text(ROW.format(low=2.0, high=2.0))
    first = price_offers()
    assert price_offers() is first
    assert first == tuple(load_prices())


def test_a_changed_file_gives_new_rows_and_new_quotes(config_dir: Path) -> None:
    path = config_dir / "prices-mine.toml"
    path.write_text(ROW.format(low=2.0, high=2.0))
    before = price_offers()
    quote = price_per_gpu_hour("rtx-4090", "my-cloud", offers=before)
    assert quote is not None and quote.mid == pytest.approx(2.0)
    path.write_text(ROW.format(low=30.0, high=30.0))  # same size, another price
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a coarse clock's same tick, moved on
    after = price_offers()
    assert after is not before
    quote = price_per_gpu_hour("rtx-4090", "my-cloud", offers=after)
    assert quote is not None and quote.mid == pytest.approx(30.0)
    assert price_per_gpu_hour("rtx-4090", "my-cloud", offers=before).mid == pytest.approx(2.0)  # type: ignore[union-attr]


def test_a_new_file_and_a_removed_one_are_seen(config_dir: Path) -> None:
    shipped = price_offers()
    (config_dir / "prices-mine.toml").write_text(ROW.format(low=5.0, high=5.0))
    added = price_offers()
    assert len(added) == len(shipped) + 1
    assert price_per_gpu_hour("rtx-4090", "my-cloud", offers=added) is not None
    (config_dir / "prices-mine.toml").unlink()
    assert price_offers() == shipped


def test_quotes_from_the_tuple_equal_quotes_from_a_list() -> None:
    offers = price_offers()
    rows = list(offers)
    for card in sorted({o.card for o in offers}):
        for billing in ("hourly", "monthly"):
            assert price_per_gpu_hour(card, billing=billing, offers=offers) == \
                price_per_gpu_hour(card, billing=billing, offers=rows)


def test_a_missing_extra_file_is_the_reader_s_message(tmp_path: Path) -> None:
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError):
        price_offers([tmp_path / "nope.toml"])
