"""`gpuwise model SRC`: the architecture, counted exactly."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuwise.cli.common import (
    Column,
    JsonOpt,
    LangOpt,
    fit_table,
    fmt_count,
    fmt_gib,
    run_command,
    safe,
    say,
)
from gpuwise.i18n import Lang, Text
from gpuwise.service import model_json

HubOpt = Annotated[str, typer.Option("--hub", help="Where hub ids are looked up: auto, hf or modelscope.")]


def list_presets() -> dict[str, Any]:
    from gpuwise.catalog.presets import all_presets
    from gpuwise.diffusion.loader import load_preset, preset_ids

    images = [load_preset(i) for i in preset_ids()]  # image and video pipelines (gpuwise.diffusion)
    return {"schema_version": 1, "presets": [
        {"id": p.id, "hf_id": p.hf_id, "published_params": p.published_params} for p in all_presets()] + [
        {"id": m.id, "hf_id": m.hf_id, "published_params": m.params_total, "kind": "diffusion"} for m in images]}


_KINDS = {"full": ("full attention", "全注意力"), "sliding": ("sliding window", "滑动窗口"),
          "linear": ("linear attention", "线性注意力")}


def _attention(s: dict[str, Any], zh: bool) -> str:
    """MLA caches a latent plus the rope dims (its head_dim is not a cache size); others heads x dim."""
    mla = s.get("mla")
    if mla:
        return (f"MLA：{s['num_heads']} 头，缓存潜向量 {mla['kv_lora_rank']} + RoPE {mla['qk_rope_head_dim']} 维"
                f"（每头 nope {mla['qk_nope_head_dim']} + rope {mla['qk_rope_head_dim']}，V {mla['v_head_dim']}）"
                if zh else
                f"MLA: {s['num_heads']} heads, caches a {mla['kv_lora_rank']} latent + {mla['qk_rope_head_dim']} "
                f"rope dims (per head nope {mla['qk_nope_head_dim']} + rope {mla['qk_rope_head_dim']}, "
                f"V {mla['v_head_dim']})")
    kind = {"gqa": "GQA", "mha": "MHA", "hybrid": "hybrid" if not zh else "混合"}.get(s["attention"], s["attention"])
    return (f"{kind}：{s['num_heads']} 个头 / {s['num_kv_heads']} 个 KV 头，head_dim {s['head_dim']}" if zh else
            f"{kind}: {s['num_heads']} heads / {s['num_kv_heads']} KV heads, head_dim {s['head_dim']}")


def _layers(s: dict[str, Any], zh: bool) -> str:
    kinds = s["layer_kinds"]
    if set(kinds) <= {"full"}:
        return str(s["num_layers"])
    parts = [f"{n} {_KINDS.get(k, (k, k))[1 if zh else 0]}" for k, n in kinds.items()]
    if s.get("sliding_window"):
        parts.append(f"窗口 {s['sliding_window']:,}" if zh else f"window {s['sliding_window']:,}")
    return f"{s['num_layers']}（{'，'.join(parts)}）" if zh else f"{s['num_layers']} ({', '.join(parts)})"


def _quant(q: dict[str, Any], zh: bool) -> str:
    group = (f"，每组 {q['group_size']}" if zh else f", groups of {q['group_size']}") if q.get("group_size") else ""
    return f"{q['method']}（{q['bits']} 位{group}）" if zh else f"{q['method']} ({q['bits']}-bit{group})"


def _render(s: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console

    zh = lang == "zh"
    console = Console(highlight=False)
    if s.get("kind") == "diffusion":  # an image or video pipeline
        from gpuwise.cli.image_cmd import render_diffusion_model

        render_diffusion_model(s, lang)
        return
    if "presets" in s:
        rows = [[p["id"], p["hf_id"], fmt_count(p["published_params"])] for p in s["presets"]]
        cols = [Column(Text("id", "id")), Column(Text("Hugging Face id", "Hugging Face id"), keep=1),
                Column(Text("params", "参数量"), right=True)]
        table, _ = fit_table(console, cols, rows, lang, title="预设模型" if zh else "Model presets")
        console.print(table)
        return
    rows = [
        ["参数量（总）" if zh else "parameters (total)", f"{s['params_total']:,} ({fmt_count(s['params_total'])})"],
        ["参数量（激活）" if zh else "parameters (active)",
         f"{s['params_active']:,} ({fmt_count(s['params_active'])})"],
        *[[f"  {_PART_WORDS.get(k, (k, k))[1 if zh else 0]}", f"{v:,}"]
          for k, v in s["params"].items() if k not in ("total", "active") and v],
        ["层数" if zh else "layers", _layers(s, zh)],
        ["注意力" if zh else "attention", _attention(s, zh)],
        ["每 token KV（16 位）" if zh else "KV per token (16-bit)", f"{s['kv_bytes_per_token']:,} B"],
        ["每 token KV（FP8）" if zh else "KV per token (FP8)", f"{s['kv_bytes_per_token_fp8']:,} B"],
        ["每序列状态" if zh else "state per sequence", fmt_gib(s["state_bytes_per_sequence"], 3)],
        ["最大上下文" if zh else "max context", f"{s['max_context']:,}"],
    ]
    if s["moe"]:
        moe = s["moe"]
        rows.append(["MoE", f"{moe['experts']} 个专家，每 token 选 {moe['top_k']} 个，{moe['shared_experts']} 个共享"
                     if zh else f"{moe['experts']} experts, top-{moe['top_k']}, {moe['shared_experts']} shared"])
    if s["quantization"]:
        rows.append(["量化" if zh else "quantization", _quant(s["quantization"], zh)])
    cols = [Column(Text("", "")), Column(Text("", ""))]
    table, _ = fit_table(console, cols, rows, lang, title=f"{s['name']} ({s['model_type']})")
    table.show_header = False
    console.print(table)
    for note in s["notes_zh" if zh else "notes"]:
        say(console, f"[yellow]![/] {safe(note)}", indent=2)


# The parameter breakdown's parts (catalog.params.ParamBreakdown fields; the JSON keeps the keys).
_PART_WORDS = {"embedding": ("embedding", "词嵌入"), "positions": ("positions", "位置编码"),
               "lm_head": ("lm_head", "输出层 lm_head"), "attention": ("attention", "注意力"),
               "mlp": ("mlp", "MLP"), "experts": ("experts", "专家"), "shared_experts": ("shared_experts", "共享专家"),
               "router": ("router", "路由"), "norms": ("norms", "归一化"), "vision": ("vision", "视觉编码器")}


def register(app: typer.Typer) -> None:
    @app.command("model")
    def model(
        src: Annotated[
            str | None,
            typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file or a size like 7b."),
        ] = None,
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
