"""How fast: decode and prefill by phase, and a compute + communication model for training.

A decode step runs its parts as separate kernels, so their times add: the GEMMs (a roofline of
the weight bytes read, for MoE the experts the batch touches, and of their FLOPs at the
precision's own efficiency, FP8 apart from BF16), attention (every sequence's KV and its FLOPs),
two all-reduces per layer under tensor parallel, weights kept off the GPU (over PCIe, or for
llama.cpp's CPU layers at host memory bandwidth), a fixed per-step overhead and, for the pool
engines, the per-layer kernel floors (every small kernel of every layer at a few microseconds
under CUDA graphs: efficiency.toml [decode_kernels]), and the CPU work per
running sequence that the engine does not overlap with the GPU (vLLM V0's Python scheduler and
output processing: data/engines.toml [[step_cpu]] by version). `benchmark_run` turns the steady
state into a finite run of N prompts sent at once (ramp, prefills and the drain behind the longest
outputs). Training lives in speed_train.py (re-exported here for callers of this module).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Precision
from gpuwise.catalog.engines import step_cpu_fixed, step_cpu_per_seq, version_key
from gpuwise.catalog.params import count_params
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.links import (
    Rates,
    efficiency_table,
    host_memory_bandwidth,
    link_path,
    sized_allreduce_seconds,
)
from gpuwise.estimate.memory_infer import kv_element_bytes, kv_share, rules_for, tensor_parallel
from gpuwise.estimate.speed_train import TrainSpeed, train_speed
from gpuwise.estimate.weights import checkpoint_format, weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.tomlcache import load_toml
from gpuwise.units import GB

_GGUF = Path(__file__).resolve().parent.parent / "data" / "gguf_types.toml"

# Engines that pre-allocate a KV pool, batch continuously and run FP8/INT8 GEMMs natively.
POOL_ENGINES = ("vllm", "sglang", "trtllm")

__all__ = ["POOL_ENGINES", "InferSpeed", "TrainSpeed", "benchmark_run", "compute_precision", "infer_speed",
           "output_lengths", "train_speed"]


@dataclass(frozen=True)
class InferSpeed:
    decode_tokens_per_s: float  # per sequence
    throughput_tokens_per_s: float  # all sequences together
    prefill_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    bound: str  # "memory" | "compute" | "communication" | "offload" | "kernel-latency"
    step_breakdown_s: dict[str, float]
    collective_busbw_bytes_per_s: float = 0.0  # the all-reduce bus bandwidth the step assumed (0: one GPU)
    collective_path: str = "none"  # links.link_path: nvls | nvlink | pcie-p2p | pcie-host-bounce ...
    run_requests: int = 0  # > 0: throughput and tpot_s are a finite run's (N prompts at once; tpot its median gap)
    run_seconds: float = 0.0  # that run's duration (prefills, decode steps, the drain of the longest)
    kernel_floor_s: float = 0.0  # the part of step_breakdown_s["overhead"] that is per-layer kernel floors

    def to_dict(self) -> dict[str, Any]:
        # as asdict gives the fields (its one dict copied), without deep-copying every value
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: round(v, 6) if isinstance(v, float) else dict(v) if isinstance(v, dict) else v
                for k, v in out.items()}


@functools.cache
def gguf_decode_table() -> dict[str, Any]:
    """Per-GGUF-type decode bandwidth factors (gguf_types.toml decode_bw_factor), their bits, the default."""
    doc = load_toml(_GGUF)
    factors = {str(t["name"]).upper(): float(t["decode_bw_factor"]) for t in doc["type"] if "decode_bw_factor" in t}
    for alias, target in doc.get("aliases", {}).items():
        if target.upper() in factors:
            factors[alias.upper()] = factors[target.upper()]
    bits = {str(t["name"]).upper(): float(t["bits_per_weight"]) for t in doc["type"]}
    return {"factors": factors, "bits": bits, "default": float(doc["decode"]["default_bw_factor"])}


def compute_precision(model: ModelArch, w: Workload, d: Deployment) -> Precision:
    """The tensor rate the matmuls run at: FP8 only where the card has it; weight-only int4/nf4
    and GGUF dequantise to 16-bit (Marlin/AWQ kernels, llama.cpp's CUDA path)."""
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    if fmt == "fp8" and d.card.dense_tflops("fp8") is not None and d.engine in POOL_ENGINES:
        return "fp8"
    if fmt == "int8" and d.card.dense_tflops("int8") is not None and d.engine in POOL_ENGINES:
        return "int8"
    if d.card.dense_tflops("bf16") is None:
        return "fp16"
    return "bf16"


def _peak_flops(d: Deployment, precision: Precision) -> float:
    return (d.card.dense_tflops(precision) or d.card.dense_tflops("fp16") or d.card.fp32_tflops or 1.0) * 1e12


def _decode_weight_bytes(model: ModelArch, w: Workload, batch: int) -> float:
    """Weights read per decode step: all of a dense model; for MoE the shared part plus the
    experts touched by `batch` tokens: E x (1 - (1 - k/E)^batch) per layer (uniform routing)."""
    wb = weight_bytes(model, w.weights)
    if model.moe is None:
        return wb.total
    p = count_params(model)
    per_param = wb.linear / max(p.linear, 1)
    e, k = model.moe.num_experts, model.moe.experts_per_token
    touched = e * (1 - (1 - k / e) ** batch)
    return wb.total - p.experts * per_param + p.experts * per_param * touched / e


def _avg_kv_tokens(w: Workload) -> float:
    """Mean KV length while decoding: the prompt plus half of the output."""
    return w.prompt_len + w.output_len / 2


@dataclass(frozen=True)
class _Block:
    """Kernels one layer block runs per decode step (efficiency.toml [decode_kernels.blocks])."""

    small: int  # no weights: norms, RoPE, the KV write, top-k, MoE bookkeeping
    gemm: int  # weight GEMMs (the MoE router included)
    kv: int  # the attention kernel reading the KV cache


@dataclass(frozen=True)
class _Kernels:
    """One engine's per-layer kernel counts, read once from efficiency.toml [decode_kernels]."""

    attention: _Block
    mlp: _Block
    mla: _Block
    moe: _Block
    quant_per_gemm: int  # activation-quant kernels per GEMM kernel of an FP8 / INT8 step
    floors: dict[str, float]  # seconds per kernel by card family ("default" for the rest)
    reference_s: float  # the kernel floors decode_step_s already holds (its reference model's)

    def floor(self, family: str) -> float:
        return self.floors.get(family, self.floors["default"])


@functools.cache
def _kernels(engine: str) -> _Kernels | None:
    """The engine's kernel counts and floors, or None where it has none (llama.cpp, transformers:
    their decode_step_s stands as measured)."""
    table = efficiency_table()["decode_kernels"]
    rows = table["blocks"].get(engine)
    if rows is None:
        return None
    blocks = {name: _Block(int(b["small"]), int(b["gemm"]), int(b["kv"])) for name, b in rows.items()}
    floors = {str(k): float(v) for k, v in table["floor_s"].items()}
    ref_floor = floors.get(str(table["reference_family"]), floors["default"])
    ref_kernels = sum(blocks[b].small + blocks[b].kv for b in ("attention", "mlp"))
    reference = float(table["reference_layers"]) * ref_kernels * ref_floor
    return _Kernels(attention=blocks["attention"], mlp=blocks["mlp"], mla=blocks["mla"], moe=blocks["moe"],
                    quant_per_gemm=int(table["quant_per_gemm"]), floors=floors, reference_s=reference)


def _kernel_floor(model: ModelArch, d: Deployment, precision: Precision, gemm: float, attention: float) -> float:
    """Seconds the decode step's kernels spend beyond their bandwidth time (efficiency.toml
    [decode_kernels]): per layer of this pipeline stage, every weight-free kernel at the card's
    floor, each weight GEMM at max(0, floor - its equal share of the GEMM time), the attention
    kernel at max(0, floor - its share of the attention time). 0 for engines without counts."""
    k = _kernels(d.engine)
    if k is None:
        return 0.0
    f = k.floor(d.card.family)
    layers = model.num_layers / d.pp
    moe_layers = (model.num_layers - len(model.moe.dense_layers)) / d.pp if model.moe is not None else 0.0
    attn = k.mla if model.mla is not None else k.attention
    small = layers * attn.small + moe_layers * k.moe.small + (layers - moe_layers) * k.mlp.small
    gemms = layers * attn.gemm + moe_layers * k.moe.gemm + (layers - moe_layers) * k.mlp.gemm
    if precision in ("fp8", "int8"):
        small += gemms * k.quant_per_gemm
    kv = layers * attn.kv
    extra = small * f
    if gemms:
        extra += gemms * max(0.0, f - gemm / gemms)
    if kv:
        extra += kv * max(0.0, f - attention / kv)
    return extra


@functools.cache
def _fixed_overhead(engine: str) -> float:
    """decode_step_s less the kernel floors it holds for its reference model (never below 0)."""
    k = _kernels(engine)
    step = float(efficiency_table()["overheads"]["decode_step_s"][engine])
    return max(step - (k.reference_s if k is not None else 0.0), 0.0)


@functools.cache
def step_cpu_held(engine: str, version: str = "") -> tuple[float, float]:
    """(seconds per token the running sequences hold, seconds of pauses per running sequence) of
    un-overlapped CPU work per decode step (efficiency.toml [[step_cpu_tokens]]: vLLM V0 rebuilt each
    request's whole output every step, and CPython's full collections paused it); the row with the
    highest from_version <= version, '' the newest; (0, 0) where the engine has none."""
    rows = sorted((r for r in efficiency_table().get("step_cpu_tokens", []) if r["engine"] == engine),
                  key=lambda r: version_key(str(r["from_version"])) or (0, 0, 0))
    if not rows:
        return 0.0, 0.0
    key = version_key(version) if version else None
    fitting = rows if key is None else [r for r in rows if (version_key(str(r["from_version"])) or (0, 0, 0)) <= key]
    row = (fitting or rows[:1])[-1]
    return float(row["per_token_s"]), float(row.get("pause_per_seq_s", 0.0))


@dataclass(frozen=True)
class _Step:
    """One decode step's parts (seconds); each is >= 0 and finite by construction."""

    gemm: float  # the linear layers: max(weight bytes read / bandwidth, FLOPs / GEMM rate)
    attention: float  # reading every sequence's KV (and its FLOPs)
    communication: float  # two all-reduces per layer under tensor parallel
    offload: float  # weights kept off the GPU: streamed over PCIe, or run on the CPU (llama.cpp)
    overhead: float  # fixed per step: graph launch, sampling (decode_step_s less its reference floors)
    cpu: float = 0.0  # CPU work not overlapped with the GPU ([[step_cpu]] and [[step_cpu_tokens]])
    kernel_floor: float = 0.0  # the layers' kernels beyond their bandwidth time ([decode_kernels])
    cpu_held: float = 0.0  # the part of `cpu` that grows with the tokens held ([[step_cpu_tokens]])
    pause: float = 0.0  # the part of `cpu` that is the engine's collector pauses, spread over the steps

    @property
    def total(self) -> float:
        return (self.gemm + self.attention + self.communication + self.offload + self.overhead + self.cpu
                + self.kernel_floor)

    def holding(self, ratio: float) -> float:
        """The step's time when its sequences hold `ratio` x the tokens it was costed at (a finite
        run's batch holds more as it drains behind its longest outputs): attention and the held-token
        CPU part scale with them."""
        return self.total + (ratio - 1.0) * (self.attention + self.cpu_held)


def _gguf_factor(model: ModelArch, w: Workload, d: Deployment) -> float:
    """llama.cpp's decode kernels stream each GGUF type at their own share of the bandwidth."""
    if d.engine != "llamacpp":
        return 1.0
    table = gguf_decode_table()
    name = w.weights.split(":", 1)[1].upper() if w.weights.startswith("gguf:") else ""
    quant = model.quant
    if not name and quant is not None and quant.method == "gguf":
        name = min(table["bits"], key=lambda t: abs(table["bits"][t] - quant.bits))
    if not name:
        name = "F16"
    return float(table["factors"].get(name, table["default"]))


def _allreduce_busbw(d: Deployment, r: Rates, n_bytes: float = math.inf) -> float:
    """The all-reduce bus bandwidth the engine gets for a message of `n_bytes` a GPU: NVLS where NCCL
    may use it, the ring figure where the engine turns NVLS off (engines.toml nccl_nvls: SGLang by
    default) or where the message goes through the engine's own peer-to-peer all-reduce instead of
    NCCL (efficiency.toml [links] custom_allreduce_max_bytes)."""
    if n_bytes <= _custom_allreduce_max(d.engine):
        return r.link_busbw
    return r.allreduce if rules_for(d).nccl_nvls else r.link_busbw


@functools.cache
def _custom_allreduce_max(engine: str) -> float:
    """Largest message the engine's own all-reduce kernels take (0 where it has none)."""
    return float(efficiency_table()["links"]["custom_allreduce_max_bytes"].get(engine, 0))


def _collective_path(d: Deployment, tp: int, n_bytes: float = math.inf) -> str:
    """links.link_path, or the card's own link where the engine keeps NVLS off or all-reduces a
    message of `n_bytes` with its own kernels (_allreduce_busbw)."""
    path = link_path(d.card, tp)
    nvls = rules_for(d).nccl_nvls and n_bytes > _custom_allreduce_max(d.engine)
    return d.card.interconnect if path == "nvls" and not nvls else path


def _decode_step(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates,
                 batch: int, tp: int) -> _Step:
    elem = kv_element_bytes(w, model)
    share = kv_share(model, tp)
    kv = (model.kv_bytes_for_context(int(_avg_kv_tokens(w)), elem)
          + model.state_bytes_per_sequence(elem)) * share * batch / d.pp
    every = weight_bytes(model, w.weights).total / (tp * d.pp)
    read = _decode_weight_bytes(model, w, batch) / (tp * d.pp)  # for MoE, the experts touched
    touched = read / every if every else 1.0
    off_gpu = min(every, (mem.host.cpu_ram + mem.host.nvme) / max(d.gpus, 1))
    if d.engine == "llamacpp" and d.gpu_layers is not None:  # host RAM also holds the CPU layers' KV
        off_gpu = every * (1 - min(max(d.gpu_layers, 0), model.num_layers) / model.num_layers)
    bw = r.mem_bw * _gguf_factor(model, w, d) * (r.decode_llamacpp if d.engine == "llamacpp" else 1.0)
    precision = compute_precision(model, w, d)
    rate = _peak_flops(d, precision) * _decode_gemm_share(model, w, d, r, precision)
    gemm = max((every - off_gpu) * touched / bw, _gemm_compute_seconds(model, w, d, batch, tp, rate))
    attn_flops = 4 * model.num_layers * model.q_dim * _avg_kv_tokens(w) * batch / (tp * d.pp)  # QK^T and AV
    share_fa = float(efficiency_table()["overheads"]["attention_flops_share"])
    attention = max(kv / r.mem_bw, attn_flops / (_peak_flops(d, "bf16") * r.gemm * share_fa))
    if d.engine == "llamacpp" and d.gpu_layers is not None and d.gpu_layers < model.num_layers:
        on_gpu = max(d.gpu_layers, 0) / model.num_layers  # the CPU layers read their KV from host RAM
        attention = kv * on_gpu / r.mem_bw + kv * (1 - on_gpu) / _offload_rate(d, mem, r)
    msg = batch * model.hidden_size * 2.0  # bf16 hidden state per token
    comm = 2 * model.num_layers / d.pp * sized_allreduce_seconds(msg, tp, _allreduce_busbw(d, r, msg),
                                                                 r.link_latency)
    offload = off_gpu * touched / _offload_rate(d, mem, r)
    overhead = _fixed_overhead(d.engine)  # per step: graph launch, sampling
    floor = _kernel_floor(model, d, precision, gemm, attention)  # per layer: the kernels' floors
    # CPU work the GPU waits for (vLLM V0's Python loop, scheduler and output processing;
    # data/engines.toml [[step_cpu]] by version): a fixed part and one per running sequence
    # and one per token the running sequences hold (V0 rebuilt each request's whole output every step),
    # with V0's collector pauses spread over the steps (efficiency.toml [[step_cpu_tokens]])
    per_token, pause_per_seq = step_cpu_held(d.engine, d.engine_version)
    held = per_token * batch * _avg_kv_tokens(w)
    pause = pause_per_seq * batch
    cpu = (step_cpu_fixed(d.engine, d.engine_version) + step_cpu_per_seq(d.engine, d.engine_version) * batch
           + held + pause)
    return _Step(gemm=gemm, attention=attention, communication=comm, offload=offload, overhead=overhead,
                 cpu=cpu, kernel_floor=floor, cpu_held=held, pause=pause)


def weight_only(model: ModelArch, w: Workload, d: Deployment) -> bool:
    """Do vLLM's / SGLang's decode GEMMs run a weight-only Marlin kernel (16-bit activations
    against packed weights)? GPTQ/AWQ int4 checkpoints do on the cards Marlin supports, and FP8
    checkpoints on cards without FP8 tensor cores (fp8_marlin, W8A16)."""
    if d.engine not in ("vllm", "sglang"):
        return False
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    return fmt == "int4" or (fmt == "fp8" and d.card.dense_tflops("fp8") is None)


def _decode_gemm_share(model: ModelArch, w: Workload, d: Deployment, r: Rates, precision: Precision) -> float:
    """The share of the precision's dense peak a decode step's GEMMs reach once compute-bound:
    the large-GEMM figure, or for weight-only Marlin its own plateau of the 16-bit peak
    (efficiency.toml [overheads] marlin_peak_share), whichever is lower."""
    share = r.gemm_at(precision)
    if weight_only(model, w, d):
        share = min(share, float(efficiency_table()["overheads"]["marlin_peak_share"]))
    return share


def _marlin_prefill(model: ModelArch, w: Workload, d: Deployment) -> bool:
    """Does the prefill run its linear layers through a weight-only Marlin kernel that plateaus at
    large batch? vLLM's Marlin methods call Marlin at every batch size (Fp8LinearMethod.apply and
    CompressedTensorsW8A16Fp8.apply_weights: 'if self.use_marlin: return apply_fp8_marlin_linear(...)',
    gptq_marlin / awq_marlin likewise), and before the 2025 rework that kernel ran 'the batch 64
    kernel repeatedly' (efficiency.toml [overheads] marlin_prefill_before: the versions it holds for).
    An unversioned request is the newest engine: no plateau."""
    before = efficiency_table()["overheads"]["marlin_prefill_before"].get(d.engine)
    if before is None or not d.engine_version or not weight_only(model, w, d):
        return False
    key, limit = version_key(d.engine_version), version_key(str(before))
    return key is not None and limit is not None and key < limit


@dataclass(frozen=True)
class _GemmShape:
    """How much slower than the large-GEMM rate a decode step's tiled GEMMs run for their shape
    (efficiency.toml [overheads] decode_gemm_*): the width part read once per (model, TP)."""

    dense: float  # FLOP-weighted slowdown of the attention and dense-MLP GEMMs (>= 1) for their width
    rows_half: float  # rows at which a GEMM reaches half its large-GEMM rate
    rows_ref: float  # the rows of the shapes behind the families' GEMM shares (no slowdown there)
    rows_min: float  # the fewest rows measured: fewer take its slowdown (their GEMMs read, not compute)

    def rows(self, m: float) -> float:
        """Slowdown of a GEMM of m (tile-padded) rows against the reference shape (>= 1)."""
        m = max(self.rows_min, m)
        slow = (m + self.rows_half) / m * self.rows_ref / (self.rows_ref + self.rows_half)
        return max(1.0, slow)


@functools.lru_cache(maxsize=512)
def _gemm_shape(model: ModelArch, tp: int) -> _GemmShape:
    """Each dense GEMM of a layer on one GPU under TP (QKV and gate/up split their outputs, O and down
    their inputs), slowed by its narrower side w as (w + W) / w x w_ref / (w_ref + W) when below the
    reference width (w no narrower than the narrowest measured, 512), averaged over the GEMMs weighted
    by their FLOPs. The routed experts' shards (DeepSeek-V3's 2,048 / TP 8 = 256 wide) lie below the
    measured widths and take the rows slowdown only."""
    t = efficiency_table()["overheads"]
    half, ref = float(t["decode_gemm_width_half"]), float(t["decode_gemm_width_ref"])

    def slow(n: float, k: float) -> float:
        w = max(min(n, k), 512.0)
        return max(1.0, (w + half) / w * ref / (ref + half))

    def mean(gemms: list[tuple[float, float]]) -> float:
        size = sum(n * k for n, k in gemms)
        return sum(n * k * slow(n, k) for n, k in gemms) / size if size else 1.0

    h = model.hidden_size
    attn = [((model.q_dim + 2 * model.kv_dim) / tp, h), (h, model.q_dim / tp)]
    up = 2 if model.gated_mlp else 1
    mlp = [(up * model.intermediate_size / tp, h), (h, model.intermediate_size / tp)]
    dense = attn + (mlp if model.moe is None or model.moe.dense_layers else [])
    if model.moe is not None and model.moe.num_shared_experts:
        ish = model.moe.shared_intermediate_size * model.moe.num_shared_experts
        dense = dense + [(up * ish / tp, h), (h, ish / tp)]
    return _GemmShape(dense=mean(dense), rows_half=float(t["decode_gemm_rows_half"]),
                      rows_ref=float(t["decode_gemm_rows_ref"]), rows_min=float(t["decode_gemm_rows_min"]))


def _gemm_compute_seconds(model: ModelArch, w: Workload, d: Deployment, batch: int, tp: int,
                          rate: float) -> float:
    """FLOP time of a decode step's linear layers at `rate` (large-GEMM FLOP/s). The pool engines
    run them as tiled GEMMs whose rows come in whole tiles (tile quantization: efficiency.toml
    [overheads] gemm_tile_rows), so m tokens cost ceil(m / tile) tiles; MoE experts each see
    batch x top-k / (experts touched) tokens, and a few tokens an expert still fill a tile (weight-only
    Marlin: its 16-row tile, efficiency.toml marlin_tile_rows). A tiled GEMM of few rows, or one whose
    narrower side TP has cut down, runs below the large-GEMM rate (_gemm_shape); Marlin's plateau
    (marlin_peak_share) is its own, flat from 64 rows up, and takes no shape slowdown.
    llama.cpp and transformers' batch-1 steps are mat-vec kernels: no tile."""
    p = count_params(model)
    table = efficiency_table()["overheads"]
    tiled = d.engine in POOL_ENGINES
    marlin = weight_only(model, w, d)
    tile = float(table["gemm_tile_rows"]) if tiled else 1.0
    if marlin:
        tile = float(table["marlin_tile_rows"])  # Marlin's own row tile
    shape = _gemm_shape(model, tp) if tiled and not marlin else None

    def padded(tokens: float) -> float:
        return math.ceil(tokens / tile - 1e-9) * tile / tokens

    dense_factor = padded(batch)
    expert = 0.0
    factor = 1.0
    if model.moe is not None:
        e, k = model.moe.num_experts, model.moe.experts_per_token
        expert = p.experts * k / e  # expert parameters one token runs
        touched = e * (1 - (1 - k / e) ** batch)
        rows = batch * k / touched  # tokens each touched expert sees
        factor = padded(rows)
        if shape is not None:
            factor *= shape.rows(rows * factor)
    if shape is not None:
        dense_factor *= shape.dense * shape.rows(batch * dense_factor)
    dense = max(p.active - expert, 0.0)
    flops = 2 * batch * (dense * dense_factor + expert * factor)
    return flops / (tp * d.pp) / rate


def _offload_rate(d: Deployment, mem: MemoryResult, r: Rates) -> float:
    """Bytes/s of the weights kept off the GPU: llama.cpp runs its CPU layers at host memory
    bandwidth; vLLM/DeepSpeed-style offload streams them over PCIe (NVMe when offloaded there)."""
    if d.engine == "llamacpp":
        return d.cpu_mem_bw_gbps * GB if d.cpu_mem_bw_gbps else host_memory_bandwidth(d.card)
    if mem.host.nvme:
        return float(efficiency_table()["links"]["nvme_gbps"]) * GB
    return r.pcie_h2d


def infer_speed(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates) -> InferSpeed:
    tp = tensor_parallel(model, d)
    batch = w.concurrency
    cap = mem.capacity
    if d.engine in POOL_ENGINES and cap is not None and 1 <= cap.max_concurrency < batch:
        batch = int(cap.max_concurrency)  # the engine queues what its KV pool cannot hold
    step = _decode_step(model, w, d, mem, r, batch, tp)
    stage = step.total
    # pipeline: a token passes every stage in turn; with >= pp batches in flight the stages overlap
    tpot = stage * d.pp
    decode_rate = batch / stage if batch >= d.pp else batch / tpot
    parts = {"gemm": step.gemm, "attention": step.attention, "communication": step.communication,
             "offload": step.offload}
    bound = _bound(step)
    weights = _decode_weight_bytes(model, w, batch) / (tp * d.pp)
    pre = _prefill(model, w, d, mem, r, tp, compute_precision(model, w, d), weights)
    ttft = pre.seconds()
    prefill_tps = pre.prompt / ttft
    packed = pre.packed
    # Each request also costs its prefill: B requests of O output tokens take O decode steps plus
    # B prompt prefills (continuous batching interleaves them; their compute adds up).
    out = w.output_len
    # Under load the waiting prompts fill whole prefill forwards: each adds its packed cost.
    throughput = batch * out / (batch * out / decode_rate + (batch * packed / d.pp if w.prompt_len else 0.0))
    stall = _prefill_stall(w, d, batch, pre.prompt / packed)
    msg = batch * model.hidden_size * 2.0  # one decode all-reduce a GPU (_decode_step's)
    loaded = tpot + stall  # what each user sees per output token
    return InferSpeed(decode_tokens_per_s=1 / loaded, throughput_tokens_per_s=throughput,
                      prefill_tokens_per_s=prefill_tps, ttft_s=ttft + tpot, tpot_s=loaded, bound=bound,
                      step_breakdown_s={**parts, "overhead": step.overhead + step.kernel_floor, "cpu": step.cpu,
                                        "prefill_stall": stall},
                      collective_busbw_bytes_per_s=_allreduce_busbw(d, r, msg) if tp > 1 else 0.0,
                      collective_path=_collective_path(d, tp, msg), kernel_floor_s=step.kernel_floor)


def _prefill_stall(w: Workload, d: Deployment, batch: int, prefill_tps: float) -> float:
    """Seconds each running sequence waits per output token for the other sequences' prefills: a
    continuous-batching engine admits a new request whenever one finishes (batch / output of them
    per step in the steady state) and runs its prompt in or beside the decode step (V0 as a
    prefill step all decoding sequences wait for; chunked prefill inside the mixed step), so the
    time per output token each user sees (benchmark_serving's TPOT and ITL) carries the prefills
    of the other batch - 1 requests. A request's own prefill is its TTFT, not its TPOT."""
    if d.engine not in POOL_ENGINES or batch <= 1:
        return 0.0
    return (batch - 1) * max(w.prompt_len, 1) / (max(w.output_len, 1) * prefill_tps * d.pp)


def _bound(step: _Step) -> str:
    """What limits the step: communication, offload or the layers' kernel floors (kernel-latency:
    small kernels one after another, as DeepSeek-V3 at batch 1) when they dominate; else the GEMMs'
    and attention's side of their rooflines (memory when both read more than they compute)."""
    parts = {"memory": step.gemm + step.attention, "communication": step.communication, "offload": step.offload,
             "kernel-latency": step.kernel_floor}
    return max(parts, key=lambda k: parts[k])


class _Prefill(NamedTuple):
    """One prompt's prefill, by part (seconds), and how many prompt tokens the engine packs into one
    forward when several prompts wait (efficiency.toml [overheads] prefill_batch_tokens)."""

    prompt: int  # tokens of one prompt (at least 1)
    compute: float  # its FLOPs at the prefill rate
    read: float  # one pass over the weights (shared by every prompt of a packed forward)
    comm: float  # its all-reduces under tensor parallel
    offload: float  # weights kept off the GPU, crossing the host link once per forward
    budget: int  # prompt tokens one forward holds (>= prompt)

    def seconds(self, prompts: float = 1.0) -> float:
        """`prompts` prompts prefilled together: their FLOPs add; the weights are read once per
        forward of `budget` tokens (a prompt alone reads them all, as its TTFT does)."""
        if prompts == 1.0:
            return max(self.compute, self.read) + self.comm + self.offload
        forwards = max(1.0, math.ceil(prompts * self.prompt / self.budget - 1e-9))
        return max(prompts * self.compute, forwards * self.read) + prompts * self.comm + forwards * self.offload

    @property
    def packed(self) -> float:
        """Seconds a prompt adds in a loaded engine, where waiting prompts fill whole forwards."""
        share = self.prompt / self.budget
        return max(self.compute, share * self.read) + self.comm + share * self.offload


@functools.cache
def _prefill_batch_tokens(engine: str) -> int:
    """Prompt tokens one prefill forward packs (efficiency.toml [overheads] prefill_batch_tokens;
    1 where the engine prefills one request at a time)."""
    return int(efficiency_table()["overheads"]["prefill_batch_tokens"].get(engine, 1))


def _prefill(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates, tp: int,
             precision: Precision, weights: float) -> _Prefill:
    """One prompt: 2 x active params x tokens + causal attention 2 x layers x q_dim x tokens^2,
    at the family's prefill fraction of peak (FP8 at its own GEMM share), or the time to read the
    weights once, whichever is longer; TP adds two all-reduces of the prompt per layer; weights kept
    off the GPU cross PCIe once per forward (llama.cpp too: it offloads large batches' CPU layers
    to the GPU). Where the engine's weight-only Marlin kernel stops scaling at large batch
    (_marlin_prefill) the prompt's linear FLOPs take Marlin's plateau in place of the GEMM share
    (_decode_gemm_share); attention keeps the prefill rate."""
    prompt = max(w.prompt_len, 1)  # a request of one token still prefills that token
    p = count_params(model)
    linear = 2 * p.active * prompt / tp
    attention = 2 * model.num_layers * model.q_dim * prompt * prompt / tp
    base = r.prefill_llamacpp if d.engine == "llamacpp" and r.prefill_llamacpp else r.prefill
    rate = base * r.gemm_at(precision) / r.gemm
    linear_rate = rate
    if _marlin_prefill(model, w, d):  # the prompt's GEMMs at Marlin's plateau, not cuBLAS's share
        linear_rate = rate * _decode_gemm_share(model, w, d, r, precision) / r.gemm_at(precision)
    compute = (linear / linear_rate + attention / rate) / _peak_flops(d, precision)
    msg = prompt * model.hidden_size * 2.0
    comm = 2 * model.num_layers * sized_allreduce_seconds(msg, tp, _allreduce_busbw(d, r, msg), r.link_latency)
    off_gpu = (mem.host.cpu_ram + mem.host.nvme) / max(d.gpus, 1)
    if d.engine == "llamacpp" and d.gpu_layers is not None:  # weights only: the CPU layers' KV stays put
        total = weight_bytes(model, w.weights).total / tp
        off_gpu = total * (1 - min(max(d.gpu_layers, 0), model.num_layers) / model.num_layers)
    link = float(efficiency_table()["links"]["nvme_gbps"]) * GB if mem.host.nvme else r.pcie_h2d
    return _Prefill(prompt=prompt, compute=compute, read=weights / r.mem_bw,
                    comm=comm, offload=off_gpu / link, budget=max(prompt, _prefill_batch_tokens(d.engine)))


def output_lengths(requests: int, mean: int, cap: int) -> list[int]:
    """Output lengths of `requests` chat requests: exponential quantiles with `mean` (ShareGPT's
    are: the 320 prompts of LambdaLabsML/vllm-benchmark results/prompt_320/1xH100-80GB-SXM/
    Mistral-7B-Instruct-v0.3_tp1_len2000.json@de55d46 have mean 224.4 and standard deviation 228.9,
    a coefficient of variation of 1.02 where an exponential has 1.0), each at most `cap`, in a
    fixed shuffled order (benchmark_serving sends the sampled dataset in its own order)."""
    import random

    raw = [-math.log(1 - (i + 0.5) / requests) for i in range(requests)]
    scale = mean * requests / sum(raw)
    lengths = [min(cap, max(1, round(x * scale))) for x in raw]
    random.Random(0).shuffle(lengths)
    return lengths


def benchmark_run(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates,
                  requests: int, steady: InferSpeed) -> InferSpeed:
    """A finite benchmark run (vLLM benchmark_serving --num-prompts N --request-rate inf): N prompts
    sent at once, at most the engine's running slots (--concurrency, less when the KV pool holds
    fewer) decoding together; each admitted request's prefill runs before its first token (V0 runs
    prefill steps; chunked prefill spends the same compute); every decode step takes the step time
    of the batch still running, so the run drains at small batches behind its longest outputs.
    The throughput is the run's output tokens over its duration, as benchmark_serving reports it; the
    time per output token is the run's median inter-token gap (benchmark_serving's median ITL): the
    median over every token of its step's time, the collector pauses apart (a few long gaps)."""
    tp = tensor_parallel(model, d)
    slots = w.concurrency
    cap = mem.capacity
    if d.engine in POOL_ENGINES and cap is not None and 1 <= cap.max_concurrency < slots:
        slots = int(cap.max_concurrency)
    lengths = output_lengths(requests, w.output_len, max(1, model.max_context - w.prompt_len))
    weights = _decode_weight_bytes(model, w, slots) / (tp * d.pp)
    pre = _prefill(model, w, d, mem, r, tp, compute_precision(model, w, d), weights)
    stage: dict[int, _Step] = {}

    def step_time(batch: int, held: float) -> tuple[float, float]:
        """One step of `batch` sequences holding `held` tokens (the step is costed at the mean hold),
        and its pause part."""
        if batch not in stage:
            stage[batch] = _decode_step(model, w, d, mem, r, batch, tp)
        part = stage[batch]
        t = part.holding(held / (batch * _avg_kv_tokens(w)))
        scale = 1 if batch >= d.pp else d.pp  # pipelined stages overlap at >= pp batches
        return t * scale, part.pause * scale

    import heapq

    seconds, step, queue = 0.0, 0, iter(lengths)
    running: list[tuple[int, int]] = []  # (the step each running request ends at, the step it began)
    began = 0  # the sum of the running requests' first steps
    gaps: list[tuple[float, int]] = []  # (a step's time without its pause, tokens it gives)
    waiting = len(lengths)
    while waiting or running:
        admitted = 0
        while waiting and len(running) < slots:
            heapq.heappush(running, (step + next(queue), step))
            began += step
            waiting -= 1
            admitted += 1
        if admitted:  # the prompts admitted together fill whole prefill forwards
            seconds += pre.seconds(admitted)
        steps = running[0][0] - step  # until the next request finishes, the batch stays the same
        n = len(running)
        held = n * w.prompt_len + n * (step + steps / 2) - began  # each holds its prompt and its output so far
        t, pause = step_time(n, held)
        seconds += steps * t
        gaps.append((t - pause, steps * n))
        step = running[0][0]
        while running and running[0][0] == step:
            began -= heapq.heappop(running)[1]
    itl = _weighted_median(gaps)
    return dataclasses.replace(steady, throughput_tokens_per_s=sum(lengths) / seconds, run_requests=requests,
                               run_seconds=seconds, tpot_s=itl, decode_tokens_per_s=1 / itl)


def _weighted_median(values: list[tuple[float, int]]) -> float:
    """The value at which half the total weight lies below (the median over every token)."""
    ordered = sorted(values)
    half = sum(weight for _, weight in ordered) / 2
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]
