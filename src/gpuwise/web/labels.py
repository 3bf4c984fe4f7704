"""Every label of the page in English and Chinese. Flags, JSON keys and configs stay English."""

from __future__ import annotations

from gpuwise.i18n import Lang

LABELS: dict[str, tuple[str, str]] = {
    "title": ("gpuwise: which GPU, how many, what it costs", "gpuwise：选什么卡、要几张、花多少钱"),
    "tagline": ("Does it fit, can it be fed, how fast, what does it cost. Memory in GiB (2^30 bytes).",
                "放得下吗、带宽够吗、有多快、花多少钱。显存单位为 GiB（2^30 字节）。"),
    "lang_switch": ("中文", "English"),
    "workload": ("Workload", "工作负载"),
    "model": ("Model", "模型"),
    "model_help": ("A preset, a size like 7b, or a Hugging Face / ModelScope id",
                   "预设名、7b 这样的规模，或 Hugging Face / ModelScope 模型 id"),
    "config": ("…or paste a config.json", "……或粘贴 config.json"),
    "config_help": ("Used instead of the model name when filled in.", "填写后将代替上面的模型名。"),
    "task": ("Task", "任务"),
    "weights": ("Precision (weights)", "精度（权重）"),
    "kv_dtype": ("KV cache precision", "KV 缓存精度"),
    "context": ("Context (tokens per sequence)", "上下文（每序列 token 数）"),
    "concurrency": ("Concurrent sequences", "并发序列数"),
    "inference": ("Inference", "推理"),
    "training": ("Training", "训练"),
    "seq_len": ("Sequence length", "序列长度"),
    "micro_batch": ("Micro-batch per GPU", "每卡微批大小"),
    "lora_rank": ("LoRA rank", "LoRA 秩"),
    "train_tokens": ("Tokens to train (for the cost per run)", "训练 token 总数（用于算单次成本）"),
    "money": ("Budget and provider", "预算与平台"),
    "budget": ("Budget (CNY per hour, or per run with tokens)", "预算（元/时；填了训练 token 数则为元/次）"),
    "provider": ("Price source", "价格来源"),
    "billing": ("Billing", "计费方式"),
    "targets": ("Targets", "目标"),
    "objective": ("Rank by", "排序依据"),
    "stage": ("Stage", "阶段"),
    "require": ("Require", "要求"),
    "allow_offload": ("Allow CPU offload", "允许卸载到 CPU"),
    "max_ttft": ("Max time to first token (s)", "首 token 最长时间（秒）"),
    "min_throughput": ("Min throughput (tokens/s, all users)", "最低总吞吐（token/秒）"),
    "min_tokens_per_s_per_user": ("Min tokens/s per user", "每用户最低 token/秒"),
    "top": ("Plans shown", "显示方案数"),
    "check_card": ("Check one card", "检查指定显卡"),
    "card": ("Card (optional)", "显卡（可选）"),
    "gpus": ("GPUs", "卡数"),
    "card_col": ("Card", "显卡"),
    "submit": ("Plan", "开始选型"),
    "any": ("any", "任意"),
    "none": ("none", "无"),
    "default": ("(default)", "（默认）"),
    "verdict": ("Verdict", "结论"),
    "fits": ("Fits", "放得下"),
    "no_fit": ("Does not fit", "放不下"),
    "tight": ("Tight: fits at the estimate, not at the top of its 80 % range",
              "偏紧：按估算放得下，按 80% 区间上限放不下"),
    "sources": (("Sources: memory from the model config and the card datasheet; speed from {rates}; "
                 "ranges fitted on {n} published measurements"),
                "依据：显存按模型配置与显卡手册计算；速度依据 {rates}；区间按 {n} 个公开实测拟合"),
    "rates_measured": ("measured rates in {file}", "{file} 中的实测值"),
    "rates_datasheet": ("datasheet rates x data/efficiency.toml", "手册速率 × data/efficiency.toml"),
    "headroom": ("headroom", "余量"),
    "tensor_headroom": ("the caching pool fills the card; the tensors leave", "缓存池会占满显卡；张量之外余"),
    "short_by": ("short by", "还差"),
    "per_gpu": ("per GPU", "每卡"),
    "usable": ("usable", "可用"),
    "required": ("required", "需要"),
    "best_plan": ("Best plan", "最佳方案"),
    "no_plan": ("No plan meets the constraints.", "没有满足条件的方案。"),
    "would_fit": ("It would fit if you:", "可以这样放下："),
    "kv_capacity": (("KV capacity {t} tokens · max concurrency at this context {n} · max context at "
                     "this concurrency {x}"),
                    "KV 容量 {t} token · 该上下文下最大并发 {n} · 该并发下最大上下文 {x}"),
    "memory_chart": ("Memory per GPU against usable memory (GiB)", "每卡显存与可用显存对比（GiB）"),
    "scatter_chart": ("Cost against throughput", "成本与吞吐"),
    "cost_axis": ("cost per hour (CNY)", "每小时成本（元）"),
    "speed_axis": ("throughput (tokens/s)", "吞吐（token/秒）"),
    "plans": ("Ranked plans", "方案排名"),
    "rank": ("#", "#"),
    "parallelism": ("Parallelism", "并行方式"),
    "memory": ("Memory per GPU", "每卡显存"),
    "speed": ("Speed", "速度"),
    "cost": ("Cost", "成本"),
    "why": ("Why", "理由"),
    "why_not": ("Why not the others", "其他卡为何落选"),
    "evaluated": ("{n} configurations evaluated.", "共评估 {n} 种配置。"),
    "configs": ("Ready-to-run configs for plan #1", "方案 #1 的可直接运行配置"),
    "copy": ("Copy", "复制"),
    "copied": ("Copied", "已复制"),
    "error": ("Error", "错误"),
    "json_link": ("The same result as JSON", "同一结果的 JSON"),
    "share": ("This page's address reproduces the result: share it.", "本页地址可复现此结果，可直接分享。"),
    "intro": (("Pick a model and a workload, then press Plan. Every card in the catalog is tried "
               "at each count, precision and parallelism; the ones that lose say why."),
              ("选择模型与负载后点击“开始选型”。将对目录中每张卡的不同卡数、精度与并行方式逐一评估，"
               "落选的会说明原因。")),
    "warnings": ("Warnings", "提示"),
    "stage_advice": ("Stage advice", "阶段建议"),
    "weights_c": ("weights", "权重"), "kv_cache_c": ("KV cache", "KV 缓存"),
    "activations_c": ("activations", "激活"), "gradients_c": ("gradients", "梯度"),
    "optimizer_c": ("optimizer states", "优化器状态"),
    "overhead_c": ("CUDA context + workspaces", "CUDA 上下文与工作区"),
    "other_c": ("other", "其他"), "free_c": ("free (usable)", "空闲（可用）"),
    "usable_c": ("usable memory", "可用显存"),
    "infer": ("inference", "推理"), "lora": ("LoRA fine-tune", "LoRA 微调"),
    "qlora": ("QLoRA fine-tune", "QLoRA 微调"), "full": ("full fine-tune", "全参微调"),
    "pretrain": ("pre-training", "预训练"),
    "cost_obj": ("lowest cost", "成本最低"), "speed_obj": ("fastest", "速度最快"),
    "cost-per-token_obj": ("lowest cost per token", "每 token 成本最低"),
    "validate": ("validate", "验证"), "stabilise": ("stabilise", "稳定"), "scale": ("scale", "扩展"),
    "hourly": ("hourly (按量)", "按量（小时）"), "daily": ("daily", "包日"), "weekly": ("weekly", "包周"),
    "monthly": ("monthly", "包月"), "spot": ("spot", "抢占式"),
    "ecc": ("ECC", "ECC"), "nvlink": ("NVLink", "NVLink"),
    "per_user": ("{v} tok/s per user", "每用户 {v} token/s"),
    "all_users": ("{v} tok/s in all", "总计 {v} token/s"),
    "ttft": ("first token {v} s", "首 token {v} 秒"),
    "hour": ("h", "时"), "mtok": ("M tokens", "百万 token"), "run": ("run", "次"),
    "flag_hint": ("on the command line:", "命令行："),
    "pareto": ("best trade-offs", "最优取舍"),
    "pareto_note": ("Green: no other plan is both cheaper and faster.", "绿色：没有其他方案既更便宜又更快。"),
    "other_plans": ("other plans", "其他方案"),
    "footer": ("gpuwise {v} · estimates, not measurements: verify a rented server with `gpuwise verify`.",
               "gpuwise {v} · 以上为估算而非实测：租到服务器后请用 `gpuwise verify` 验收。"),
}


def labels(lang: Lang) -> dict[str, str]:
    i = 1 if lang == "zh" else 0
    return {key: pair[i] for key, pair in LABELS.items()}


def pick_page_lang(flag: str | None, accept_language: str | None) -> Lang:
    """`?lang=` wins; else the first of zh/en in Accept-Language by quality; else English."""
    if flag and flag.lower()[:2] in ("zh", "en"):
        return "zh" if flag.lower().startswith("zh") else "en"
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((accept_language or "").split(",")[:20]):
        tag, _, q = part.strip().partition(";q=")
        try:
            quality = float(q) if q else 1.0
        except ValueError:
            quality = 0.0
        ranked.append((-quality, i, tag.strip().lower()))
    for _, _, tag in sorted(ranked):
        if tag.startswith("zh"):
            return "zh"
        if tag.startswith("en"):
            return "en"
    return "en"
