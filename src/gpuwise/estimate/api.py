"""The estimate: memory (and later speed and cost) for one model, workload and deployment."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.params import count_params
from gpuwise.catalog.prices import PriceOffer
from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.constants import engine_constants
from gpuwise.estimate.cost import Cost, job_cost
from gpuwise.estimate.fit import Fix, command_line_words, find_fixes
from gpuwise.estimate.links import card_rates
from gpuwise.estimate.memory_infer import infer_memory
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.provenance import provenance
from gpuwise.estimate.ranges import Ranged, estimate_values, fit_verdict, ranges_for
from gpuwise.estimate.speed import InferSpeed, TrainSpeed, infer_speed, train_speed
from gpuwise.estimate.startup import startup
from gpuwise.estimate.weights import checkpoint_format
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB

SCHEMA_VERSION = 1


def estimate_memory(model: ModelArch, w: Workload, d: Deployment) -> MemoryResult:
    """The pure, fast path: per-GPU memory and whether it fits."""
    return train_memory(model, w, d) if w.is_training else infer_memory(model, w, d)


@dataclass(frozen=True)
class Estimate:
    model: ModelArch
    workload: Workload
    deployment: Deployment
    memory: MemoryResult
    warnings: tuple[Text, ...]
    suggestions: tuple[Text, ...]  # the fixes in the command line's words
    speed: InferSpeed | TrainSpeed | None = None
    cost: Cost | None = None
    calibrated: bool = False
    replicas: int = 1
    calibration: Any = None  # the verify Calibration the speeds used, if any
    fixes: tuple[Fix, ...] = ()  # the same fixes as data, for each shell to word

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @functools.cached_property
    def ranges(self) -> Ranged:
        """80 % bands (data/intervals.toml) for the numbers the estimate gives."""
        return ranges_for(estimate_values(self.memory, self.speed, self.cost), training=self.workload.is_training,
                          engine=self.deployment.engine, family=self.deployment.card.family, task=self.workload.task,
                          framework=self.workload.framework,
                          caps={"capacity.max_context": self.model.max_context})

    @property
    def fit(self) -> str:
        """fits | tight (fits at the estimate, not at the top of its band) | does_not_fit."""
        top = self.ranges.get("memory.required")
        return fit_verdict(self.memory.breakdown.required, self.memory.usable, top.high if top else None)

    def to_dict(self) -> dict[str, Any]:
        mem, d, w = self.memory, self.deployment, self.workload
        params = count_params(self.model)
        tensors = mem.tensors_beside_full_pool
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "model": {"name": self.model.name, "params_total": params.total,
                      "params_active": params.active, "approximate": self.model.approximate},
            "card": d.card.id, "gpus": d.gpus, "replicas": self.replicas,
            "gpus_total": d.gpus * d.nodes * self.replicas, "task": w.task,
            "engine": d.engine if not w.is_training else None,
            "weights": w.weights if w.weights != "auto" else checkpoint_format(self.model),
            "memory": mem.breakdown.to_dict(),
            "usable_bytes": round(mem.usable),
            "fits": mem.fits,
            "fit": self.fit,
            "headroom_bytes": round(mem.usable - mem.breakdown.required),
            "tensor_headroom_bytes": None if tensors is None else round(mem.usable - tensors),
            "host": mem.host.to_dict(),
            "warnings": [t.en for t in self.warnings],
            "warnings_zh": [t.zh for t in self.warnings],
            "suggestions": [t.en for t in self.suggestions],
            "suggestions_zh": [t.zh for t in self.suggestions],
            "fixes": [f.to_dict() for f in self.fixes],
        }
        if d.cp > 1:  # training under context parallelism (--cp, --cp-kind)
            out["context_parallel"] = {"cp": d.cp, "kind": d.cp_kind}
        if mem.capacity is not None:
            out["capacity"] = mem.capacity.to_dict()
        if self.speed is not None:
            out["speed"] = self.speed.to_dict()
        out["cost"] = self.cost.to_dict() if self.cost is not None else None
        out["calibrated"] = self.calibrated
        out["ranges"] = self.ranges.to_dict()
        out["provenance"] = provenance(self.model, d.card, training=w.is_training, calibration=self.calibration,
                                       ranges=self.ranges, has=frozenset(k for k in ("capacity", "speed") if k in out)
                                       | ({"cost"} if self.cost else set())
                                       | ({"kv_pool"} if mem.breakdown.kv_pool else set()))
        if d.margin and not w.is_training:
            out["margin"] = _margin(self)
        boot = None if w.is_training else startup(self.model, w, d, mem)
        if boot is not None:
            out["engine_startup"] = boot  # the engine's rule set and the lines it would print
        if w.is_training:
            out["limits"] = training_limits(self.model, w, d)
            out["framework"] = framework_dict(w, d)
        return out


def framework_dict(w: Workload, d: Deployment) -> dict[str, Any]:
    """The framework a training estimate follows, and every default it took from it."""
    from gpuwise.catalog.frameworks import find_framework

    fw = find_framework(w.framework)
    knobs = {"loss": w.loss, "grad_ckpt": w.grad_ckpt, "activation_offload": w.activation_offload,
             "optimizer": w.optimizer, "optimizer_in_backward": w.optimizer_in_backward,
             "packing": w.packing, "padding_free": w.padding_free, "compile": w.compile, "float8": w.float8,
             "zero": d.zero, "dora": w.dora, "modules_to_save": list(w.modules_to_save)}
    return {"id": fw.id, "name": fw.name, "version": fw.version, "launch": fw.launch,
            "knobs": knobs, "defaults_applied": list(w.framework_defaults),
            "chosen_by_default": "framework" in w.framework_defaults, "default_reason": fw.default_reason,
            "adapter_dtype": fw.adapter_dtype, "master_weights": fw.master_weights,
            "peak_reported": fw.peak_reported, "peak_note": fw.peak_note, "sources": list(fw.sources)}


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest n in [low, high] with fits(n), for a fits() that only turns false as n grows."""
    if not fits(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def training_limits(model: ModelArch, w: Workload, d: Deployment) -> dict[str, int | None]:
    """The largest micro-batch at this sequence length, and the longest sequence at this
    micro-batch, that fit (memory only grows with either; a dozen estimates each)."""
    def fits(changed: Workload) -> bool:
        return estimate_memory(model, changed, d).fits
    return {"max_micro_batch": _largest(lambda n: fits(dataclasses.replace(w, micro_batch=n)), 1, 4096),
            "max_seq_len": _largest(lambda n: fits(dataclasses.replace(w, seq_len=n)), 128,
                                    max(128, model.max_context))}


def _margin(e: Estimate) -> dict[str, Any]:
    """The guides' rule of thumb for online serving: plan twice the weights' memory per GPU,
    so KV cache and bursts have as much room again. Shown apart; it never changes `fits`."""
    weights = e.memory.breakdown.component("weights")
    need = 2 * weights + e.memory.breakdown.component("overhead")
    return {"rule": "2x weights", "required_bytes": round(need), "meets": need <= e.memory.usable}


def _check_context(model: ModelArch, w: Workload) -> None:
    if w.is_training or w.context <= model.max_context:
        return
    raise InputError(Text(
        f"--context {w.context:,} exceeds {model.name}'s maximum of {model.max_context:,} tokens.",
        f"--context {w.context:,} 超过 {model.name} 的最大上下文 {model.max_context:,}。"),
        hint=Text("Pass --allow-long-context if you extend it with RoPE scaling.",
                  "若用 RoPE 缩放扩展了上下文，请加 --allow-long-context。"))


def check_valid(model: ModelArch, w: Workload, d: Deployment, *, allow_long_context: bool = False) -> None:
    """Refuse what no engine or framework runs. `estimate` and `plan` share this one check, so a
    configuration the planner ranks is one that `estimate` accepts. Of the deployment it reads
    the card and the engine only (the plan search checks each workload once per card and engine:
    tests/test_plan_caches.py)."""
    if not allow_long_context:
        _check_context(model, w)
    card = d.card
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    if (fmt != "fp8" and not (w.is_training and w.float8)) or card.dense_tflops("fp8") is not None:
        return
    if w.is_training:
        raise InputError(Text(f"{card.name} has no FP8 tensor cores, so it cannot train in FP8.",
                              f"{card.name} 没有 FP8 张量核心，无法做 FP8 训练。"),
                         hint=Text("Train in bf16 (drop --float8, or --weights bf16), "
                                   "or pick a card with FP8 (Ada, Hopper, Blackwell).",
                                   "请用 bf16 训练（去掉 --float8，或 --weights bf16），"
                                   "或换用支持 FP8 的卡（Ada、Hopper、Blackwell）。"))
    if d.engine != "vllm" or card.software != "cuda":  # Marlin's weight-only FP8 is a CUDA kernel
        raise InputError(Text(f"{card.name} has no FP8 tensor cores; {d.engine} cannot run FP8 weights on it.",
                              f"{card.name} 没有 FP8 张量核心，{d.engine} 无法在其上运行 FP8 权重。"),
                         hint=Text("Use --engine vllm (weight-only FP8 via Marlin) or --weights int8/bf16.",
                                   "请用 --engine vllm（Marlin 仅权重 FP8）或 --weights int8/bf16。"))


def _warnings(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult) -> list[Text]:
    card = d.card
    found = [*model.notes, *mem.warnings]
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    if fmt == "fp8" and card.dense_tflops("fp8") is None:
        found.append(Text(f"{card.name} has no FP8 compute: vLLM runs FP8 weights weight-only (Marlin W8A16).",
                          f"{card.name} 不支持 FP8 计算：vLLM 以仅权重方式（Marlin W8A16）运行 FP8 权重。"))
    if not w.is_training and d.engine == "vllm":
        graphs = engine_constants()["vllm"]["cuda_graph_gib"] * GiB
        if (1 - d.gpu_memory_utilization) * card.usable_bytes < graphs:
            found.append(Text("--gpu-memory-utilization leaves less than the ~0.5 GiB CUDA graphs need.",
                              "--gpu-memory-utilization 留下的显存不足 CUDA graph 所需的约 0.5 GiB。"))
    pool_engine = not w.is_training and d.engine in ("vllm", "sglang", "trtllm")
    if pool_engine and mem.capacity is not None and mem.capacity.max_concurrency < 1:
        name = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[d.engine]
        found.append(Text(f"{name} would refuse to start: one {w.context:,}-token request needs more KV "
                          "cache than the pool holds.",
                          f"{name} 将无法启动：一个 {w.context:,} token 的请求所需 KV 超过 KV 池容量。"))
    return found


@dataclass(frozen=True)
class CostOptions:
    """Pricing choices: provider, billing, and the training run's size."""

    provider: str | None = None
    billing: str = "hourly"
    train_tokens: float | None = None  # tokens to train on, for the per-run cost
    inter_node_gbps: float | None = None  # None: the card's platform reference fabric
    offers: tuple[PriceOffer, ...] | None = None  # None: the shipped and config-dir price files


def speed_of(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult,
             calibration: Any = None, inter_node_gbps: float | None = None) -> InferSpeed | TrainSpeed:
    rates = card_rates(d.card, calibration, d.gpus)
    if w.is_training:
        return train_speed(model, w, d, mem, rates, inter_node_gbps)
    return infer_speed(model, w, d, mem, rates)


def cost_of(d: Deployment, speed: InferSpeed | TrainSpeed, opts: CostOptions, replicas: int = 1) -> Cost | None:
    """The whole deployment's cost: every replica's GPUs, and the tokens of all of them
    (`speed` is the deployment's, see `scale_out`)."""
    n = d.gpus * d.nodes * replicas
    if isinstance(speed, TrainSpeed):
        seconds = opts.train_tokens / speed.tokens_per_s if opts.train_tokens else None
        return job_cost(d.card.id, n, provider=opts.provider, billing=opts.billing, run_seconds=seconds,
                        tokens_per_s=speed.tokens_per_s, offers=opts.offers)
    return job_cost(d.card.id, n, provider=opts.provider, billing=opts.billing,
                    tokens_per_s=speed.throughput_tokens_per_s, offers=opts.offers)


def replica_users(w: Workload, replicas: int) -> int:
    """The users one of `replicas` identical engines behind a load balancer serves (rounded up)."""
    return -(-w.concurrency // replicas)


def per_replica(w: Workload, replicas: int) -> Workload:
    """What one of `replicas` identical engines behind a load balancer serves: its share of users."""
    return w if replicas == 1 else dataclasses.replace(w, concurrency=replica_users(w, replicas))


def scale_out(speed: InferSpeed | TrainSpeed, replicas: int) -> InferSpeed | TrainSpeed:
    """The deployment's speed: replicas add throughput; each user still sees one replica's latency."""
    if replicas == 1 or not isinstance(speed, InferSpeed):
        return speed
    return dataclasses.replace(speed, throughput_tokens_per_s=speed.throughput_tokens_per_s * replicas)


def estimate(model: ModelArch, w: Workload, d: Deployment, *, allow_long_context: bool = False,
             suggest: bool = True, cost: CostOptions | None = None, calibration: Any = None,
             replicas: int = 1) -> Estimate:
    """Memory per GPU, fit verdict, warnings, the nearest fixes, speed and cost. Serving with
    `replicas` engines: memory is one replica's (each serves its share of the users); speed
    and cost are the whole deployment's."""
    check_valid(model, w, d, allow_long_context=allow_long_context)
    if replicas > 1:
        if w.is_training:
            raise InputError(Text("--replicas is for serving; training scales with --gpus and --nodes.",
                                  "--replicas 用于推理服务；训练请用 --gpus 与 --nodes 扩展。"))
        w = per_replica(w, replicas)
    mem = estimate_memory(model, w, d)
    warnings = _warnings(model, w, d, mem)
    fixes = find_fixes(model, w, d, mem, estimate_memory) if suggest and not mem.fits else ()
    opts = cost or CostOptions()
    speed = scale_out(speed_of(model, w, d, mem, calibration, opts.inter_node_gbps), replicas)
    if calibration is not None:
        warnings.append(calibration.note)  # "Speeds calibrated from <file> (<card>, <date>)."
    return Estimate(model=model, workload=w, deployment=d, memory=mem, warnings=tuple(warnings),
                    suggestions=tuple(command_line_words(f) for f in fixes), fixes=fixes, speed=speed,
                    cost=cost_of(d, speed, opts, replicas),
                    calibrated=calibration is not None, replicas=replicas, calibration=calibration)
