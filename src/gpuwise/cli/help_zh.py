"""Chinese for the option help that is written in English only (most of `estimate` and `plan`).

Keyed by the English help text, so one translation serves every command that shares it.
Option help that already carries its Chinese inline ("How many GPUs you rented. 租用的 GPU
数量。") needs no entry. tests/test_i18n_help.py fails when an option's help has neither.
Flags, values and file names stay as they are typed.
"""

from __future__ import annotations

HELP_ZH: dict[str, str] = {
    # shared
    "Show the version and exit.": "显示版本并退出。",
    "Show this message and exit.": "显示本帮助并退出。",
    "Print the result as JSON (stable schema).": "以 JSON 输出结果（结构稳定）。",
    "Language of human output: zh or en (default: from the locale).": "界面语言：zh 或 en（默认按系统区域设置）。",
    # model
    "Preset, HF id, config.json, model folder, GGUF file or a size like 7b.":
        "预设名、HF 仓库 id、config.json、模型文件夹、GGUF 文件，或 7b 这样的规模。",
    "Where hub ids are looked up: auto, hf or modelscope.": "仓库 id 的查找来源：auto、hf 或 modelscope。",
    "Hub revision.": "仓库版本（revision）。",
    "List the presets.": "列出预设模型。",
    # estimate
    "Preset, HF id, config.json, model folder, GGUF file, or a size like 7b.":
        "预设名、HF 仓库 id、config.json、模型文件夹、GGUF 文件，或 7b 这样的规模。",
    "GPU card, e.g. H100-SXM, 4090, A100-80G.": "显卡型号，例如 H100-SXM、4090、A100-80G。",
    "GPUs per node.": "每个节点的 GPU 数。",
    "infer | full | lora | qlora | pretrain": "任务：infer | full | lora | qlora | pretrain",
    "auto | bf16 | fp16 | fp8 | int8 | int4 | nf4 | gguf:<TYPE>":
        "权重精度：auto | bf16 | fp16 | fp8 | int8 | int4 | nf4 | gguf:<TYPE>",
    "auto | fp16 | bf16 | fp8 | int8 | q8_0 | q4_0": "KV 缓存精度：auto | fp16 | bf16 | fp8 | int8 | q8_0 | q4_0",
    "Tokens per sequence (prompt + output).": "每条序列的 token 数（提示 + 输出）。",
    "Sequences served at once.": "同时服务的序列数。",
    "Generated tokens per request, part of --context (default: a quarter, at most 1,024).":
        "每个请求生成的 token 数，计入 --context（默认四分之一，最多 1,024）。",
    "Prefill chunk (default: the engine's).": "预填充分块大小（默认按引擎）。",
    "Sequences the engine schedules at once; vLLM profiles its sampler over them (default: the engine's).":
        "引擎同时调度的序列数；vLLM 按它探测采样器显存（默认按引擎）。",
    "Throughput of a benchmark run of N prompts sent at once (vllm bench serve --num-prompts N "
    "--request-rate inf), its drain included; default: steady state.":
        "一次性发送 N 个提示的基准测试吞吐（vllm bench serve --num-prompts N --request-rate inf），"
        "含收尾阶段；默认为稳态吞吐。",
    "Replay a recorded run's own prompts: the JSON vLLM's benchmark saves with --save-result "
    "(its input_lens and output_lens), sent at once.":
        "重放一次已记录测试的提示：vLLM 基准测试用 --save-result 保存的 JSON（其 input_lens 与 "
        "output_lens），一次性发送。",
    "vllm | sglang | trtllm | llamacpp | transformers": "推理引擎：vllm | sglang | trtllm | llamacpp | transformers",
    "The engine's version, e.g. 0.11 (default: the newest rules, data/engines.toml).":
        "引擎版本，例如 0.11（默认用最新规则，见 data/engines.toml）。",
    "SGLang --mem-fraction-static / TRT-LLM kv_cache_free_gpu_memory_fraction (default: the engine's).":
        "SGLang --mem-fraction-static / TRT-LLM kv_cache_free_gpu_memory_fraction（默认按引擎）。",
    "Host memory GB/s for llama.cpp layers on the CPU (default: by the card's usual host, data/efficiency.toml).":
        "llama.cpp 放在 CPU 上的层所用的主机内存带宽 GB/s（默认按该卡常见主机，见 data/efficiency.toml）。",
    "vLLM's memory fraction.": "vLLM 的显存占用比例。",
    "Tensor parallel degree (default: all GPUs for serving, 1 for training).":
        "张量并行度（默认：推理用全部 GPU，训练为 1）。",
    "Pipeline parallel degree.": "流水线并行度。",
    "Training: expert parallel degree for MoE models (divides the data-parallel GPUs).":
        "训练：MoE 模型的专家并行度（在数据并行的 GPU 中划分）。",
    "Training: model chunks per pipeline stage (interleaved 1F1B; Megatron --num-layers-per-virtual-pipeline-stage).":
        "训练：每个流水线级的模型分块数（交错 1F1B；Megatron --num-layers-per-virtual-pipeline-stage）。",
    "Training: context parallel degree (each sequence split over cp GPUs; torchtitan context_parallel_degree, "
    "Megatron --context-parallel-size, ms-swift --sequence_parallel_size).":
        "训练：上下文并行度（每条序列切分到 cp 张卡上；torchtitan context_parallel_degree、"
        "Megatron --context-parallel-size、ms-swift --sequence_parallel_size）。",
    "Training: how --cp moves keys and values: allgather (torch context_parallel, torchtitan), ring (Megatron / "
    "TE, ring attention) or ulysses (DeepSpeed-Ulysses all-to-all).":
        "训练：--cp 如何在卡间传递 K 与 V：allgather（torch context_parallel，torchtitan）、ring（Megatron / "
        "TE，环形注意力）或 ulysses（DeepSpeed-Ulysses all-to-all）。",
    "Training: hide TP communication under compute (Megatron --tp-comm-overlap; torchtitan AsyncTP, with --compile).":
        "训练：把 TP 通信与计算重叠（Megatron --tp-comm-overlap；torchtitan AsyncTP，需 --compile）。",
    "none | cpu | nvme": "卸载：none | cpu | nvme",
    "vLLM: GiB of weights per GPU kept in CPU RAM.": "vLLM：每卡放在 CPU 内存中的权重 GiB 数。",
    "llama.cpp -ngl: layers on the GPU.": "llama.cpp -ngl：放在 GPU 上的层数。",
    "Also apply the x2 rule for online serving (shown apart).": "另按在线服务的 ×2 经验规则计算（单独显示）。",
    "Training sequence length.": "训练序列长度。",
    "Training sequences per GPU per step.": "训练时每卡每步的序列数。",
    "Micro-batches per optimizer step.": "每个优化器步的微批数（梯度累积）。",
    "Serving engines behind a load balancer (each on --gpus).": "负载均衡后面的推理引擎实例数（每个占 --gpus 张卡）。",
    "A price file (TOML, the config-dir format).": "价格文件（TOML，与配置目录中的格式相同）。",
    "Training framework whose defaults apply: auto (LLaMA-Factory for lora/qlora/full, hf for pretrain) | "
    "hf | hf-liger | llama-factory | unsloth | torchtune | deepspeed | torchtitan | megatron | ms-swift":
        "采用其默认设置的训练框架：auto（lora/qlora/full 用 LLaMA-Factory，pretrain 用 hf）| hf | hf-liger | "
        "llama-factory | unsloth | torchtune | deepspeed | torchtitan | megatron | ms-swift",
    "adamw | adamw8bit | paged-adamw8bit | sgd | adafactor (default: the framework's)":
        "优化器：adamw | adamw8bit | paged-adamw8bit | sgd | adafactor（默认按框架）",
    "none | full | selective | op-sac | every-N (default: the framework's)":
        "激活检查点：none | full | selective | op-sac | every-N（默认按框架）",
    "full | chunked | fused cross-entropy (default: the framework's)":
        "交叉熵损失：full | chunked | fused（默认按框架）",
    "Offload saved activations to CPU RAM.": "把保存的激活卸载到 CPU 内存。",
    "Step each parameter as its gradient is ready (no full gradient buffer).":
        "每个参数的梯度一就绪就更新该参数（不保留完整梯度缓冲）。",
    "torch.compile the model.": "用 torch.compile 编译模型。",
    "Pack sequences to the full --seq-len.": "把样本拼接到完整的 --seq-len。",
    "Concatenate a micro-batch's samples into one unpadded row (flash-attention varlen; ms-swift --padding_free, "
    "TRL padding_free). Sized at --micro-batch x --seq-len tokens, the most the row holds.":
        "把一个微批的样本拼成一行、不做填充（flash-attention varlen；ms-swift --padding_free、TRL padding_free）。"
        "按 --micro-batch × --seq-len 个 token 估算，即该行最多容纳的 token 数。",
    "LoRA as DoRA (PEFT use_dora): a trained magnitude per output row and the merged weight's norm in every forward.":
        "以 DoRA 方式训练 LoRA（PEFT use_dora）：每个输出行一个可训练幅值，每次前向计算合并权重的范数。",
    "Comma list of embed_tokens,lm_head trained in full beside LoRA (PEFT modules_to_save; needed for new special "
    "tokens).":
        "逗号分隔的 embed_tokens,lm_head，在 LoRA 之外全量训练（PEFT modules_to_save；新增特殊 token 时需要）。",
    "Float8 training matmuls (Hopper, Ada, Blackwell).": "训练矩阵乘使用 Float8（Hopper、Ada、Blackwell）。",
    "ZeRO stage 0-3 (3 = FSDP). Default: the framework's multi-GPU sharding.":
        "ZeRO 阶段 0-3（3 = FSDP）。默认：所选框架多卡时的切分方式。",
    "Comma list of q,k,v,o,gate,up,down or 'all'.": "逗号分隔的 q,k,v,o,gate,up,down，或 'all'。",
    "Nodes (training).": "节点数（训练）。",
    "Network per node between nodes, Gb/s (default: the platform's reference fabric, e.g. 1600 for HGX A100, "
    "3200 for HGX H100; 100 for PCIe servers).":
        "节点间每节点网络带宽 Gb/s（默认按平台参考网络，例如 HGX A100 为 1600，HGX H100 为 3200；"
        "PCIe 服务器为 100）。",
    "Allow --context above the model's maximum.": "允许 --context 超过模型的最大上下文。",
    "auto | hf | modelscope": "模型仓库：auto | hf | modelscope",
    "Extra card data file (TOML).": "额外的显卡数据文件（TOML）。",
    "A `gpuwise verify --save` file: use its measured rates.":
        "`gpuwise verify --save` 保存的文件：使用其中的实测速率。",
    "Price provider (see `gpuwise prices`).": "价格来源（见 `gpuwise prices`）。",
    "hourly | monthly | spot": "计费方式：hourly | monthly | spot",
    "Training tokens, for time and cost per run.": "训练 token 总数，用于估算整次训练的用时与成本。",
    "Show the formula behind each line.": "显示每一行背后的公式。",
    "Also draw the memory chart to out.png or out.svg (gpuwise[plot]).":
        "另把显存图画到 out.png 或 out.svg（需 gpuwise[plot]）。",
    "Image/video models: width in pixels (default: the model's).": "图像/视频模型：宽度像素（默认按模型）。",
    "Image/video models: height in pixels.": "图像/视频模型：高度像素。",
    "Video models: frames (4k + 1, e.g. 81).": "视频模型：帧数（4k + 1，例如 81）。",
    "Image/video models: sampling steps.": "图像/视频模型：采样步数。",
    "Image/video models: guidance scale (CFG runs a negative prompt when > 1).":
        "图像/视频模型：引导系数（大于 1 时 CFG 会多跑一遍负向提示）。",
    "Image/video models: outputs per prompt (batch).": "图像/视频模型：每个提示的输出数（批大小）。",
    "Image/video models: the large text encoder's precision (bf16 | fp8 | nf4 | gguf:Q8_0 ...).":
        "图像/视频模型：大文本编码器的精度（bf16 | fp8 | nf4 | gguf:Q8_0 ...）。",
    "Image/video models: decode in tiles.": "图像/视频模型：分块解码。",
    "Image models: decode a batch one image at a time.": "图像模型：一批图逐张解码。",
    "Image/video models: run the text encoders on the CPU.": "图像/视频模型：在 CPU 上运行文本编码器。",
    "Image/video models: diffusers | comfyui (with --offload: none | model | sequential | group | lowvram).":
        "图像/视频模型：diffusers | comfyui（配合 --offload：none | model | sequential | group | lowvram）。",
    "Image/video models: linux | windows (what happens when it does not fit).":
        "图像/视频模型：linux | windows（放不下时的表现不同）。",
    # plan
    "Preset, HF id, config.json, model folder, GGUF file, or a size like 70b.":
        "预设名、HF 仓库 id、config.json、模型文件夹、GGUF 文件，或 70b 这样的规模。",
    "auto (checkpoint or FP8) | any (4-bit too) | bf16 | fp8 | int4 | ...":
        "权重：auto（检查点精度或 FP8）| any（也试 4-bit）| bf16 | fp8 | int4 | ...",
    "Generated tokens per request, part of --context.": "每个请求生成的 token 数，计入 --context。",
    "Serving engines behind a load balancer (default: searched).": "负载均衡后面的推理引擎实例数（默认自动搜索）。",
    "Serving engine whose rules size the plans: vllm | sglang | trtllm | llamacpp | transformers.":
        "按哪个推理引擎的规则给方案定规模：vllm | sglang | trtllm | llamacpp | transformers。",
    "Engine version, e.g. 0.11 (default: the newest rules gpuwise has).":
        "引擎版本，例如 0.11（默认用 gpuwise 最新的规则）。",
    "Largest micro-batch per GPU to try.": "每卡尝试的最大微批。",
    "Fixes the global batch at micro-batch x this.": "把全局批固定为 微批 × 该值。",
    "Sequences per optimizer step, kept fixed.": "每个优化器步的序列数（固定不变）。",
    "Training framework whose defaults apply (see `gpuwise estimate --help`; default auto).":
        "采用其默认设置的训练框架（见 `gpuwise estimate --help`；默认 auto）。",
    "Default: the framework's.": "默认按框架。",
    "auto | none | full | selective | op-sac | every-N":
        "激活检查点：auto | none | full | selective | op-sac | every-N",
    "Per hour (or per run with --tokens).": "每小时预算（给出 --tokens 时为整次训练预算）。",
    "tokens/s, all users.": "token/s，所有用户合计。",
    "seconds": "秒",
    "ecc,nvlink": "必须具备：ecc,nvlink",
    "hourly | daily | weekly | monthly | spot": "计费方式：hourly | daily | weekly | monthly | spot",
    "Comma list of cards to consider.": "逗号分隔的候选显卡。",
    "Also rank ROCm and Ascend (CANN) cards.": "也参与排名 ROCm 与昇腾（CANN）显卡。",
    "cost | speed | cost-per-token": "优化目标：cost | speed | cost-per-token",
    "validate | stabilise | scale": "阶段：validate | stabilise | scale",
    "Training tokens, for the per-run cost.": "训练 token 总数，用于整次训练成本。",
    "Gb/s per node (default: the platform's reference fabric).": "每节点 Gb/s（默认按平台参考网络）。",
    "Checkpoint the exports start, e.g. an AWQ repo of the model.": "导出配置启动的检查点，例如该模型的 AWQ 仓库。",
    "Training script the exports run (relative to --workdir).": "导出配置运行的训练脚本（相对于 --workdir）。",
    "Folder the exports ship to the machine.": "导出配置上传到机器的文件夹。",
    "Container image for the exports.": "导出配置使用的容器镜像。",
    "Write the plan JSON to this file (read back by --from).": "把方案 JSON 写入该文件（可用 --from 读回）。",
    "With --emit: export a saved plan instead of planning.": "配合 --emit：导出已保存的方案，而不重新选型。",
    "Also draw memory and cost-vs-throughput charts to out.png or out.svg (gpuwise[plot]).":
        "另把显存图与成本-吞吐图画到 out.png 或 out.svg（需 gpuwise[plot]）。",
    "vllm | sglang | trtllm | docker | framework (the training framework's own launch and config) | deepspeed | "
    "accelerate | torchrun | skypilot | dstack | k8s | ray":
        "导出：vllm | sglang | trtllm | docker | framework（训练框架自己的启动命令与配置）| deepspeed | "
        "accelerate | torchrun | skypilot | dstack | k8s | ray",
    "Image/video models: guidance scale.": "图像/视频模型：引导系数。",
    "Image/video models: outputs per prompt.": "图像/视频模型：每个提示的输出数。",
    "Image/video models: one output every N seconds at most.": "图像/视频模型：每个输出最多 N 秒。",
    "Image/video models: linux | windows.": "图像/视频模型：linux | windows。",
}

# Help written in both languages inline ("How many GPUs you rented. 租用的 GPU 数量。") whose Chinese half
# is shorter than its English: on a Chinese help page the whole of it in Chinese, keyed by the English
# half (helpfmt._in_lang); help not listed here is shown with both halves, as written.
INLINE_ZH: dict[str, str] = {
    # command descriptions (the top of each help page)
    "Size, speed, cost and verify GPU servers for AI work.":
        "为 AI 任务选卡、估算显存、速度与成本，并验收 GPU 服务器。",
    "Show a model's architecture: parameters, layers, KV bytes per token.":
        "查看模型结构：参数量、层数、每 token 的 KV 字节数。",
    "Memory per GPU, a fit verdict, speed and cost (and the nearest fixes when it does not fit).":
        "估算每卡显存、是否放得下、速度与成本（放不下时给出最近的修改办法）。",
    "Rank card x count x precision x parallelism, with a reason for every rejection.":
        "按显卡 × 卡数 × 精度 × 并行方式给方案排名，并说明每个落选方案的原因。",
    "Serve verify/fleet results for Prometheus to scrape (beside DCGM exporter).":
        "把 verify/fleet 验收结果提供给 Prometheus 抓取（与 DCGM exporter 并列）。",
    "Choose MIG profiles for inference services and pack them onto the fewest GPUs; print the nvidia-smi "
    "lines, Kubernetes resources and a mig-parted config. Training is refused (use whole GPUs); MPS and "
    "time-slicing are the alternatives for cards without MIG.":
        "为推理服务选择 MIG 切片并装到最少的 GPU 上；输出 nvidia-smi 命令、Kubernetes 资源与 mig-parted "
        "配置。不接受训练任务（请用整卡）；没有 MIG 的显卡可改用 MPS 或时间片。",
    "Place a pipeline's models (LLM, embedder, reranker, diffusion components) onto N GPUs: per-GPU memory, "
    "transfers between GPUs, the slowest stage's throughput, and the settings (device_map / .to('cuda:N'), "
    "vLLM instances per GPU, ComfyUI-MultiGPU loaders).":
        "把流水线中的多个模型（LLM、嵌入、重排、扩散组件）放到 N 张 GPU 上：每卡显存、卡间传输、最慢阶段的"
        "吞吐，以及对应设置（device_map / .to('cuda:N')、每卡的 vLLM 实例、ComfyUI-MultiGPU 加载器）。",
    "Run jobs that declare their GPU memory (or have gpuwise estimate it) on a Ray cluster, or print the "
    "Kubernetes (HAMi) or `ray job submit` form.":
        "按任务声明的显存（或由 gpuwise 估算）把任务提交到 Ray 集群运行，或输出 Kubernetes（HAMi）或 "
        "`ray job submit` 形式。",
    "Judge verify evidence from many nodes against the datasheet and against each other.":
        "评判多个节点的验收数据：对照规格，并互相比较。",
    "Run verify on every GPU node of a Ray cluster (one task per node, pinned), then judge the fleet.":
        "在 Ray 集群的每个 GPU 节点上运行验收（每节点一个固定任务），再评判整个机群。",
    # cards
    "A card id, alias or nvidia-smi name (e.g. 4090, A100-SXM-80GB).":
        "显卡 id、别名或 nvidia-smi 名称（如 4090、A100-SXM-80GB）。",
    "Only cards with at least this many GB.": "只列显存不少于该值（GB）的卡。",
    "Only cards with NVLink (SXM or bridge).": "只列带 NVLink 的卡（SXM 或桥接）。",
    "nvidia, amd or huawei.": "厂商：nvidia、amd 或 huawei。",
    "bandwidth, memory, bf16, fp8, name or price.": "排序方式：bandwidth、memory、bf16、fp8、name 或 price。",
    "Extra card file (TOML), repeatable; overrides by id.": "额外的显卡数据文件（TOML），可重复；按 id 覆盖。",
    "Extra price file (TOML), repeatable.": "额外的价格文件（TOML），可重复。",
    # verify
    "The card you rented, e.g. H100-SXM (default: recognised).": "租用的显卡型号，如 H100-SXM（默认：自动识别）。",
    "Contract file (TOML), see docs/verify.md.": "合同文件（TOML），见 docs/verify.md。",
    "Default: a 20 s all-GPU load window and short benchmarks (~1 min).":
        "默认：所有 GPU 同时负载 20 秒并运行简短基准测试（约 1 分钟）。",
    "A 5-minute all-GPU load window and larger benchmarks (~6-7 min).":
        "所有 GPU 同时负载 5 分钟并运行更大的基准测试（约 6-7 分钟）。",
    "No benchmarks: inventory, health and links only.": "不跑基准测试：只查清单、健康状态与互联。",
    "Judge a saved raw JSON instead of this machine (no GPU needed).":
        "评判已保存的原始 JSON，而不是本机（无需 GPU）。",
    "Write the raw measurements as JSON.": "把原始测量数据保存为 JSON。",
    "Write a report: report.md or report.html.": "生成报告：report.md 或 report.html。",
    "Write the evidence bundle (raw.json, verdict.json, report.md/html, SHA256SUMS) into this folder.":
        "把证据包（raw.json、verdict.json、report.md/html、SHA256SUMS）写入该目录。",
    "Seconds of the sustained all-GPU load window (quick 20, full 300).":
        "所有 GPU 持续负载的秒数（快速 20，完整 300）。",
    # serve
    "Plan worker processes in all (default: one per core), warmed before the server answers; estimates run "
    "apart, in two processes of their own, never behind a plan.":
        "方案计算进程总数（默认每核一个），服务开始应答前预热；估算在另外两个专用进程中运行，从不排在方案之后。",
    "Server processes (event loops) in front of the plan workers (default 1: one queue for every worker; "
    "more only if one loop cannot keep up).":
        "方案计算进程前的服务进程（事件循环）数（默认 1：所有计算进程共用一个队列；只有一个循环跟不上时才加）。",
    "Seconds a request may queue for a worker: one expected to queue longer is answered 503 with Retry-After "
    "at once, one still queued then is answered so.":
        "请求等待计算进程的秒数上限：预计等待更久的请求立即返回 503（带 Retry-After），到时仍在排队的也返回 503。",
    "Seconds one request's work may run; past that it is 504 and its worker is replaced.":
        "单个请求的计算时限（秒）；超时返回 504，并替换其计算进程。",
    "Seconds a client has to send a whole request (slow clients are cut off).":
        "客户端发送完整请求的时限（秒），过慢即断开。",
    "Open connections per client address; idle ones are closed first.": "每个客户端地址的连接上限；先关闭空闲连接。",
    # exporter
    "Evidence files, or folders of them; re-read on every scrape.": "证据文件或其所在目录；每次抓取时重新读取。",
    "TCP port (DCGM exporter uses 9400).": "TCP 端口（DCGM exporter 用 9400）。",
    "Judge every node against this card (default: each node's recognised card).":
        "按此显卡评判所有节点（默认：各节点自动识别的显卡）。",
    # mig
    "Services file (TOML): card = \"...\" and [[service]] rows with model, context, concurrency, optional "
    "min_tokens_per_s / max_ttft_s / profile.":
        "服务文件（TOML）：card = \"...\" 与若干 [[service]] 行（model、context、concurrency，可选 "
        "min_tokens_per_s / max_ttft_s / profile）。",
    "The MIG card (overrides the file's).": "MIG 显卡（覆盖文件中的设置）。",
    "List the card's MIG profiles.": "列出该卡的 MIG 切片规格。",
    # place, submit, inventory
    "Pipeline file (TOML): [gpus] and [[stage]] rows.": "流水线文件（TOML）：[gpus] 与若干 [[stage]] 行。",
    "Job files (TOML).": "任务文件（TOML）。",
    "Ray cluster: HOST:PORT, ray://HOST:PORT or auto.": "Ray 集群地址：HOST:PORT、ray://HOST:PORT 或 auto。",
    "Print instead of running: k8s (a Job with HAMi nvidia.com/gpumem) or ray (`ray job submit`).":
        "只输出、不运行：k8s（带 HAMi nvidia.com/gpumem 的 Job）或 ray（`ray job submit`）。",
    "Seconds to wait for the cluster to answer.": "等待集群应答的秒数。",
    "Read the GPUs from saved verify evidence.": "从已保存的验收数据读取 GPU。",
    "Or name the card...": "或指定显卡型号……",
    "...and how many.": "……及其数量。",
    # prices
    "Only this provider.": "只列该价格来源。",
    "CSV file: SkyPilot vms.csv, gpuhunt catalog or plain CSV.": "CSV 文件：SkyPilot vms.csv、gpuhunt 目录或普通 CSV。",
    "auto, skypilot, gpuhunt, csv (default: from the header).":
        "文件格式：auto、skypilot、gpuhunt、csv（默认按表头判断）。",
    "Provider id for SkyPilot/gpuhunt rows, e.g. aws.": "SkyPilot/gpuhunt 行的价格来源 id，如 aws。",
    "Currency (SkyPilot/gpuhunt: USD; plain CSV default: CNY).": "货币（SkyPilot/gpuhunt 为 USD；普通 CSV 默认 CNY）。",
    "Date of the prices, YYYY-MM-DD (default: the file's date).": "价格日期，YYYY-MM-DD（默认：文件日期）。",
    "TOML file to write (default: $GPUWISE_CONFIG_DIR/prices-<provider>.toml).":
        "要写出的 TOML 文件（默认：$GPUWISE_CONFIG_DIR/prices-<provider>.toml）。",
    "NAME=CARD: price the file's NAME as this card, e.g. H100=h100-pcie; repeatable.":
        "NAME=CARD：把文件中的 NAME 按该显卡计价，如 H100=h100-pcie；可重复。",
    # fleet
    "Evidence files (`gpuwise verify --save`).": "证据文件（`gpuwise verify --save` 保存）。",
    "Write the report as HTML.": "把报告写成 HTML。",
    "Write the results in Prometheus text format.": "以 Prometheus 文本格式写出结果。",
    "Longer benchmarks on each node.": "在每个节点上运行更长的基准测试。",
    "Verify the nodes that have this Ray resource.": "只验收拥有该 Ray 资源的节点。",
    "Recorded evidence per node instead of measuring (dry run).": "用每个节点已记录的数据代替测量（演练）。",
    "Seconds for all nodes.": "所有节点合计的超时秒数。",
    "Seconds to wait for the cluster.": "等待集群的秒数。",
}

# Click's and Typer's own words in a help page.
HEADINGS_ZH = {"Usage": "用法", "Options": "选项", "Arguments": "参数", "Commands": "命令"}
EXTRA_ZH = (("[default: ", "[默认："), ("[required]", "[必填]"))
