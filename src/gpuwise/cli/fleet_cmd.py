"""`gpuwise fleet report|verify` and `gpuwise exporter`: acceptance across many nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fail, lang_of, print_json
from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang, Text

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "ok": "green", "suspect": "bold red",
          "not_measured": "dim", "no_fleet": "dim"}

CardOpt = Annotated[str | None, typer.Option(
    "--card", help="Judge every node against this card (default: each node's recognised card). "
                   "按此显卡型号评判所有节点。")]
ContractOpt = Annotated[Path | None, typer.Option(
    "--contract", help="Contract file (TOML) every node must meet. 所有节点须满足的合同文件。")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="Write the report as HTML. 生成 HTML 报告。")]
PromOpt = Annotated[Path | None, typer.Option(
    "--prometheus", help="Write the results in Prometheus text format. 以 Prometheus 文本格式写出结果。")]


def register(app: typer.Typer) -> None:
    group = typer.Typer(no_args_is_help=True, add_completion=False)
    group.command("report", help="Judge verify evidence from many nodes against the datasheet and "
                                 "against each other. 汇总多节点验收数据，对照规格并互相比较。")(report)
    app.add_typer(group, name="fleet", help="Acceptance across a fleet of GPU nodes. 机群验收。")
    app.command("exporter", help="Serve verify/fleet results for Prometheus to scrape (beside DCGM "
                                 "exporter). 为 Prometheus 提供验收指标。")(exporter)


def exporter(
    paths: Annotated[list[Path], typer.Argument(
        help="Evidence files, or folders of them; re-read on every scrape. 证据文件或目录。")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on. 监听地址。")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port (DCGM exporter uses 9400). 端口。",
                                      min=0, max=65535)] = 9401,
    card: CardOpt = None,
    contract: ContractOpt = None,
    lang_flag: LangOpt = None,
) -> None:
    from gpuwise.fleet.api import make_claim
    from gpuwise.fleet.exporter import make_exporter

    lang = lang_of(lang_flag)
    try:
        server = make_exporter(paths, host, port, make_claim(card, contract))
    except GpuwiseError as err:
        fail(err, json_out=False, lang=lang)
    bound = server.server_address[1]
    typer.echo(Text(f"Serving http://{host}:{bound}/metrics (Ctrl-C to stop).",
                    f"正在提供 http://{host}:{bound}/metrics（Ctrl-C 停止）。").render(lang), err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def report(
    files: Annotated[list[Path], typer.Argument(help="Evidence files (`gpuwise verify --save`). 证据文件。")],
    card: CardOpt = None,
    contract: ContractOpt = None,
    html: HtmlOpt = None,
    prometheus: PromOpt = None,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    lang = lang_of(lang_flag)
    try:
        result = _report(files, card, contract, html, prometheus, lang)
    except GpuwiseError as err:
        fail(err, json_out=json_out, lang=lang)
    finish(result, json_out, lang)


def _report(files: list[Path], card: str | None, contract: Path | None, html: Path | None,
            prometheus: Path | None, lang: Lang) -> Any:
    from gpuwise.fleet.api import fleet_report, make_claim, write_html

    result = fleet_report(files, make_claim(card, contract))
    if html is not None:
        write_html(result, html, lang)
    if prometheus is not None:
        from gpuwise.fleet.prometheus import write_fleet_metrics

        write_fleet_metrics(result, prometheus)
    return result


def finish(result: Any, json_out: bool, lang: Lang) -> None:
    """Print the report (JSON or tables) and exit 1 when a node failed or stands out."""
    if json_out:
        print_json(result.to_dict())
    else:
        render(result, lang)
    raise typer.Exit(0 if result.ok else 1)


def render(result: Any, lang: Lang) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from gpuwise.fleet.words import CELL_WORDS, cell_ratio, cell_value, summary

    console = Console(highlight=False)
    for note in result.notes:
        console.print(escape(note.render(lang)))
    for g in result.groups:
        console.print(f"[bold]{escape(g.key)}[/]: " + ", ".join(
            f"{escape(n.host)} [{_STYLE[n.status]}]{n.status}[/]" for n in g.nodes))
        for note in g.notes:
            console.print(escape(note.render(lang)))
        for t in g.tables:
            median = "-" if t.median is None else f"{t.median:,.1f}"
            table = Table(title=f"{t.metric.label.render(lang)} ({t.metric.unit}); "
                                f"{Text('median', '中位数').render(lang)} {median}", title_justify="left")
            for head in (Text("Node", "节点"), Text("Value", "数值"), Text("vs median", "相对中位数"),
                         Text("Fleet", "机群")):
                table.add_column(head.render(lang))
            for c in t.cells:
                mark = CELL_WORDS[c.status].render(lang) + (" <" if c.status == "suspect" else "")
                table.add_row(escape(c.host), cell_value(c), cell_ratio(c), f"[{_STYLE[c.status]}]{mark}[/]")
            console.print(table)
    style = "green" if result.ok else "bold red"
    console.print(f"[{style}]{escape(summary(result, lang))}[/]")
