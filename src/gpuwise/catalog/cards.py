"""GPU cards: datasheet specs with provenance, user overrides, and generous name lookup.

The shipped catalog is src/gpuwise/data/cards.toml; a user's `$GPUWISE_CONFIG_DIR/cards.toml`
(default ~/.config/gpuwise/cards.toml) and any `--cards FILE` override it field by field
(same id) or extend it (new id). Schema: docs/data-schema.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.catalog._datafile import check_row, config_dir, data_error, read_toml, table_rows
from gpuwise.catalog.card_schema import (
    AMBIGUOUS_FIELDS,
    CARD_FIELDS,
    DEFAULT_SOFTWARE,
    META_FIELDS,
    TOP_LEVEL_KEYS,
    VENDORS,
)
from gpuwise.catalog.hardware import SHIPPED_FORM_FACTORS, form_factors
from gpuwise.errors import InputError, UnknownNameError, close_matches, unknown_name
from gpuwise.i18n import Text
from gpuwise.units import GiB

if TYPE_CHECKING:
    from gpuwise.catalog.prices import PriceOffer

Vendor = Literal["nvidia", "amd", "huawei"]
Interconnect = Literal["nvlink", "nvlink-bridge", "none", "infinity-fabric", "hccs"]
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
Provenance = Literal["official", "derived", "unverified", "user"]
SortKey = Literal["bandwidth", "memory", "bf16", "fp8", "name", "price"]

PRECISIONS: tuple[Precision, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
SORT_KEYS: tuple[SortKey, ...] = ("bandwidth", "memory", "bf16", "fp8", "name", "price")
SHIPPED_CARDS = Path(__file__).resolve().parent.parent / "data" / "cards.toml"
CARD = Text("card", "显卡")
_PCI_ID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{4}")  # vendor:device, lower-case hex (lspci -nn)

# Dense-rate field per precision; bf16/fp16/fp8 are FP32-accumulate (what training gets).
_DENSE_FIELD: dict[str, str] = {
    "fp32": "fp32_tflops", "tf32": "tf32_dense_tflops", "bf16": "bf16_dense_tflops",
    "fp16": "fp16_dense_tflops", "fp8": "fp8_dense_tflops", "int8": "int8_dense_tops",
    "fp4": "fp4_dense_tflops",
}


@dataclass(frozen=True)
class Card:
    """One GPU model. Units are in the field names; see docs/data-schema.md for each field."""

    id: str
    name: str
    vendor: Vendor
    architecture: str
    form_factor: str
    memory_gb: float
    memory_cuda_gib: float
    mem_bw_gbps: float
    family: str
    sources: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    pci_device_ids: tuple[str, ...] = ()  # "10de:2330" (vendor:device); () = not known
    memory_type: str = ""
    fp32_tflops: float | None = None
    tf32_dense_tflops: float | None = None
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    fp16_fp16acc_dense_tflops: float | None = None
    fp8_dense_tflops: float | None = None
    int8_dense_tops: float | None = None
    fp4_dense_tflops: float | None = None
    bf16_sparse_tflops: float | None = None
    fp8_sparse_tflops: float | None = None
    int8_sparse_tops: float | None = None
    interconnect: Interconnect = "none"
    nvlink_gen: int | None = None
    interconnect_bw_gbps: float = 0.0
    interconnect_max_gpus: int = 1
    # Set by the loader: the row's own value, else its form factor's (form_factors.toml).
    max_gpus_per_node: int = 1
    pcie_p2p: bool | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    tdp_w: float | None = None
    ecc: bool | None = None
    ecc_note: str = ""
    mig_profiles: tuple[str, ...] = ()
    compute_capability: str | None = None
    software: Literal["cuda", "rocm", "cann"] = "cuda"
    release_year: int | None = None
    verification: Literal["official", "partial", "secondary", "unverified"] = "unverified"
    derived: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    notes: str = ""
    user_fields: tuple[str, ...] = ()  # set by the loader: fields a user file gave

    @property
    def usable_bytes(self) -> int:
        """Total memory as CUDA reports it, in bytes (before the CUDA context takes its share)."""
        return int(self.memory_cuda_gib * GiB)

    @property
    def has_nvlink(self) -> bool:
        return self.interconnect in ("nvlink", "nvlink-bridge")

    @property
    def nvlink_group(self) -> int:
        """GPUs one fast link joins (NVLink/NVSwitch, bridge, Infinity Fabric, HCCS); 1 for none."""
        return 1 if self.interconnect == "none" else self.interconnect_max_gpus

    def linked(self, gpus: int) -> bool:
        """Every GPU of a `gpus`-GPU node talks to every other over the fast link."""
        return gpus <= self.nvlink_group

    def dense_tflops(self, precision: Precision) -> float | None:
        """Dense tensor (or FP32 shader) rate for a precision; None when the card lacks it."""
        field = _DENSE_FIELD.get(precision)
        if field is None:
            raise InputError(Text(f"Unknown precision '{precision}': use {', '.join(PRECISIONS)}.",
                                  f"未知精度“{precision}”：可用 {', '.join(PRECISIONS)}。"))
        value = getattr(self, field)
        return None if value is None else float(value)

    def provenance(self, field: str) -> Provenance:
        """Where a value comes from: a user file, unverified, derived, else the vendor's document."""
        if field not in CARD_FIELDS:
            raise InputError(Text(f"Card has no field '{field}'.", f"显卡没有字段“{field}”。"))
        if field in self.user_fields:
            return "user"
        if field in self.unverified:
            return "unverified"
        return "derived" if field in self.derived else "official"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (*CARD_FIELDS, "user_fields"):
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class AmbiguousName:
    """A name that fits several cards (`A100`), and the card it means by default."""

    names: tuple[str, ...]
    default: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class ResolvedCard:
    """A card found by name, with a note when the name could mean several cards."""

    card: Card
    note: Text | None = None

    def to_dict(self) -> dict[str, Any]:
        note = None if self.note is None else {"en": self.note.en, "zh": self.note.zh}
        return {**self.card.to_dict(), "note": note}


@dataclass(frozen=True)
class Catalog:
    """The cards in catalog order, the ambiguous-name defaults, and the files they came from."""

    cards: tuple[Card, ...]
    ambiguous: tuple[AmbiguousName, ...] = ()
    files: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Card]:
        return iter(self.cards)

    def __len__(self) -> int:
        return len(self.cards)

    def get(self, card_id: str) -> Card | None:
        return self._by_id.get(card_id)

    def ids(self) -> list[str]:
        return [c.id for c in self.cards]

    def names(self) -> list[str]:
        """Every id, alias and ambiguous name: what `resolve_card` can suggest."""
        out = [n for c in self.cards for n in (c.id, *c.aliases)]
        return out + [n for a in self.ambiguous for n in a.names]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": 1, "cards": [c.to_dict() for c in self.cards]}

    @functools.cached_property
    def _by_id(self) -> dict[str, Card]:
        return {c.id: c for c in self.cards}

    @functools.cached_property
    def _index(self) -> tuple[dict[str, Card], dict[str, Card], dict[str, AmbiguousName]]:
        full: dict[str, Card] = {}
        stripped: dict[str, Card] = {}
        for card in self.cards:  # later cards (user files) win a shared key
            for key in (card.id, card.name, *card.aliases):
                full[normalize(key)] = card
                stripped[strip_prefixes(normalize(key))] = card
        ambiguous = {strip_prefixes(normalize(n)): a for a in self.ambiguous for n in a.names}
        return full, stripped, ambiguous


# ------------------------------------------------------------------ names

# Brand words people add or drop freely ("NVIDIA GeForce RTX 4090" = "RTX 4090" = "4090").
_PREFIXES = ("nvidia", "geforce", "tesla", "amd", "instinct", "huawei", "rtx")


def normalize(name: str) -> str:
    """Lower case, no spaces/dashes/punctuation, '80GB' == '80G'."""
    key = re.sub(r"[^0-9a-z\u4e00-\u9fff]", "", name.lower())
    return re.sub(r"(\d)gb", r"\1g", key)


def strip_prefixes(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                key, changed = key[len(prefix):], True
    return key


def resolve_card(name: str, catalog: Catalog | None = None) -> ResolvedCard:
    """Find a card by id, alias or nvidia-smi name; an ambiguous name gets its default + a note."""
    cat = catalog if catalog is not None else load_cards()
    query = name.strip()
    if not query:
        raise InputError(Text("No card name given.", "没有给出显卡名称。"),
                         hint=Text("Run `gpuwise cards` to list them.", "运行 `gpuwise cards` 查看全部。"))
    exact = cat.get(query) or cat.get(query.lower())
    if exact is not None:
        return ResolvedCard(exact)
    full, stripped, ambiguous = cat._index
    key = normalize(query)
    if key in full:
        return ResolvedCard(full[key])
    amb = ambiguous.get(strip_prefixes(key))
    if amb is not None:
        default = cat.get(amb.default)
        if default is not None:
            return ResolvedCard(default, _ambiguous_note(query, amb, default))
    card = stripped.get(strip_prefixes(key))
    if card is not None:
        return ResolvedCard(card)
    found = _by_model_number(strip_prefixes(key), stripped)
    if len(found) == 1:
        return ResolvedCard(found[0], Text(
            f"'{query}' is taken as {found[0].name} ({found[0].id}), the only card of that model number.",
            f"“{query}”按 {found[0].name}（{found[0].id}）计算：目录中只有这一张该型号的卡。"))
    raise _unknown_card(query, cat, found)


def _by_model_number(prefix: str, stripped: dict[str, Card]) -> list[Card]:
    """Cards whose name starts with the typed model number ("4050" -> "4050 Laptop"): the next
    character must not be a digit, so "409" never means 4090 and "A100" never means "A100 80G"."""
    if len(prefix) < 3:
        return []
    hits = {card.id: card for name, card in stripped.items()
            if name.startswith(prefix) and len(name) > len(prefix) and not name[len(prefix)].isdigit()}
    return list(hits.values())


_MEMORY = re.compile(r"(\d+)\s*gi?b?\b", re.IGNORECASE)  # "A100-80G", "4090 48GB", "80 GiB"


def _unknown_card(query: str, cat: Catalog, found: list[Card]) -> UnknownNameError:
    """Unknown card: the cards that share its model number first, those with the memory it names
    ahead of the others ("A100-96G" lists the 80 GB variants before the 40 GB ones)."""
    err = unknown_name(CARD, query, cat.names(), "gpuwise cards")
    size = _MEMORY.search(query)
    if not found:
        stem = strip_prefixes(normalize(_MEMORY.sub("", query)))
        found = [c for c in cat.cards if strip_prefixes(normalize(c.id)).startswith(stem)] if len(stem) >= 3 else []
    if not found:
        return err
    if size is not None:
        want = float(size.group(1))
        found = sorted(found, key=lambda c: abs(c.memory_gb - want))
    ids = [c.id for c in found[:4]]
    quoted = ", ".join(f"'{i}'" for i in ids)
    return UnknownNameError(Text(f"Unknown card '{query}'. Did you mean {quoted}?",
                                 f"未知的显卡“{query}”。您是否想输入 {quoted}？"),
                            hint=err.hint, suggestions=tuple(ids))


def _ambiguous_note(query: str, amb: AmbiguousName, default: Card) -> Text:
    others = [c for c in amb.candidates if c != amb.default]
    return Text(
        f"'{query}' can mean several cards; using {default.name} ({default.id}). "
        f"Name one exactly to choose another: {', '.join(others)}.",
        f"“{query}”可指多种型号；这里按 {default.name}（{default.id}）计算。"
        f"如需其他型号请写明确的 id：{'、'.join(others)}。")


# ------------------------------------------------------------------ loading

def user_cards_file() -> Path:
    return config_dir() / "cards.toml"


@functools.cache
def _shipped_catalog() -> Catalog:
    return _merge(Catalog(()), [SHIPPED_CARDS], user=False)


def load_cards(extra: Sequence[Path | str] = ()) -> Catalog:
    """The shipped catalog, then the user's cards.toml, then `extra` files (later rows win)."""
    user_file = user_cards_file()
    files = ([user_file] if user_file.is_file() else []) + [Path(p) for p in extra]
    if not files:
        return _shipped_catalog()
    return _merge(_shipped_catalog(), files, user=True)


def _merge(base: Catalog, paths: Sequence[Path], *, user: bool) -> Catalog:
    cards = {c.id: c for c in base.cards}
    ambiguous = list(base.ambiguous)
    for path in paths:
        doc = read_toml(path)
        for i, row in enumerate(table_rows(doc, "card", path, TOP_LEVEL_KEYS)):
            card = _card_from_row(row, i, path, cards, user=user)
            cards[card.id] = card
        for i, row in enumerate(table_rows(doc, "ambiguous", path, TOP_LEVEL_KEYS)):
            where = Text(f"ambiguous name #{i + 1}", f"歧义名称第 {i + 1} 条")
            values = check_row(row, AMBIGUOUS_FIELDS, path=path, where=where, require=True)
            amb = AmbiguousName(values["names"], values["default"], values["candidates"])
            for card_id in (amb.default, *amb.candidates):
                if card_id not in cards:
                    raise data_error(path, where, f"no card with id '{card_id}'.",
                                     f"没有 id 为“{card_id}”的显卡。")
            ambiguous.insert(0, amb)  # later files take precedence
    files = (*base.files, *(str(p) for p in paths))
    return Catalog(tuple(cards.values()), tuple(ambiguous), files)


def _card_from_row(row: Any, i: int, path: Path, cards: dict[str, Card], *, user: bool) -> Card:
    card_id = row.get("id") if isinstance(row, dict) else None
    where = Text(f"card '{card_id}'", f"显卡“{card_id}”") if isinstance(card_id, str) \
        else Text(f"card #{i + 1}", f"第 {i + 1} 张显卡")
    old = cards.get(card_id) if isinstance(card_id, str) else None
    values = check_row(row, CARD_FIELDS, path=path, where=where, require=old is None)
    for listed in (*values.get("derived", ()), *values.get("unverified", ())):
        if listed not in CARD_FIELDS or listed in META_FIELDS:
            raise data_error(path, where, f"'derived'/'unverified' name '{listed}', which is not a "
                             "spec field.", f"“derived”/“unverified”中的“{listed}”不是规格字段。")
    for pci in values.get("pci_device_ids", ()):
        if not _PCI_ID.fullmatch(pci):
            raise data_error(path, where, f"pci_device_ids entry '{pci}' is not vendor:device in "
                             "lower-case hex, like '10de:2330'.",
                             f"pci_device_ids 中的“{pci}”不是小写十六进制的 vendor:device（如“10de:2330”）。")
    given = tuple(k for k in values if k != "id") if user else ()
    if "form_factor" in values:  # an unknown form factor is an error even with an override
        ff_max = _form_factor_max(values["form_factor"], path, where)
        values.setdefault("max_gpus_per_node", ff_max)
    if old is not None:
        user_fields = tuple(dict.fromkeys((*old.user_fields, *given)))
        return replace(old, **values, user_fields=user_fields)
    values.setdefault("software", DEFAULT_SOFTWARE[values["vendor"]])
    return Card(**values, user_fields=given)


def _form_factor_max(form_factor: str, path: Path, where: Text) -> int:
    """GPUs per node for a form factor; one missing from form_factors.toml is a data error."""
    table = form_factors()
    ff = table.get(form_factor)
    if ff is not None:
        return ff.max_gpus_per_node
    close = ", ".join(f"'{m}'" for m in close_matches(form_factor, table))
    known = ", ".join(table)
    raise data_error(path, where,
                     f"form_factor '{form_factor}' has no row in {SHIPPED_FORM_FACTORS.name} "
                     f"(known: {known})." + (f" Did you mean {close}?" if close else "")
                     + " Add a row there or use a known form factor.",
                     f"form_factor“{form_factor}”在 {SHIPPED_FORM_FACTORS.name} 中没有对应行"
                     f"（可用：{known}）。" + (f"您是否想写 {close}？" if close else "")
                     + "请在该文件中添加一行，或使用已有的规格。")


# ------------------------------------------------------------------ listing

def filter_cards(catalog: Catalog, min_memory_gb: float | None = None, nvlink: bool | None = None,
                 vendor: str | None = None, sort: str = "bandwidth",
                 prices: Sequence[PriceOffer] | None = None) -> list[Card]:
    """Cards matching the filters, best first for the sort key (missing values last)."""
    if vendor is not None and vendor.lower() not in VENDORS:
        raise unknown_name(Text("vendor", "厂商"), vendor, VENDORS, "gpuwise cards --help")
    if sort not in SORT_KEYS:
        raise unknown_name(Text("sort key", "排序键"), sort, SORT_KEYS, "gpuwise cards --help")
    if min_memory_gb is not None and min_memory_gb < 0:
        raise InputError(Text(f"--min-memory must be 0 or more, got {min_memory_gb}.",
                              f"--min-memory 不能为负数（{min_memory_gb}）。"))
    chosen = [c for c in catalog
              if (min_memory_gb is None or c.memory_gb >= min_memory_gb)
              and (nvlink is None or c.has_nvlink == nvlink)
              and (vendor is None or c.vendor == vendor.lower())]
    if sort == "name":
        return sorted(chosen, key=lambda c: c.name.lower())
    value = _sort_value(sort, prices)
    ascending = sort == "price"  # cheapest first; for every other key, biggest first
    return sorted(chosen, key=lambda c: _missing_last(value(c), ascending))


def _sort_value(sort: str, prices: Sequence[PriceOffer] | None) -> Any:
    if sort == "price":
        from gpuwise.catalog.prices import load_prices, price_per_gpu_hour

        offers = list(prices) if prices is not None else load_prices()

        def cny_per_hour(card: Card) -> float | None:
            quote = price_per_gpu_hour(card.id, offers=offers)
            return quote.mid if quote is not None and quote.currency == "CNY" else None

        return cny_per_hour
    field = {"bandwidth": "mem_bw_gbps", "memory": "memory_gb",
             "bf16": "bf16_dense_tflops", "fp8": "fp8_dense_tflops"}[sort]
    return lambda c: getattr(c, field)


def _missing_last(value: float | None, ascending: bool) -> tuple[bool, float]:
    if value is None:
        return (True, 0.0)
    return (False, value if ascending else -value)


__all__ = [
    "PRECISIONS",
    "SHIPPED_CARDS",
    "SORT_KEYS",
    "AmbiguousName",
    "Card",
    "Catalog",
    "ResolvedCard",
    "filter_cards",
    "load_cards",
    "normalize",
    "resolve_card",
    "user_cards_file",
]
