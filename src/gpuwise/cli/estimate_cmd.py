"""`gpuwise estimate SRC --card CARD ...`: per-GPU memory, fit verdict, and the nearest fixes.
The words on screen are gpuwise.cli.estimate_view's."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuwise.cli.common import DoraOption, JsonOpt, LangOpt, ModulesToSaveOption, PaddingFreeOption, run_command


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
        replay: Annotated[
            str | None,
            typer.Option(
                "--replay",
                help="Replay a recorded run's own prompts: the JSON vLLM's benchmark saves with "
                     "--save-result (its input_lens and output_lens), sent at once.",
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
        cp: Annotated[
            int,
            typer.Option("--cp", help="Training: context parallel degree (each sequence split over cp GPUs; "
                                      "torchtitan context_parallel_degree, Megatron --context-parallel-size, "
                                      "ms-swift --sequence_parallel_size)."),
        ] = 1,
        cp_kind: Annotated[
            str,
            typer.Option("--cp-kind", help="Training: how --cp moves keys and values: allgather (torch "
                                           "context_parallel, torchtitan), ring (Megatron / TE, ring attention) "
                                           "or ulysses (DeepSpeed-Ulysses all-to-all)."),
        ] = "ring",
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
        padding_free: PaddingFreeOption = None,
        float8: Annotated[
            bool | None, typer.Option("--float8/--no-float8", help="Float8 training matmuls (Hopper, Ada, Blackwell).")
        ] = None,
        flash_attention: Annotated[bool, typer.Option("--flash-attention/--no-flash-attention")] = True,
        zero: Annotated[
            int | None,
            typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP). Default: the framework's multi-GPU sharding."),
        ] = None,
        lora_rank: Annotated[int, typer.Option("--lora-rank")] = 16,
        lora_targets: Annotated[
            str, typer.Option("--lora-targets", help="Comma list of q,k,v,o,gate,up,down or 'all'.")
        ] = "all",
        dora: DoraOption = False,
        modules_to_save: ModulesToSaveOption = "",
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
            requests=requests, replay=replay,
            engine_version=engine_version,
            mem_fraction=mem_fraction, cpu_mem_bw=cpu_mem_bw,
            gpu_memory_utilization=gpu_memory_utilization, tp=tp, pp=pp, ep=ep, virtual_stages=virtual_stages,
            cp=cp, cp_kind=cp_kind, tp_overlap=tp_overlap, offload=offload,
            cpu_offload_gb=cpu_offload_gb, gpu_layers=gpu_layers, margin=margin, seq_len=seq_len,
            micro_batch=micro_batch, grad_accum=grad_accum, replicas=replicas, prices_file=prices,
            framework=framework, optimizer=optimizer, grad_ckpt=grad_ckpt, loss=loss,
            activation_offload=activation_offload, optimizer_in_backward=optimizer_in_backward,
            compile=compile_, packing=packing, padding_free=padding_free, float8=float8,
            flash_attention=flash_attention, zero=zero,
            lora_rank=lora_rank, lora_targets=lora_targets, dora=dora, modules_to_save=modules_to_save,
            nodes=nodes, allow_long_context=allow_long_context, hub=hub, cards_file=cards_file,
            calibration=calibration, provider=provider, billing=billing, train_tokens=tokens,
            inter_node_gbps=inter_node_gbps,
            width=width, height=height, frames=frames, steps=steps, guidance=guidance, images=images,
            te_weights=te_weights, vae_tiling=vae_tiling, vae_slicing=vae_slicing, te_cpu=te_cpu,
            runtime=runtime, os=os_name)
        from gpuwise.cli.estimate_view import render_diffusion_estimate, render_with_images
        from gpuwise.report.plot import with_plot

        run_command(json_out, lang, lambda: with_plot(estimate_json(req), plot, lang),
                    lambda r, lg: render_diffusion_estimate(r, lg) if r.get("kind") == "diffusion"
                    else render_with_images(r, lg, explain))


