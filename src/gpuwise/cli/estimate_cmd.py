"""`gpuwise estimate SRC --card CARD ...`: per-GPU memory, fit verdict, and the nearest fixes."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuwise.cli.common import JsonOpt, LangOpt, fmt_gib, run_command
from gpuwise.i18n import Lang

_LABELS = {
    "weights": ("weights", "权重"), "kv_cache": ("KV cache", "KV 缓存"),
    "sequence_state": ("sequence state", "序列状态"), "forward_activations": ("activations", "激活"),
    "logits": ("logits", "logits"), "runtime": ("CUDA context + workspaces", "CUDA 上下文与工作区"),
    "adapters": ("LoRA adapters", "LoRA 适配器"), "gradients": ("gradients", "梯度"),
    "optimizer": ("optimizer states", "优化器状态"), "activations": ("activations", "激活"),
    "zero3_gather": ("ZeRO-3 gather buffers", "ZeRO-3 收集缓冲"),
}


def render_estimate(r: dict[str, Any], lang: Lang, explain: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    zh = lang == "zh"
    c = Console(highlight=False)
    m = r["memory"]
    title = (f"{r['model']['name']} · {r['card']} × {r['gpus']} · {r['task']}"
             + (f" · {r['engine']}" if r.get("engine") else ""))
    t = Table(title=title + ("（每卡）" if zh else " (per GPU)"))
    t.add_column("项目" if zh else "component")
    t.add_column("显存" if zh else "memory", justify="right")
    if explain:
        t.add_column("依据" if zh else "why")
    for item in m["items"]:
        label = _LABELS.get(item["name"], (item["name"], item["name"]))[1 if zh else 0]
        row = [label, fmt_gib(item["bytes"])]
        if explain:
            row.append(item["why_zh" if zh else "why"])
        t.add_row(*row)
    if "kv_pool" in m:
        t.add_row("vLLM KV 池" if zh else "vLLM KV pool", fmt_gib(m["kv_pool"]), *([""] if explain else []))
    t.add_row("[bold]" + ("合计（需要）" if zh else "required") + "[/]", f"[bold]{fmt_gib(m['required'])}[/]",
              *([""] if explain else []))
    t.add_row("可用" if zh else "usable", fmt_gib(r["usable_bytes"]), *([""] if explain else []))
    c.print(t)
    _render_verdict(c, r, zh)


def _render_verdict(c: Any, r: dict[str, Any], zh: bool) -> None:
    head = r["headroom_bytes"]
    if r["fits"]:
        c.print(f"[bold green]{'放得下' if zh else 'FITS'}[/] — {'余量' if zh else 'headroom'} {fmt_gib(head)}")
    else:
        c.print(f"[bold red]{'放不下' if zh else 'DOES NOT FIT'}[/] — {'还差' if zh else 'short by'} {fmt_gib(-head)}")
    cap = r.get("capacity")
    if cap:
        c.print(("KV 容量 {t:,} token · 该上下文下最大并发 {n} · 该并发下最大上下文 {x:,}" if zh else
                 "KV capacity {t:,} tokens · max concurrency at this context {n} · max context at this concurrency {x:,}")
                .format(t=cap["kv_tokens"], n=cap["max_concurrency"], x=cap["max_context"]))
    host = r.get("host", {})
    if host.get("cpu_ram") or host.get("nvme"):
        c.print(("需要主机内存 {a} · NVMe {b}" if zh else "host RAM needed {a} · NVMe {b}")
                .format(a=fmt_gib(host["cpu_ram"]), b=fmt_gib(host["nvme"])))
    if "margin" in r:
        mg = r["margin"]
        ok = ("满足" if zh else "met") if mg["meets"] else ("不满足" if zh else "not met")
        c.print(("在线服务 2 倍经验法则：需 {n}（{ok}）" if zh else "online-serving x2 rule: needs {n} ({ok})")
                .format(n=fmt_gib(mg["required_bytes"]), ok=ok))
    for key in ("card_note", "warnings"):
        values = r.get(key + ("_zh" if zh else ""))
        for v in ([values] if isinstance(values, str) else values or []):
            c.print(f"[yellow]![/] {v}")
    fixes = r.get("suggestions_zh" if zh else "suggestions") or []
    if fixes:
        c.print("可以这样放下：" if zh else "It would fit if you:")
        for f in fixes:
            c.print(f"  • {f}")


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate(
        src: Annotated[str, typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file, or a size like 7b.")],
        card: Annotated[str, typer.Option("--card", help="GPU card, e.g. H100-SXM, 4090, A100-80G.")],
        gpus: Annotated[int, typer.Option("--gpus", help="GPUs per node.")] = 1,
        task: Annotated[str, typer.Option("--task", help="infer | full | lora | qlora | pretrain")] = "infer",
        weights: Annotated[str, typer.Option("--weights", help="auto | bf16 | fp16 | fp8 | int8 | int4 | nf4 | gguf:<TYPE>")] = "auto",
        kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="auto | fp16 | bf16 | fp8 | int8 | q8_0 | q4_0")] = "auto",
        context: Annotated[int, typer.Option("--context", help="Tokens per sequence (prompt + output).")] = 4096,
        concurrency: Annotated[int, typer.Option("--concurrency", help="Sequences served at once.")] = 1,
        output_tokens: Annotated[int | None, typer.Option("--output-tokens", help="Generated tokens per request, part of --context (default: a quarter, at most 1,024).")] = None,
        max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="Prefill chunk (default: the engine's).")] = None,
        engine: Annotated[str, typer.Option("--engine", help="vllm | transformers | llamacpp")] = "vllm",
        gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", help="vLLM's memory fraction.")] = 0.9,
        tp: Annotated[int, typer.Option("--tp", help="Tensor parallel degree (default: all GPUs for serving, 1 for training).")] = 0,
        pp: Annotated[int, typer.Option("--pp", help="Pipeline parallel degree.")] = 1,
        offload: Annotated[str, typer.Option("--offload", help="none | cpu | nvme")] = "none",
        cpu_offload_gb: Annotated[float, typer.Option("--cpu-offload-gb", help="vLLM: GiB of weights per GPU kept in CPU RAM.")] = 0.0,
        gpu_layers: Annotated[int | None, typer.Option("--gpu-layers", help="llama.cpp -ngl: layers on the GPU.")] = None,
        margin: Annotated[bool, typer.Option("--margin", help="Also apply the x2 rule for online serving (shown apart).")] = False,
        seq_len: Annotated[int, typer.Option("--seq-len", help="Training sequence length.")] = 2048,
        micro_batch: Annotated[int, typer.Option("--micro-batch", help="Training sequences per GPU per step.")] = 1,
        grad_accum: Annotated[int, typer.Option("--grad-accum", help="Micro-batches per optimizer step.")] = 1,
        replicas: Annotated[int, typer.Option("--replicas", help="Serving engines behind a load balancer (each on --gpus).")] = 1,
        prices: Annotated[str | None, typer.Option("--prices", help="A price file (TOML, the config-dir format).")] = None,
        optimizer: Annotated[str, typer.Option("--optimizer", help="adamw | adamw8bit | sgd | adafactor")] = "adamw",
        grad_ckpt: Annotated[str, typer.Option("--grad-ckpt", help="none | selective | full")] = "none",
        flash_attention: Annotated[bool, typer.Option("--flash-attention/--no-flash-attention")] = True,
        zero: Annotated[int, typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP).")] = 0,
        lora_rank: Annotated[int, typer.Option("--lora-rank")] = 16,
        lora_targets: Annotated[str, typer.Option("--lora-targets", help="Comma list of q,k,v,o,gate,up,down or 'all'.")] = "all",
        nodes: Annotated[int, typer.Option("--nodes", help="Nodes (training).")] = 1,
        inter_node_gbps: Annotated[float, typer.Option("--inter-node-gbps", help="Network per node between nodes, Gb/s.")] = 100.0,
        allow_long_context: Annotated[bool, typer.Option("--allow-long-context", help="Allow --context above the model's maximum.")] = False,
        hub: Annotated[str, typer.Option("--hub", help="auto | hf | modelscope")] = "auto",
        cards_file: Annotated[str | None, typer.Option("--cards", help="Extra card data file (TOML).")] = None,
        calibration: Annotated[str | None, typer.Option("--calibration", help="A `gpuwise verify --save` file: use its measured rates.")] = None,
        provider: Annotated[str | None, typer.Option("--provider", help="Price provider (see `gpuwise prices`).")] = None,
        billing: Annotated[str, typer.Option("--billing", help="hourly | monthly | spot")] = "hourly",
        tokens: Annotated[float | None, typer.Option("--tokens", help="Training tokens, for time and cost per run.")] = None,
        explain: Annotated[bool, typer.Option("--explain", help="Show the formula behind each line.")] = False,
        plot: Annotated[str | None, typer.Option("--plot", help="Also draw the memory chart to out.png or out.svg (gpuwise[plot]).")] = None,
        json_out: JsonOpt = False,
        lang: LangOpt = None,
    ) -> None:
        """Memory per GPU and a fit verdict (and the nearest fix when it does not fit). 估算每卡显存。"""
        from gpuwise.service import EstimateRequest, estimate_json

        req = EstimateRequest(
            model=src, card=card, gpus=gpus, task=task, weights=weights, kv_dtype=kv_dtype, context=context,
            concurrency=concurrency, output_tokens=output_tokens,
            max_num_batched_tokens=max_num_batched_tokens, engine=engine,
            gpu_memory_utilization=gpu_memory_utilization, tp=tp, pp=pp, offload=offload,
            cpu_offload_gb=cpu_offload_gb, gpu_layers=gpu_layers, margin=margin, seq_len=seq_len,
            micro_batch=micro_batch, grad_accum=grad_accum, replicas=replicas, prices_file=prices,
            optimizer=optimizer, grad_ckpt=grad_ckpt, flash_attention=flash_attention, zero=zero, lora_rank=lora_rank, lora_targets=lora_targets,
            nodes=nodes, allow_long_context=allow_long_context, hub=hub, cards_file=cards_file,
            calibration=calibration, provider=provider, billing=billing, train_tokens=tokens,
            inter_node_gbps=inter_node_gbps)
        from gpuwise.report.plot import with_plot

        run_command(json_out, lang, lambda: with_plot(estimate_json(req), plot, lang),
                    lambda r, lg: render_estimate(r, lg, explain))
