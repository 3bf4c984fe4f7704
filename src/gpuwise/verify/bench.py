"""PyTorch micro-benchmarks. torch is imported inside each function, never at module level.

Every function takes a `device` ("cuda:0", or "cpu" for the tests) and small sizes work,
so the same code runs in the CPU test suite and on a GPU. Conventions:
- device copy bandwidth counts READ + WRITE: a copy of S bytes moves 2 S bytes
  (CUDA bandwidthTest's D2D convention; nvbandwidth counts S once);
- matmul FLOPs are 2 n^3 per n x n x n product;
- time comes from CUDA events on a GPU and perf_counter on the CPU, after warm-up.

`python -m gpuwise.verify.bench '<json spec>'` runs one phase in a child process (so a
hang is killed by the parent's timeout and GPU memory is freed on exit) and prints one JSON
line per result. Phases: "devices" (CUDA's device list with PCI bus ids, so the parent maps
NVML GPUs to CUDA devices by bus, never by index), "micro" (per-GPU benchmarks, one GPU at a
time) and "window" (one GPU, GEMM and copies for a set time, its rate once a second; the
parent starts one child per GPU, so every GPU is loaded together).
Each timing is a median over per-iteration CUDA events, with its spread ((p90 - p10) / median).
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
    "memtest",
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
    spread: float = 0.0


@dataclass(frozen=True)
class MatmulResult:
    precision: str
    flops_per_s: float
    n: int
    rel_error: float
    tolerance: float
    iters: int = 0
    spread: float = 0.0


@dataclass(frozen=True)
class MemTestResult:
    bytes_tested: int
    fraction_of_free: float
    mismatches: int


def _torch() -> Any:
    """Import torch here, at call time: the library never imports it at module level."""
    import torch

    return torch


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(torch: Any, device: Any, fn: Callable[[], Any], iters: int, warmup: int) -> tuple[float, float]:
    """(median seconds per call of fn, spread), each call timed on its own after warm-up:
    CUDA events on a GPU (no host overhead in the number), perf_counter on the CPU."""
    for _ in range(warmup):
        fn()
    _sync(torch, device)
    times: list[float] = []
    if device.type == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        events[-1][1].synchronize()
        times = [float(a.elapsed_time(b)) / 1000.0 for a, b in events]
    else:
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return _median_spread(times)


def _median_spread(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    mid = ordered[len(ordered) // 2]
    p10, p90 = ordered[int(0.1 * (len(ordered) - 1))], ordered[int(0.9 * (len(ordered) - 1))]
    return mid, (p90 - p10) / mid if mid > 0 else 0.0


def device_copy_bandwidth(device: str, size_bytes: int, iters: int = 20,
                          warmup: int = 3) -> BandwidthResult:
    """Device-to-device copy of `size_bytes`; bytes counted read + write (2 x size)."""
    torch = _torch()
    dev = torch.device(device)
    src = torch.empty(size_bytes, dtype=torch.uint8, device=dev).random_(0, 255)
    dst = torch.empty_like(src)
    try:
        seconds, spread = _timed(torch, dev, lambda: dst.copy_(src), iters, warmup)
        if not torch.equal(dst, src):
            raise RuntimeError("device copy produced different bytes")
    finally:
        src = dst = None
        _free(torch, dev)
    # 2x: every byte is read once and written once.
    return BandwidthResult(2 * size_bytes / seconds, size_bytes, seconds, "read+write", spread)


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
        seconds, spread = _timed(torch, dev, fn, iters, warmup)
        out = fn().float()
        ref = a.float() @ b.float()
        rel = float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
    finally:
        a = b = None
        _free(torch, dev)
    # 2 n^3: n^2 outputs, each n multiply-adds.
    return MatmulResult(precision, 2 * n**3 / seconds, n, rel, TOLERANCE[precision], iters, spread)


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
        seconds, spread = _timed(torch, dev, fn, iters, warmup)
    finally:
        host = gpu = None
        _free(torch, dev)
    return BandwidthResult(size_bytes / seconds, size_bytes, seconds, "once", spread)


def memtest(device: str, fraction: float = 0.9, cpu_bytes: int = 64 * 2**20,
            chunk_bytes: int = 2**30) -> MemTestResult:
    """Write a position-dependent pattern over `fraction` of the free memory, in chunks, and
    read it back: finds weak cells outside the copy buffers and memory that is not there."""
    torch = _torch()
    dev = torch.device(device)
    free = int(torch.cuda.mem_get_info(dev)[0]) if dev.type == "cuda" else cpu_bytes
    chunk = min(chunk_bytes, max(int(free * fraction) // 8, 4)) // 4  # int32 elements per chunk
    # Two chunks stay free for the read-back (the expected pattern and the comparison).
    budget = int(free * fraction) - 2 * chunk * 4
    oom = getattr(torch.cuda, "OutOfMemoryError", MemoryError)
    chunks: list[Any] = []
    mismatches = 0

    def pattern(k: int, out: Any) -> Any:
        # position in the chunk XOR a per-chunk constant (golden-ratio hash): every word differs
        torch.arange(chunk, dtype=torch.int32, device=dev, out=out)
        return out.bitwise_xor_((k * 0x9E3779B1) & 0x7FFFFFFF)

    try:
        while (len(chunks) + 1) * chunk * 4 <= budget:
            try:
                t = torch.empty(chunk, dtype=torch.int32, device=dev)
            except (oom, MemoryError):  # another allocation won the race: test what we hold
                break
            chunks.append(pattern(len(chunks), t))
        want = torch.empty(chunk, dtype=torch.int32, device=dev)
        for k, t in enumerate(chunks):
            mismatches += int((t != pattern(k, want)).sum().item())
        del want
    finally:
        tested = len(chunks) * chunk * 4
        chunks.clear()
        _free(torch, dev)
    return MemTestResult(tested, tested / free if free else 0.0, mismatches)


@dataclass(frozen=True)
class _WindowResult:
    seconds: float
    intervals: int


def window(device: str, index: int, seconds: float, n: int, copy_bytes: int,
           interval_s: float = 1.0) -> _WindowResult:
    """Keep one GPU busy for `seconds` with bf16 GEMMs and a device copy; print the GEMM rate
    of every interval so the parent can tell the burst from the sustained rate."""
    torch = _torch()
    dev = torch.device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=dev, dtype=dtype)
    src = torch.empty(copy_bytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    t0 = time.perf_counter()
    count = 0
    try:
        while (now := time.perf_counter()) - t0 < seconds:
            start, done = now, 0
            while time.perf_counter() - start < interval_s:
                for _ in range(4):
                    a @ a
                dst.copy_(src)
                _sync(torch, dev)
                done += 4
            elapsed = time.perf_counter() - start
            count += 1
            _emit({"kind": "rate", "index": index, "t": round(time.perf_counter() - t0, 3),
                   "flops_per_s": 2 * n**3 * done / elapsed})  # 2 n^3 per product
    finally:
        a = src = dst = None
        _free(torch, dev)
    return _WindowResult(time.perf_counter() - t0, count)


def cuda_devices() -> list[dict[str, Any]]:
    """CUDA's devices (CUDA_DEVICE_ORDER as the parent set it) with their PCI bus ids."""
    torch = _torch()
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        bus_no, dev_no = getattr(p, "pci_bus_id", None), getattr(p, "pci_device_id", None)
        bus = "" if bus_no is None or dev_no is None else \
            f"{int(getattr(p, 'pci_domain_id', 0)):04x}:{int(bus_no):02x}:{int(dev_no):02x}.0"
        uuid = getattr(p, "uuid", None)
        out.append({"cuda_index": i, "name": str(p.name), "pci_bus_id": bus,
                    "sm_count": int(p.multi_processor_count), "total_memory_bytes": int(p.total_memory),
                    "uuid": None if uuid is None else f"GPU-{uuid}"})
    return out


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


def _device(spec: dict[str, Any], cuda_index: int) -> str:
    return f"cuda:{cuda_index}" if spec.get("device_type", "cuda") == "cuda" else "cpu"


def _targets(spec: dict[str, Any]) -> list[tuple[int, int]]:
    """(NVML index, CUDA index) pairs; a spec with only "gpus" means the same numbers."""
    if "targets" in spec:
        return [(int(a), int(b)) for a, b in spec["targets"]]
    return [(int(i), int(i)) for i in spec["gpus"]]


def run_suite(spec: dict[str, Any]) -> None:
    """Run one phase described by `spec`, one JSON line per result on stdout."""
    phase = spec.get("phase", "micro")
    if phase == "devices":
        _emit({"kind": "devices", "devices": cuda_devices()})
        return
    if phase == "window":
        index, cuda_index = _targets(spec)[0]
        _attempt("load", index, partial(window, _device(spec, cuda_index), index, spec["load_s"],
                                        spec["matmul_n"], spec["copy_bytes"]))
        return
    for index, cuda_index in _targets(spec):
        dev = _device(spec, cuda_index)
        if spec.get("memtest_fraction", 0) > 0:
            _attempt("memtest", index, partial(memtest, dev, spec["memtest_fraction"]))
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


if __name__ == "__main__":
    run_suite(json.loads(sys.argv[1]))
