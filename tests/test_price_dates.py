"""An `as_of` date is checked without the datetime module exactly as datetime.date checks it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuwise.catalog.prices import as_of_date, is_valid_as_of

_WRITTEN = st.from_regex(r"\A\d{4}(-\d{2}(-\d{2})?)?\Z") | st.text(max_size=12)


@given(_WRITTEN)
def test_an_as_of_is_valid_exactly_when_it_names_a_calendar_day(as_of: str) -> None:
    assert is_valid_as_of(as_of) == (as_of_date(as_of) is not None)


def test_the_calendar_edges() -> None:
    for good in ("2024-02-29", "2000-02-29", "0001", "9999-12-31", "2026", "2026-04"):
        assert is_valid_as_of(good) and as_of_date(good) is not None
    for bad in ("1900-02-29", "2026-02-29", "0000", "2026-13", "2026-00", "2026-04-31", "2026-1", "26-01-01"):
        assert not is_valid_as_of(bad) and as_of_date(bad) is None
