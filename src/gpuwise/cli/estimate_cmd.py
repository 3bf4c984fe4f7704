"""`gpuwise estimate SRC --card CARD ...`: per-GPU memory, fit verdict, and the nearest fixes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from gpuwise.cli.common import (
    Column,
    JsonOpt,
    LangOpt,
    fit_table,
    fmt_gib,
    fmt_hours,
    money,
    on_off,
    per_hour,
    run_command,
    safe,
    say,
    task_name,
)
from gpuwise.i18n import Lang, Text

_LABELS = {
    "weights": ("weights", "权重"), "kv_cache": ("KV cache", "KV 缓存"),
    "sequence_state": ("sequence state", "序列状态"), "forward_activations": ("activations", "激活"),
    "logits": ("logits", "logits"), "runtime": ("CUDA context + workspaces", "CUDA 上下文与工作区"),
    "adapters": ("LoRA adapters", "LoRA 适配器"), "gradients": ("gradients", "梯度"),
    "optimizer": ("optimizer states", "优化器状态"), "activations": ("activations", "激活"),
    "zero3_gather": ("ZeRO-3 gather buffers", "ZeRO-3 收集缓冲"),
    "allocator_slack": ("allocator cache (reserved - allocated)", "分配器缓存（保留 - 已分配）"),
    "sampler_peak": ("sampler profiling peak", "采样器探测峰值"), "cuda_graphs": ("CUDA graphs", "CUDA graph"),
}


def render_estimate(r: dict[str, Any], lang: Lang, explain: bool = False) -> None:
    from rich.console import Console

    zh = lang == "zh"
    c = Console(highlight=False)
    m = r["memory"]
    title = " · ".join([r["model"]["name"], f"{r['card']} × {r['gpus']}", task_name(r["task"], lang),
                        *([r["engine"]] if r.get("engine") else [])]) + ("（每卡）" if zh else " (per GPU)")
    columns = [Column(Text("component", "项目")), Column(Text("memory", "显存"), right=True)]
    if explain:
        columns.append(Column(Text("why", "依据")))
    rows: list[list[str]] = []
    for item in m["items"]:
        label = _LABELS.get(item["name"], (item["name"], item["name"]))[1 if zh else 0]
        rows.append([label, fmt_gib(item["bytes"]), *([item["why_zh" if zh else "why"]] if explain else [])])
    pad = [""] if explain else []
    if "kv_pool" in m:
        rows.append(["vLLM KV 池" if zh else "vLLM KV pool", fmt_gib(m["kv_pool"]), *pad])
    rows.append(["合计（需要）" if zh else "required",
                 fmt_gib(m["required"]) + _band(r, "memory.required", lambda v: f"{v / 2**30:,.1f}"), *pad])
    rows.append(["可用" if zh else "usable", fmt_gib(r["usable_bytes"]), *pad])
    table, _ = fit_table(c, columns, rows, lang, title=title)
    c.print(table)
    _render_verdict(c, r, lang)


def _band(r: dict[str, Any], path: str, fmt: Callable[[float], str]) -> str:
    """' (low-high)' for a number that has an 80 % band, else ''."""
    b = r.get("ranges", {}).get(path)
    return f" ({fmt(b['low'])}-{fmt(b['high'])})" if b else ""


def _n(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:,.3g}"


def _int(v: float) -> str:
    """Whole sequences: 109.47 concurrent sequences is 109."""
    return f"{int(v):,}"


def _ms(v: float) -> str:
    return f"{v * 1e3:,.0f}" if v >= 0.1 else f"{v * 1e3:,.3g}"


def _verdict_line(r: dict[str, Any], zh: bool) -> str:
    head = r["headroom_bytes"]
    top = r.get("ranges", {}).get("memory.required")
    if r.get("fit") == "tight" and top:
        return (f"[bold yellow]{'勉强放得下' if zh else 'TIGHT'}[/] — "
                + (f"按估算余量 {fmt_gib(head)}，但按 80% 区间上限（{fmt_gib(top['high'], 1)}）放不下" if zh else
                   f"fits at the estimate (headroom {fmt_gib(head)}), not at the top of its 80 % range "
                   f"({fmt_gib(top['high'], 1)})"))
    if r["fits"]:
        return f"[bold green]{'放得下' if zh else 'FITS'}[/] — {'余量' if zh else 'headroom'} {fmt_gib(head)}"
    return f"[bold red]{'放不下' if zh else 'DOES NOT FIT'}[/] — {'还差' if zh else 'short by'} {fmt_gib(-head)}"


def _speed_lines(r: dict[str, Any], lang: Lang) -> list[str]:
    """Speed and cost in words, each number with its 80 % band."""
    zh = lang == "zh"
    sp, cost = r.get("speed"), r.get("cost") or {}
    out = []
    if sp and "decode_tokens_per_s" in sp:
        out.append(("速度：每用户解码 {d} token/s{db} · 总吞吐 {t} token/s{tb}" if zh else
                    "speed: {d} tok/s per user{db} · {t} tok/s in all{tb}")
                   .format(d=_n(sp["decode_tokens_per_s"]), db=_band(r, "speed.decode_tokens_per_s", _n),
                           t=_n(sp["throughput_tokens_per_s"]),
                           tb="" if sp.get("run_requests") else _band(r, "speed.throughput_tokens_per_s", _n)))
        if sp.get("run_requests"):  # --requests: a finite run's throughput, its ramp and drain included
            out.append(("压测：{n} 个请求同时发出，共 {s:,.1f} 秒（总吞吐含排队与收尾）" if zh else
                        "benchmark run: {n} prompts sent at once take {s:,.1f} s "
                        "(the throughput counts its ramp and drain)")
                       .format(n=f"{sp['run_requests']:,}", s=sp["run_seconds"]))
        out.append(("延迟：首 token {f} ms{fb} · 每 token {p} ms{pb}" if zh else
                    "latency: first token {f} ms{fb} · {p} ms per token{pb}")
                   .format(f=_ms(sp["ttft_s"]), fb=_band(r, "speed.ttft_s", _ms),
                           p=_ms(sp["tpot_s"]), pb=_band(r, "speed.tpot_s", _ms)))
    elif sp:
        out.append(("训练：{t} token/s{tb} · 每步 {s} 秒{sb} · MFU {m}{mb}" if zh else
                    "training: {t} tok/s{tb} · {s} s per step{sb} · MFU {m}{mb}")
                   .format(t=_n(sp["tokens_per_s"]), tb=_band(r, "speed.tokens_per_s", _n),
                           s=f"{sp['step_time_s']:,.3g}", sb=_band(r, "speed.step_time_s", lambda v: f"{v:,.3g}"),
                           m=f"{sp['mfu']:.0%}", mb=_band(r, "speed.mfu", lambda v: f"{v:.0%}")))
        gbps = (sp.get("communication_s") or {}).get("inter_node_gbps")
        if gbps:
            out.append(("节点间网络：每节点 {g:,.0f} Gb/s（{s}；可用 --inter-node-gbps 修改）" if zh else
                        "between nodes: {g:,.0f} Gb/s per node ({s}; set --inter-node-gbps)")
                       .format(g=gbps, s=safe(sp.get("inter_node_source_zh" if zh else "inter_node_source")
                                             or "--inter-node-gbps")))
    if cost:
        cur = cost["currency"]
        low_high = cost.get("low_high_per_hour")
        money_line = (("成本：{h} {u}" if zh else "cost: {h} {u}")
                      .format(h=f"{cost['per_hour']:,.2f}", u=per_hour(cur, lang))
                      + (f" ({low_high[0]:,.2f}-{low_high[1]:,.2f})" if low_high and low_high[0] != low_high[1]
                         else ""))
        if cost.get("per_million_tokens") is not None:
            money_line += (" · 每百万 token {v} {c}{b}" if zh else " · {v} {c} per million tokens{b}").format(
                v=f"{cost['per_million_tokens']:,.2f}", c=money(cur, lang),
                b=_band(r, "cost.per_million_tokens", lambda v: f"{v:,.2f}"))
        out.append(money_line)
        if cost.get("per_run") is not None:
            hours = cost.get("run_hours")
            out.append(("整次训练：{v} {c}{b}" if zh else "the whole run: {v} {c}{b}").format(
                v=f"{cost['per_run']:,.0f}", c=money(cur, lang),
                b=_band(r, "cost.per_run", lambda v: f"{v:,.0f}"))
                + ("" if hours is None else ("，用时 {t}" if zh else " in {t}").format(
                    t=fmt_hours(hours, lang, r.get("ranges", {}).get("cost.run_hours")))))
        out.append(("价格来源：{p}（{a}）" if zh else "price: {p} ({a})").format(
            p=safe(cost["provider"]), a=safe(cost["as_of"])))
    return out


def _sources_line(r: dict[str, Any], zh: bool) -> str | None:
    prov = r.get("provenance")
    if not prov:
        return None
    inputs = prov["inputs"]
    rates = (("实测 {s}" if zh else "measured in {s}").format(s=safe(inputs["calibration"]["file"]))
             if "calibration" in inputs else ("数据手册 × data/efficiency.toml" if zh else
                                              "datasheet x data/efficiency.toml"))
    rows = sum(len(v) for v in prov.get("ranges", {}).get("rows", {}).values())
    band = (("区间按 {n} 个公开实测拟合（validation/）" if zh else "ranges fitted on {n} published measurements "
             "(validation/)").format(n=rows) if rows else ("无拟合区间" if zh else "no fitted ranges"))
    return ("依据：显存为公式（模型配置 + 显卡手册）· 速度为公式（{r}）· {b}" if zh else
            "sources: memory is a formula (model config + card datasheet) · speed a formula ({r}) · {b}"
            ).format(r=rates, b=band)


def _framework_line(r: dict[str, Any], lang: Lang) -> str | None:
    fw = r.get("framework")
    if not fw:
        return None
    zh = lang == "zh"
    shown = ", ".join(f"{k.replace('_', '-')} {on_off(v, lang)}"
                      for k, v in fw["knobs"].items() if k in fw["defaults_applied"])
    line = (f"框架：{safe(fw['name'])}（{safe(fw['version'])}）的默认设置（{shown}）；可用对应参数覆盖" if zh else
            f"framework: {safe(fw['name'])} ({safe(fw['version'])}) defaults ({shown}); flags override them")
    if fw.get("chosen_by_default"):
        line += ("；未指定 --framework，按本任务的默认框架计算" if zh else
                 f"; chosen because no --framework was given ({safe(fw['default_reason'])})")
    return line


_PEAK_NAMES = {"allocated": ("allocated", "已分配"), "reserved": ("reserved", "已保留"),
               "nvidia-smi": ("device total", "设备总量")}


def _peaks_line(r: dict[str, Any], zh: bool) -> str | None:
    """Training: the allocator's peaks beside the device total, and which one the framework logs."""
    m, fw = r["memory"], r.get("framework")
    if not fw or not m.get("allocated_peak"):
        return None
    shows = _PEAK_NAMES.get(fw["peak_reported"])
    name = safe(fw["name"])
    said = ((f"；{name} 日志显示的是{shows[1]}" if zh else f"; {name}'s logs show {shows[0]}")
            if shows else ("；该框架不打印峰值" if zh else f"; {name} prints no peak"))
    return ((f"峰值：已分配 {fmt_gib(m['allocated_peak'])}（max_memory_allocated）· 已保留 "
             f"{fmt_gib(m['reserved_peak'])} · 设备总量 {fmt_gib(m['device_total'])}（nvidia-smi）") if zh else
            (f"peak: allocated {fmt_gib(m['allocated_peak'])} (max_memory_allocated) · reserved "
             f"{fmt_gib(m['reserved_peak'])} · device total {fmt_gib(m['device_total'])} (nvidia-smi)")) + said


def _capacity_line(r: dict[str, Any], zh: bool) -> str | None:
    cap = r.get("capacity")
    if not cap:
        return None
    return (("KV 容量 {t} token{tb} · 该上下文下最多并发 {n} 路{nb} · 该并发下最长上下文 {x}{xb}" if zh else
             "KV capacity {t} tokens{tb} · at most {n} sequences at this context{nb} · at most {x} tokens "
             "of context at this concurrency{xb}")
            .format(t=f"{cap['kv_tokens']:,}", n=_int(cap["max_concurrency"]), x=f"{cap['max_context']:,}",
                    tb=_band(r, "capacity.kv_tokens", _n), nb=_band(r, "capacity.max_concurrency", _int),
                    xb=_band(r, "capacity.max_context", _n)))


def _startup_line(r: dict[str, Any], zh: bool) -> str | None:
    boot = r.get("engine_startup")
    if not boot:
        return None
    said = " · ".join(safe(line) for line in boot["lines"])
    link = r.get("speed") or {}
    if link.get("collective_busbw_bytes_per_s"):  # the all-reduce bandwidth the speeds assumed
        said += f" · all-reduce: {link['collective_path']} {link['collective_busbw_bytes_per_s'] / 1e9:.0f} GB/s"
    return (f"{boot['engine']} 启动时将打印（规则 {boot['rules']}）：{said}" if zh else
            f"{boot['engine']} would print at start-up (rules {boot['rules']}): {said}")


def _render_verdict(c: Any, r: dict[str, Any], lang: Lang) -> None:
    zh = lang == "zh"
    line = _framework_line(r, lang)
    if line:
        say(c, f"[dim]{line}[/]")
    peaks = _peaks_line(r, zh)
    if peaks:
        say(c, peaks)
    say(c, _verdict_line(r, zh))
    for line in [_capacity_line(r, zh), _startup_line(r, zh), *_speed_lines(r, lang)]:
        if line:
            say(c, line)
    sources = _sources_line(r, zh)
    if sources:
        say(c, f"[dim]{sources}[/]")
    host = r.get("host", {})
    if host.get("cpu_ram") or host.get("nvme"):
        say(c, ("需要主机内存 {a} · NVMe {b}" if zh else "host RAM needed {a} · NVMe {b}")
                .format(a=fmt_gib(host["cpu_ram"]), b=fmt_gib(host["nvme"])))
    if "margin" in r:
        mg = r["margin"]
        ok = ("满足" if zh else "met") if mg["meets"] else ("不满足" if zh else "not met")
        say(c, ("在线服务 2 倍经验法则：需 {n}（{ok}）" if zh else "online-serving x2 rule: needs {n} ({ok})")
                .format(n=fmt_gib(mg["required_bytes"]), ok=ok))
    for key in ("card_note", "warnings"):
        values = r.get(key + ("_zh" if zh else ""))
        for v in ([values] if isinstance(values, str) else values or []):
            say(c, f"[yellow]![/] {safe(v)}")
    fixes = r.get("suggestions_zh" if zh else "suggestions") or []
    if fixes:
        say(c, "可以这样放下：" if zh else "It would fit if you:")
        for f in fixes:
            say(c, f"  • {safe(f)}", indent=4)


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate(
        src: Annotated[
            str, typer.Argument(help="Preset, HF id, config.json, model folder, GGUF file, or a size like 7b.")
        ],
        card: Annotated[str, typer.Option("--card", help="GPU card, e.g. H100-SXM, 4090, A100-80G.")],
        gpus: Annotated[int, typer.Option("--gpus", help="GPUs per node.")] = 1,
        task: Annotated[str, typer.Option("--task", help="infer | full | lora | qlora | pretrain")] = "infer",
        weights: Annotated[
            str, typer.Option("--weights", help="auto | bf16 | fp16 | fp8 | int8 | int4 | nf4 | gguf:<TYPE>")
        ] = "auto",
        kv_dtype: Annotated[
            str, typer.Option("--kv-dtype", help="auto | fp16 | bf16 | fp8 | int8 | q8_0 | q4_0")
        ] = "auto",
        context: Annotated[int, typer.Option("--context", help="Tokens per sequence (prompt + output).")] = 4096,
        concurrency: Annotated[int, typer.Option("--concurrency", help="Sequences served at once.")] = 1,
        output_tokens: Annotated[
            int | None,
            typer.Option(
                "--output-tokens",
                help="Generated tokens per request, part of --context (default: a quarter, at most 1,024).",
            ),
        ] = None,
        max_num_batched_tokens: Annotated[
            int | None, typer.Option("--max-num-batched-tokens", help="Prefill chunk (default: the engine's).")
        ] = None,
        max_num_seqs: Annotated[
            int | None,
            typer.Option(
                "--max-num-seqs",
                help="Sequences the engine schedules at once; vLLM profiles its sampler over them "
                     "(default: the engine's).",
            ),
        ] = None,
        requests: Annotated[
            int | None,
            typer.Option(
                "--requests",
                help="Throughput of a benchmark run of N prompts sent at once "
                     "(vllm bench serve --num-prompts N --request-rate inf), its drain included; "
                     "default: steady state.",
            ),
        ] = None,
        engine: Annotated[
            str, typer.Option("--engine", help="vllm | sglang | trtllm | llamacpp | transformers")
        ] = "vllm",
        engine_version: Annotated[
            str,
            typer.Option(
                "--engine-version",
                help="The engine's version, e.g. 0.11 (default: the newest rules, data/engines.toml).",
            ),
        ] = "",
        mem_fraction: Annotated[
            float | None,
            typer.Option(
                "--mem-fraction",
                help="SGLang --mem-fraction-static / TRT-LLM kv_cache_free_gpu_memory_fraction "
                     "(default: the engine's).",
            ),
        ] = None,
        cpu_mem_bw: Annotated[
            float | None,
            typer.Option(
                "--cpu-mem-bw",
                help="Host memory GB/s for llama.cpp layers on the CPU "
                     "(default: by the card's usual host, data/efficiency.toml).",
            ),
        ] = None,
        gpu_memory_utilization: Annotated[
            float, typer.Option("--gpu-memory-utilization", help="vLLM's memory fraction.")
        ] = 0.9,
        tp: Annotated[
            int, typer.Option("--tp", help="Tensor parallel degree (default: all GPUs for serving, 1 for training).")
        ] = 0,
        pp: Annotated[int, typer.Option("--pp", help="Pipeline parallel degree.")] = 1,
        ep: Annotated[
            int,
            typer.Option(
                "--ep", help="Training: expert parallel degree for MoE models (divides the data-parallel GPUs)."
            ),
        ] = 1,
        virtual_stages: Annotated[
            int,
            typer.Option(
                "--virtual-stages",
                help="Training: model chunks per pipeline stage (interleaved 1F1B; "
                     "Megatron --num-layers-per-virtual-pipeline-stage).",
            ),
        ] = 1,
        tp_overlap: Annotated[
            bool,
            typer.Option(
                "--tp-overlap",
                help="Training: hide TP communication under compute "
                     "(Megatron --tp-comm-overlap; torchtitan AsyncTP, with --compile).",
            ),
        ] = False,
        offload: Annotated[str, typer.Option("--offload", help="none | cpu | nvme")] = "none",
        cpu_offload_gb: Annotated[
            float, typer.Option("--cpu-offload-gb", help="vLLM: GiB of weights per GPU kept in CPU RAM.")
        ] = 0.0,
        gpu_layers: Annotated[
            int | None, typer.Option("--gpu-layers", help="llama.cpp -ngl: layers on the GPU.")
        ] = None,
        margin: Annotated[
            bool, typer.Option("--margin", help="Also apply the x2 rule for online serving (shown apart).")
        ] = False,
        seq_len: Annotated[int, typer.Option("--seq-len", help="Training sequence length.")] = 2048,
        micro_batch: Annotated[int, typer.Option("--micro-batch", help="Training sequences per GPU per step.")] = 1,
        grad_accum: Annotated[int, typer.Option("--grad-accum", help="Micro-batches per optimizer step.")] = 1,
        replicas: Annotated[
            int, typer.Option("--replicas", help="Serving engines behind a load balancer (each on --gpus).")
        ] = 1,
        prices: Annotated[
            str | None, typer.Option("--prices", help="A price file (TOML, the config-dir format).")
        ] = None,
        framework: Annotated[
            str,
            typer.Option(
                "--framework",
                help="Training framework whose defaults apply: auto (LLaMA-Factory for lora/qlora/full, "
                     "hf for pretrain) | hf | hf-liger | llama-factory | unsloth | torchtune | deepspeed | "
                     "torchtitan | megatron | ms-swift",
            ),
        ] = "auto",
        optimizer: Annotated[
            str | None,
            typer.Option(
                "--optimizer", help="adamw | adamw8bit | paged-adamw8bit | sgd | adafactor (default: the framework's)"
            ),
        ] = None,
        grad_ckpt: Annotated[
            str | None,
            typer.Option("--grad-ckpt", help="none | full | selective | op-sac | every-N (default: the framework's)"),
        ] = None,
        loss: Annotated[
            str | None, typer.Option("--loss", help="full | chunked | fused cross-entropy (default: the framework's)")
        ] = None,
        activation_offload: Annotated[
            bool | None,
            typer.Option("--activation-offload/--no-activation-offload", help="Offload saved activations to CPU RAM."),
        ] = None,
        optimizer_in_backward: Annotated[
            bool | None,
            typer.Option(
                "--optimizer-in-backward/--no-optimizer-in-backward",
                help="Step each parameter as its gradient is ready (no full gradient buffer).",
            ),
        ] = None,
        compile_: Annotated[
            bool | None, typer.Option("--compile/--no-compile", help="torch.compile the model.")
        ] = None,
        packing: Annotated[
            bool | None, typer.Option("--packing/--no-packing", help="Pack sequences to the full --seq-len.")
        ] = None,
        float8: Annotated[
            bool | None, typer.Option("--float8/--no-float8", help="Float8 training matmuls (Hopper, Ada, Blackwell).")
        ] = None,
        flash_attention: Annotated[bool, typer.Option("--flash-attention/--no-flash-attention")] = True,
        zero: Annotated[int, typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP).")] = 0,
        lora_rank: Annotated[int, typer.Option("--lora-rank")] = 16,
        lora_targets: Annotated[
            str, typer.Option("--lora-targets", help="Comma list of q,k,v,o,gate,up,down or 'all'.")
        ] = "all",
        nodes: Annotated[int, typer.Option("--nodes", help="Nodes (training).")] = 1,
        inter_node_gbps: Annotated[
            float | None,
            typer.Option(
                "--inter-node-gbps",
                help="Network per node between nodes, Gb/s (default: the platform's reference fabric, "
                     "e.g. 1600 for HGX A100, 3200 for HGX H100; 100 for PCIe servers).",
            ),
        ] = None,
        allow_long_context: Annotated[
            bool, typer.Option("--allow-long-context", help="Allow --context above the model's maximum.")
        ] = False,
        hub: Annotated[str, typer.Option("--hub", help="auto | hf | modelscope")] = "auto",
        cards_file: Annotated[str | None, typer.Option("--cards", help="Extra card data file (TOML).")] = None,
        calibration: Annotated[
            str | None, typer.Option("--calibration", help="A `gpuwise verify --save` file: use its measured rates.")
        ] = None,
        provider: Annotated[
            str | None, typer.Option("--provider", help="Price provider (see `gpuwise prices`).")
        ] = None,
        billing: Annotated[str, typer.Option("--billing", help="hourly | monthly | spot")] = "hourly",
        tokens: Annotated[
            float | None, typer.Option("--tokens", help="Training tokens, for time and cost per run.")
        ] = None,
        explain: Annotated[bool, typer.Option("--explain", help="Show the formula behind each line.")] = False,
        plot: Annotated[
            str | None, typer.Option("--plot", help="Also draw the memory chart to out.png or out.svg (gpuwise[plot]).")
        ] = None,
        json_out: JsonOpt = False,
        lang: LangOpt = None,
        width: Annotated[
            int | None, typer.Option("--width", help="Image/video models: width in pixels (default: the model's).")
        ] = None,
        height: Annotated[int | None, typer.Option("--height", help="Image/video models: height in pixels.")] = None,
        frames: Annotated[int | None, typer.Option("--frames", help="Video models: frames (4k + 1, e.g. 81).")] = None,
        steps: Annotated[int | None, typer.Option("--steps", help="Image/video models: sampling steps.")] = None,
        guidance: Annotated[
            float | None,
            typer.Option(
                "--guidance", help="Image/video models: guidance scale (CFG runs a negative prompt when > 1)."
            ),
        ] = None,
        images: Annotated[int, typer.Option("--images", help="Image/video models: outputs per prompt (batch).")] = 1,
        te_weights: Annotated[
            str,
            typer.Option(
                "--te-weights",
                help="Image/video models: the large text encoder's precision (bf16 | fp8 | nf4 | gguf:Q8_0 ...).",
            ),
        ] = "auto",
        vae_tiling: Annotated[bool, typer.Option("--vae-tiling", help="Image/video models: decode in tiles.")] = False,
        vae_slicing: Annotated[
            bool, typer.Option("--vae-slicing", help="Image models: decode a batch one image at a time.")
        ] = False,
        te_cpu: Annotated[
            bool, typer.Option("--te-cpu", help="Image/video models: run the text encoders on the CPU.")
        ] = False,
        runtime: Annotated[
            str,
            typer.Option(
                "--runtime",
                help="Image/video models: diffusers | comfyui "
                     "(with --offload: none | model | sequential | group | lowvram).",
            ),
        ] = "diffusers",
        os_name: Annotated[
            str, typer.Option("--os", help="Image/video models: linux | windows (what happens when it does not fit).")
        ] = "linux",
    ) -> None:
        """Memory per GPU, a fit verdict, speed and cost (and the nearest fixes when it does not fit). \
估算每卡显存、速度与成本。"""
        from gpuwise.service import EstimateRequest, estimate_json

        req = EstimateRequest(
            model=src, card=card, gpus=gpus, task=task, weights=weights, kv_dtype=kv_dtype, context=context,
            concurrency=concurrency, output_tokens=output_tokens,
            max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, engine=engine,
            requests=requests,
            engine_version=engine_version,
            mem_fraction=mem_fraction, cpu_mem_bw=cpu_mem_bw,
            gpu_memory_utilization=gpu_memory_utilization, tp=tp, pp=pp, ep=ep, virtual_stages=virtual_stages,
            tp_overlap=tp_overlap, offload=offload,
            cpu_offload_gb=cpu_offload_gb, gpu_layers=gpu_layers, margin=margin, seq_len=seq_len,
            micro_batch=micro_batch, grad_accum=grad_accum, replicas=replicas, prices_file=prices,
            framework=framework, optimizer=optimizer, grad_ckpt=grad_ckpt, loss=loss,
            activation_offload=activation_offload, optimizer_in_backward=optimizer_in_backward,
            compile=compile_, packing=packing, float8=float8, flash_attention=flash_attention, zero=zero,
            lora_rank=lora_rank, lora_targets=lora_targets,
            nodes=nodes, allow_long_context=allow_long_context, hub=hub, cards_file=cards_file,
            calibration=calibration, provider=provider, billing=billing, train_tokens=tokens,
            inter_node_gbps=inter_node_gbps,
            width=width, height=height, frames=frames, steps=steps, guidance=guidance, images=images,
            te_weights=te_weights, vae_tiling=vae_tiling, vae_slicing=vae_slicing, te_cpu=te_cpu,
            runtime=runtime, os=os_name)
        from gpuwise.report.plot import with_plot

        run_command(json_out, lang, lambda: with_plot(estimate_json(req), plot, lang),
                    lambda r, lg: _render_diffusion(r, lg) if r.get("kind") == "diffusion"
                    else _render_with_images(r, lg, explain))


def _render_diffusion(r: dict[str, Any], lang: Lang) -> None:
    from gpuwise.cli.image_cmd import render_diffusion

    render_diffusion(r, lang)


def _render_with_images(r: dict[str, Any], lang: Lang, explain: bool) -> None:
    """An LLM estimate, plus the image tokens of a vision-language model shown images."""
    render_estimate(r, lang, explain)
    if r.get("vision"):
        from rich.console import Console

        from gpuwise.cli.image_cmd import vision_line

        Console(highlight=False).print(vision_line(r, lang), markup=False)
