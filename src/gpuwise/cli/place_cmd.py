"""`gpuwise place pipeline.toml`: a pipeline of models placed onto N GPUs, with the settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, run_command
from gpuwise.i18n import Lang, Text

_HELP = ("Place a pipeline's models (LLM, embedder, reranker, diffusion components) onto N GPUs: "
         "per-GPU memory, transfers between GPUs, the slowest stage's throughput, and the settings "
         "(device_map / .to('cuda:N'), vLLM instances per GPU, ComfyUI-MultiGPU loaders). "
         "把流水线中的多个模型放到多张 GPU 上。")


def register(app: typer.Typer) -> None:
    app.command("place", help=_HELP)(place)


def place(
    pipeline: Annotated[Path, typer.Argument(help="Pipeline file (TOML): [gpus] and [[stage]] rows. 流水线文件。")],
    json_out: JsonOpt = False,
    lang_flag: LangOpt = None,
) -> None:
    run_command(json_out, lang_flag, lambda: _compute(pipeline), _render)


def _compute(path: Path) -> dict[str, Any]:
    from gpuwise.fleet.place import place_pipeline
    from gpuwise.fleet.place_input import load_pipeline
    from gpuwise.fleet.place_out import placement_dict

    return placement_dict(place_pipeline(load_pipeline(path)))


def _render(d: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from gpuwise.cli.common import say

    zh = lang == "zh"
    console = Console(highlight=False)
    budget = (f"（预算每卡 {d['budget_gib_per_gpu']:.1f} GiB）" if zh else
              f" (budget {d['budget_gib_per_gpu']:.1f} GiB/GPU)")
    table = Table(title=escape(f"{d['gpus']} x {d['card']}") + budget, title_justify="left")
    for head in (Text("GPU", "GPU"), Text("Stages", "阶段"), Text("Memory", "显存"),
                 Text("Busy per request", "每请求占用")):
        table.add_column(head.render(lang))
    for g in d["per_gpu"]:
        table.add_row(str(g["gpu"]), escape(("、" if zh else ", ").join(g["stages"]) or "-"),
                      f"{g['memory_gib']:.1f} GiB", f"{g['busy_seconds_per_request'] * 1000:,.1f} ms")
    console.print(table)
    for t in d["transfers"]:
        words = (f"每请求 {t['bytes_per_request']:,} B 跨 GPU（GPU {t['from_gpus']} -> {t['to_gpus']}）" if zh else
                 f"{t['bytes_per_request']:,} B/request across GPUs (GPU {t['from_gpus']} -> {t['to_gpus']})")
        say(console, f"  {escape(t['from'])} -> {escape(t['to'])}: {escape(words)}", indent=4)
    slow, bound = d["slowest_stage"], _bound_words(d["bottleneck"], lang)
    say(console, escape(Text(
        f"Throughput {d['throughput_requests_per_s']:.2f} requests/s, bound by {bound}; "
        f"slowest stage: {slow['name']} ({slow['replicas']} replica(s)).",
        f"吞吐 {d['throughput_requests_per_s']:.2f} 请求/秒，瓶颈在{bound}；"
        f"最慢的阶段：{slow['name']}（{slow['replicas']} 个副本）。").render(lang)))
    for note in d["notes" if lang == "en" else "notes_zh"]:
        say(console, "  " + escape(note), indent=2)
    s = d["settings"]
    console.print("[bold]transformers[/]")
    console.print("\n".join(s["python"]), markup=False)
    if s["vllm"]:
        console.print("[bold]vLLM[/]")
        console.print("\n".join(s["vllm"]), markup=False)
    if s["comfyui_multigpu"]:
        console.print("[bold]ComfyUI-MultiGPU[/]")
        for n in s["comfyui_multigpu"]:
            console.print(f"  {n['stage']}: {n['node']} device = {n['device']}", markup=False)


def _bound_words(where: str, lang: Lang) -> str:
    """The bottleneck key ('gpu N', 'link', 'comfyui workflow') in the reader's words."""
    if lang != "zh":
        return where
    if where.startswith("gpu "):
        return f" GPU {where[4:]}"
    return {"link": "GPU 间的传输", "comfyui workflow": " ComfyUI 工作流（组件依次执行）"}.get(where, f" {where}")
