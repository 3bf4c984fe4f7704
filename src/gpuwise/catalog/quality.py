"""What a weight format costs in output quality, with the measurement and its source.

Rows live in src/gpuwise/data/quant_quality.toml (tiers and thresholds are explained there
and in docs/quality.md). `quality_cost("int4")` answers with the cited figure; a GGUF type
the file has no row for borrows the row nearest in bits per weight and says so.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.catalog._datafile import FieldSpec, check_row, data_error, read_toml, table_rows
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Text

Tier = Literal["lossless", "near-lossless", "small", "noticeable", "large"]

# Best to worst; data/quant_quality.toml gives each tier's threshold.
TIERS: tuple[Tier, ...] = ("lossless", "near-lossless", "small", "noticeable", "large")
# Formats the planner may pick without the user asking for them.
DEFAULT_OK_TIERS: tuple[Tier, ...] = ("lossless", "near-lossless")
UNQUANTISED: tuple[str, ...] = ("bf16", "fp16", "fp32")
# GGUF's float types store the checkpoint's own floats (ggml F32/F16/BF16), not a quantisation.
_GGUF_FLOATS: dict[str, str] = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"}

_DATA = Path(__file__).resolve().parent.parent / "data"
QUALITY_FILE = _DATA / "quant_quality.toml"
_GGUF_TYPES_FILE = _DATA / "gguf_types.toml"
_LIST_COMMAND = "gpuwise estimate --help"

QUALITY_FIELDS: dict[str, FieldSpec] = {
    "format": FieldSpec("str", required=True),
    "tier": FieldSpec("str", required=True, choices=TIERS),
    "summary_en": FieldSpec("str", required=True),
    "summary_zh": FieldSpec("str", required=True),
    "metric": FieldSpec("str", required=True),
    "value": FieldSpec("float"),
    "model_scope": FieldSpec("str", required=True),
    "sources": FieldSpec("strlist", required=True),
    "quote": FieldSpec("strlist", required=True),
    "unverified": FieldSpec("bool"),
    "note": FieldSpec("str"),
}


@dataclass(frozen=True)
class QualityCost:
    """The quality cost of one weight format against the 16-bit checkpoint."""

    format: str
    tier: Tier
    summary: Text
    metric: str
    value: float | None
    model_scope: str
    sources: tuple[str, ...]
    unverified: bool
    quotes: tuple[str, ...] = ()  # the exact words of each source, same order as `sources`
    note: str = ""
    approximated_from: str | None = None  # the row this was borrowed from (nearest bits per weight)

    @property
    def default_ok(self) -> bool:
        return self.tier in DEFAULT_OK_TIERS

    @property
    def tier_rank(self) -> int:
        """0 for lossless, growing as the tier gets worse."""
        return TIERS.index(self.tier)


def _row(row: Any, i: int, path: Path) -> QualityCost:
    where = Text(f"quality row #{i + 1}", f"质量第 {i + 1} 条")
    if isinstance(row, dict) and isinstance(row.get("format"), str):
        where = Text(f"quality row #{i + 1} ({row['format']})", f"质量第 {i + 1} 条（{row['format']}）")
    v = check_row(row, QUALITY_FIELDS, path=path, where=where, require=True)
    if not v["sources"] or len(v["quote"]) != len(v["sources"]):
        raise data_error(path, where, "needs at least one source and exactly one quote per source.",
                         "至少需要一个来源，且每个来源对应一条引文。")
    if v.get("unverified") and not v.get("note"):
        raise data_error(path, where, "an unverified figure needs a note saying why.",
                         "未核实的数字需要在 note 中说明原因。")
    if v["tier"] != "lossless" and "value" not in v:
        raise data_error(path, where, "a quantised format needs a measured value.",
                         "量化格式需要一个实测值 value。")
    return QualityCost(
        format=v["format"], tier=v["tier"], summary=Text(v["summary_en"], v["summary_zh"]),
        metric=v["metric"], value=v.get("value"), model_scope=v["model_scope"],
        sources=v["sources"], unverified=v.get("unverified", False), quotes=v["quote"],
        note=v.get("note", ""))


@functools.cache
def quality_rows() -> dict[str, QualityCost]:
    """Every row of the data file by format (GGUF types upper-cased: 'gguf:Q4_K_M')."""
    doc = read_toml(QUALITY_FILE)
    rows: dict[str, QualityCost] = {}
    for i, raw in enumerate(table_rows(doc, "quality", QUALITY_FILE, {"schema_version", "quality"})):
        cost = _row(raw, i, QUALITY_FILE)
        key = _normalise(cost.format)
        if key in rows:
            raise data_error(QUALITY_FILE, Text(f"quality row #{i + 1}", f"质量第 {i + 1} 条"),
                             f"format '{cost.format}' is listed twice.", f"格式“{cost.format}”重复出现。")
        rows[key] = cost
    return rows


@functools.cache
def _gguf_aliases() -> dict[str, str]:
    """llama-quantize aliases from gguf_types.toml: Q4_K -> Q4_K_M and the like."""
    aliases = read_toml(_GGUF_TYPES_FILE).get("aliases", {})
    return {str(k).upper(): str(v).upper() for k, v in aliases.items()}


def _gguf_bits() -> dict[str, float]:
    from gpuwise.catalog.gguf_reader import GGUF_BITS_PER_WEIGHT

    return GGUF_BITS_PER_WEIGHT


def _normalise(fmt: str) -> str:
    if fmt[:5].lower() == "gguf:":
        name = fmt[5:].upper()
        return "gguf:" + _gguf_aliases().get(name, name)
    return fmt


def _unknown(kind: Text, word: str, choices: list[str]) -> InputError:
    err = unknown_name(kind, word, choices, _LIST_COMMAND)
    return InputError(err.message, hint=err.hint, suggestions=err.suggestions)


def quality_cost(fmt: str) -> QualityCost:
    """The cited quality cost of `fmt` (bf16, fp8, int4, nf4, gguf:Q4_K_M, ...).

    `gguf:<TYPE>` ignores the case of TYPE; a GGUF type without a row borrows the row nearest
    in bits per weight (the lower-bit one on a tie) and names it in `approximated_from`.
    """
    rows = quality_rows()
    key = _normalise(fmt)
    if key in rows:
        return rows[key]
    if not key.startswith("gguf:"):
        choices = [f for f in rows if not f.startswith("gguf:")] + ["gguf:<TYPE>"]
        raise _unknown(Text("weight format", "权重格式"), fmt, choices)
    return _gguf_fallback(key[5:], rows)


def _gguf_fallback(name: str, rows: dict[str, QualityCost]) -> QualityCost:
    if name in _GGUF_FLOATS:
        base = rows[_GGUF_FLOATS[name]]
        return _borrowed(base, f"gguf:{name}", None)
    bits = _gguf_bits()
    if name not in bits:
        raise _unknown(Text("GGUF type", "GGUF 量化类型"), name, sorted(bits))
    known = [(bits[k[5:]], k) for k in rows if k.startswith("gguf:") and k[5:] in bits]
    # nearest bits per weight; on a tie the lower-bit (more pessimistic) row wins
    _, nearest = min(known, key=lambda bk: (abs(bk[0] - bits[name]), bk[0]))
    return _borrowed(rows[nearest], f"gguf:{name}", nearest)


def _borrowed(base: QualityCost, fmt: str, source_format: str | None) -> QualityCost:
    if source_format is None:  # a GGUF float type: the checkpoint's own precision
        return QualityCost(fmt, base.tier, base.summary, base.metric, base.value, base.model_scope,
                           base.sources, base.unverified, base.quotes, base.note)
    bits = _gguf_bits()
    lead = Text(
        f"Approximation: {fmt} ({bits[fmt[5:]]:g} bits/weight) has no measurement of its own; "
        f"using {source_format} ({bits[source_format[5:]]:g} bits/weight), the nearest measured type. ",
        f"近似值：{fmt}（每权重 {bits[fmt[5:]]:g} 位）没有单独的实测数据；"
        f"采用每权重位数最接近的已测类型 {source_format}（{bits[source_format[5:]]:g} 位）。")
    return QualityCost(fmt, base.tier, lead + base.summary, base.metric, base.value,
                       base.model_scope, base.sources, base.unverified, base.quotes, base.note,
                       approximated_from=source_format)


def is_quantised(fmt: str) -> bool:
    """True for every format except the checkpoint's own floats (bf16, fp16, fp32, GGUF F16...)."""
    if fmt[:5].lower() == "gguf:":
        return fmt[5:].upper() not in _GGUF_FLOATS
    return fmt not in UNQUANTISED


def default_ok(fmt: str) -> bool:
    """May the planner choose `fmt` without being asked? Only lossless or near-lossless formats."""
    return quality_cost(fmt).default_ok


__all__ = [
    "DEFAULT_OK_TIERS",
    "QUALITY_FILE",
    "TIERS",
    "UNQUANTISED",
    "QualityCost",
    "Tier",
    "default_ok",
    "is_quantised",
    "quality_cost",
    "quality_rows",
]
