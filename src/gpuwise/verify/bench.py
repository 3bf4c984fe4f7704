"""PyTorch micro-benchmarks. torch is imported inside each function, never at module level.

Every function takes a `device` ("cuda:0", or "cpu" for the tests) and small sizes work,
so the same code runs in the CPU test suite and on a GPU. Conventions:
- device copy bandwidth counts READ + WRITE: a copy of S bytes moves 2 S bytes
  (CUDA bandwidthTest's D2D convention; nvbandwidth counts S once);
- matmul FLOPs are 2 n^3 per n x n x n product;
- time comes from CUDA events on a GPU and perf_counter on the CPU, after warm-up.

`python -m gpuwise.verify.bench '<json spec>'` runs the per-GPU suite in a child process
(so a hang is killed by the parent's timeout and GPU memory is freed on exit) and prints
one JSON line per result.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

__all__ = [
    "TOLERANCE",
    "BandwidthResult",
    "MatmulResult",
    "device_copy_bandwidth",
    "fp8_supported",
    "host_device_bandwidth",
    "matmul_tflops",
    "run_suite",
    "software_info",
]

# Mirrors acceptance.toml [matmul.tolerance]; the judge re-checks with the data file.
TOLERANCE = {"bf16": 0.02, "fp16": 0.005, "fp8": 0.03}


@dataclass(frozen=True)
class BandwidthResult:
    bytes_per_s: float
    size_bytes: int
    seconds: float
    convention: str


@dataclass(frozen=True)
class MatmulResult:
    precision: str
    flops_per_s: float
    n: int
    rel_error: float
    tolerance: float


def _torch() -> Any:
    """Import torch here, at call time: the library never imports it at module level."""
    import torch

    return torch


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(torch: Any, device: Any, fn: Callable[[], Any], iters: int, warmup: int) -> float:
    """Seconds per call of fn, after warm-up."""
    for _ in range(warmup):
        fn()
    _sync(torch, device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def device_copy_bandwidth(device: str, size_bytes: int, iters: int = 20,
                          warmup: int = 3) -> BandwidthResult:
    """Device-to-device copy of `size_bytes`; bytes counted read + write (2 x size)."""
    torch = _torch()
    dev = torch.device(device)
    src = torch.empty(size_bytes, dtype=torch.uint8, device=dev).random_(0, 255)
    dst = torch.empty_like(src)
    try:
        seconds = _timed(torch, dev, lambda: dst.copy_(src), iters, warmup)
        if not torch.equal(dst, src):
            raise RuntimeError("device copy produced different bytes")
    finally:
        src = dst = None
        _free(torch, dev)
    # 2x: every byte is read once and written once.
    return BandwidthResult(2 * size_bytes / seconds, size_bytes, seconds, "read+write")


def fp8_supported(device: str) -> str | None:
    """None when fp8 matmul can run on `device`; else the reason it cannot."""
    torch = _torch()
    dev = torch.device(device)
    if dev.type != "cuda":
        return "fp8 matmul needs a CUDA GPU"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no fp8 matmul"
    major, minor = torch.cuda.get_device_capability(dev)
    if (major, minor) < (8, 9):  # fp8 tensor cores arrived with Ada (8.9) and Hopper (9.0)
        return f"compute capability {major}.{minor} has no fp8 tensor cores (needs 8.9+)"
    return None


def _inputs(torch: Any, dev: Any, n: int, precision: str, seed: int) -> tuple[Any, Any]:
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(n, n, device=dev, generator=gen)
    b = torch.randn(n, n, device=dev, generator=gen)
    if precision == "fp8":
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    return a.to(dtype), b.to(dtype)


def _matmul_fn(torch: Any, precision: str, a: Any, b: Any) -> Callable[[], Any]:
    if precision == "fp8":
        one = torch.ones((), device=a.device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return lambda: a @ b


def matmul_tflops(device: str, precision: str, n: int, iters: int = 10, warmup: int = 2,
                  seed: int = 0) -> MatmulResult:
    """Dense n x n x n matmul throughput, and its relative error vs an fp32 reference.

    The reference multiplies the same rounded inputs in fp32, so only the low-precision
    arithmetic is judged, not the rounding of the inputs.
    """
    torch = _torch()
    if precision not in TOLERANCE:
        raise ValueError(f"unknown precision {precision!r}")
    dev = torch.device(device)
    if precision == "fp8" and (reason := fp8_supported(device)):
        raise RuntimeError(reason)
    a, b = _inputs(torch, dev, n, precision, seed)
    fn = _matmul_fn(torch, precision, a, b)
    try:
        seconds = _timed(torch, dev, fn, iters, warmup)
        out = fn().float()
        ref = a.float() @ b.float()
        rel = float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
    finally:
        a = b = None
        _free(torch, dev)
    # 2 n^3: n^2 outputs, each n multiply-adds.
    return MatmulResult(precision, 2 * n**3 / seconds, n, rel, TOLERANCE[precision])


def host_device_bandwidth(device: str, size_bytes: int, direction: str, iters: int = 10,
                          warmup: int = 2) -> BandwidthResult:
    """Host<->device copy of `size_bytes` from pinned host memory, counted once."""
    torch = _torch()
    dev = torch.device(device)
    pinned = dev.type == "cuda"  # pinning needs an accelerator; CPU tests use plain memory
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=pinned).random_(0, 255)
    gpu = torch.empty(size_bytes, dtype=torch.uint8, device=dev)
    if direction == "h2d":
        fn = lambda: gpu.copy_(host, non_blocking=pinned)
    elif direction == "d2h":
        gpu.random_(0, 255)
        fn = lambda: host.copy_(gpu, non_blocking=pinned)
    else:
        raise ValueError(f"direction must be h2d or d2h, not {direction!r}")
    try:
        seconds = _timed(torch, dev, fn, iters, warmup)
    finally:
        host = gpu = None
        _free(torch, dev)
    return BandwidthResult(size_bytes / seconds, size_bytes, seconds, "once")


def _free(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def software_info() -> dict[str, Any]:
    """torch version, its CUDA build, NCCL and visible devices; NotAvailable-style strings."""
    import os

    info: dict[str, Any] = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        torch = _torch()
    except ImportError as exc:
        info["error"] = f"torch not installed ({exc})"
        return info
    info["torch_version"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda  # None on a CPU-only build (pytorch/pytorch#2969)
    info["cuda_available"] = bool(torch.cuda.is_available())
    info["cuda_device_count"] = torch.cuda.device_count() if info["cuda_available"] else 0
    try:
        version = torch.cuda.nccl.version() if torch.version.cuda else None  # untyped in torch
        info["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else version
    except Exception as exc:  # noqa: BLE001  (NCCL missing from the build)
        info["nccl_version_error"] = str(exc)
    return info


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _attempt(kind: str, index: int, fn: Callable[[], Any], **extra: Any) -> None:
    try:
        _emit({"kind": kind, "index": index, **extra, "result": asdict(fn())})
    except Exception as exc:  # noqa: BLE001  (one failing bench must not stop the rest)
        _emit({"kind": kind, "index": index, **extra, "error": f"{type(exc).__name__}: {exc}"})


def run_suite(spec: dict[str, Any]) -> None:
    """Run the per-GPU suite described by `spec`, one JSON line per result on stdout."""
    for index in spec["gpus"]:
        dev = f"{spec.get('device_type', 'cuda')}:{index}" if spec.get("device_type", "cuda") == "cuda" else "cpu"
        _attempt("mem_bw", index, partial(device_copy_bandwidth, dev, spec["copy_bytes"], spec["iters"]))
        for precision in spec["precisions"]:
            if precision == "fp8" and (reason := fp8_supported(dev)):
                _emit({"kind": "matmul", "index": index, "precision": precision, "skipped": reason})
                continue
            _attempt("matmul", index, partial(matmul_tflops, dev, precision, spec["matmul_n"],
                                              spec["iters"]),
                     precision=precision)
        for direction in ("h2d", "d2h"):
            _attempt(direction, index, partial(host_device_bandwidth, dev, spec["pcie_bytes"],
                                               direction, max(3, spec["iters"] // 2)))
        if spec.get("load_s", 0) > 0:  # keep the GPU busy so links and clocks show load
            _attempt("load", index, partial(_burn, dev, spec["matmul_n"], spec["load_s"]))


@dataclass(frozen=True)
class _BurnResult:
    seconds: float
    matmuls: int


def _burn(device: str, n: int, seconds: float) -> _BurnResult:
    torch = _torch()
    dev = torch.device(device)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            a @ a
        _sync(torch, dev)
        done += 8
    a = None
    _free(torch, dev)
    return _BurnResult(time.perf_counter() - t0, done)


if __name__ == "__main__":
    run_suite(json.loads(sys.argv[1]))
