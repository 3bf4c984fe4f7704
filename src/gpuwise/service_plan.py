"""`gpuwise plan` and the exports, as one function per command taking plain values named like
the CLI flags (the estimate, model and cards commands are gpuwise.service's). The CLI and the web
API both call these, so `--json` and the HTTP API return the same object."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.catalog.prices import price_offers
from gpuwise.catalog.sources import load_model
from gpuwise.errors import InputError
from gpuwise.estimate.workload import TASKS, Workload, choose
from gpuwise.i18n import Text
from gpuwise.service import PipelineShape, checked_hub, is_diffusion, modules_to_save, train_knobs

STAGES = {
    "validate": Text("validate: the cheapest card that runs the job, to prove the pipeline (a 4090-class card is fine)",
                     "验证阶段：能跑通流程的最便宜的卡（4090 级即可）"),
    "stabilise": Text("stabilise: ECC data-centre cards (A100 class) for long, unattended runs",
                      "稳定阶段：长时间无人值守运行用带 ECC 的数据中心卡（A100 级）"),
    "scale": Text("scale: several ECC cards joined by NVLink/NVSwitch (H100/H200 class), ranked by cost per token",
                  "扩展阶段：多张由 NVLink/NVSwitch 互联的 ECC 卡（H100/H200 级），按单位 token 成本排序"),
}


@dataclass(frozen=True)
class PlanRequest(PipelineShape):
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
    dora: bool = False  # LoRA as DoRA (PEFT use_dora)
    modules_to_save: str = ""  # comma list of embed_tokens, lm_head trained in full beside LoRA
    padding_free: bool | None = None  # a micro-batch's samples in one unpadded row; None: the framework's
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
    max_seconds: float | None = None  # diffusion: seconds per image / video, at most
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
    # --top, --replicas, --grad-accum and --global-batch are bounded in gpuwise.bounds (check_request, first)
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
    model = load_model(req.model, hub=checked_hub(req.hub))
    w = Workload(task=choose(req.task, TASKS, "--task"), kv_dtype=req.kv_dtype, context=req.context,
                 concurrency=req.concurrency, output_tokens=req.output_tokens, seq_len=req.seq_len,
                 micro_batch=req.micro_batch, grad_accum=req.grad_accum or 1,
                 lora_rank=req.lora_rank, dora=req.dora, modules_to_save=modules_to_save(req.modules_to_save),
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
    # read once per plan (with the user's files), not once per candidate; the same tuple while
    # no price file changed
    offers = price_offers([req.prices_file] if req.prices_file else [])
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
    if is_diffusion(req.model):  # image and video pipelines: gpuwise.diffusion
        from gpuwise.bounds import check_fields
        from gpuwise.diffusion.service import diffusion_plan_json

        check_fields(req)  # --top 0 or --max-seconds nan is refused here too, not ranked as 'no plan'

        return diffusion_plan_json(req, *_plan_cards(req))
    return run_plan(req).to_dict()


def _no_plan() -> InputError:
    return InputError(Text("No plan meets the constraints, so there is nothing to export.",
                           "没有满足条件的方案，无法导出配置。"))


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


def _ckpt_options(req: Any) -> tuple[str, ...]:
    """--grad-ckpt auto: no recompute, the framework's own policy, then full recomputation."""
    from gpuwise.catalog.frameworks import find_framework

    own = find_framework(req.framework, req.task).grad_ckpt
    return tuple(dict.fromkeys(("none", own, "full")))
