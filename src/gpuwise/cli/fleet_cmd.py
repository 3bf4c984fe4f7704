"""`gpuwise fleet report|verify` and `gpuwise exporter`: acceptance across many nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fail, lang_of, print_json
from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Lang, Text

_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "incomplete": "magenta", "ok": "green",
          "suspect": "bold red",
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
    group.callback()(_group_lang)
    group.command("report", help="Judge verify evidence from many nodes against the datasheet and "
                                 "against each other. 汇总多节点验收数据，对照规格并互相比较。")(report)
    group.command("verify", help="Run verify on every GPU node of a Ray cluster (one task per node, pinned), "
                                 "then judge the fleet. 在 Ray 集群的每个 GPU 节点上验收并汇总。")(verify)
    app.add_typer(group, name="fleet", help="Acceptance across a fleet of GPU nodes. 机群验收。")
    app.command("exporter", help="Serve verify/fleet results for Prometheus to scrape (beside DCGM "
                                 "exporter). 为 Prometheus 提供验收指标。")(exporter)


def _group_lang(lang: LangOpt = None) -> None:
    """`gpuwise fleet --lang zh ...`: the language of the subcommand's output and help."""
    from gpuwise.cli.common import set_default_lang

    set_default_lang(lang)


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
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(Text(f"Note: {host} is reachable from other machines; the metrics name your hosts and GPUs.",
                        f"注意：{host} 可被其他机器访问；指标中含主机名与 GPU 信息。").render(lang), err=True)
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


def verify(
    ray_address: Annotated[str, typer.Option(
        "--ray-address", help="Ray cluster: HOST:PORT, ray://HOST:PORT or auto. Ray 集群地址。")],
    full: Annotated[bool, typer.Option("--full", help="Longer benchmarks on each node. 完整测试。")] = False,
    resource: Annotated[str, typer.Option(
        "--resource", help="Verify the nodes that have this Ray resource. 只验收拥有该资源的节点。")] = "GPU",
    replay: Annotated[list[Path] | None, typer.Option(
        "--replay", help="Recorded evidence per node instead of measuring (dry run). 以已记录的数据代替测量。")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds for all nodes. 总超时秒数。", min=1)] = 1800.0,
    connect_timeout: Annotated[float, typer.Option(
        "--connect-timeout", help="Seconds to wait for the cluster. 连接超时秒数。", min=1, max=600)] = 30.0,
    card: CardOpt = None,
    contract: ContractOpt = None,
    html: HtmlOpt = None,
    prometheus: PromOpt = None,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    lang = lang_of(lang_flag)
    try:
        from gpuwise.fleet.api import make_claim
        from gpuwise.fleet.ray_verify import fleet_verify

        result = fleet_verify(ray_address, mode="full" if full else "quick", resource=resource,
                              replay=replay or (), claim=make_claim(card, contract), timeout_s=timeout,
                              connect_s=connect_timeout)
        _outputs(result, html, prometheus, lang)
    except GpuwiseError as err:
        fail(err, json_out=json_out, lang=lang)
    finish(result, json_out, lang)


def _outputs(result: Any, html: Path | None, prometheus: Path | None, lang: Lang) -> None:
    from gpuwise.fleet.api import write_html

    if html is not None:
        write_html(result, html, lang)
    if prometheus is not None:
        from gpuwise.fleet.prometheus import write_fleet_metrics

        write_fleet_metrics(result, prometheus)


def _report(files: list[Path], card: str | None, contract: Path | None, html: Path | None,
            prometheus: Path | None, lang: Lang) -> Any:
    from gpuwise.fleet.api import fleet_report, make_claim

    result = fleet_report(files, make_claim(card, contract))
    _outputs(result, html, prometheus, lang)
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

    from gpuwise.cli.common import say
    from gpuwise.fleet.words import CELL_WORDS, cell_ratio, cell_value, summary
    from gpuwise.verify.report import STATUS_WORDS

    zh = lang == "zh"
    console = Console(highlight=False)
    for note in result.notes:
        say(console, escape(note.render(lang)))
    for g in result.groups:
        status = {n.status: (STATUS_WORDS[n.status].render(lang) if n.status in STATUS_WORDS else n.status)
                  for n in g.nodes}
        say(console, f"[bold]{escape(g.key)}[/]{'：' if zh else ': '}" + ("、" if zh else ", ").join(
            f"{escape(n.host)} [{_STYLE[n.status]}]{escape(status[n.status])}[/]" for n in g.nodes))
        for note in g.notes:
            say(console, escape(note.render(lang)))
        for t in g.tables:
            median = "-" if t.median is None else f"{t.median:,.1f}"
            label, unit = escape(t.metric.label.render(lang)), escape(t.metric.unit)
            say(console, f"{label}（{unit}）；中位数 {median}" if zh else f"{label} ({unit}); median {median}")
            table = Table()
            for head in (Text("Node", "节点"), Text("Value", "数值"), Text("vs median", "相对中位数"),
                         Text("Fleet", "机群")):
                table.add_column(head.render(lang))
            for c in t.cells:
                mark = CELL_WORDS[c.status].render(lang) + (" <" if c.status == "suspect" else "")
                table.add_row(escape(c.host), cell_value(c), cell_ratio(c), f"[{_STYLE[c.status]}]{mark}[/]")
            console.print(table)
    style = "green" if result.ok else "bold red"
    say(console, f"[{style}]{escape(summary(result, lang))}[/]")
