"""`gpuwise plan SRC --task ...`: the ranked plans, why every other card lost, and --emit."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fmt_gib, run_command
from gpuwise.i18n import Lang


def render_plan(r: dict[str, Any], lang: Lang) -> None:
    from rich.console import Console
    from rich.table import Table

    zh = lang == "zh"
    c = Console(highlight=False)
    if r.get("stage_advice"):
        c.print(r["stage_advice_zh" if zh else "stage_advice"])
    t = Table(title=(f"{r['model']} · {r['task']} · " + ("方案排名" if zh else "ranked plans")))
    for head in (("#", "#"), ("card", "显卡"), ("GPUs", "卡数"), ("weights", "权重"), ("memory/GPU", "每卡显存"),
                 ("speed", "速度"), ("cost", "成本")):
        t.add_column(head[1] if zh else head[0])
    for i, p in enumerate(r["plans"], 1):
        sp = p["speed"] or {}
        speed = (f"{sp['throughput_tokens_per_s']:,.0f} tok/s · TTFT {sp['ttft_s']:.2f}s"
                 if "throughput_tokens_per_s" in sp else f"{sp.get('tokens_per_s', 0):,.0f} tok/s · MFU {sp.get('mfu', 0):.0%}")
        cost = p["cost"]
        cost_s = "—" if not cost else f"{cost['per_hour']:,.2f} {cost['currency']}/h" + (
            f" · {cost['per_million_tokens']:,.2f}/Mtok" if cost.get("per_million_tokens") else "") + (
            f" · {cost['per_run']:,.0f}/run" if cost.get("per_run") else "")
        t.add_row(str(i), p["card_name"], str(p["gpus"]), p["weights"],
                  f"{fmt_gib(p['memory']['required'], 1)} / {fmt_gib(p['memory']['usable_bytes'], 1)}", speed, cost_s)
    c.print(t)
    for p in r["plans"][:1]:
        c.print("[bold]" + ("理由：" if zh else "why: ") + "[/]" + "; ".join(p["reasons_zh" if zh else "reasons"]))
    if r["rejected"]:
        c.print("[bold]" + ("落选原因：" if zh else "why not:") + "[/]")
        for x in r["rejected"]:
            c.print(f"  {x['card']}: " + "; ".join(x["reasons_zh" if zh else "reasons"]))
    if not r["plans"]:
        c.print("[red]" + ("没有满足条件的方案。" if zh else "No plan meets the constraints.") + "[/]")


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        src: Annotated[str, typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file, or a size like 70b.")],
        task: Annotated[str, typer.Option("--task", help="infer | full | lora | qlora | pretrain")] = "infer",
        weights: Annotated[str, typer.Option("--weights", help="any | bf16 | fp8 | int4 | ...")] = "any",
        kv_dtype: Annotated[str, typer.Option("--kv-dtype")] = "auto",
        context: Annotated[int, typer.Option("--context")] = 4096,
        concurrency: Annotated[int, typer.Option("--concurrency")] = 1,
        output_tokens: Annotated[int | None, typer.Option("--output-tokens", help="Generated tokens per request, part of --context.")] = None,
        seq_len: Annotated[int, typer.Option("--seq-len")] = 2048,
        micro_batch: Annotated[int, typer.Option("--micro-batch")] = 1,
        optimizer: Annotated[str, typer.Option("--optimizer")] = "adamw",
        grad_ckpt: Annotated[str, typer.Option("--grad-ckpt", help="auto | none | selective | full")] = "auto",
        lora_rank: Annotated[int, typer.Option("--lora-rank")] = 16,
        budget: Annotated[float | None, typer.Option("--budget", help="Per hour (or per run with --tokens).")] = None,
        min_throughput: Annotated[float | None, typer.Option("--min-throughput", help="tokens/s, all users.")] = None,
        max_ttft: Annotated[float | None, typer.Option("--max-ttft", help="seconds")] = None,
        min_tps_user: Annotated[float | None, typer.Option("--min-tokens-per-s-per-user")] = None,
        require: Annotated[str, typer.Option("--require", help="ecc,nvlink")] = "",
        provider: Annotated[str | None, typer.Option("--provider")] = None,
        billing: Annotated[str, typer.Option("--billing", help="hourly | monthly | spot")] = "hourly",
        cards: Annotated[str, typer.Option("--cards", help="Comma list of cards to consider.")] = "",
        objective: Annotated[str, typer.Option("--objective", help="cost | speed | cost-per-token")] = "cost",
        stage: Annotated[str | None, typer.Option("--stage", help="validate | stabilise | scale")] = None,
        allow_offload: Annotated[bool, typer.Option("--allow-offload")] = False,
        tokens: Annotated[float | None, typer.Option("--tokens", help="Training tokens, for the per-run cost.")] = None,
        inter_node_gbps: Annotated[float, typer.Option("--inter-node-gbps")] = 100.0,
        top: Annotated[int, typer.Option("--top")] = 5,
        plot: Annotated[str | None, typer.Option("--plot", help="Also draw memory and cost-vs-throughput charts to out.png or out.svg (gpuwise[plot]).")] = None,
        emit: Annotated[str | None, typer.Option("--emit", help="vllm | deepspeed | accelerate | torchrun | skypilot | dstack | k8s | ray")] = None,
        hub: Annotated[str, typer.Option("--hub")] = "auto",
        json_out: JsonOpt = False,
        lang: LangOpt = None,
    ) -> None:
        """Rank card x count x precision x parallelism, with a reason for every rejection. 选型方案排名。"""
        from gpuwise.service import PlanRequest, emit_json, plan_json

        req = PlanRequest(model=src, task=task, weights=weights, kv_dtype=kv_dtype, context=context,
                          concurrency=concurrency, output_tokens=output_tokens, seq_len=seq_len, micro_batch=micro_batch, optimizer=optimizer,
                          grad_ckpt=grad_ckpt, lora_rank=lora_rank, budget=budget, min_throughput=min_throughput,
                          max_ttft=max_ttft, min_tokens_per_s_per_user=min_tps_user, require=require,
                          provider=provider, billing=billing, cards=cards, objective=objective, stage=stage,
                          allow_offload=allow_offload, train_tokens=tokens, inter_node_gbps=inter_node_gbps,
                          top=top, hub=hub)
        if emit:
            run_command(json_out, lang, lambda: emit_json(req, emit), lambda r, lg: typer.echo(r["config"]))
            return
        from gpuwise.report.plot import with_plot

        run_command(json_out, lang, lambda: with_plot(plan_json(req), plot, lang), render_plan)
