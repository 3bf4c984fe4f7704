"""What each validation metric is compared with in the estimate JSON, and in which unit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GIB = 2**30

# value x factor = the canonical unit of the metric
UNITS: dict[str, tuple[str, float]] = {
    "GiB": ("bytes", GIB), "GB": ("bytes", 1e9), "MiB": ("bytes", 2**20), "MB": ("bytes", 1e6),
    "tokens": ("tokens", 1.0), "requests": ("requests", 1.0),
    "tok/s": ("tok/s", 1.0), "tok/s/GPU": ("tok/s/GPU", 1.0),
    "ms": ("s", 1e-3), "s": ("s", 1.0), "fraction": ("fraction", 1.0), "percent": ("fraction", 0.01),
}


def _get(obj: dict[str, Any], path: str) -> float:
    for key in path.split("."):
        obj = obj[key]
    return float(obj)  # type: ignore[arg-type]


def _path(path: str) -> Callable[[dict[str, Any]], float]:
    return lambda est: _get(est, path)


def _infer_peak(est: dict[str, Any]) -> float:
    mem = est["memory"]
    return float(mem["weights"] + mem["activations"] + mem["overhead"])


def _train_per_gpu(est: dict[str, Any]) -> float:
    return float(est["speed"]["tokens_per_s"]) / int(est["gpus_total"])


def _max_context(est: dict[str, Any]) -> float:
    return float(est["capacity"]["max_context"])


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str  # canonical unit (UNITS' first element)
    pick: Callable[[dict[str, Any]], float]
    group: str  # interval group (src/gpuwise/data/intervals.toml)
    inverse: bool = False  # a time where the group is a rate (or the reverse)
    training: bool | None = None  # True: needs a training request; False: serving; None: either


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("weights", "bytes", _path("memory.weights"), "memory"),
    Metric("infer_peak", "bytes", _infer_peak, "memory", training=False),
    Metric("train_peak", "bytes", _path("memory.required"), "memory", training=True),  # device total (nvidia-smi)
    Metric("train_peak_allocated", "bytes", _path("memory.allocated_peak"), "memory", training=True),
    Metric("train_peak_reserved", "bytes", _path("memory.reserved_peak"), "memory", training=True),
    Metric("kv_pool", "bytes", _path("memory.kv_pool"), "kv", training=False),
    Metric("kv_tokens", "tokens", _path("capacity.kv_tokens"), "kv", training=False),
    Metric("max_concurrency", "requests", _path("capacity.max_concurrency"), "kv", training=False),
    Metric("max_context", "tokens", _max_context, "kv", training=False),
    Metric("max_seq_len", "tokens", _path("limits.max_seq_len"), "train_limits", training=True),
    Metric("decode_tok_s", "tok/s", _path("speed.decode_tokens_per_s"), "decode", training=False),
    Metric("tpot_ms", "s", _path("speed.tpot_s"), "decode", inverse=True, training=False),
    Metric("throughput_tok_s", "tok/s", _path("speed.throughput_tokens_per_s"), "throughput", training=False),
    Metric("prefill_tok_s", "tok/s", _path("speed.prefill_tokens_per_s"), "ttft", inverse=True, training=False),
    Metric("ttft_ms", "s", _path("speed.ttft_s"), "ttft", training=False),
    Metric("train_tok_s", "tok/s", _path("speed.tokens_per_s"), "train_speed", training=True),
    Metric("train_tok_s_per_gpu", "tok/s/GPU", _train_per_gpu, "train_speed", training=True),
    Metric("step_time_s", "s", _path("speed.step_time_s"), "train_speed", inverse=True, training=True),
    Metric("mfu", "fraction", _path("speed.mfu"), "train_speed", training=True),
    # Diffusion image / video pipelines (gpuwise.diffusion): GPU peak of one generation, seconds per output.
    Metric("image_peak", "bytes", _path("memory.required"), "image_memory", training=False),
    # ... as the source's counter reads it: torch.cuda.max_memory_allocated / max_memory_reserved
    Metric("image_peak_allocated", "bytes", _path("memory.allocated_peak"), "image_memory", training=False),
    Metric("image_peak_reserved", "bytes", _path("memory.reserved_peak"), "image_memory", training=False),
    Metric("image_seconds", "s", _path("speed.seconds_per_output"), "image_speed", training=False),
)}
