"""One function per command, taking plain values named like the CLI flags.

The CLI and the web API both call these, so `--json` and the HTTP API return the same object.
`gpuwise plan` and the exports live in gpuwise.service_plan (an estimate never loads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.catalog.prices import load_prices
from gpuwise.catalog.sources import HUBS, Hub, load_model
from gpuwise.errors import InputError
from gpuwise.estimate.api import Estimate, estimate
from gpuwise.estimate.workload import CP_KINDS, ENGINES, LORA_TARGETS, OFFLOADS, TASKS, Deployment, Workload, choose
from gpuwise.i18n import Text
from gpuwise.replay import load_recorded_run


@dataclass(frozen=True, kw_only=True)
class PipelineShape:
    """The size of an image or video job (diffusion pipelines), a part of both `estimate`'s and
    `plan`'s requests: None takes the model's default (gpuwise.diffusion)."""

    width: int | None = None
    height: int | None = None
    frames: int | None = None
    steps: int | None = None
    guidance: float | None = None
    images: int = 1


@dataclass(frozen=True)
class EstimateRequest(PipelineShape):
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
    # A recorded benchmark's result JSON: replay its own prompts (gpuwise.replay). A server path: never
    # settable over HTTP (web/params.py).
    replay: str | None = field(default=None, metadata={"path": True})
    engine: str = "vllm"
    engine_version: str = ""  # '' = the newest rules gpuwise has for the engine
    mem_fraction: float | None = None  # SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction
    cpu_mem_bw: float | None = None  # GB/s of host memory for llama.cpp CPU layers (None: by form factor)
    gpu_memory_utilization: float = 0.9
    tp: int = 0
    pp: int = 1
    ep: int = 1  # training: expert parallelism for MoE models
    virtual_stages: int = 1  # training: interleaved 1F1B model chunks per pipeline stage
    cp: int = 1  # training: context parallelism, each sequence split over cp ranks
    cp_kind: str = "ring"  # training: how --cp moves keys and values (estimate.workload.CP_KINDS)
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
    padding_free: bool | None = None  # a micro-batch's samples in one unpadded row (ms-swift --padding_free)
    compile: bool | None = None
    float8: bool | None = None
    flash_attention: bool = True
    zero: int | None = None  # training: None takes the --framework's multi-GPU sharding
    lora_rank: int = 16
    lora_targets: str = ",".join(LORA_TARGETS)
    dora: bool = False  # LoRA as DoRA (PEFT use_dora)
    modules_to_save: str = ""  # comma list of embed_tokens, lm_head trained in full beside LoRA
    nodes: int = 1
    allow_long_context: bool = False
    hub: str = "auto"
    cards_file: str | None = None
    calibration: str | None = None  # a `gpuwise verify --save` file: measured rates replace assumed ones
    provider: str | None = None
    billing: str = "hourly"
    train_tokens: float | None = None
    inter_node_gbps: float | None = None
    te_weights: str = "auto"
    vae_tiling: bool = False
    vae_slicing: bool = False
    te_cpu: bool = False
    runtime: str = "diffusers"
    os: str = "linux"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def checked_hub(hub: str) -> Hub:
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


def modules_to_save(value: str) -> tuple[str, ...]:
    """--modules-to-save as written (commas or spaces, as ms-swift's --modules_to_save embed_tokens lm_head)."""
    return tuple(m for m in value.replace(",", " ").split() if m)


def train_zero(req: Any, framework_id: str) -> tuple[int, bool]:
    """--zero, or where it is not given and the GPUs data-parallel, the framework's own default
    sharding (frameworks.toml `sharding`: torchtune's and torchtitan's FSDP2 shard like ZeRO-3);
    and whether it came from the framework."""
    from gpuwise.catalog.frameworks import SHARDING_ZERO, find_framework

    if req.zero is not None:
        return req.zero, False
    dp = req.gpus * req.nodes // max(1, max(1, req.tp) * req.pp * getattr(req, "cp", 1))
    if req.task == "infer" or dp <= 1:
        return 0, False
    return SHARDING_ZERO[find_framework(framework_id).sharding], True


def refuse_training_flags(req: EstimateRequest) -> None:
    """An inference estimate given training flags would drop them without a word: say so instead. A
    flag at its neutral value (--zero 0, --grad-ckpt none, --no-compile, ...) changes nothing and passes."""
    given = [flag for flag, on in (
        ("--framework", req.framework.strip().lower() != "auto"), ("--optimizer", req.optimizer is not None),
        ("--grad-ckpt", req.grad_ckpt not in (None, "none")), ("--loss", req.loss is not None),
        ("--activation-offload", bool(req.activation_offload)),
        ("--optimizer-in-backward", bool(req.optimizer_in_backward)), ("--packing", bool(req.packing)),
        ("--compile", bool(req.compile)), ("--float8", bool(req.float8)), ("--zero", req.zero not in (None, 0)),
        ("--padding-free", bool(req.padding_free)), ("--dora", req.dora),
        ("--modules-to-save", bool(req.modules_to_save.strip())), ("--micro-batch", req.micro_batch != 1),
        ("--grad-accum", req.grad_accum != 1), ("--virtual-stages", req.virtual_stages != 1),
        ("--tp-overlap", req.tp_overlap)) if on]
    if given:
        en = f"{', '.join(given)}: training only; an inference estimate (--task infer) would ignore them."
        raise InputError(Text(en, f"{'、'.join(given)} 仅用于训练；当前是推理估算（--task infer），会忽略它们。"),
                         hint=Text("Drop them, or pick a training --task (lora, qlora, full, pretrain).",
                                   "去掉这些参数，或选择训练类 --task（lora、qlora、full、pretrain）。"))


def build(req: EstimateRequest) -> tuple[Any, Workload, Deployment, Text | None]:
    """Resolve names and validate values into the estimate's inputs."""
    from gpuwise.bounds import check_layers, check_request

    check_request(req)  # every number within its bound (gpuwise.bounds), tp x pp within the GPUs
    if req.task == "infer":
        refuse_training_flags(req)
    hub = checked_hub(req.hub)
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    resolved = resolve_card(req.card, catalog)
    model = load_model(req.model, hub=hub)
    check_layers(req.pp, model.num_layers, model.name)
    targets = tuple(t.strip() for t in req.lora_targets.split(",") if t.strip())
    if targets == ("all",) or targets == ("all-linear",):
        targets = LORA_TARGETS
    knobs = train_knobs(req, multi_gpu=req.gpus * req.nodes > 1)
    zero, zero_default = train_zero(req, knobs["framework"])
    if zero_default:
        knobs["framework_defaults"] = (*knobs["framework_defaults"], "zero")
    w = Workload(task=choose(req.task, TASKS, "--task"), weights=req.weights, kv_dtype=req.kv_dtype,
                 context=req.context, concurrency=req.concurrency, output_tokens=req.output_tokens,
                 max_num_batched_tokens=req.max_num_batched_tokens, max_num_seqs=req.max_num_seqs,
                 seq_len=req.seq_len,
                 micro_batch=req.micro_batch, grad_accum=req.grad_accum,
                 flash_attention=req.flash_attention, lora_rank=req.lora_rank, lora_targets=targets,
                 dora=req.dora, modules_to_save=modules_to_save(req.modules_to_save),
                 tp_overlap=req.tp_overlap, **knobs)
    d = Deployment(card=resolved.card, gpus=req.gpus, tp=req.tp, pp=req.pp,
                   engine=choose(req.engine, ENGINES, "--engine"),
                   gpu_memory_utilization=req.gpu_memory_utilization, zero=zero,
                   offload=choose(req.offload, OFFLOADS, "--offload"), cpu_offload_gib=req.cpu_offload_gb,
                   gpu_layers=req.gpu_layers, nodes=req.nodes, margin=req.margin,
                   engine_version=req.engine_version, mem_fraction=req.mem_fraction,
                   cpu_mem_bw_gbps=req.cpu_mem_bw, ep=req.ep,
                   virtual_stages=req.virtual_stages, cp=req.cp, cp_kind=choose(req.cp_kind, CP_KINDS, "--cp-kind"))
    if d.cp > 1 and not w.is_training:
        raise InputError(Text("--cp splits a training sequence over GPUs; serving estimates do not take it.",
                              "--cp 把训练序列切分到多张卡上；推理估算不接受该参数。"),
                         hint=Text("Drop --cp, or pick a training --task.", "去掉 --cp，或选择训练类 --task。"))
    return model, w, d, resolved.note


def run_estimate(req: EstimateRequest) -> tuple[Estimate, Text | None]:
    from gpuwise.estimate.api import CostOptions

    model, w, d, note = build(req)
    calibration = None
    if req.calibration:
        from gpuwise.verify.calibration import load_calibration

        calibration = load_calibration(Path(req.calibration), d.card)  # refused unless this card's
    offers = tuple(load_prices([req.prices_file])) if req.prices_file else None
    opts = CostOptions(provider=req.provider, billing=req.billing, train_tokens=req.train_tokens,
                       inter_node_gbps=req.inter_node_gbps, offers=offers)
    result = estimate(model, w, d, allow_long_context=req.allow_long_context, cost=opts,
                      calibration=calibration, replicas=req.replicas)
    if req.requests is not None or req.replay is not None:
        result = _benchmark_run(req, result)
    return result, note


def _benchmark_run(req: EstimateRequest, result: Estimate) -> Estimate:
    """--requests N: the throughput of one engine's finite run of N prompts sent at once
    (estimate/speed.py benchmark_run), in place of the steady-state figure; --replay FILE: the same
    run over a recorded benchmark's own prompts (gpuwise.replay)."""
    import dataclasses

    from gpuwise.estimate.links import card_rates
    from gpuwise.estimate.speed import InferSpeed, benchmark_run

    recorded = None
    if req.replay is not None:
        run = load_recorded_run(req.replay)
        recorded = list(zip(run.prompts, run.outputs, strict=True))
        if req.requests is not None and req.requests != len(recorded):
            raise InputError(Text(f"--requests {req.requests:,} and --replay's {len(recorded):,} recorded "
                                  "requests disagree: give one of them.",
                                  f"--requests {req.requests:,} 与 --replay 录制的 {len(recorded):,} 个请求"
                                  "不一致：二者只给其一。"))
    # --requests is within gpuwise.bounds (check_request), a replay's count within gpuwise.replay's cap
    n = len(recorded) if recorded is not None else int(req.requests or 0)
    if req.task != "infer" or req.replicas != 1:
        raise InputError(Text("--requests and --replay describe one serving engine's benchmark run: use them "
                              "with --task infer and --replicas 1.",
                              "--requests 与 --replay 描述单个推理引擎的一次压测：请配合 --task infer 与 "
                              "--replicas 1 使用。"))
    if not isinstance(result.speed, InferSpeed) or result.memory.capacity is None:
        return result
    rates = card_rates(result.deployment.card, result.calibration, result.deployment.gpus)
    speed = benchmark_run(result.model, result.workload, result.deployment, result.memory, rates,
                          n, result.speed, recorded)
    return dataclasses.replace(result, speed=speed)


def is_diffusion(source: str) -> bool:
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
    if is_diffusion(req.model):  # image and video pipelines: gpuwise.diffusion
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


def model_json(src: str, hub: str = "auto", revision: str | None = None) -> dict[str, Any]:
    """The `gpuwise model --json` object (documented in docs/json.md)."""
    from gpuwise.bounds import check_text
    from gpuwise.catalog.params import count_params

    check_text("model", src)  # a name too long for any path or hub id is refused, never stat()ed
    if hub == "auto" and is_diffusion(src):  # image and video pipelines: gpuwise.diffusion
        from gpuwise.diffusion.service import diffusion_model_json

        return diffusion_model_json(src)

    m = load_model(src, hub=checked_hub(hub), revision=revision)
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
