"""`gpuwise mig`: MIG slicing plans for inference services (text only: gpuwise runs nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, run_command
from gpuwise.errors import InputError
from gpuwise.i18n import Lang, Text

_HELP = ("Choose MIG profiles for inference services and pack them onto the fewest GPUs; print the "
         "nvidia-smi lines, Kubernetes resources and a mig-parted config. Training is refused (use "
         "whole GPUs); MPS and time-slicing are the alternatives for cards without MIG. "
         "为推理服务选择 MIG 切片并装到最少的 GPU 上；训练请用整卡。")


def register(app: typer.Typer) -> None:
    app.command("mig", help=_HELP)(mig)


def mig(
    services: Annotated[Path | None, typer.Argument(
        help="Services file (TOML): card = \"...\" and [[service]] rows with model, context, "
             "concurrency, optional min_tokens_per_s / max_ttft_s / profile. 服务文件。")] = None,
    card: Annotated[str | None, typer.Option("--card", help="The MIG card (overrides the file's). 显卡。")] = None,
    list_profiles: Annotated[bool, typer.Option("--list", help="List the card's MIG profiles. 列出切片。")] = False,
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    run_command(json_out, lang_flag, lambda: _compute(services, card, list_profiles), _render)


def _compute(services: Path | None, card: str | None, list_profiles: bool) -> dict[str, Any]:
    from gpuwise.catalog.cards import resolve_card
    from gpuwise.fleet.mig import plan_mig
    from gpuwise.fleet.mig_input import load_services

    file_card, specs = load_services(services) if services is not None else (None, ())
    name = card or file_card
    if name is None:
        raise InputError(Text("Name the card: --card A100-80GB (or card = \"...\" in the services file).",
                              "请指定显卡：--card A100-80GB（或在服务文件中写 card = \"...\"）。"))
    resolved = resolve_card(name).card
    if list_profiles or services is None:
        return _profiles(resolved)
    return plan_mig(specs, resolved).to_dict()


def _profiles(card: Any) -> dict[str, Any]:
    from gpuwise.fleet.mig_data import mig_table_for

    t = mig_table_for(card)
    rows = [{"profile": p.name, "compute_slices": p.compute, "memory_slices": p.memory,
             "sm_fraction": f"{p.compute}/{t.compute_slices}", "memory_fraction": f"{p.memory}/{t.memory_slices}",
             "usable_gib": round(max(card.memory_cuda_gib * t.memory_fraction(p) - t.reserve_gib, 0.0), 2),
             "max_instances": p.max_instances, "placements": list(p.placements), "media": p.media}
            for p in t.profiles]
    return {"schema_version": 1, "kind": "gpuwise.mig.profiles", "card": card.id, "mig_table": t.name,
            "profiles": rows, "sources": list(t.sources)}


def _render(d: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    if d["kind"] == "gpuwise.mig.profiles":
        table = Table(title=f"{d['card']}: MIG ({d['mig_table']})", title_justify="left")
        for head in (Text("Profile", "切片"), Text("SMs", "SM 占比"), Text("Memory", "显存占比"),
                     Text("GiB", "GiB"), Text("Max", "最多"), Text("Start slices", "起始切片")):
            table.add_column(head.render(lang))
        for r in d["profiles"]:
            table.add_row(r["profile"], r["sm_fraction"], r["memory_fraction"], f"{r['usable_gib']:.2f}",
                          str(r["max_instances"]), ",".join(map(str, r["placements"])))
        console.print(table)
        return
    T = Text
    count = Text(f"{d['gpus_total']} GPU(s)", f"{d['gpus_total']} 张 GPU").render(lang)
    table = Table(title=f"{d['card']}{'：' if lang == 'zh' else ': '}{count}", title_justify="left")
    for head in (T("Service", "服务"), T("Model", "模型"), T("Profile", "切片"), T("Needs / slice", "需要 / 切片"),
                 T("Speed on the slice", "切片上的速度")):
        table.add_column(head.render(lang))
    for s in d["services"]:
        c = s["chosen"]
        table.add_row(escape(s["name"]), escape(s["model"]), c["profile"],
                      f"{c['required_gib']:.1f} / {c['usable_gib']:.1f} GiB",
                      escape(c["why" if lang == "en" else "why_zh"]))
    console.print(table)
    console.print("[bold]nvidia-smi[/] " + T("(gpuwise runs nothing)", "（gpuwise 不会执行）").render(lang))
    console.print("\n".join(d["nvidia_smi"]), markup=False)
    console.print("[bold]Kubernetes[/] "
                  + T("(device plugin, mixed strategy)", "（设备插件，mixed 策略）").render(lang))
    for name, res in d["k8s_resources"].items():
        console.print(f"  {name}: resources.limits: " + ", ".join(f"{k}: {v}" for k, v in res.items()), markup=False)
    console.print("[bold]mig-parted[/]")
    console.print(d["mig_parted"], markup=False, end="")
    console.print("[bold]" + T("Without MIG", "不用 MIG 时").render(lang) + "[/]")
    from gpuwise.cli.common import say

    for a in d["alternatives" if lang == "en" else "alternatives_zh"]:  # wrapped by cells, indented under the dash
        say(console, "  - " + escape(a), indent=4)
