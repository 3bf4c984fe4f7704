"""`gpuwise doctor`: explain why this machine cannot use its NVIDIA GPU, with fixes."""

from __future__ import annotations

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, lang_of, print_json
from gpuwise.i18n import Lang, Text

_MARK = {"ok": ("green", Text("ok", "正常")), "info": ("cyan", Text("info", "提示")),
         "warn": ("yellow", Text("warn", "警告")), "error": ("bold red", Text("error", "错误"))}


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
    """Each finding's mark and title, then its fix and evidence indented under it; every line
    wrapped by terminal cells with its continuation indented (a long `apt install` stays readable)."""
    from rich.console import Console
    from rich.markup import escape

    from gpuwise.cli.common import say
    from gpuwise.cli.helpfmt import cells

    console = Console(highlight=False)
    findings = getattr(result, "findings", ())
    marks = {k: (style, word.render(lang)) for k, (style, word) in _MARK.items()}
    mark_w = max(cells(word) for _, word in marks.values())
    colon = "：" if lang == "zh" else ": "
    for f in findings:
        style, word = marks[f.severity]
        pad = " " * (mark_w - cells(word) + 2)
        say(console, f"[{style}]{word}[/]{pad}{escape(f.title.render(lang))}", indent=mark_w + 2)
        if f.fix is not None:
            label = Text("fix", "修复").render(lang)
            say(console, f"{' ' * (mark_w + 2)}{label}{colon}{escape(f.fix.render(lang))}", indent=mark_w + 4)
        if f.evidence:
            say(console, f"{' ' * (mark_w + 2)}[dim]> {escape(str(f.evidence))}[/]", indent=mark_w + 4)
    ok = getattr(result, "ok", False)
    say(console, escape(Text("No blocking problem found.", "未发现阻塞性问题。").render(lang) if ok else
                        Text("Fix the errors above, then run `gpuwise doctor` again.",
                             "请先修复上述错误，再运行 `gpuwise doctor`。").render(lang)))
