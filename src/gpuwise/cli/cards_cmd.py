"""`gpuwise cards` (the card catalog), `gpuwise prices` (rental price rows) and `prices import`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup

from gpuwise.catalog._datafile import config_dir
from gpuwise.catalog.card_schema import CARD_FIELDS
from gpuwise.catalog.cards import Card, ResolvedCard, filter_cards, load_cards, resolve_card
from gpuwise.catalog.prices import (
    BILLING_WORDS,
    UNIT_WORDS,
    PriceOffer,
    PriceQuote,
    load_prices,
    price_per_gpu_hour,
    prices_toml,
    providers,
)
from gpuwise.catalog.prices_import import FORMATS, PriceImport, import_prices
from gpuwise.cli.common import Column, JsonOpt, LangOpt, dropped_note, fit_table, money, run_command, safe, say
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Lang, Text, os_reason

SCHEMA_VERSION = 1
# Marks after a value: where it comes from (docs/data-schema.md, "Provenance").
MARKS = {"official": "", "derived": "*", "unverified": "?", "user": "†"}
LEGEND = Text("* derived   ? unverified   † from your file", "* 推算值   ? 未核实   † 来自您的文件")

NameArg = Annotated[str | None, typer.Argument(
    help="A card id, alias or nvidia-smi name (e.g. 4090, A100-SXM-80GB). 显卡名称。")]
CardsOpt = Annotated[list[Path] | None, typer.Option(
    "--cards", help="Extra card file (TOML), repeatable; overrides by id. 额外的显卡数据文件。")]
PricesOpt = Annotated[list[Path] | None, typer.Option(
    "--prices", help="Extra price file (TOML), repeatable. 额外的价格文件。")]


@dataclass(frozen=True)
class CardList:
    cards: tuple[Card, ...]
    quotes: dict[str, PriceQuote | None]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "cards": [c.to_dict() for c in self.cards]}


@dataclass(frozen=True)
class CardDetail:
    resolved: ResolvedCard
    quote: PriceQuote | None

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **self.resolved.to_dict()}


@dataclass(frozen=True)
class ImportReport:
    result: PriceImport
    written: str
    in_config_dir: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "written": self.written}


class _PricesGroup(TyperGroup):
    """`gpuwise prices [CARD] [OPTIONS]` lists; `gpuwise prices import FILE` imports.

    A Click group gives its optional CARD argument the first word, a subcommand's name
    included, and stops reading options after it. So: a first word naming a subcommand leaves
    CARD empty; any other first word lets options follow CARD, as before the group existed.
    """

    # ctx is Any: typer >= 0.29 vendors Click (its own Context class), older typer uses Click's.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands:
            ctx.allow_interspersed_args = True
            return super().parse_args(ctx, args)
        own = self.params
        self.params = [p for p in own if not isinstance(p, TyperArgument)]
        try:
            rest = super().parse_args(ctx, args)
        finally:
            self.params = own
        for param in own:
            if isinstance(param, TyperArgument) and param.name:
                ctx.params.setdefault(param.name, None)
        return rest


def register(app: typer.Typer) -> None:
    app.command("cards", help="List GPU cards or show one in full. 列出显卡规格或查看单卡详情。")(cards)
    group = typer.Typer(cls=_PricesGroup, add_completion=False)
    group.callback(invoke_without_command=True)(prices)
    group.command("import", help="Import prices from a SkyPilot, gpuhunt or plain CSV file. "
                  "从 SkyPilot、gpuhunt 或普通 CSV 导入价格。")(prices_import)
    app.add_typer(group, name="prices", help="List rental price rows; `prices import FILE` adds "
                  "your own. 列出租用价格；`prices import FILE` 导入价格。")


def cards(
    name: NameArg = None,
    min_memory: Annotated[float | None, typer.Option(
        "--min-memory", help="Only cards with at least this many GB. 最小显存（GB）。")] = None,
    nvlink: Annotated[bool, typer.Option(
        "--nvlink", help="Only cards with NVLink (SXM or bridge). 仅显示带 NVLink 的卡。")] = False,
    vendor: Annotated[str | None, typer.Option(
        "--vendor", help="nvidia, amd or huawei. 厂商。")] = None,
    sort: Annotated[str, typer.Option(
        "--sort", help="bandwidth, memory, bf16, fp8, name or price. 排序方式。")] = "bandwidth",
    cards_files: CardsOpt = None,
    prices_files: PricesOpt = None,
    json_out: JsonOpt = False,
    lang: LangOpt = None,
) -> None:
    """List GPU cards (datasheet specs, dense FLOPs) or show one card with every field."""

    def compute() -> CardList | CardDetail:
        catalog = load_cards(cards_files or ())
        offers = load_prices(prices_files or ())
        if name is not None:
            resolved = resolve_card(name, catalog)
            return CardDetail(resolved, price_per_gpu_hour(resolved.card.id, offers=offers))
        if min_memory is not None:
            from gpuwise.bounds import check_value

            check_value("min_memory", min_memory)  # finite, 0 or more (gpuwise.bounds)
        chosen = filter_cards(catalog, min_memory_gb=min_memory, nvlink=True if nvlink else None,
                              vendor=vendor, sort=sort, prices=offers)
        return CardList(tuple(chosen), {c.id: price_per_gpu_hour(c.id, offers=offers) for c in chosen})

    run_command(json_out, lang, compute, _render)


def prices(
    ctx: typer.Context,
    card: NameArg = None,
    provider: Annotated[str | None, typer.Option(
        "--provider", help="Only this provider. 仅显示该来源。")] = None,
    cards_files: CardsOpt = None,
    prices_files: PricesOpt = None,
    json_out: JsonOpt = False,
    lang: LangOpt = None,
) -> None:
    """List the price rows (shipped references and your own files), per card and provider."""
    if ctx.invoked_subcommand is not None:
        return

    def compute() -> dict[str, Any]:
        offers = load_prices(prices_files or ())
        if provider is not None and provider not in providers(offers):
            raise unknown_name(Text("price provider", "价格来源"), provider, providers(offers),
                               "gpuwise prices")
        card_id = resolve_card(card, load_cards(cards_files or ())).card.id if card else None
        rows = [o for o in offers if (card_id is None or o.card == card_id)
                and (provider is None or o.provider == provider)]
        return {"schema_version": SCHEMA_VERSION, "prices": [o.to_dict() for o in rows]}

    run_command(json_out, lang, compute, _render_prices)


def prices_import(
    file: Annotated[Path, typer.Argument(
        help="CSV file: SkyPilot vms.csv, gpuhunt catalog or plain CSV. 要导入的 CSV 文件。")],
    fmt: Annotated[str, typer.Option(
        "--format", help=f"{', '.join(FORMATS)} (default: from the header). 文件格式。")] = "auto",
    provider: Annotated[str | None, typer.Option(
        "--provider", help="Provider id for SkyPilot/gpuhunt rows, e.g. aws. 价格来源名称。")] = None,
    currency: Annotated[str | None, typer.Option(
        "--currency", help="Currency (SkyPilot/gpuhunt: USD; plain CSV default: CNY). 货币。")] = None,
    as_of: Annotated[str | None, typer.Option(
        "--as-of", help="Date of the prices, YYYY-MM-DD (default: the file's date). 价格日期。")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="TOML file to write (default: $GPUWISE_CONFIG_DIR/prices-<provider>.toml). "
        "输出文件。")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace the output file if it exists. 覆盖已有文件。")] = False,
    card_map: Annotated[list[str] | None, typer.Option(
        "--map", help="NAME=CARD: price the file's NAME as this card, e.g. H100=h100-pcie; "
        "repeatable. 指定名称对应的显卡。")] = None,
    cards_files: CardsOpt = None,
    json_out: JsonOpt = False,
    lang: LangOpt = None,
) -> None:
    """Read a price catalog, map its GPUs to catalog cards and write a prices TOML file."""

    def compute() -> ImportReport:
        result = import_prices(file, fmt=fmt, provider=provider, currency=currency, as_of=as_of,
                               card_map=card_map or (), catalog=load_cards(cards_files or ()))
        if not result.offers:
            reasons = "; ".join(dict.fromkeys(s.reason.en for s in result.skipped[:20])) or "no GPU rows"
            reasons_zh = "；".join(dict.fromkeys(s.reason.zh for s in result.skipped[:20])) or "没有 GPU 行"
            raise InputError(Text(f"No price row could be imported from {file}: {reasons}",
                                  f"{file} 中没有可导入的价格行：{reasons_zh}"))
        target = out or config_dir() / f"prices-{_slug(provider or _one_provider(result))}.toml"
        _write_new(target, prices_toml(result.offers, _comments(result)), force=force)
        return ImportReport(result, str(target), target.parent.resolve() == config_dir().resolve())

    run_command(json_out, lang, compute, _render_import)


def _one_provider(result: PriceImport) -> str:
    names = {o.provider for o in result.offers}
    return names.pop() if len(names) == 1 else "imported"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "imported"


def _comments(result: PriceImport) -> list[str]:
    dated = {"flag": f"dated {result.as_of} (--as-of)",
             "file-mtime": f"dated {result.as_of}, the file's modification date",
             "rows": "dated by each row's as_of"}[result.as_of_from]
    return [f"Imported by `gpuwise prices import` from {result.file} ({result.format} format), {dated}.",
            ("Schema: docs/data-schema.md. Rows with the same provider, card, billing and region "
             "were merged, keeping the cheapest.")]


def _write_new(path: Path, text: str, *, force: bool) -> None:
    if path.exists() and not force:
        raise InputError(Text(f"{path} already exists.", f"{path} 已存在。"),
                         hint=Text("Pass --force to replace it, or --out to write elsewhere.",
                                   "加 --force 覆盖，或用 --out 写到别处。"))
    from gpuwise.safefile import write_output

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_output(path, text, replace=True)  # whole, never through a symbolic link or onto a folder
    except OSError as exc:
        raise InputError(Text(f"Cannot write {path}: {exc.strerror or exc}.",
                              f"无法写入 {path}：{os_reason(exc).zh}。")) from exc


# ------------------------------------------------------------------ rendering

def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:,.0f}"
    return str(value)


def _val(card: Card, field: str, digits: int = 1) -> str:
    value = getattr(card, field)
    text = _fmt(value, digits)
    return text if value is None else text + MARKS[card.provenance(field)]


def _link(card: Card) -> str:
    if card.interconnect == "none":
        return "–"
    label = {"nvlink": f"NVLink{card.nvlink_gen or ''}", "nvlink-bridge": "NVLink bridge",
             "infinity-fabric": "Infinity Fabric", "hccs": "HCCS"}[card.interconnect]
    return f"{label} {_fmt(card.interconnect_bw_gbps)}"


def _pcie(card: Card) -> str:
    if card.pcie_gen is None:
        return "–"
    return f"Gen{card.pcie_gen} x{card.pcie_lanes}" if card.pcie_lanes else f"Gen{card.pcie_gen}"


def _price(quote: PriceQuote | None) -> str:
    if quote is None or quote.currency != "CNY":
        return "–"
    if abs(quote.high - quote.low) < 1e-9:
        return f"{quote.mid:g}"
    return f"{quote.low:g}–{quote.high:g}"


# Columns of `gpuwise cards`: id, memory, bandwidth and BF16 always show; on a narrow terminal the
# rest go in the order of `keep` (highest first), and `gpuwise cards ID` shows every field.
_COLUMNS = [Column(Text("id", "id")), Column(Text("name", "名称"), keep=8),
            Column(Text("memory GB / CUDA GiB", "显存 GB / CUDA GiB"), right=True, whole=True),
            Column(Text("bandwidth GB/s", "带宽 GB/s"), right=True),
            Column(Text("BF16 dense TF", "BF16 稠密 TF"), right=True),
            Column(Text("FP8 dense TF", "FP8 稠密 TF"), keep=2, right=True),
            Column(Text("interconnect GB/s", "互联 GB/s"), keep=3),
            Column(Text("PCIe", "PCIe"), keep=6), Column(Text("TDP W", "功耗 W"), keep=5, right=True),
            Column(Text("ECC", "ECC"), keep=4), Column(Text("typical CNY/h", "参考价 元/卡时"), keep=1, right=True)]


def _render(result: CardList | CardDetail, lang: Lang) -> None:
    if isinstance(result, CardDetail):
        _render_detail(result, lang)
        return
    rows = [[card.id, card.name, f"{_val(card, 'memory_gb', 0)} / {_val(card, 'memory_cuda_gib', 2)}",
             _val(card, "mem_bw_gbps", 0), _val(card, "bf16_dense_tflops", 2),
             _val(card, "fp8_dense_tflops", 2), _link(card), _pcie(card),
             _val(card, "tdp_w", 0), _yes_no(card.ecc, lang), _price(result.quotes[card.id])]
            for card in result.cards]
    console = _console()
    table, dropped = fit_table(console, _COLUMNS, rows, lang)
    console.print(table)
    count = Text(f"{len(result.cards)} cards. ", f"共 {len(result.cards)} 张卡。")
    price_note = Text("Prices: 2026 China market reference, per GPU-hour (override in your prices file).",
                      "价格：2026 年国内市场参考，元/卡时（可用自己的价格文件覆盖）。")
    console.print((count + LEGEND).render(lang), markup=False)
    console.print(price_note.render(lang), markup=False)
    note = dropped_note(dropped, lang)
    if note is not None:
        console.print(note + Text(" `gpuwise cards ID` shows every field.",
                                  "`gpuwise cards ID` 显示全部字段。").render(lang), markup=False)


def _yes_no(value: bool | None, lang: Lang) -> str:
    if value is None:
        return "?"
    return ("是" if value else "否") if lang == "zh" else ("yes" if value else "no")


# What each field of `gpuwise cards ID` is, in words (the field name stays beside it: it is the JSON key).
FIELD_WORDS: dict[str, Text] = {
    "vendor": Text("vendor", "厂商"), "architecture": Text("architecture", "架构"),
    "form_factor": Text("form factor", "形态"), "aliases": Text("other names", "别名"),
    "pci_device_ids": Text("PCI device ids", "PCI 设备 id"), "memory_gb": Text("memory, GB", "显存（GB）"),
    "memory_cuda_gib": Text("memory CUDA sees, GiB", "CUDA 可见显存（GiB）"),
    "memory_type": Text("memory type", "显存类型"), "mem_bw_gbps": Text("memory bandwidth, GB/s", "显存带宽（GB/s）"),
    "fp32_tflops": Text("FP32 TFLOPS", "FP32 TFLOPS"),
    "tf32_dense_tflops": Text("TF32 dense TFLOPS", "TF32 稠密 TFLOPS"),
    "bf16_dense_tflops": Text("BF16 dense TFLOPS", "BF16 稠密 TFLOPS"),
    "fp16_dense_tflops": Text("FP16 dense TFLOPS", "FP16 稠密 TFLOPS"),
    "fp16_fp16acc_dense_tflops": Text("FP16 dense TFLOPS, FP16 accumulate", "FP16 稠密 TFLOPS（FP16 累加）"),
    "fp8_dense_tflops": Text("FP8 dense TFLOPS", "FP8 稠密 TFLOPS"),
    "int8_dense_tops": Text("INT8 dense TOPS", "INT8 稠密 TOPS"),
    "fp4_dense_tflops": Text("FP4 dense TFLOPS", "FP4 稠密 TFLOPS"),
    "bf16_sparse_tflops": Text("BF16 sparse TFLOPS", "BF16 稀疏 TFLOPS"),
    "fp8_sparse_tflops": Text("FP8 sparse TFLOPS", "FP8 稀疏 TFLOPS"),
    "int8_sparse_tops": Text("INT8 sparse TOPS", "INT8 稀疏 TOPS"),
    "interconnect": Text("GPU interconnect", "卡间互联"), "nvlink_gen": Text("NVLink generation", "NVLink 代数"),
    "interconnect_bw_gbps": Text("interconnect bandwidth, GB/s", "互联带宽（GB/s）"),
    "interconnect_max_gpus": Text("GPUs one link domain joins", "互联域内最多卡数"),
    "max_gpus_per_node": Text("GPUs per server at most", "每台服务器最多卡数"),
    "pcie_p2p": Text("PCIe peer-to-peer", "PCIe 点对点"), "pcie_gen": Text("PCIe generation", "PCIe 代数"),
    "pcie_lanes": Text("PCIe lanes", "PCIe 通道数"), "tdp_w": Text("board power, W", "功耗（W）"),
    "ecc": Text("ECC memory", "ECC 显存"), "ecc_note": Text("ECC note", "ECC 说明"),
    "mig_profiles": Text("MIG profiles", "MIG 切分规格"), "compute_capability": Text("compute capability", "计算能力"),
    "software": Text("software stack", "软件栈"), "release_year": Text("released", "发布年份"),
    "family": Text("family", "系列"), "verification": Text("how the figures were checked", "数据核实程度"),
}


_VERIFICATION_ZH = {"official": "官方数据", "partial": "部分核实", "secondary": "第三方来源", "unverified": "未核实"}


def _render_detail(result: CardDetail, lang: Lang) -> None:
    card = result.resolved.card
    console = _console()
    if result.resolved.note is not None:  # wrapped between Chinese characters too
        say(console, f"[yellow]{safe(result.resolved.note.render(lang))}[/yellow]")
    rows = []
    skip = {"sources", "derived", "unverified", "notes", "id", "name"}
    for field in CARD_FIELDS:
        if field in skip:
            continue
        value = getattr(card, field)
        if isinstance(value, tuple):
            shown = ", ".join(value)
        elif isinstance(value, bool):
            shown = _yes_no(value, lang) + MARKS[card.provenance(field)]
        elif field == "verification" and lang == "zh":  # the id stays in the JSON key column's row
            shown = _VERIFICATION_ZH.get(str(value), str(value))
        else:
            shown = _val(card, field, 2)
        words = FIELD_WORDS.get(field)
        rows.append([words.render(lang) if words else field, shown or "–", field])
    if result.quote is not None:
        q = result.quote
        billing, cur = _word(BILLING_WORDS, q.billing, lang), money(q.currency, lang)
        rows.append([Text("price per GPU-hour", "每卡时价格").render(lang),
                     f"{q.low:g}–{q.high:g} {cur}（{q.provider}，{billing}，{q.as_of}）" if lang == "zh" else
                     f"{q.low:g}–{q.high:g} {cur} ({q.provider}, {billing}, {q.as_of})", ""])
    # Chinese words name the field; the JSON key beside them (dropped first when narrow) is English.
    columns = [Column(Text("field", "字段")), Column(Text("value", "取值")),
               *([Column(Text("JSON key", "JSON 键"), keep=1)] if lang == "zh" else [])]
    table, _ = fit_table(console, columns, [r[:len(columns)] for r in rows], lang, title=f"{card.name} ({card.id})")
    console.print(table)
    console.print(LEGEND.render(lang), markup=False)
    if card.notes:  # the data files' notes are English (cards.toml has no notes_zh): said so in Chinese
        say(console, Text("Notes: ", "说明（英文原文）：").render(lang) + safe(card.notes))
    say(console, Text("Sources:", "来源：").render(lang))
    for source in card.sources:  # wrapped by cells, continuation indented under the text
        say(console, f"  - {safe(source)}", indent=4)


def _word(words: dict[str, Text], key: str, lang: Lang) -> str:
    """A billing mode, unit or currency in the reader's words; one gpuwise has no words for as is."""
    found = words.get(key)
    return found.render(lang) if found is not None else key


def _render_prices(result: dict[str, Any], lang: Lang) -> None:
    columns = [Column(Text("provider", "来源")), Column(Text("card", "显卡")),
               Column(Text("billing", "计费"), keep=3), Column(Text("price", "价格"), right=True),
               Column(Text("unit", "单位"), keep=2), Column(Text("as of", "日期"), keep=4),
               Column(Text("note", "备注"), keep=1)]
    rows = []
    for row in result["prices"]:
        offer = PriceOffer(**row)
        price = f"{offer.low:g}" if offer.low == offer.high else f"{offer.low:g}–{offer.high:g}"
        where = f"{offer.provider} ({offer.region})" if offer.region else offer.provider
        rows.append([where, offer.card, _word(BILLING_WORDS, offer.billing, lang),
                     f"{price} {money(offer.currency, lang)}", _word(UNIT_WORDS, offer.unit, lang),
                     offer.as_of, Text(offer.note, offer.note_zh or offer.note).render(lang)])
    console = _console()
    table, dropped = fit_table(console, columns, rows, lang)
    console.print(table)
    note = dropped_note(dropped, lang)
    if note is not None:
        console.print(note, markup=False)
    console.print(Text("Defaults, not quotes: put your provider's prices in "
                       "~/.config/gpuwise/prices.toml (docs/data-schema.md).",
                       "以上为参考值而非报价：可把实际价格写入 ~/.config/gpuwise/prices.toml"
                       "（格式见 docs/data-schema.md）。").render(lang), markup=False)


def _render_import(report: ImportReport, lang: Lang) -> None:
    from rich.table import Table

    result, console = report.result, _console()
    table = Table(header_style="bold")
    for head in (Text("card", "显卡"), Text("rows imported", "导入行数")):
        table.add_column(head.render(lang))
    for card, count in result.per_card().items():
        table.add_row(_esc(card), str(count))
    console.print(table)
    dated = {"flag": Text(f"Dated {result.as_of} (from --as-of).", f"日期 {result.as_of}（来自 --as-of）。"),
             "file-mtime": Text(f"Dated {result.as_of}: the file's modification date (pass --as-of "
                                "to set it).", f"日期 {result.as_of}：取自文件修改时间（可用 --as-of 指定）。"),
             "rows": Text("Dated by each row's as_of.", "日期取自每行的 as_of。")}[result.as_of_from]
    lines = [Text(f"{len(result.offers)} price rows from {result.file} ({result.format}).",
                  f"从 {result.file}（{result.format}）导入 {len(result.offers)} 行价格。"), dated]
    if result.merged:
        lines.append(Text(f"{result.merged} dearer duplicate rows merged (same provider, card, billing, "
                          "region: the cheapest is kept).",
                          f"合并了 {result.merged} 行较贵的重复行（来源、显卡、计费、地区相同时保留最便宜的）。"))
    if result.no_accelerator:
        lines.append(Text(f"{result.no_accelerator} rows without a GPU skipped.",
                          f"跳过 {result.no_accelerator} 行无 GPU 的实例。"))
    lines += [a.text for a in result.assumptions]
    for line in lines:
        console.print(line.render(lang), markup=False)
    _render_skipped(result, lang)
    where = (Text("gpuwise reads it from now on (it is in your config folder).",
                  "它位于配置目录，gpuwise 会自动读取。") if report.in_config_dir
             else Text("Pass --prices with this path to use it.", "使用时请加 --prices 指定该路径。"))
    console.print(Text(f"Wrote {report.written}. ", f"已写入 {report.written}。").render(lang)
                  + where.render(lang), markup=False)


def _render_skipped(result: PriceImport, lang: Lang) -> None:
    if not result.skipped:
        return
    by_reason: dict[str, list[int]] = {}
    for row in result.skipped:
        by_reason.setdefault(row.reason.render(lang), []).append(row.line)
    console = _console()
    console.print(Text(f"{len(result.skipped)} rows skipped:", f"跳过 {len(result.skipped)} 行：").render(lang),
                  style="yellow", markup=False)
    for reason, lines in by_reason.items():
        shown = ", ".join(str(n) for n in lines[:8]) + (", ..." if len(lines) > 8 else "")
        console.print(f"  - {reason} " + Text(f"(line {shown})", f"（第 {shown} 行）").render(lang),
                      markup=False)
    if any(row.candidates for row in result.skipped):
        console.print(Text("  To choose the card for a name, pass --map NAME=CARD (e.g. --map H100=h100-sxm).",
                           "  如需指定名称对应的显卡，请加 --map NAME=CARD（如 --map H100=h100-sxm）。").render(lang),
                      markup=False)
