"""`gpuwise verify`: the acceptance test of the GPU server it runs on (or of saved evidence).

Exit codes: 0 pass (warnings allowed), 1 fail, 2 bad input (flag, contract, evidence file),
3 no NVIDIA GPU or driver, 4 incomplete (something needed could not be seen: a benchmark
that timed out, a hung all-reduce, missing evidence). checks.EXIT_CODES holds the mapping.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fail, lang_of, print_json
from gpuwise.errors import GpuwiseError, InputError
from gpuwise.i18n import Lang, Text


def register(app: typer.Typer) -> None:
    app.command("verify", help="Acceptance test of this GPU server against its card or a contract. "
                               "验收本机 GPU 服务器（对照显卡规格或租用合同）。")(verify)


def verify(
    card: Annotated[str | None, typer.Option(
        "--card", help="The card you rented, e.g. H100-SXM (default: recognised). 租用的显卡型号。")] = None,
    gpus: Annotated[int | None, typer.Option(
        "--gpus", help="How many GPUs you rented. 租用的 GPU 数量。")] = None,
    contract: Annotated[Path | None, typer.Option(
        "--contract", help="Contract file (TOML), see docs/verify.md. 合同文件。")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="Default: a 20 s all-GPU load window and short benchmarks (~1 min). 快速测试。")] = False,
    full: Annotated[bool, typer.Option(
        "--full", help="A 5-minute all-GPU load window and larger benchmarks (~6-7 min). 完整测试。")] = False,
    inventory: Annotated[bool, typer.Option(
        "--inventory", help="No benchmarks: inventory, health and links only. 只查清单与健康。")] = False,
    from_file: Annotated[Path | None, typer.Option(
        "--from", help="Judge a saved raw JSON instead of this machine (no GPU needed). 评判已保存的数据。")] = None,
    save: Annotated[Path | None, typer.Option(
        "--save", help="Write the raw measurements as JSON. 保存原始测量数据。")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write a report: report.md or report.html. 生成报告。")] = None,
    bundle: Annotated[Path | None, typer.Option(
        "--bundle", help="Write the evidence bundle (raw.json, verdict.json, report.md/html, SHA256SUMS) "
                         "into this folder. 写出证据包。")] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", help="Seconds of the sustained all-GPU load window (quick 20, full 300). "
                           "持续负载时长（秒）。")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Benchmark GPUs that are already in use. 对已被占用的 GPU 也进行测试。")] = False,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    lang = lang_of(lang_flag)
    try:
        options = _Options(_mode(quick, full, inventory, lang), _duration(duration), force, bundle)
        verdict = _run(card, gpus, contract, options, from_file, save, report, lang,
                       show_progress=not json_out)
    except GpuwiseError as err:
        fail(err, json_out=json_out, lang=lang)
    if json_out:
        print_json(verdict.to_dict())
    else:
        from gpuwise.cli.verify_view import render

        render(verdict, lang)
    raise typer.Exit(verdict.exit_code)


@dataclass(frozen=True)
class _Options:
    mode: str
    duration_s: float | None
    force: bool
    bundle: Path | None = None


def _duration(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and 5 <= value <= 86_400):
        raise InputError(Text(f"--duration must be 5 to 86400 seconds, got {value}.",
                              f"--duration 必须为 5 到 86400 秒，实际为 {value}。"))
    return value


def _mode(quick: bool, full: bool, inventory: bool, lang: Lang) -> str:
    if sum((quick, full, inventory)) > 1:
        raise_input = InputError(Text("Use only one of --quick, --full and --inventory.",
                                      "--quick、--full 与 --inventory 只能选一个。"))
        fail(raise_input, json_out=False, lang=lang)
    return "full" if full else "inventory" if inventory else "quick"


def _run(card: str | None, gpus: int | None, contract: Path | None, options: _Options,
         from_file: Path | None, save: Path | None, report: Path | None, lang: Lang,
         show_progress: bool) -> Any:
    from gpuwise.verify.contract import load_contract
    from gpuwise.verify.judge import Claim, claimed_card, judge
    from gpuwise.verify.raw import load_evidence, save_evidence
    from gpuwise.verify.raw_schema import check_measurements
    from gpuwise.verify.report import write_report

    if gpus is not None and gpus < 1:
        raise InputError(Text(f"--gpus must be at least 1, got {gpus}.", f"--gpus 至少为 1，实际为 {gpus}。"))
    claim = Claim(card=card, count=gpus, contract=load_contract(contract) if contract else None)
    if claim.card_name:
        claimed_card(claim.card_name)  # a typo fails now, not after minutes of benchmarks
    if report is not None and report.suffix.lower() not in (".md", ".markdown", ".html", ".htm"):
        raise InputError(Text(f"--report must end in .md or .html, got '{report}'.",
                              f"--report 的扩展名必须是 .md 或 .html，实际为“{report}”。"))
    from gpuwise.safefile import check_output, replaced_note

    for out in (save, report):  # a missing folder or a link fails now, not after minutes of benchmarks
        if out is not None:
            check_output(out, replace=True)
    if from_file is not None:
        evidence = load_evidence(from_file)
        check_measurements(evidence, str(from_file))
    else:
        evidence = _collect(options, show_progress)
    verdict = judge(evidence, claim)
    for out, replaced in ((save, save is not None and save_evidence(evidence, save)),
                          (report, report is not None and write_report(verdict, report, lang))):
        if out is not None and replaced:
            sys.stderr.write(replaced_note(out).render(lang) + "\n")
    if options.bundle is not None:
        from gpuwise.verify.bundle import write_bundle

        write_bundle(verdict, options.bundle, lang)
    return verdict


def _collect(options: _Options, show_progress: bool) -> Any:
    from gpuwise.verify.collect import collect

    mode, seconds, force = options.mode, options.duration_s, options.force
    if not show_progress:
        return collect(mode, duration_s=seconds, force=force)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("verify", total=1.0)
        return collect(mode, progress=lambda what, frac: bar.update(task, description=what,
                                                                     completed=frac),
                       duration_s=seconds, force=force)
