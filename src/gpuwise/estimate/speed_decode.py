"""One decode step, by part: a decode step runs its parts as separate kernels, so their times add:
the GEMMs (a roofline of the weight bytes read, for MoE the experts the batch touches, and of their
FLOPs at the precision's own efficiency, FP8 apart from BF16: speed_gemm.py), attention (every
sequence's KV and its FLOPs), two all-reduces per layer under tensor parallel, weights kept off the
GPU (over PCIe, or for llama.cpp's CPU layers at host memory bandwidth), a fixed per-step overhead
and, for the pool engines, the per-layer kernel floors (every small kernel of every layer at a few
microseconds under CUDA graphs: efficiency.toml [decode_kernels]), and the CPU work per running
sequence that the engine does not overlap with the GPU (vLLM V0's Python scheduler and output
processing: data/engines.toml [[step_cpu]] by version). speed.py assembles the phases from it;
this module does not import speed.py.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    nvls_allreduce_shape,
    sized_allreduce_seconds,
)
from gpuwise.estimate.memory_infer import kv_element_bytes, kv_share, rules_for
from gpuwise.estimate.speed_gemm import _decode_gemm_share, _gemm_compute_seconds, _peak_flops, compute_precision
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.tomlcache import load_toml
from gpuwise.units import GB

_GGUF = Path(__file__).resolve().parent.parent / "data" / "gguf_types.toml"

__all__ = ["allreduce_message_seconds", "gguf_decode_table", "step_cpu_held"]


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


def _elementwise_bytes(model: ModelArch, d: Deployment, precision: Precision, tp: int) -> float:
    """Bytes one token's weight-free kernels move per decode step on one GPU of this pipeline stage
    (efficiency.toml [overheads] decode_elementwise_bytes, the engine's, per element): each layer's two residual
    add + RMSNorm over the whole hidden state, which every TP rank holds in full; the activation
    quantisation in front of each FP8 / INT8 GEMM; RoPE on the rank's q and k; the gated activation
    on its share of the MLP. MoE layers' expert kernels and MLA's own small kernels are left out."""
    b = efficiency_table()["overheads"]["decode_elementwise_bytes"].get(d.engine)
    if b is None:  # llama.cpp, transformers: their decode_step_s stands as measured
        return 0.0
    layers = model.num_layers / d.pp
    moe_layers = (model.num_layers - len(model.moe.dense_layers)) / d.pp if model.moe is not None else 0.0
    quant = float(b["activation_quant"]) if precision in ("fp8", "int8") else 0.0
    h, inter = model.hidden_size, model.intermediate_size / tp
    per_layer = 2 * float(b["residual_norm"]) * h + 2 * quant * h  # two norms; the QKV and gate/up inputs
    if model.mla is None:
        per_layer += float(b["rotary"]) * (model.q_dim + model.kv_dim) / tp + quant * model.q_dim / tp
    act = float(b["gated_act"] if model.gated_mlp else b["act"])
    return layers * per_layer + (layers - moe_layers) * (act + quant) * inter


def _kernel_floor(model: ModelArch, d: Deployment, precision: Precision, gemm: float, attention: float,
                  elementwise: float = 0.0) -> float:
    """Seconds the decode step's kernels spend beyond their GEMM and attention bandwidth time
    (efficiency.toml [decode_kernels]): per layer of this pipeline stage, the weight-free kernels at
    the card's floor each or, when longer, their bytes at the memory bandwidth (`elementwise`
    seconds: a few hundred tokens of a wide model's hidden state stream for longer than a floor),
    each weight GEMM at max(0, floor - its equal share of the GEMM time), the attention kernel at
    max(0, floor - its share of the attention time). 0 for engines without counts."""
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
    extra = max(small * f, elementwise)
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


def _allreduce_busbw(d: Deployment, r: Rates, n_bytes: float = math.inf, tokens: float = math.inf) -> float:
    """The all-reduce bus bandwidth the engine gets for a message of `n_bytes` a GPU (`tokens` rows):
    NVLS where NCCL may use it, the ring figure where the engine turns NVLS off (engines.toml
    nccl_nvls: SGLang by default) or where the message goes through the engine's own peer-to-peer
    all-reduce instead of NCCL (_custom_allreduce)."""
    return r.allreduce if _nvls(d, r, n_bytes, tokens) else r.link_busbw


def _nvls(d: Deployment, r: Rates, n_bytes: float, tokens: float = math.inf) -> bool:
    """Does a message of `n_bytes` go through NCCL's NVLink SHARP all-reduce (the node has it, the
    engine leaves it on, the message is past the engine's own all-reduce kernels)?"""
    return not _custom_allreduce(d.engine, n_bytes, tokens) and rules_for(d).nccl_nvls and r.allreduce > r.link_busbw


def allreduce_message_seconds(d: Deployment, r: Rates, n_bytes: float, tp: int, tokens: float = math.inf) -> float:
    """One serving all-reduce of `n_bytes` a GPU (`tokens` rows) over `tp` GPUs, at the rate and size
    slope of the path it takes: NVLS with its own latency and half-rate size
    (links.nvls_allreduce_shape), else the ring-class figure and the link's latency."""
    if _nvls(d, r, n_bytes, tokens):
        latency, half_rate = nvls_allreduce_shape()
        return sized_allreduce_seconds(n_bytes, tp, r.allreduce, latency, half_rate)
    return sized_allreduce_seconds(n_bytes, tp, r.link_busbw, r.link_latency)


def _custom_allreduce(engine: str, n_bytes: float, tokens: float) -> bool:
    """Does the engine all-reduce this message with its own kernels? Up to its largest message
    (efficiency.toml [links] custom_allreduce_max_bytes) and, where it also caps the rows, up to that
    many tokens (custom_allreduce_max_tokens)."""
    links = efficiency_table()["links"]
    max_tokens = links.get("custom_allreduce_max_tokens", {}).get(engine)
    return n_bytes <= _custom_allreduce_max(engine) and (max_tokens is None or tokens <= float(max_tokens))


@functools.cache
def _custom_allreduce_max(engine: str) -> float:
    """Largest message the engine's own all-reduce kernels take (0 where it has none)."""
    return float(efficiency_table()["links"]["custom_allreduce_max_bytes"].get(engine, 0))


def _collective_path(d: Deployment, tp: int, n_bytes: float = math.inf, tokens: float = math.inf) -> str:
    """links.link_path, or the card's own link where the engine keeps NVLS off or all-reduces a
    message of `n_bytes` with its own kernels (_allreduce_busbw)."""
    path = link_path(d.card, tp)
    nvls = rules_for(d).nccl_nvls and not _custom_allreduce(d.engine, n_bytes, tokens)
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
    comm = 2 * model.num_layers / d.pp * allreduce_message_seconds(d, r, msg, tp, batch)
    offload = off_gpu * touched / _offload_rate(d, mem, r)
    overhead = _fixed_overhead(d.engine)  # per step: graph launch, sampling
    elementwise = batch * _elementwise_bytes(model, d, precision, tp) / r.mem_bw
    floor = _kernel_floor(model, d, precision, gemm, attention, elementwise)  # per layer: the kernels' floors
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


def _offload_rate(d: Deployment, mem: MemoryResult, r: Rates) -> float:
    """Bytes/s of the weights kept off the GPU: llama.cpp runs its CPU layers at host memory
    bandwidth; vLLM/DeepSpeed-style offload streams them over PCIe (NVMe when offloaded there)."""
    if d.engine == "llamacpp":
        return d.cpu_mem_bw_gbps * GB if d.cpu_mem_bw_gbps else host_memory_bandwidth(d.card)
    if mem.host.nvme:
        return float(efficiency_table()["links"]["nvme_gbps"]) * GB
    return r.pcie_h2d
