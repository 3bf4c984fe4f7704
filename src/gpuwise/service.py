"""One function per command, taking plain values named like the CLI flags.

The CLI and the web API both call these, so `--json` and the HTTP API return the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.catalog.prices import load_prices
from gpuwise.catalog.sources import HUBS, Hub, load_model
from gpuwise.errors import InputError
from gpuwise.estimate.api import Estimate, estimate
from gpuwise.estimate.workload import ENGINES, LORA_TARGETS, OFFLOADS, TASKS, Deployment, Workload, choose
from gpuwise.i18n import Text


@dataclass(frozen=True)
class EstimateRequest:
    """Every `gpuwise estimate` flag, with its CLI default."""

    model: str
    card: str
    gpus: int = 1
    task: str = "infer"
    weights: str = "auto"
    kv_dtype: str = "auto"
    context: int = 4096
    concurrency: int = 1
    output_tokens: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None  # None: the engine's default
    requests: int | None = None  # a benchmark run of N prompts sent at once: its throughput (None: steady state)
    engine: str = "vllm"
    engine_version: str = ""  # '' = the newest rules gpuwise has for the engine
    mem_fraction: float | None = None  # SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction
    cpu_mem_bw: float | None = None  # GB/s of host memory for llama.cpp CPU layers (None: by form factor)
    gpu_memory_utilization: float = 0.9
    tp: int = 0
    pp: int = 1
    ep: int = 1  # training: expert parallelism for MoE models
    virtual_stages: int = 1  # training: interleaved 1F1B model chunks per pipeline stage
    tp_overlap: bool = False  # training: TP communication overlap (Megatron --tp-comm-overlap, torchtitan AsyncTP)
    offload: str = "none"
    cpu_offload_gb: float = 0.0
    gpu_layers: int | None = None
    margin: bool = False
    seq_len: int = 2048
    micro_batch: int = 1
    grad_accum: int = 1
    replicas: int = 1
    prices_file: str | None = None
    # Training knobs: None takes the --framework's default (data/frameworks.toml).
    framework: str = "auto"
    optimizer: str | None = None
    grad_ckpt: str | None = None
    loss: str | None = None
    activation_offload: bool | None = None
    optimizer_in_backward: bool | None = None
    packing: bool | None = None
    compile: bool | None = None
    float8: bool | None = None
    flash_attention: bool = True
    zero: int = 0
    lora_rank: int = 16
    lora_targets: str = ",".join(LORA_TARGETS)
    nodes: int = 1
    allow_long_context: bool = False
    hub: str = "auto"
    cards_file: str | None = None
    calibration: str | None = None  # a `gpuwise verify --save` file: measured rates replace assumed ones
    provider: str | None = None
    billing: str = "hourly"
    train_tokens: float | None = None
    inter_node_gbps: float | None = None
    # Diffusion pipelines (image / video): None takes the model's default (gpuwise.diffusion).
    width: int | None = None
    height: int | None = None
    frames: int | None = None
    steps: int | None = None
    guidance: float | None = None
    images: int = 1
    te_weights: str = "auto"
    vae_tiling: bool = False
    vae_slicing: bool = False
    te_cpu: bool = False
    runtime: str = "diffusers"
    os: str = "linux"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _hub(hub: str) -> Hub:
    return choose(hub, HUBS, "--hub")


def train_knobs(req: Any, *, multi_gpu: bool, search_ckpt: bool = False) -> dict[str, Any]:
    """The Workload fields of a training run: the framework's defaults, each explicit flag
    winning (an EstimateRequest or a PlanRequest). `--weights fp8` in training means Float8."""
    from gpuwise.catalog.frameworks import AUTO, KNOBS, find_framework, resolve_knobs

    fw = find_framework(req.framework, req.task)
    explicit = {k: getattr(req, k, None) for k in KNOBS}
    if search_ckpt:
        explicit["grad_ckpt"] = "none"  # the planner tries its own list
    if req.task != "infer" and req.weights == "fp8" and explicit["float8"] is None:
        explicit["float8"] = True
    knobs, defaults = resolve_knobs(fw, req.task, multi_gpu=multi_gpu, explicit=explicit)
    training = req.task != "infer"
    chosen = ("framework",) if req.framework.strip().lower() == AUTO else ()
    return {**knobs, "framework": fw.id, "framework_defaults": (*chosen, *defaults) if training else ()}


def _ckpt_options(req: Any) -> tuple[str, ...]:
    """--grad-ckpt auto: no recompute, the framework's own policy, then full recomputation."""
    from gpuwise.catalog.frameworks import find_framework

    own = find_framework(req.framework, req.task).grad_ckpt
    return tuple(dict.fromkeys(("none", own, "full")))


def build(req: EstimateRequest) -> tuple[Any, Workload, Deployment, Text | None]:
    """Resolve names and validate values into the estimate's inputs."""
    from gpuwise.bounds import check_layers, check_request

    check_request(req)  # every number within its bound (gpuwise.bounds), tp x pp within the GPUs
    hub = _hub(req.hub)
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    resolved = resolve_card(req.card, catalog)
    model = load_model(req.model, hub=hub)
    check_layers(req.pp, model.num_layers, model.name)
    targets = tuple(t.strip() for t in req.lora_targets.split(",") if t.strip())
    if targets == ("all",) or targets == ("all-linear",):
        targets = LORA_TARGETS
    w = Workload(task=choose(req.task, TASKS, "--task"), weights=req.weights, kv_dtype=req.kv_dtype,
                 context=req.context, concurrency=req.concurrency, output_tokens=req.output_tokens,
                 max_num_batched_tokens=req.max_num_batched_tokens, max_num_seqs=req.max_num_seqs,
                 seq_len=req.seq_len,
                 micro_batch=req.micro_batch, grad_accum=req.grad_accum,
                 flash_attention=req.flash_attention, lora_rank=req.lora_rank, lora_targets=targets,
                 tp_overlap=req.tp_overlap, **train_knobs(req, multi_gpu=req.gpus * req.nodes > 1))
    d = Deployment(card=resolved.card, gpus=req.gpus, tp=req.tp, pp=req.pp,
                   engine=choose(req.engine, ENGINES, "--engine"),
                   gpu_memory_utilization=req.gpu_memory_utilization, zero=req.zero,
                   offload=choose(req.offload, OFFLOADS, "--offload"), cpu_offload_gib=req.cpu_offload_gb,
                   gpu_layers=req.gpu_layers, nodes=req.nodes, margin=req.margin,
                   engine_version=req.engine_version, mem_fraction=req.mem_fraction,
                   cpu_mem_bw_gbps=req.cpu_mem_bw, ep=req.ep,
                   virtual_stages=req.virtual_stages)
    return model, w, d, resolved.note


def run_estimate(req: EstimateRequest) -> tuple[Estimate, Text | None]:
    from gpuwise.estimate.api import CostOptions

    model, w, d, note = build(req)
    calibration = None
    if req.calibration:
        from gpuwise.verify.calibration import load_calibration

        calibration = load_calibration(Path(req.calibration), d.card)  # refused unless this card's
    if not 1 <= req.replicas <= 1024:
        raise InputError(Text(f"--replicas must be between 1 and 1,024; got {req.replicas}.",
                              f"--replicas 必须在 1 到 1,024 之间，实际为 {req.replicas}。"))
    offers = tuple(load_prices([req.prices_file])) if req.prices_file else None
    opts = CostOptions(provider=req.provider, billing=req.billing, train_tokens=req.train_tokens,
                       inter_node_gbps=req.inter_node_gbps, offers=offers)
    result = estimate(model, w, d, allow_long_context=req.allow_long_context, cost=opts,
                      calibration=calibration, replicas=req.replicas)
    if req.requests is not None:
        result = _benchmark_run(req, result)
    return result, note


MAX_RUN_REQUESTS = 1 << 17  # a simulated run of this many prompts stays under a few seconds


def _benchmark_run(req: EstimateRequest, result: Estimate) -> Estimate:
    """--requests N: the throughput of one engine's finite run of N prompts sent at once
    (estimate/speed.py benchmark_run), in place of the steady-state figure."""
    import dataclasses

    from gpuwise.estimate.links import card_rates
    from gpuwise.estimate.speed import InferSpeed, benchmark_run

    n = req.requests
    if n is None or isinstance(n, bool) or not 1 <= n <= MAX_RUN_REQUESTS:
        raise InputError(Text(f"--requests must be between 1 and {MAX_RUN_REQUESTS:,}; got {req.requests}.",
                              f"--requests 必须在 1 到 {MAX_RUN_REQUESTS:,} 之间，实际为 {req.requests}。"))
    if req.task != "infer" or req.replicas != 1:
        raise InputError(Text("--requests describes one serving engine's benchmark run: use it with --task infer "
                              "and --replicas 1.",
                              "--requests 描述单个推理引擎的一次压测：请配合 --task infer 与 --replicas 1 使用。"))
    if not isinstance(result.speed, InferSpeed) or result.memory.capacity is None:
        return result
    rates = card_rates(result.deployment.card, result.calibration, result.deployment.gpus)
    run = benchmark_run(result.model, result.workload, result.deployment, result.memory, rates,
                        n, result.speed)
    return dataclasses.replace(result, speed=run)


def _is_diffusion(source: str) -> bool:
    """An image or video pipeline? A language-model preset name never is (no name is both,
    tests/test_cli.py), so naming one skips importing gpuwise.diffusion on a cold start."""
    from gpuwise.catalog.presets import find_preset

    if find_preset(source) is not None:
        return False
    from gpuwise.diffusion.resolve import is_diffusion_source

    return is_diffusion_source(source)


def estimate_json(req: EstimateRequest) -> dict[str, Any]:
    """The `gpuwise estimate --json` object."""
    from gpuwise.bounds import check_text

    check_text("model", req.model)  # too long for any path or hub id: refused, never stat()ed
    if _is_diffusion(req.model):  # image and video pipelines: gpuwise.diffusion
        from gpuwise.diffusion.service import diffusion_estimate_json

        return diffusion_estimate_json(req)
    if req.width and req.height:  # a vision-language model shown images of that size
        from gpuwise.diffusion.service import vlm_estimate_json

        return vlm_estimate_json(req)
    result, note = run_estimate(req)
    out = result.to_dict()
    if result.calibration is not None:
        out["calibration"] = result.calibration.to_dict()
    if note is not None:
        out["card_note"] = note.en
        out["card_note_zh"] = note.zh
    return out


STAGES = {
    "validate": Text("validate: the cheapest card that runs the job, to prove the pipeline (a 4090-class card is fine)",
                     "验证阶段：能跑通流程的最便宜的卡（4090 级即可）"),
    "stabilise": Text("stabilise: ECC data-centre cards (A100 class) for long, unattended runs",
                      "稳定阶段：长时间无人值守运行用带 ECC 的数据中心卡（A100 级）"),
    "scale": Text("scale: several ECC cards joined by NVLink/NVSwitch (H100/H200 class), ranked by cost per token",
                  "扩展阶段：多张由 NVLink/NVSwitch 互联的 ECC 卡（H100/H200 级），按单位 token 成本排序"),
}


@dataclass(frozen=True)
class PlanRequest:
    """Every `gpuwise plan` flag, with its CLI default."""

    model: str
    task: str = "infer"
    weights: str = "auto"  # auto: the checkpoint's precision or FP8; any: 4-bit too
    kv_dtype: str = "auto"
    context: int = 4096
    concurrency: int = 1
    output_tokens: int | None = None
    engine: str = "vllm"
    engine_version: str = ""  # '' = the newest rules gpuwise has for the engine
    replicas: int | None = None  # serving engines; None: searched
    seq_len: int = 2048
    micro_batch: int = 1
    grad_accum: int | None = None
    global_batch: int | None = None  # sequences per optimizer step, kept fixed by the search
    framework: str = "auto"
    optimizer: str | None = None
    grad_ckpt: str = "auto"  # auto: try none, then full recomputation
    lora_rank: int = 16
    budget: float | None = None  # per hour, or per run when train_tokens is given
    min_throughput: float | None = None
    max_ttft: float | None = None
    min_tokens_per_s_per_user: float | None = None
    require: str = ""  # comma list: ecc, nvlink
    provider: str | None = None
    billing: str = "hourly"
    cards: str = ""  # comma list restricting the search
    include_non_cuda: bool = False
    objective: str = "cost"
    stage: str | None = None
    allow_offload: bool = False
    train_tokens: float | None = None
    inter_node_gbps: float | None = None
    # Diffusion pipelines (image / video): None takes the model's default (gpuwise.diffusion).
    width: int | None = None
    height: int | None = None
    frames: int | None = None
    steps: int | None = None
    guidance: float | None = None
    images: int = 1
    max_seconds: float | None = None  # seconds per image / video, at most
    os: str = "linux"
    top: int = 5
    hub: str = "auto"
    cards_file: str | None = None
    prices_file: str | None = None
    deploy_model: str | None = None  # the checkpoint the exports start (e.g. an AWQ repo)
    script: str | None = None  # training entry point the exports run
    workdir: str | None = None  # the folder the exports ship to the machine
    image: str | None = None  # container image for the exports

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _split(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _check_plan(req: PlanRequest) -> None:
    from gpuwise.errors import unknown_name

    for flag, value, choices in (("--objective", req.objective, ("cost", "speed", "cost-per-token")),
                                 ("--stage", req.stage or "validate", tuple(STAGES))):
        if value not in choices:
            raise unknown_name(Text(f"{flag} value", f"{flag} 取值"), value, choices, "gpuwise plan --help")
    from gpuwise.catalog.prices import BILLINGS
    from gpuwise.estimate.constants import KV_BYTES
    from gpuwise.estimate.weights import WEIGHT_FORMATS, _gguf_bits

    if req.weights.startswith("gguf:"):
        _gguf_bits(req.weights)  # refuses an unknown GGUF type with the list of known ones
    elif req.weights not in (*WEIGHT_FORMATS, "any"):
        raise unknown_name(Text("--weights value", " --weights 取值"), req.weights, (*WEIGHT_FORMATS, "any"),
                           "gpuwise plan --help")
    closed = (("--kv-dtype", req.kv_dtype, ("auto", *KV_BYTES)), ("--billing", req.billing, BILLINGS))
    for flag, value, options in closed:
        if value not in options:
            raise unknown_name(Text(f"{flag} value", f" {flag} 取值"), value, options, "gpuwise plan --help")
    for need in _split(req.require):
        if need not in ("ecc", "nvlink"):
            raise unknown_name(Text("--require value", "--require 取值"), need, ("ecc", "nvlink"),
                               "gpuwise plan --help")
    if not 1 <= req.top <= 50:
        raise InputError(Text("--top must be between 1 and 50.", "--top 必须在 1 到 50 之间。"))
    counts: tuple[tuple[str, int | None], ...] = (("--replicas", req.replicas), ("--grad-accum", req.grad_accum),
                                                  ("--global-batch", req.global_batch))
    for name, count in counts:
        if count is not None and not 1 <= count <= 1 << 20:
            raise InputError(Text(f"{name} must be between 1 and {1 << 20:,}; got {count}.",
                                  f"{name} 必须在 1 到 {1 << 20:,} 之间，实际为 {count}。"))
    if req.global_batch is not None and req.grad_accum is not None:
        raise InputError(Text("Give --global-batch or --grad-accum, not both: the global batch is "
                              "micro-batch x accumulation x data-parallel GPUs.",
                              "--global-batch 与 --grad-accum 只能给一个："
                              "全局 batch = micro-batch × 累积步数 × 数据并行卡数。"))
    if req.global_batch is not None and req.global_batch < req.micro_batch:
        raise InputError(Text(f"--global-batch {req.global_batch} is smaller than --micro-batch {req.micro_batch}.",
                              f"--global-batch {req.global_batch} 小于 --micro-batch {req.micro_batch}。"))
    if req.task == "infer" and (req.script or req.workdir or req.global_batch or req.grad_accum):
        raise InputError(Text("--script, --workdir, --global-batch and --grad-accum are for training tasks.",
                              "--script、--workdir、--global-batch 和 --grad-accum 只用于训练任务。"))
    if req.task != "infer" and req.replicas:
        raise InputError(Text("--replicas is for serving; training scales with GPUs and nodes.",
                              "--replicas 用于推理服务；训练按卡数与节点扩展。"))


def _choices(req: PlanRequest) -> Any:
    from gpuwise.plan.build import DeployChoices
    from gpuwise.textsafe import clean_text

    def clean(v: str | None) -> str | None:
        return clean_text(v, limit=500) if v else None
    return DeployChoices(source=clean_text(req.model, limit=500), deploy_model=clean(req.deploy_model),
                         script=clean(req.script), workdir=clean(req.workdir), image=clean(req.image))


def _plan_cards(req: PlanRequest) -> tuple[list[Any], dict[str, Text]]:
    """The cards to search, and those left out before the search with the reason."""
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    named = [resolve_card(n, catalog).card for n in _split(req.cards)]
    cards = named or list(catalog)
    excluded: dict[str, Text] = {}
    if not named and not req.include_non_cuda:
        from gpuwise.catalog.stacks import software_stack

        for card in cards:
            stack = software_stack(card)
            if not stack.default_included:
                excluded[card.id] = stack.why_not or Text(f"needs the {stack.name} stack",
                                                          f"需要 {stack.name} 软件栈")
    return cards, excluded


def plan_request_parts(req: PlanRequest) -> tuple[Any, Workload, Any, Any]:
    """The model, workload, targets and cost options of a plan request, validated."""
    from gpuwise.bounds import check_request
    from gpuwise.estimate.api import CostOptions
    from gpuwise.plan.search import Targets

    check_request(req)  # every number within its bound (gpuwise.bounds)
    _check_plan(req)
    if req.task == "infer":
        from gpuwise.catalog.engines import engine_rules

        engine_rules(req.engine, req.engine_version)  # an unknown engine or version is a message now
    model = load_model(req.model, hub=_hub(req.hub))
    w = Workload(task=choose(req.task, TASKS, "--task"), kv_dtype=req.kv_dtype, context=req.context,
                 concurrency=req.concurrency, output_tokens=req.output_tokens, seq_len=req.seq_len,
                 micro_batch=req.micro_batch, grad_accum=req.grad_accum or 1,
                 lora_rank=req.lora_rank,
                 **train_knobs(req, multi_gpu=False, search_ckpt=req.grad_ckpt == "auto"))
    if not w.is_training and req.context > model.max_context:
        raise InputError(Text(f"--context {req.context:,} exceeds {model.name}'s maximum of {model.max_context:,}.",
                              f"--context {req.context:,} 超过 {model.name} 的最大上下文 {model.max_context:,}。"))
    per_run = req.budget if req.train_tokens and w.is_training else None
    global_batch = req.global_batch or (req.micro_batch * req.grad_accum if req.grad_accum else None)
    targets = Targets(budget_per_hour=None if per_run else req.budget, budget_per_run=per_run,
                      min_throughput=req.min_throughput, max_ttft=req.max_ttft,
                      min_tokens_per_s_per_user=req.min_tokens_per_s_per_user, require=_split(req.require),
                      objective=req.objective, stage=req.stage, allow_offload=req.allow_offload,
                      weights=req.weights, global_batch=global_batch, replicas=req.replicas,
                      engine=req.engine, engine_version=req.engine_version,
                      grad_ckpt_options=_ckpt_options(req) if req.grad_ckpt == "auto" else (req.grad_ckpt,))
    # read once per plan (with the user's files), not once per candidate
    offers = tuple(load_prices([req.prices_file] if req.prices_file else []))
    opts = CostOptions(provider=req.provider, billing=req.billing, train_tokens=req.train_tokens,
                       inter_node_gbps=req.inter_node_gbps, offers=offers)
    return model, w, targets, opts


@dataclass(frozen=True)
class PlanOutcome:
    """`gpuwise plan`'s answer: typed plans, the ranking's own words, and what was left out."""

    model_name: str
    task: str
    stage: str | None
    plans: tuple[Any, ...]  # gpuwise.plan.value.Plan
    result: Any  # gpuwise.plan.rank.PlanResult

    def to_dict(self) -> dict[str, Any]:
        from gpuwise.plan.rank import SCHEMA_VERSION

        r = self.result
        return {
            "schema_version": SCHEMA_VERSION, "model": self.model_name, "task": self.task,
            "objective": r.objective.to_dict(), "stage": self.stage,
            "stage_advice": STAGES[self.stage].en if self.stage else None,
            "stage_advice_zh": STAGES[self.stage].zh if self.stage else None,
            "notes": [n.en for n in r.notes], "notes_zh": [n.zh for n in r.notes],
            "plans": [p.to_dict() for p in self.plans],
            "unpriced": [x.to_dict() for x in r.unpriced],
            "rejected": [x.to_dict() for x in r.rejected], "evaluated": r.evaluated,
        }


def _price_notes(c: Any, today: Any) -> tuple[Text, ...]:
    from gpuwise.catalog.prices import STALE_PRICE_DAYS, price_age_days

    if c.cost is None:
        return ()
    age = price_age_days(c.cost.as_of, today)
    if age <= STALE_PRICE_DAYS:
        return ()
    return (Text(f"The price ({c.cost.provider}, as of {c.cost.as_of}) is {age} days old: check it "
                 "with the provider or pass --prices FILE.",
                 f"价格（{c.cost.provider}，{c.cost.as_of}）已有 {age} 天：请向服务商核实，或用 --prices FILE 提供。"),)


def run_plan(req: PlanRequest, *, exhaustive: bool = False) -> PlanOutcome:
    """Search, rank and build the typed plans of a `gpuwise plan` request. `exhaustive` evaluates
    every configuration in full (the reference the fast search is tested against)."""
    import datetime

    from gpuwise.plan.build import plan_from_candidate, plan_notes, quality_of
    from gpuwise.plan.load import NEAR_LIMIT
    from gpuwise.plan.rank import plan

    model, w, targets, opts = plan_request_parts(req)
    cards, excluded = _plan_cards(req)
    result = plan(model, w, cards, targets, opts, top=req.top, excluded=excluded, exhaustive=exhaustive)
    choice, today = _choices(req), datetime.date.today()
    plans = tuple(plan_from_candidate(c, model, choice, result.objective.key, (reason,),
                                      plan_notes(c, NEAR_LIMIT) + _price_notes(c, today),
                                      quality_of(c.workload.weights))
                  for c, reason in zip(result.plans, result.reasons, strict=True))
    return PlanOutcome(model.name, req.task, req.stage, plans, result)


def plan_json(req: PlanRequest) -> dict[str, Any]:
    """The `gpuwise plan --json` object: ranked plans and a reason for every rejected card."""
    from gpuwise.bounds import check_text

    check_text("model", req.model)  # too long for any path or hub id: refused, never stat()ed
    if _is_diffusion(req.model):  # image and video pipelines: gpuwise.diffusion
        from gpuwise.diffusion.service import diffusion_plan_json

        return diffusion_plan_json(req, *_plan_cards(req))
    return run_plan(req).to_dict()


def _no_plan() -> InputError:
    return InputError(Text("No plan meets the constraints, so there is nothing to export.",
                           "没有满足条件的方案，无法导出配置。"))


def model_json(src: str, hub: str = "auto", revision: str | None = None) -> dict[str, Any]:
    """The `gpuwise model --json` object (documented in docs/json.md)."""
    from gpuwise.bounds import check_text
    from gpuwise.catalog.params import count_params

    check_text("model", src)  # a name too long for any path or hub id is refused, never stat()ed
    if hub == "auto" and _is_diffusion(src):  # image and video pipelines: gpuwise.diffusion
        from gpuwise.diffusion.service import diffusion_model_json

        return diffusion_model_json(src)

    m = load_model(src, hub=_hub(hub), revision=revision)
    p = count_params(m)
    return {
        "schema_version": 1, "name": m.name, "model_type": m.model_type, "source": m.source,
        "approximate": m.approximate,
        "params_total": p.total, "params_active": p.active, "params": p.to_dict(),
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "num_heads": m.num_heads,
        "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim, "vocab_size": m.vocab_size,
        "layer_kinds": {k: m.count_kind(k) for k in ("full", "sliding", "linear") if m.count_kind(k)},
        "sliding_window": m.sliding_window or None,
        "attention": "mla" if m.mla else ("hybrid" if m.linear else "gqa" if m.num_kv_heads < m.num_heads else "mha"),
        "mla": None if m.mla is None else {"kv_lora_rank": m.mla.kv_lora_rank, "q_lora_rank": m.mla.q_lora_rank,
                                           "qk_nope_head_dim": m.mla.qk_nope_head_dim,
                                           "qk_rope_head_dim": m.mla.qk_rope_head_dim,
                                           "v_head_dim": m.mla.v_head_dim},
        "moe": None if m.moe is None else {"experts": m.moe.num_experts, "top_k": m.moe.experts_per_token,
                                           "shared_experts": m.moe.num_shared_experts},
        "kv_bytes_per_token": int(m.kv_bytes_per_token(2.0)),
        "kv_bytes_per_token_fp8": int(m.kv_bytes_per_token(1.0)),
        "state_bytes_per_sequence": int(m.state_bytes_per_sequence(2.0)),
        "max_context": m.max_context, "dtype": m.dtype,
        "quantization": None if m.quant is None else {"method": m.quant.method, "bits": m.quant.bits,
                                                      "group_size": m.quant.group_size},
        "checkpoint_bytes": m.checkpoint_bytes or None,
        "notes": [n.en for n in m.notes], "notes_zh": [n.zh for n in m.notes],
    }


def emit_json(req: PlanRequest | None, target: str, from_file: str | None = None) -> dict[str, Any]:
    """The winning plan written in `target`'s own vocabulary: planned now, or read from a
    `gpuwise plan --save` file."""
    from gpuwise.export import emit, target_key

    if req is not None and not from_file:
        from gpuwise.bounds import check_text
        from gpuwise.diffusion.resolve import is_diffusion_source

        check_text("model", req.model)
        if is_diffusion_source(req.model):  # image and video pipelines: diffusers / comfyui settings
            from gpuwise.diffusion.service import diffusion_emit_json

            return diffusion_emit_json(req, target, *_plan_cards(req))

    key = target_key(target)
    if from_file:
        from gpuwise.catalog._datafile import read_json_object
        from gpuwise.plan.load import plan_from_dict

        best = plan_from_dict(read_json_object(Path(from_file), 4 << 20, "plan"))
    else:
        if req is None:
            raise _no_plan()
        outcome = run_plan(req)
        if not outcome.plans:
            raise _no_plan()
        best = outcome.plans[0]
    return {"schema_version": 2, "target": key, "plan": best.to_dict(), "config": emit(best, key)}


def cards_json(name: str | None = None, min_memory: float | None = None, nvlink: bool | None = None,
               vendor: str | None = None, sort: str = "bandwidth") -> dict[str, Any]:
    """The `gpuwise cards --json` object: the filtered catalog, or one card with its note."""
    from gpuwise.catalog.cards import filter_cards

    catalog = load_cards(())
    if name:
        return {"schema_version": 1, **resolve_card(name, catalog).to_dict()}
    if min_memory is not None:
        from gpuwise.bounds import check_value

        check_value("min_memory", min_memory)  # finite, 0 or more (gpuwise.bounds)
    chosen = filter_cards(catalog, min_memory_gb=min_memory, nvlink=True if nvlink else None,
                          vendor=vendor, sort=sort)
    return {"schema_version": 1, "cards": [c.to_dict() for c in chosen]}
