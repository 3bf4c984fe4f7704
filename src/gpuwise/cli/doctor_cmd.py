"""`gpuwise doctor`: explain why this machine cannot use its NVIDIA GPU, with fixes."""

from __future__ import annotations

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, lang_of, print_json
from gpuwise.i18n import Lang, Text

_MARK = {"ok": "[green]ok[/]", "info": "[cyan]info[/]", "warn": "[yellow]warn[/]",
         "error": "[bold red]error[/]"}


def register(app: typer.Typer) -> None:
    app.command("doctor", help="Diagnose the NVIDIA driver, CUDA and PyTorch setup. "
                               "诊断 NVIDIA 驱动、CUDA 与 PyTorch 环境。")(doctor)


def doctor(json_out: JsonOpt = False, lang_flag: LangOpt = None) -> None:
    from gpuwise.verify.doctor import diagnose

    lang = lang_of(lang_flag)
    result = diagnose()
    if json_out:
        print_json(result.to_dict())
    else:
        _render(result, lang)
    raise typer.Exit(0 if result.ok else 1)


def _render(result: object, lang: Lang) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    findings = getattr(result, "findings", ())
    for f in findings:
        console.print(f"{_MARK[f.severity]}  {f.title.render(lang)}", markup=True)
        if f.fix is not None:
            label = Text("fix", "修复").render(lang)
            console.print(f"      {label}: ", end="", markup=False)
            console.print(f.fix.render(lang), markup=False)
        if f.evidence:
            console.print(f"      > {f.evidence}", markup=False, style="dim")
    ok = getattr(result, "ok", False)
    console.print(Text("No blocking problem found.", "未发现阻塞性问题。").render(lang) if ok else
                  Text("Fix the errors above, then run `gpuwise doctor` again.",
                       "请先修复上述错误，再运行 `gpuwise doctor`。").render(lang))
