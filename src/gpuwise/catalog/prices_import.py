"""Price rows from other tools' catalogs: SkyPilot, dstack gpuhunt, or a plain CSV.

Pure parsing: text in, `PriceImport` out; nothing is printed (the TOML writer whose output
`load_prices` reads back is `prices.prices_toml`). Every cell of an imported file is treated as hostile: control
characters are removed, strings are escaped, numbers must be finite and 0 or more.

Column names, as confirmed in the tools' own sources:

* SkyPilot `catalogs/v*/<cloud>/vms.csv`: skypilot-org/skypilot-catalog README.md ("Schema
  V5", vms.csv): InstanceType, vCPUs, MemoryGiB, AcceleratorName, AcceleratorCount, GPUInfo,
  Region, AvailabilityZone, Price, SpotPrice. Price is USD per instance-hour; GPUInfo may hold
  `'MemoryInfo': {'SizeInMiB': 40960}` per GPU.
* dstack gpuhunt offline catalogs (`aws.csv`, ...): dstackai/gpuhunt
  src/gpuhunt/_internal/models.py (`RawCatalogItem`: instance_name, location, price, cpu,
  memory, gpu_count, gpu_name, gpu_memory, spot) and storage.py (written by csv.DictWriter,
  so `spot` is `True`/`False`); price is "$ per hour", gpu_memory "GB for each GPU".
"""

from __future__ import annotations

import csv
import datetime
import io
import math
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from gpuwise.catalog.cards import Catalog, load_cards, normalize, resolve_card, strip_prefixes
from gpuwise.catalog.prices import (
    BILLINGS,
    HOURS_PER_UNIT,
    Billing,
    PriceOffer,
    Unit,
    as_of_date,
)
from gpuwise.errors import InputError, UnknownNameError
from gpuwise.i18n import Text, os_reason
from gpuwise.textsafe import clean_text

ImportFormat = Literal["skypilot", "gpuhunt", "csv"]
AsOfFrom = Literal["flag", "file-mtime", "rows"]
FORMATS: tuple[str, ...] = ("auto", "skypilot", "gpuhunt", "csv")
MAX_IMPORT_BYTES = 50 * 2**20  # 50 MiB; SkyPilot's largest vms.csv (AWS) is a few MiB
# Memory sizes within 7 % are the same card: GB vs GiB (80 GB = 74.5 GiB) differ by 6.9 %.
MEMORY_TOLERANCE = 0.07
# Columns each format must have (what the importer reads); other columns are ignored.
REQUIRED_COLUMNS: dict[ImportFormat, tuple[str, ...]] = {
    "skypilot": ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region"),
    "gpuhunt": ("instance_name", "location", "price", "gpu_count", "gpu_name", "gpu_memory", "spot"),
    "csv": ("provider", "card", "billing", "price", "as_of"),
}
DEFAULT_PROVIDER: dict[ImportFormat, str] = {"skypilot": "skypilot", "gpuhunt": "gpuhunt", "csv": ""}
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_MIB = re.compile(r"SizeInMiB'?\"?\s*:\s*([0-9.]+)")
_BILLING_OF: dict[str, Billing] = {b: b for b in BILLINGS}
_UNIT_OF: dict[str, Unit] = {"gpu_hour": "gpu_hour", "gpu_day": "gpu_day", "gpu_week": "gpu_week",
                             "gpu_month": "gpu_month"}
_MEMORY_IN_NAME = re.compile(r"[-_ ](\d+)\s*G(?:i?B)?$", re.IGNORECASE)


@dataclass(frozen=True)
class SkippedRow:
    """A row that became no price, with the line it is on and why (never dropped silently)."""

    line: int
    name: str
    reason: Text
    candidates: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "name": self.name, "reason": self.reason.en,
                "reason_zh": self.reason.zh, "candidates": list(self.candidates)}


@dataclass(frozen=True)
class Assumption:
    """An ambiguous name priced as one card because the memory size narrowed it only so far."""

    name: str
    card: str
    candidates: tuple[str, ...]

    @property
    def text(self) -> Text:
        others = ", ".join(c for c in self.candidates if c != self.card)
        return Text(f"'{self.name}' does not say the form factor; priced as {self.card} (the catalog "
                    f"default), not {others}.",
                    f"“{self.name}”未写明形态；按目录默认的 {self.card} 计价，而非 {others}。")


@dataclass(frozen=True)
class PriceImport:
    """What one imported file gave: deduplicated offers, skipped rows, and how the date was set."""

    format: ImportFormat
    file: str
    offers: tuple[PriceOffer, ...]
    skipped: tuple[SkippedRow, ...]
    no_accelerator: int  # rows without a GPU (CPU-only instances): counted, not listed
    merged: int  # rows dropped because a cheaper row had the same key
    assumptions: tuple[Assumption, ...]
    as_of: str
    as_of_from: AsOfFrom

    def per_card(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for offer in self.offers:
            counts[offer.card] = counts.get(offer.card, 0) + 1
        return dict(sorted(counts.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, "format": self.format, "file": self.file,
                "as_of": self.as_of, "as_of_from": self.as_of_from, "per_card": self.per_card(),
                "prices": [o.to_dict() for o in self.offers],
                "skipped": [s.to_dict() for s in self.skipped],
                "skipped_no_accelerator": self.no_accelerator, "merged_duplicates": self.merged,
                "assumptions": [{"name": a.name, "card": a.card, "candidates": list(a.candidates),
                                 "note": a.text.en, "note_zh": a.text.zh} for a in self.assumptions]}


# ------------------------------------------------------------------ strings

# ------------------------------------------------------------------ card names

@dataclass(frozen=True)
class _Match:
    card: str | None
    reason: Text | None = None
    candidates: tuple[str, ...] = ()
    assumed: bool = False


def parse_card_map(items: Iterable[str], catalog: Catalog) -> dict[str, str]:
    """`NAME=CARD` pairs (the file's accelerator name, a catalog card id) as {normalized name: id}."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, card = item.partition("=")
        if not sep or not name.strip() or not card.strip():
            raise InputError(Text(f"A card mapping must read NAME=CARD (e.g. H100=h100-sxm), got {item!r}.",
                                  f"显卡映射应写成 NAME=CARD（如 H100=h100-sxm），实际为 {item!r}。"))
        resolved = resolve_card(card, catalog)
        if resolved.note is not None:
            raise InputError(resolved.note, hint=Text("Map to an exact card id.", "请映射到确切的显卡 id。"))
        out[normalize(name)] = resolved.card.id
    return out


def match_card(name: str, memory_gb: float | None, catalog: Catalog,
               card_map: Mapping[str, str] | None = None) -> _Match:
    """The catalog card an accelerator name means; an ambiguous one is narrowed by memory or skipped."""
    if card_map and normalize(name) in card_map:
        return _Match(card_map[normalize(name)])
    try:
        resolved = resolve_card(name, catalog)
    except UnknownNameError as err:
        close = f" Close names: {', '.join(err.suggestions)}." if err.suggestions else ""
        close_zh = f"相近的名称：{'、'.join(err.suggestions)}。" if err.suggestions else ""
        return _Match(None, Text(f"'{name}' is not a card in the catalog.{close}",
                                 f"“{name}”不在显卡目录中。{close_zh}"), err.suggestions)
    if resolved.note is None:
        return _Match(resolved.card.id)
    key = strip_prefixes(normalize(name))
    entry = next((a for a in catalog.ambiguous
                  if key in {strip_prefixes(normalize(n)) for n in a.names}), None)
    candidates = entry.candidates if entry is not None else (resolved.card.id,)
    memory = memory_gb if memory_gb is not None else _memory_in_name(name)
    if memory is None:
        return _Match(None, Text(f"'{name}' can be {', '.join(candidates)} and the file gives no "
                                 "memory size to tell them apart.",
                                 f"“{name}”可指 {'、'.join(candidates)}，文件中没有显存大小可供区分。"),
                      candidates)
    fits = tuple(c for c in candidates if _same_memory(catalog, c, memory))
    if len(fits) == 1:
        return _Match(fits[0])
    base = _MEMORY_IN_NAME.sub("", name)
    default = resolved.card.id if resolved.card.id in fits else _default_card(f"{base} {memory:g}GB", catalog)
    if default in fits:
        return _Match(default, candidates=fits, assumed=True)
    among = ", ".join(fits or candidates)
    return _Match(None, Text(f"'{name}' with {memory:g} GB matches {'several of' if fits else 'none of'} "
                             f"{among}, and the catalog names no default for it.",
                             f"显存 {memory:g} GB 的“{name}”与 {among} {'中的多个' if fits else '均不'}"
                             "相符，目录没有默认型号。"), fits or candidates)


def _same_memory(catalog: Catalog, card_id: str, memory_gb: float) -> bool:
    card = catalog.get(card_id)
    return card is not None and abs(card.memory_gb - memory_gb) <= MEMORY_TOLERANCE * memory_gb


def _memory_in_name(name: str) -> float | None:
    found = _MEMORY_IN_NAME.search(name.strip())
    return float(found.group(1)) if found else None


def _default_card(name: str, catalog: Catalog) -> str | None:
    try:
        return resolve_card(name, catalog).card.id
    except UnknownNameError:
        return None


# ------------------------------------------------------------------ reading files

def read_import_file(path: Path) -> tuple[str, datetime.date]:
    """The text of a CSV no larger than MAX_IMPORT_BYTES, and the local date it was last modified."""
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(Text(f"Cannot read {path}: {exc.strerror or exc}.",
                              f"无法读取 {path}：{os_reason(exc).zh}。")) from exc
    if not stat.S_ISREG(info.st_mode):  # a FIFO or device could block or never end
        raise InputError(Text(f"{path} is not a regular file (a folder, FIFO or device).",
                              f"{path} 不是普通文件（而是文件夹、FIFO 或设备）。"))
    limit = f"{MAX_IMPORT_BYTES / 2**20:g} MiB"
    too_big = InputError(Text(f"{path} is larger than {limit}: not a price catalog.",
                              f"{path} 超过 {limit}，不是价格表。"))
    if info.st_size > MAX_IMPORT_BYTES:
        raise too_big
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_IMPORT_BYTES + 1)
    except OSError as exc:
        raise InputError(Text(f"Cannot read {path}: {exc.strerror or exc}.",
                              f"无法读取 {path}：{os_reason(exc).zh}。")) from exc
    if len(data) > MAX_IMPORT_BYTES:
        raise too_big
    try:
        if b"\x00" in data:
            raise UnicodeError("NUL byte")
        text = data.decode("utf-8-sig")
    except UnicodeError as exc:
        raise InputError(Text(f"{path} is not a UTF-8 text CSV file ({exc}).",
                              f"{path} 不是 UTF-8 文本 CSV 文件（{exc}）。")) from exc
    return text, datetime.date.fromtimestamp(info.st_mtime)


def import_prices(path: Path | str, *, fmt: str = "auto", provider: str | None = None,
                  currency: str | None = None, as_of: str | None = None,
                  card_map: Iterable[str] = (), catalog: Catalog | None = None) -> PriceImport:
    """Read one file and parse it; rows without a date get `as_of`, else the file's modification date."""
    file = Path(path)
    text, modified = read_import_file(file)
    when: AsOfFrom = "flag" if as_of else "file-mtime"
    return parse_prices(text, file=str(file), fmt=fmt, provider=provider, currency=currency,
                        as_of=as_of or modified.isoformat(), as_of_from=when, card_map=card_map,
                        catalog=catalog)


# ------------------------------------------------------------------ parsing

def parse_prices(text: str, *, file: str, as_of: str, as_of_from: AsOfFrom = "flag", fmt: str = "auto",
                 provider: str | None = None, currency: str | None = None,
                 card_map: Iterable[str] = (), catalog: Catalog | None = None) -> PriceImport:
    """Price offers per GPU from CSV text; the format is told from the header unless `fmt` names it.

    Rows with the same (provider, card, billing, region) key are merged, keeping the cheapest
    per GPU-hour (an instance family offered in several zones or sizes is one row).
    """
    cat = catalog if catalog is not None else load_cards()
    if as_of_date(as_of) is None:
        raise InputError(Text(f"The date must be YYYY-MM-DD (or YYYY-MM, YYYY), got {as_of!r}.",
                              f"日期应为 YYYY-MM-DD（或 YYYY-MM、YYYY），实际为 {as_of!r}。"))
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = [clean_text(h or "", 60) for h in (reader.fieldnames or [])]
        reader.fieldnames = header
        kind = _detect(header, fmt, file)
        ctx = _Context(file, kind, _given_provider(provider, kind), _given_currency(currency, kind),
                       as_of, as_of_from, cat, parse_card_map(card_map, cat), set(header))
        for row in reader:
            _HANDLERS[kind](row, reader.line_num, ctx)
    except csv.Error as exc:
        raise InputError(Text(f"{file}: line {reader.line_num}: not valid CSV ({exc}).",
                              f"{file}：第 {reader.line_num} 行不是合法的 CSV（{exc}）。")) from exc
    return ctx.result()


def _detect(header: Sequence[str], fmt: str, file: str) -> ImportFormat:
    if fmt not in FORMATS:
        raise InputError(Text(f"Unknown price file format {fmt!r}: use {', '.join(FORMATS)}.",
                              f"未知的价格文件格式 {fmt!r}：可用 {'、'.join(FORMATS)}。"))
    kinds = list(REQUIRED_COLUMNS) if fmt == "auto" else [k for k in REQUIRED_COLUMNS if k == fmt]
    for kind in kinds:
        if all(col in header for col in REQUIRED_COLUMNS[kind]):
            return kind
    has = ", ".join(header[:12]) or "nothing"
    if fmt != "auto":
        missing = ", ".join(c for c in REQUIRED_COLUMNS[kinds[0]] if c not in header)
        raise InputError(Text(f"{file}: line 1: not a {fmt} price file, missing column(s) {missing} "
                              f"(the header has {has}).",
                              f"{file}：第 1 行：不是 {fmt} 价格文件，缺少列 {missing}（表头为 {has}）。"))
    wanted = "; ".join(f"{k}: {', '.join(c)}" for k, c in REQUIRED_COLUMNS.items())
    raise InputError(Text(f"{file}: line 1: the header matches no price format (it has {has}).",
                          f"{file}：第 1 行的表头不符合任何价格格式（表头为 {has}）。"),
                     hint=Text(f"Expected columns: {wanted} (docs/data-schema.md).",
                               f"需要的列：{wanted}（见 docs/data-schema.md）。"))


def _given_provider(provider: str | None, kind: ImportFormat) -> str:
    if provider is None:
        return DEFAULT_PROVIDER[kind]
    cleaned = clean_text(provider, 100)
    if not cleaned:
        raise InputError(Text(f"The provider name {provider!r} is empty.", f"来源名称 {provider!r} 为空。"))
    return cleaned


def _given_currency(currency: str | None, kind: ImportFormat) -> str:
    code = (currency or ("CNY" if kind == "csv" else "USD")).strip().upper()
    if not _CURRENCY.match(code):
        raise InputError(Text(f"A currency is 3 letters such as CNY or USD, got {currency!r}.",
                              f"货币应为三个字母（如 CNY、USD），实际为 {currency!r}。"))
    return code


class _Context:
    """The parse state of one file (private and mutable; the result is frozen)."""

    def __init__(self, file: str, kind: ImportFormat, provider: str, currency: str, as_of: str,
                 as_of_from: AsOfFrom, catalog: Catalog, card_map: dict[str, str],
                 columns: set[str]) -> None:
        self.file, self.kind, self.provider, self.currency = file, kind, provider, currency
        self.as_of, self.as_of_from, self.catalog, self.card_map = as_of, as_of_from, catalog, card_map
        self.columns, self.name = columns, clean_text(Path(file).name, 100)
        self.best: dict[tuple[str, str, str, str], PriceOffer] = {}
        self.seen: dict[tuple[str, str, str, str], int] = {}
        self.skipped: list[SkippedRow] = []
        self.assumed: dict[tuple[str, str], Assumption] = {}
        self.no_accelerator = 0
        self._matches: dict[tuple[str, float | None], _Match] = {}

    def card(self, name: str, memory: float | None, line: int) -> tuple[str | None, str]:
        """The card id for a name (None: skipped, with the reason kept) and a note when assumed."""
        match = self._matches.get((name, memory))
        if match is None:
            match = self._matches[(name, memory)] = match_card(name, memory, self.catalog, self.card_map)
        if match.card is None:
            self.skip(line, name, match.reason or Text("unknown card", "未知显卡"), match.candidates)
            return None, ""
        if not match.assumed:
            return match.card, ""
        assumption = self.assumed.setdefault((name, match.card), Assumption(name, match.card, match.candidates))
        return match.card, assumption.text.en

    def skip(self, line: int, name: str, reason: Text, candidates: tuple[str, ...] = ()) -> None:
        self.skipped.append(SkippedRow(line, name, reason, candidates))

    def add(self, offer: PriceOffer, line: int, name: str) -> None:
        if offer.low == 0:
            self.skip(line, name, Text("the price is 0 (not a rental price).", "价格为 0（不是租用价格）。"))
            return
        key = offer.key
        self.seen[key] = self.seen.get(key, 0) + 1
        kept = self.best.get(key)
        if kept is None or offer.low / offer.hours_per_unit < kept.low / kept.hours_per_unit:
            self.best[key] = offer

    def result(self) -> PriceImport:
        offers = []
        for key, offer in sorted(self.best.items(), key=lambda kv: (kv[0][1], kv[0])):
            n = self.seen[key]
            extra = f"cheapest of {n} rows with this provider, card, billing and region" if n > 1 else ""
            note = "; ".join(p.rstrip(".") for p in (offer.note, extra) if p)
            offers.append(replace(offer, note=clean_text(note, 500)))
        merged = sum(self.seen.values()) - len(self.best)
        return PriceImport(self.kind, self.file, tuple(offers), tuple(self.skipped), self.no_accelerator,
                           merged, tuple(self.assumed.values()),
                           self.as_of if self.kind != "csv" else "", "rows" if self.kind == "csv"
                           else self.as_of_from)

    def offer(self, *, card: str, billing: Billing, price: float, region: str, source: str,
              note: str, unit: Unit = "gpu_hour", provider: str | None = None,
              currency: str | None = None, as_of: str | None = None) -> PriceOffer:
        per = round(price, 6)  # a millionth of a currency unit is below any rental price's precision
        return PriceOffer(provider or self.provider, card, currency or self.currency, billing, unit,
                          per, per, as_of or self.as_of, clean_text(source, 500), clean_text(note, 500),
                          region=clean_text(region, 100))


def _cell(row: Mapping[str | None, Any], column: str) -> str:
    value = row.get(column)
    return value if isinstance(value, str) else ""


def _cell_error(ctx: _Context, line: int, column: str, raw: str, en: str, zh: str) -> InputError:
    shown = repr(raw[:40])
    return InputError(Text(f"{ctx.file}: line {line}, column '{column}': {en}, got {shown}.",
                           f"{ctx.file}：第 {line} 行，列“{column}”：{zh}，实际为 {shown}。"),
                      hint=Text("Fix that cell, or remove the row.", "请修正该单元格或删除该行。"))


def _number(row: Mapping[str | None, Any], column: str, line: int, ctx: _Context) -> float | None:
    """A finite number >= 0 from one cell; None when the cell is empty."""
    raw = _cell(row, column).strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise _cell_error(ctx, line, column, raw, "must be a number", "应为数字") from None
    if not math.isfinite(value):
        raise _cell_error(ctx, line, column, raw, "must be a finite number (not NaN or infinity)",
                          "应为有限数字（不能是 NaN 或无穷大）")
    if value < 0:
        raise _cell_error(ctx, line, column, raw, "must be 0 or more", "不能为负数")
    return value


def _skypilot_row(row: Mapping[str | None, Any], line: int, ctx: _Context) -> None:
    name = clean_text(_cell(row, "AcceleratorName"), 100)
    count = _number(row, "AcceleratorCount", line, ctx)
    if not name or not count:
        ctx.no_accelerator += 1
        return
    found = _MIB.search(_cell(row, "GPUInfo") or _cell(row, "GpuInfo"))
    memory = round(float(found.group(1)) / 1024, 1) if found else None  # MiB -> GiB per GPU
    card, note = ctx.card(name, memory, line)
    if card is None:
        return
    instance = clean_text(_cell(row, "InstanceType"), 100)
    source = (f"SkyPilot catalog {ctx.name}: {instance} ({count:g} x {name}); "
              f"per GPU = instance price / {count:g}")
    for billing, column in (("hourly", "Price"), ("spot", "SpotPrice")):
        price = _number(row, column, line, ctx) if column in ctx.columns else None
        if price is None:
            if billing == "hourly":
                ctx.skip(line, name, Text("no on-demand price in column 'Price'.", "“Price”列没有按量价格。"))
            continue
        offer = ctx.offer(card=card, billing="hourly" if billing == "hourly" else "spot",
                          price=price / count, region=_cell(row, "Region"), source=source, note=note)
        ctx.add(offer, line, name)


def _gpuhunt_row(row: Mapping[str | None, Any], line: int, ctx: _Context) -> None:
    name = clean_text(_cell(row, "gpu_name"), 100)
    count = _number(row, "gpu_count", line, ctx)
    if not name or not count:
        ctx.no_accelerator += 1
        return
    spot_cell = _cell(row, "spot").strip().lower()
    if spot_cell not in ("true", "false", ""):
        raise _cell_error(ctx, line, "spot", spot_cell, "must be True or False", "应为 True 或 False")
    memory = _number(row, "gpu_memory", line, ctx)
    card, note = ctx.card(name, memory, line)
    if card is None:
        return
    price = _number(row, "price", line, ctx)
    if price is None:
        ctx.skip(line, name, Text("no price in column 'price'.", "“price”列没有价格。"))
        return
    instance = clean_text(_cell(row, "instance_name"), 100)
    shown = f"{count:g} x {name}" + (f" {memory:g}GB" if memory else "")
    source = f"gpuhunt catalog {ctx.name}: {instance} ({shown}); per GPU = instance price / {count:g}"
    offer = ctx.offer(card=card, billing="spot" if spot_cell == "true" else "hourly",
                      price=price / count, region=_cell(row, "location"), source=source, note=note)
    ctx.add(offer, line, name)


def _csv_row(row: Mapping[str | None, Any], line: int, ctx: _Context) -> None:
    provider = clean_text(_cell(row, "provider"), 100)
    if not provider:
        raise _cell_error(ctx, line, "provider", "", "must name the provider", "应填写来源名称")
    billing_cell = _cell(row, "billing").strip().lower()
    billing = _BILLING_OF.get(billing_cell)
    if billing is None:
        raise _cell_error(ctx, line, "billing", billing_cell, f"must be one of {', '.join(BILLINGS)}",
                          f"应为 {'、'.join(BILLINGS)} 之一")
    unit_cell = _cell(row, "unit").strip().lower() or "gpu_hour"
    unit = _UNIT_OF.get(unit_cell)
    if unit is None:
        raise _cell_error(ctx, line, "unit", unit_cell, f"must be one of {', '.join(HOURS_PER_UNIT)}",
                          f"应为 {'、'.join(HOURS_PER_UNIT)} 之一")
    price = _number(row, "price", line, ctx)
    if price is None:
        raise _cell_error(ctx, line, "price", "", "must be a number", "应为数字")
    as_of = _cell(row, "as_of").strip() or (ctx.as_of if ctx.as_of_from == "flag" else "")
    if as_of_date(as_of) is None:
        raise _cell_error(ctx, line, "as_of", as_of, "must be a date YYYY, YYYY-MM or YYYY-MM-DD",
                          "应为日期 YYYY、YYYY-MM 或 YYYY-MM-DD")
    currency = _cell(row, "currency").strip().upper() or ctx.currency
    if not _CURRENCY.match(currency):
        raise _cell_error(ctx, line, "currency", currency, "must be 3 letters such as CNY or USD",
                          "应为三个字母（如 CNY、USD）")
    name = clean_text(_cell(row, "card"), 100)
    card, assumed = ctx.card(name, None, line)
    if card is None:
        return
    note = "; ".join(p for p in (_cell(row, "note"), assumed) if p)
    offer = ctx.offer(card=card, billing=billing, price=price, region=_cell(row, "region"),
                      source=_cell(row, "source") or f"imported from {ctx.name}", note=note,
                      unit=unit, provider=provider, currency=currency, as_of=as_of)
    ctx.add(offer, line, name)


_HANDLERS = {"skypilot": _skypilot_row, "gpuhunt": _gpuhunt_row, "csv": _csv_row}


__all__ = [
    "FORMATS",
    "MAX_IMPORT_BYTES",
    "REQUIRED_COLUMNS",
    "Assumption",
    "ImportFormat",
    "PriceImport",
    "SkippedRow",
    "clean_text",
    "import_prices",
    "match_card",
    "parse_card_map",
    "parse_prices",
    "read_import_file",
]
