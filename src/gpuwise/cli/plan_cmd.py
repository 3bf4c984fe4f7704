"""`gpuwise plan SRC --task ...`: the ranked plans, why every other card lost, --save and --emit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from gpuwise.cli.common import (
    Column,
    DoraOption,
    JsonOpt,
    LangOpt,
    ModulesToSaveOption,
    PaddingFreeOption,
    dropped_note,
    fit_table,
    fmt_hours,
    money,
    per_hour,
    reasons_of,
    run_command,
    safe,
    say,
    task_name,
)
from gpuwise.i18n import Lang, Text


def _ms_cell(seconds: float) -> str:
    return f"{seconds:,.2f}"


def _columns(r: dict[str, Any], lang: Lang) -> list[Column]:
    """The plan table: the answer columns always stay; detail columns go first on a narrow terminal."""
    obj, training = r["objective"], r["task"] != "infer"
    cur = next((p["cost"]["currency"] for p in r["plans"] if p["cost"]), "CNY")
    cols = [Column(Text("#", "#"), right=True), Column(Text("card", "显卡")), Column(Text("GPUs", "卡数"), whole=True),
            Column(Text("weights", "权重"), keep=2),
            Column(Text("memory/GPU GiB", "每卡显存 GiB"), keep=3, right=True, whole=True)]
    if training:
        cols += [Column(Text("tok/s", "token/s"), right=True), Column(Text("MFU", "MFU"), keep=4, right=True),
                 Column(Text("step s", "每步 秒"), keep=5, right=True)]
        if any((p["cost"] or {}).get("run_hours") is not None for p in r["plans"]):
            cols.append(Column(Text("run time", "用时"), keep=1, right=True))
    else:
        cols += [Column(Text("tok/s per user", "每用户 token/s"), right=True),
                 Column(Text("tok/s all users", "总 token/s"), keep=1, right=True),
                 Column(Text("TTFT s", "首 token 秒"), keep=4, right=True)]
    cols.append(Column(Text(per_hour(cur, "en"), per_hour(cur, "zh")), right=True))
    if obj["key"] not in ("per_hour", "tokens_per_s"):
        short_zh = {"per_million_tokens": "/百万 token", "per_run": "/次"}.get(obj["key"], obj["unit_zh"])
        cols.append(Column(Text(cur + obj["short"], money(cur, "zh") + short_zh), right=True))
    return cols


def _row(i: int, p: dict[str, Any], r: dict[str, Any], lang: Lang) -> list[str]:
    obj, training = r["objective"], r["task"] != "infer"
    sp, cost, mem = p["speed"] or {}, p["cost"] or {}, p["memory"]
    flag = " !" if mem.get("near_limit") else ""
    row = [str(i), p["card_name"], _gpus(p, lang), p["weights"],
           f"{mem['required'] / 2**30:,.1f} / {mem['usable_bytes'] / 2**30:,.1f}{flag}"]
    if training:
        row += [f"{sp.get('tokens_per_s', 0):,.0f}", f"{sp.get('mfu', 0):.0%}", f"{sp.get('step_time_s', 0):,.3g}"]
        if any((q["cost"] or {}).get("run_hours") is not None for q in r["plans"]):
            hours = cost.get("run_hours")
            row.append("—" if hours is None else fmt_hours(hours, lang))
    else:
        row += [f"{sp.get('decode_tokens_per_s', 0):,.0f}", f"{sp.get('throughput_tokens_per_s', 0):,.0f}",
                _ms_cell(sp.get("ttft_s", 0))]
    row.append("—" if not cost else f"{cost['per_hour']:,.2f}")
    key = obj["key"]
    if key not in ("per_hour", "tokens_per_s"):
        value = cost.get(key)
        row.append("—" if value is None else f"{value:,.{0 if key == 'per_run' else 2}f}")
    return row


_BANDS: tuple[tuple[str, str, str, Callable[[float], str], str], ...] = (  # path, labels, format, unit
    ("memory.required", "memory/GPU", "每卡显存", lambda v: f"{v / 2**30:,.1f}", " GiB"),
    ("speed.throughput_tokens_per_s", "throughput", "吞吐", lambda v: f"{v:,.0f}", " tok/s"),
    ("speed.ttft_s", "TTFT", "首 token", lambda v: f"{v:,.2f}", "s"),
    ("speed.tokens_per_s", "training", "训练", lambda v: f"{v:,.0f}", " tok/s"),
    ("cost.per_million_tokens", "per M tokens", "每百万 token", lambda v: f"{v:,.2f}", ""),
    ("cost.per_run", "per run", "整次训练", lambda v: f"{v:,.0f}", ""),
)


def _bands_line(p: dict[str, Any], zh: bool) -> str:
    """The top plan's main numbers as 80 % bands: 'memory/GPU 8.9-10.4 GiB · ...'."""
    ranges = p.get("ranges") or {}
    shown = [f"{zh_label if zh else label} {fmt(ranges[path]['low'])}-{fmt(ranges[path]['high'])}{unit}"
             for path, label, zh_label, fmt, unit in _BANDS if path in ranges]
    return " · ".join(shown)


def _gpus(p: dict[str, Any], lang: Lang) -> str:
    par = p["parallelism"]
    shape = f"{p['replicas']}×TP{par['tp']}" if p.get("replicas", 1) > 1 else f"TP{par['tp']}" \
        if par.get("engine") else f"ZeRO-{par['zero']}" if par["zero"] else "DDP" if p["gpus"] > 1 else ""
    nodes = "" if p["nodes"] <= 1 else f" · {p['nodes']} " + ("节点" if lang == "zh" else "nodes")
    return f"{p['gpus']} {shape}{nodes}".strip()


def _lines(c: Any, head: str, rows: list[dict[str, Any]], zh: bool) -> None:
    if not rows:
        return
    say(c, f"[bold]{head}[/]")
    for x in rows:
        gpus = f" x{x['gpus']}" if x.get("gpus") else ""
        say(c, f"  {safe(x['card'])}{gpus}: " + safe(reasons_of(x, zh)), indent=4)


def render_plan(r: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console

    zh = lang == "zh"
    c = Console(highlight=False)
    obj = r["objective"]
    if r.get("stage_advice"):
        say(c, safe(r["stage_advice_zh" if zh else "stage_advice"]))
    cur = next((p["cost"]["currency"] for p in r["plans"] if p["cost"]), "CNY")
    unit = (per_hour(cur, lang) if obj["key"] == "per_hour" else "token/s" if obj["key"] == "tokens_per_s"
            else money(cur, lang) + (obj["unit_zh"] if zh else obj["unit"]))
    say(c, ("排序依据：" if zh else "ranked by: ") + safe(obj["label_zh" if zh else "label"])
        + (f"（{safe(unit)}）" if zh else f" ({safe(unit)})"))
    for note in r["notes_zh" if zh else "notes"]:
        say(c, "[yellow]" + safe(note) + "[/]")
    title = f"{r['model']} · {task_name(r['task'], lang)} · " + ("方案排名" if zh else "ranked plans")
    none = "[red]" + ("没有满足条件的方案。" if zh else "No plan meets the constraints.") + "[/]"
    if r["plans"]:
        rows = [_row(i, p, r, lang) for i, p in enumerate(r["plans"], 1)]
        table, dropped = fit_table(c, _columns(r, lang), rows, lang, title=title)
        c.print(table)  # a table lays itself out
        note = dropped_note(dropped, lang)
        if note:
            say(c, f"[dim]{safe(note)}[/]")
    else:  # said first, not an empty table: the reasons below are why
        say(c, f"[bold]{safe(title)}[/]")
        say(c, none)
    for p in r["plans"][:1]:
        say(c, "[bold]" + ("理由：" if zh else "why: ") + "[/]" + safe(reasons_of(p, zh)))
        bands = _bands_line(p, zh)
        if bands:
            say(c, "[bold]" + ("80% 区间：" if zh else "80 % range: ") + "[/]" + safe(bands))
        if p.get("quality"):
            q = p["quality"]
            say(c, "[bold]" + ("质量：" if zh else "quality: ") + "[/]" + safe(q["summary_zh" if zh else "summary"]))
        for note in p["notes_zh" if zh else "notes"]:
            say(c, "  · " + safe(note), indent=4)
        need = safe(p["quantization"]) if p.get("quantization") else None  # the format it still needs
        say(c, ("部署：" if zh else "deploys: ") + safe(p["deploy_model"])
                + ("" if need is None else f"（需要 {need} 权重，见上方说明）" if zh else
                   f" (needs {need} weights: see the notes above)"))
    if r.get("unpriced"):
        # 'a10×1' is one word: a line never breaks between a card and its count
        names = ("、" if zh else ", ").join(f"{x['card']}×{x['gpus']}" for x in r["unpriced"])
        say(c, "[bold]" + ("放得下但无报价（可用 --prices FILE 补充）：" if zh else
                            "fits, no price (add one with --prices FILE): ") + "[/]" + safe(names))
    _lines(c, "落选原因：" if zh else "why not:", r["rejected"], zh)
    if not r["plans"]:
        say(c, none)  # again after the reasons, where the eye ends


def _save(result: dict[str, Any], path: str | None, lang: str | None = None) -> dict[str, Any]:
    """--save: strict JSON, written whole, never through a symbolic link; says when it replaced a file."""
    if path:
        import sys

        from gpuwise.i18n import pick_lang
        from gpuwise.jsonable import dumps
        from gpuwise.safefile import replaced_note, write_output

        if write_output(path, dumps(result, indent=2) + "\n", replace=True):
            sys.stderr.write(replaced_note(path).render(pick_lang(lang)) + "\n")
    return result


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        src: Annotated[
            str | None, typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file, or a size like 70b.")
        ] = None,
        task: Annotated[str, typer.Option("--task", help="infer | full | lora | qlora | pretrain")] = "infer",
        weights: Annotated[
            str, typer.Option("--weights", help="auto (checkpoint or FP8) | any (4-bit too) | bf16 | fp8 | int4 | ...")
        ] = "auto",
        kv_dtype: Annotated[str, typer.Option("--kv-dtype")] = "auto",
        context: Annotated[int, typer.Option("--context")] = 4096,
        concurrency: Annotated[int, typer.Option("--concurrency")] = 1,
        output_tokens: Annotated[
            int | None, typer.Option("--output-tokens", help="Generated tokens per request, part of --context.")
        ] = None,
        replicas: Annotated[
            int | None, typer.Option("--replicas", help="Serving engines behind a load balancer (default: searched).")
        ] = None,
        engine: Annotated[
            str,
            typer.Option(
                "--engine",
                help="Serving engine whose rules size the plans: vllm | sglang | trtllm | llamacpp | transformers.",
            ),
        ] = "vllm",
        engine_version: Annotated[
            str,
            typer.Option("--engine-version", help="Engine version, e.g. 0.11 (default: the newest rules gpuwise has)."),
        ] = "",
        seq_len: Annotated[int, typer.Option("--seq-len")] = 2048,
        micro_batch: Annotated[int, typer.Option("--micro-batch", help="Largest micro-batch per GPU to try.")] = 1,
        grad_accum: Annotated[
            int | None, typer.Option("--grad-accum", help="Fixes the global batch at micro-batch x this.")
        ] = None,
        global_batch: Annotated[
            int | None, typer.Option("--global-batch", help="Sequences per optimizer step, kept fixed.")
        ] = None,
        framework: Annotated[
            str,
            typer.Option(
                "--framework",
                help="Training framework whose defaults apply (see `gpuwise estimate --help`; default auto).",
            ),
        ] = "auto",
        optimizer: Annotated[str | None, typer.Option("--optimizer", help="Default: the framework's.")] = None,
        grad_ckpt: Annotated[
            str, typer.Option("--grad-ckpt", help="auto | none | full | selective | op-sac | every-N")
        ] = "auto",
        lora_rank: Annotated[int, typer.Option("--lora-rank")] = 16,
        dora: DoraOption = False,
        modules_to_save: ModulesToSaveOption = "",
        padding_free: PaddingFreeOption = None,
        budget: Annotated[float | None, typer.Option("--budget", help="Per hour (or per run with --tokens).")] = None,
        min_throughput: Annotated[float | None, typer.Option("--min-throughput", help="tokens/s, all users.")] = None,
        max_ttft: Annotated[float | None, typer.Option("--max-ttft", help="seconds")] = None,
        min_tps_user: Annotated[float | None, typer.Option("--min-tokens-per-s-per-user")] = None,
        require: Annotated[str, typer.Option("--require", help="ecc,nvlink")] = "",
        provider: Annotated[str | None, typer.Option("--provider")] = None,
        billing: Annotated[str, typer.Option("--billing", help="hourly | daily | weekly | monthly | spot")] = "hourly",
        prices: Annotated[
            str | None, typer.Option("--prices", help="A price file (TOML, the config-dir format).")
        ] = None,
        cards: Annotated[str, typer.Option("--cards", help="Comma list of cards to consider.")] = "",
        include_non_cuda: Annotated[
            bool, typer.Option("--include-non-cuda", help="Also rank ROCm and Ascend (CANN) cards.")
        ] = False,
        objective: Annotated[str, typer.Option("--objective", help="cost | speed | cost-per-token")] = "cost",
        stage: Annotated[str | None, typer.Option("--stage", help="validate | stabilise | scale")] = None,
        allow_offload: Annotated[bool, typer.Option("--allow-offload")] = False,
        tokens: Annotated[float | None, typer.Option("--tokens", help="Training tokens, for the per-run cost.")] = None,
        inter_node_gbps: Annotated[
            float | None,
            typer.Option("--inter-node-gbps", help="Gb/s per node (default: the platform's reference fabric)."),
        ] = None,
        top: Annotated[int, typer.Option("--top")] = 5,
        deploy_model: Annotated[
            str | None,
            typer.Option("--deploy-model", help="Checkpoint the exports start, e.g. an AWQ repo of the model."),
        ] = None,
        script: Annotated[
            str | None, typer.Option("--script", help="Training script the exports run (relative to --workdir).")
        ] = None,
        workdir: Annotated[
            str | None, typer.Option("--workdir", help="Folder the exports ship to the machine.")
        ] = None,
        image: Annotated[str | None, typer.Option("--image", help="Container image for the exports.")] = None,
        save: Annotated[
            str | None, typer.Option("--save", help="Write the plan JSON to this file (read back by --from).")
        ] = None,
        from_file: Annotated[
            str | None, typer.Option("--from", help="With --emit: export a saved plan instead of planning.")
        ] = None,
        plot: Annotated[
            str | None,
            typer.Option(
                "--plot", help="Also draw memory and cost-vs-throughput charts to out.png or out.svg (gpuwise[plot])."
            ),
        ] = None,
        emit: Annotated[
            str | None,
            typer.Option(
                "--emit",
                help="vllm | sglang | trtllm | docker | framework (the training framework's own launch and config) | "
                     "deepspeed | accelerate | torchrun | skypilot | dstack | k8s | ray",
            ),
        ] = None,
        hub: Annotated[str, typer.Option("--hub")] = "auto",
        json_out: JsonOpt = False,
        lang: LangOpt = None,
        width: Annotated[
            int | None, typer.Option("--width", help="Image/video models: width in pixels (default: the model's).")
        ] = None,
        height: Annotated[int | None, typer.Option("--height", help="Image/video models: height in pixels.")] = None,
        frames: Annotated[int | None, typer.Option("--frames", help="Video models: frames (4k + 1, e.g. 81).")] = None,
        steps: Annotated[int | None, typer.Option("--steps", help="Image/video models: sampling steps.")] = None,
        guidance: Annotated[
            float | None, typer.Option("--guidance", help="Image/video models: guidance scale.")
        ] = None,
        images: Annotated[int, typer.Option("--images", help="Image/video models: outputs per prompt.")] = 1,
        max_seconds: Annotated[
            float | None, typer.Option("--max-seconds", help="Image/video models: one output every N seconds at most.")
        ] = None,
        os_name: Annotated[str, typer.Option("--os", help="Image/video models: linux | windows.")] = "linux",
    ) -> None:
        """Rank card x count x precision x parallelism, with a reason for every rejection. 选型方案排名。"""
        from gpuwise.errors import InputError
        from gpuwise.i18n import Text
        from gpuwise.service_plan import PlanRequest, emit_json, plan_json

        def request() -> PlanRequest:
            if src is None:
                raise InputError(Text("Name a model (a preset, hub id, file or folder), "
                                      "or use --emit T --from plan.json.",
                                      "请给出模型（预设、模型库 id、文件或目录），或用 --emit T --from plan.json。"))
            return PlanRequest(
                model=src, task=task, weights=weights, kv_dtype=kv_dtype, context=context,
                concurrency=concurrency, output_tokens=output_tokens, replicas=replicas, seq_len=seq_len,
                engine=engine, engine_version=engine_version,
                micro_batch=micro_batch, grad_accum=grad_accum, global_batch=global_batch,
                framework=framework, optimizer=optimizer, grad_ckpt=grad_ckpt, lora_rank=lora_rank, budget=budget,
                dora=dora, modules_to_save=modules_to_save, padding_free=padding_free,
                min_throughput=min_throughput, max_ttft=max_ttft, min_tokens_per_s_per_user=min_tps_user,
                require=require, provider=provider, billing=billing, cards=cards,
                include_non_cuda=include_non_cuda, objective=objective, stage=stage,
                allow_offload=allow_offload, train_tokens=tokens, inter_node_gbps=inter_node_gbps,
                top=top, hub=hub, prices_file=prices, deploy_model=deploy_model, script=script,
                workdir=workdir, image=image, width=width, height=height, frames=frames, steps=steps,
                guidance=guidance, images=images, max_seconds=max_seconds, os=os_name)

        if emit:
            run_command(json_out, lang, lambda: emit_json(None if from_file else request(), emit, from_file),
                        lambda r, lg: typer.echo(r["config"], nl=False))
            return
        from gpuwise.cli.common import run_command_with_status
        from gpuwise.report.plot import with_plot

        # Exit 1 when no plan meets the constraints (2 is a user error): the answer is still printed.
        run_command_with_status(json_out, lang, lambda: _save(with_plot(plan_json(request()), plot, lang), save, lang),
                                _render_any_plan, lambda r: 0 if r["plans"] else 1)


def _render_any_plan(r: dict[str, Any], lang: Lang) -> None:
    if r.get("kind") == "diffusion":  # image and video pipelines
        from gpuwise.cli.image_cmd import render_diffusion_plan

        render_diffusion_plan(r, lang)
        return
    render_plan(r, lang)
