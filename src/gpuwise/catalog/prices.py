"""GPU rental prices per provider, dated, with user overrides. Schema: docs/data-schema.md.

Shipped rows live in src/gpuwise/data/prices/*.toml; `$GPUWISE_CONFIG_DIR/prices*.toml` and
any extra files come after, and a row with the same (provider, card, billing, region) key wins.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.catalog._datafile import (
    FieldSpec,
    check_row,
    config_dir,
    data_error,
    is_as_of,
    read_toml,
    table_rows,
)
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Lang, Text

if TYPE_CHECKING:
    import datetime  # imported where a date is made: loading it costs a cold estimate 8 M instructions

Billing = Literal["hourly", "daily", "weekly", "monthly", "spot"]
Unit = Literal["gpu_hour", "gpu_day", "gpu_week", "gpu_month"]

BILLINGS: tuple[Billing, ...] = ("hourly", "daily", "weekly", "monthly", "spot")
# How the page and the command line name a billing mode, a unit and a currency in each language
# (the JSON and the files keep the ids; one set of words, so 元/时 never sits beside 元/h).
BILLING_WORDS: dict[str, Text] = {"hourly": Text("hourly", "按量"), "daily": Text("daily", "包日"),
                                  "weekly": Text("weekly", "包周"), "monthly": Text("monthly", "包月"),
                                  "spot": Text("spot", "抢占式")}
UNIT_WORDS: dict[str, Text] = {"gpu_hour": Text("GPU-hour", "卡时"), "gpu_day": Text("GPU-day", "卡日"),
                               "gpu_week": Text("GPU-week", "卡周"), "gpu_month": Text("GPU-month", "卡月")}
CURRENCY_WORDS: dict[str, Text] = {"CNY": Text("CNY", "元"), "USD": Text("USD", "美元"), "EUR": Text("EUR", "欧元")}


def currency_word(code: str, lang: Lang) -> str:
    """'CNY' in English, '元' in Chinese; a code gpuwise has no words for, as it is."""
    words = CURRENCY_WORDS.get(code)
    return words.render(lang) if words is not None else code
# Hours in one unit. A month is 8760 h / 12 = 730 h of round-the-clock use: a prepaid month
# (包月) costs the same whether or not the GPU is busy, so this is its best-case hourly rate.
HOURS_PER_UNIT: dict[str, float] = {"gpu_hour": 1, "gpu_day": 24, "gpu_week": 168, "gpu_month": 730}
# The provider asked for when none is named: the 2026 China market reference ranges.
REFERENCE_PROVIDER = "china-ref-2026"
SHIPPED_PRICES_DIR = Path(__file__).resolve().parent.parent / "data" / "prices"
PROVIDER = Text("price provider", "价格来源")
# A price older than this many days is flagged as stale: rental prices in China move monthly,
# and the shipped reference is dated to the year only (its age counts from 1 January).
STALE_PRICE_DAYS = 180

PRICE_FIELDS: dict[str, FieldSpec] = {
    "provider": FieldSpec("str", required=True),
    "card": FieldSpec("str", required=True),
    "currency": FieldSpec("str", required=True),
    "billing": FieldSpec("str", required=True, choices=BILLINGS),
    "unit": FieldSpec("str", required=True, choices=tuple(HOURS_PER_UNIT)),
    "low": FieldSpec("float", required=True),
    "high": FieldSpec("float", required=True),
    "as_of": FieldSpec("str", required=True),
    "source": FieldSpec("str", required=True),
    "region": FieldSpec("str"),
    "note": FieldSpec("str"),
    "note_zh": FieldSpec("str"),
}


@dataclass(frozen=True)
class PriceOffer:
    """One provider's price range for one card under one billing mode, as the file gives it."""

    provider: str
    card: str
    currency: str
    billing: Billing
    unit: Unit
    low: float
    high: float
    as_of: str
    source: str
    note: str = ""
    note_zh: str = ""  # the note in Chinese, where the file gives one
    origin: str = ""  # the file this row came from
    region: str = ""  # "" = the provider as a whole (no region named)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.provider, self.card, self.billing, self.region)

    @property
    def mid(self) -> float:
        return (self.low + self.high) / 2

    @property
    def hours_per_unit(self) -> float:
        return HOURS_PER_UNIT[self.unit]

    def age_days(self, today: datetime.date) -> int:
        """Days since `as_of` (the oldest reading of a partial date); see `price_age_days`."""
        return price_age_days(self.as_of, today)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PriceQuote:
    """A price per GPU-hour (low / mid / high), converted from the offer's unit."""

    card: str
    provider: str
    billing: Billing
    currency: str
    low: float
    mid: float
    high: float
    as_of: str
    source: str
    unit: Unit
    hours_per_unit: float
    note: str = ""
    region: str = ""

    @classmethod
    def from_offer(cls, offer: PriceOffer) -> PriceQuote:
        hours = offer.hours_per_unit
        return cls(offer.card, offer.provider, offer.billing, offer.currency,
                   offer.low / hours, offer.mid / hours, offer.high / hours,
                   offer.as_of, offer.source, offer.unit, hours, offer.note, offer.region)

    def age_days(self, today: datetime.date) -> int:
        """Days since `as_of` (the oldest reading of a partial date); see `price_age_days`."""
        return price_age_days(self.as_of, today)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per": "gpu_hour"}


def _as_of_parts(as_of: str) -> tuple[int, int, int] | None:
    """Year, month and day of an `as_of` (a missing month or day read as 1), unchecked; None when
    it is not written YYYY, YYYY-MM or YYYY-MM-DD."""
    if not is_as_of(as_of):
        return None
    parts = [int(p) for p in as_of.split("-")] + [1, 1]
    return parts[0], parts[1], parts[2]


def as_of_date(as_of: str) -> datetime.date | None:
    """The first day an `as_of` (YYYY, YYYY-MM or YYYY-MM-DD) can mean; None when it is not one."""
    import datetime

    parts = _as_of_parts(as_of)
    if parts is None:
        return None
    try:
        return datetime.date(*parts)
    except ValueError:  # 2026-13, 2026-02-30, 0000
        return None


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_valid_as_of(as_of: str) -> bool:
    """`as_of_date(as_of) is not None`, decided without the datetime module (the Gregorian
    calendar's rules, as datetime.date applies them: years 1-9999, February 29 in leap years)."""
    parts = _as_of_parts(as_of)
    if parts is None:
        return False
    year, month, day = parts
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return False
    leap = month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= _MONTH_DAYS[month - 1] + leap


def price_age_days(as_of: str, today: datetime.date) -> int:
    """Whole days from `as_of` to `today`; negative when `as_of` is after `today`.

    A partial date counts from the first day of its period, i.e. the oldest it could be:
    "2026" is read as 2026-01-01 and "2026-03" as 2026-03-01. `today` is the caller's, so
    the function stays pure.
    """
    start = as_of_date(as_of)
    if start is None:
        raise InputError(Text(f"as_of must be a date YYYY, YYYY-MM or YYYY-MM-DD, got {as_of!r}.",
                              f"as_of 应为日期 YYYY、YYYY-MM 或 YYYY-MM-DD，实际为 {as_of!r}。"))
    return (today - start).days


def user_price_files() -> list[Path]:
    return sorted(config_dir().glob("prices*.toml"))


@functools.cache
def _shipped_offers() -> tuple[PriceOffer, ...]:
    return tuple(_merge([], sorted(SHIPPED_PRICES_DIR.glob("*.toml"))))


def load_prices(extra: Sequence[Path | str] = ()) -> list[PriceOffer]:
    """Shipped offers, then the user's prices*.toml, then `extra` (same key: the later row wins)."""
    files = user_price_files() + [Path(p) for p in extra]
    return _merge(list(_shipped_offers()), files)


# The offers of `price_offers`, by each file's path, size and modification time: the same tuple
# while no file changed (a plan keys its price caches by the tuple's identity). Cleared when full.
_LOADED: dict[tuple[tuple[str, int, int], ...], tuple[PriceOffer, ...]] = {}


def price_offers(extra: Sequence[Path | str] = ()) -> tuple[PriceOffer, ...]:
    """`load_prices` as a tuple, the same object while none of the files changed."""
    files = user_price_files() + [Path(p) for p in extra]
    try:
        stamp = tuple((str(p), st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    except OSError:  # read as usual: the reader says what is wrong with the file
        return tuple(_merge(list(_shipped_offers()), files))
    found = _LOADED.get(stamp)
    if found is None:
        if len(_LOADED) >= 16:
            _LOADED.clear()
        found = _LOADED[stamp] = tuple(_merge(list(_shipped_offers()), files))
    return found


def _merge(base: list[PriceOffer], paths: Sequence[Path]) -> list[PriceOffer]:
    offers = {o.key: o for o in base}
    for path in paths:
        doc = read_toml(path)
        for i, row in enumerate(table_rows(doc, "price", path, {"schema_version", "price"})):
            offer = _offer_from_row(row, i, path)
            offers[offer.key] = offer
    return list(offers.values())


_CURRENCY = re.compile(r"^[A-Z]{3}$")


def _offer_from_row(row: Any, i: int, path: Path) -> PriceOffer:
    where = Text(f"price row #{i + 1}", f"价格第 {i + 1} 条")
    if isinstance(row, dict) and isinstance(row.get("card"), str):
        where = Text(f"price row #{i + 1} ({row.get('provider')}, {row['card']})",
                     f"价格第 {i + 1} 条（{row.get('provider')}，{row['card']}）")
    values = check_row(row, PRICE_FIELDS, path=path, where=where, require=True)
    if values["low"] > values["high"]:
        raise data_error(path, where, f"low ({values['low']}) is above high ({values['high']}).",
                         f"low（{values['low']}）大于 high（{values['high']}）。")
    if not is_valid_as_of(values["as_of"]):
        raise data_error(path, where, f"as_of must be YYYY, YYYY-MM or YYYY-MM-DD, got "
                         f"{values['as_of']!r}.", f"as_of 应为 YYYY、YYYY-MM 或 YYYY-MM-DD，"
                         f"实际为 {values['as_of']!r}。")
    if not _CURRENCY.match(values["currency"]):
        raise data_error(path, where, f"currency must be a 3-letter code such as CNY or USD, got "
                         f"{values['currency']!r}.", f"currency 应为三个大写字母（如 CNY、USD），"
                         f"实际为 {values['currency']!r}。")
    return PriceOffer(**values, origin=str(path))


# ------------------------------------------------------------------ writing

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # not allowed raw in TOML strings or comments


def toml_string(value: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, every control character as \\uXXXX."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:  # TOML forbids raw control characters in strings
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\u{code:04X}"))
        else:
            out.append(ch)
    return "".join(out) + '"'


def prices_toml(offers: Iterable[PriceOffer], comments: Sequence[str] = ()) -> str:
    """A prices file (docs/data-schema.md) that `load_prices` reads back to the same offers."""
    lines = [f"# {_CONTROL.sub(' ', c)}" for c in comments] + ["", "schema_version = 1"]
    for offer in offers:
        lines += ["", "[[price]]"]
        for name, spec in PRICE_FIELDS.items():
            value = getattr(offer, name)
            if isinstance(value, float):
                lines.append(f"{name} = {value!r}")
            elif value != "" or spec.required:
                lines.append(f"{name} = {toml_string(value)}")
    return "\n".join(lines) + "\n"


def providers(offers: Sequence[PriceOffer] | None = None) -> list[str]:
    """Provider ids that have at least one price row."""
    rows = offers if offers is not None else load_prices()
    return sorted({o.provider for o in rows})


# Quotes from a tuple of offers (immutable: a plan's CostOptions holds one), by its identity, the
# tuple pinned beside: a plan asks the same few cards' prices once per configuration it prices.
# Cleared when full.
_QUOTES: dict[tuple[int, str, str | None, str, str | None], tuple[tuple[PriceOffer, ...], PriceQuote | None]] = {}


def price_per_gpu_hour(card_id: str, provider: str | None = None, billing: str = "hourly",
                       offers: Sequence[PriceOffer] | None = None,
                       region: str | None = None) -> PriceQuote | None:
    """The price of one GPU-hour of `card_id`, or None when no row has it.

    With no provider: the China reference ranges when they list the card, else the cheapest
    CNY offer, else the cheapest offer in any currency. Several regions of one provider: the
    cheapest, unless `region` names one.
    """
    if not isinstance(offers, tuple):
        return _quote(card_id, provider, billing, offers, region)
    key = (id(offers), card_id, provider, billing, region)
    found = _QUOTES.get(key)
    if found is None or found[0] is not offers:
        if len(_QUOTES) >= 4096:
            _QUOTES.clear()
        found = _QUOTES[key] = (offers, _quote(card_id, provider, billing, offers, region))
    return found[1]


def _quote(card_id: str, provider: str | None, billing: str, offers: Sequence[PriceOffer] | None,
           region: str | None) -> PriceQuote | None:
    rows = list(offers) if offers is not None else load_prices()
    if billing not in BILLINGS:
        raise unknown_name(Text("billing mode", "计费方式"), billing, BILLINGS, "gpuwise prices --help")
    if provider is not None and provider not in {o.provider for o in rows}:
        raise unknown_name(PROVIDER, provider, providers(rows), "gpuwise prices")
    found = [o for o in rows if o.card == card_id and o.billing == billing
             and (provider is None or o.provider == provider)
             and (region is None or o.region == region)]
    if not found:
        return None
    chosen = next((o for o in found if o.provider == REFERENCE_PROVIDER), None) \
        or min(found, key=lambda o: (o.currency != "CNY", o.mid / o.hours_per_unit))
    return PriceQuote.from_offer(chosen)


__all__ = [
    "BILLINGS",
    "HOURS_PER_UNIT",
    "PRICE_FIELDS",
    "REFERENCE_PROVIDER",
    "STALE_PRICE_DAYS",
    "PriceOffer",
    "PriceQuote",
    "as_of_date",
    "is_valid_as_of",
    "load_prices",
    "price_age_days",
    "price_per_gpu_hour",
    "prices_toml",
    "providers",
    "toml_string",
    "user_price_files",
]
