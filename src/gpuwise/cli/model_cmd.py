"""`gpuwise model SRC`: the architecture, counted exactly."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fmt_count, fmt_gib, run_command
from gpuwise.i18n import Lang
from gpuwise.service import model_json

HubOpt = Annotated[str, typer.Option("--hub", help="Where hub ids are looked up: auto, hf or modelscope.")]


def list_presets() -> dict[str, Any]:
    from gpuwise.catalog.presets import all_presets

    return {"schema_version": 1, "presets": [
        {"id": p.id, "hf_id": p.hf_id, "published_params": p.published_params} for p in all_presets()]}


def _render(s: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console
    from rich.table import Table

    zh = lang == "zh"
    if "presets" in s:
        table = Table("id", "Hugging Face id", "参数量" if zh else "params", title="预设模型" if zh else "Model presets")
        for p in s["presets"]:
            table.add_row(p["id"], p["hf_id"], fmt_count(p["published_params"]))
        Console().print(table)
        return
    t = Table(show_header=False, title=f"{s['name']}  ({s['model_type']})")
    rows = [
        ("参数量（总）" if zh else "parameters (total)", f"{s['params_total']:,}  ({fmt_count(s['params_total'])})"),
        ("参数量（激活）" if zh else "parameters (active)", f"{s['params_active']:,}  ({fmt_count(s['params_active'])})"),
        *[(f"  {k}", f"{v:,}") for k, v in s["params"].items() if k not in ("total", "active") and v],
        ("层数" if zh else "layers", f"{s['num_layers']}  {s['layer_kinds']}"),
        ("注意力" if zh else "attention", f"{s['attention']}: {s['num_heads']} heads / {s['num_kv_heads']} KV, head_dim {s['head_dim']}"),
        ("每 token KV（16 位）" if zh else "KV per token (16-bit)", f"{s['kv_bytes_per_token']:,} B"),
        ("每 token KV（FP8）" if zh else "KV per token (FP8)", f"{s['kv_bytes_per_token_fp8']:,} B"),
        ("每序列状态" if zh else "state per sequence", fmt_gib(s["state_bytes_per_sequence"], 3)),
        ("最大上下文" if zh else "max context", f"{s['max_context']:,}"),
    ]
    if s["moe"]:
        rows.append(("MoE", f"{s['moe']['experts']} experts, top-{s['moe']['top_k']}, {s['moe']['shared_experts']} shared"))
    if s["quantization"]:
        rows.append(("量化" if zh else "quantization", str(s["quantization"])))
    for key, value in rows:
        t.add_row(key, value)
    Console().print(t)
    for note in s["notes_zh" if zh else "notes"]:
        Console().print(f"[yellow]![/] {note}")


def register(app: typer.Typer) -> None:
    @app.command("model")
    def model(
        src: Annotated[str | None, typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file or a size like 7b.")] = None,
        hub: HubOpt = "auto",
        revision: Annotated[str | None, typer.Option("--revision", help="Hub revision.")] = None,
        list_: Annotated[bool, typer.Option("--list", help="List the presets.")] = False,
        json_out: JsonOpt = False,
        lang: LangOpt = None,
    ) -> None:
        """Show a model's architecture: parameters, layers, KV bytes per token. 查看模型结构。"""
        if list_ or src is None:
            run_command(json_out, lang, list_presets, _render)
            return
        run_command(json_out, lang, lambda: model_json(src, hub, revision), _render)
