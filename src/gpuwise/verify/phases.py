"""The loaded part of a verify run: device mapping, the sustained window, per-GPU benchmarks,
and folding their records into evidence (collect.py orchestrates; children.py runs them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwise.verify.children import Sampler, run_children, worst_outcome
from gpuwise.verify.nvml import NotAvailable, is_na
from gpuwise.verify.raw import (
    BenchError,
    ChildOutcome,
    CudaDevice,
    GpuBench,
    GpuSnapshot,
    LoadSample,
    MatmulRun,
    MemTest,
)
from gpuwise.verify.window import merge_load

__all__ = ["Loaded", "busy_gpus", "fold_bench", "map_devices", "run_loaded"]

Progress = Callable[[str, float], None]
Reader = Callable[[int], dict[str, Any]]


@dataclass(frozen=True)
class Loaded:
    bench: Any
    load: Any
    cuda_devices: Any
    outcome: ChildOutcome


def busy_gpus(gpus: tuple[GpuSnapshot, ...], used_limit_bytes: float) -> list[str]:
    """Why each busy GPU is busy: another process listed, or memory in use beyond an idle context."""
    out = []
    for g in gpus:
        procs = [] if is_na(g.processes) else [p for p in g.processes if p.same_user is not True]
        if procs:
            out.append(f"GPU{g.index}: another process (pid {procs[0].pid} {procs[0].name})")
        elif not is_na(g.memory_used_bytes) and g.memory_used_bytes > used_limit_bytes:
            out.append(f"GPU{g.index}: {g.memory_used_bytes / 2**30:.1f} GiB in use")
    return out


def map_devices(gpus: tuple[GpuSnapshot, ...], device_type: str) -> tuple[Any, list[tuple[int, int]]]:
    """(CUDA device list, [(NVML index, CUDA index)]) matched by PCI bus id."""
    from gpuwise.verify.judge_identity import bus_key

    if device_type != "cuda":
        return NotAvailable(f"{device_type} run: no CUDA devices"), [(g.index, g.index) for g in gpus]
    records, outcome = run_children([{"phase": "devices"}], timeout_s=120)
    found = next((r["devices"] for r in records if r.get("kind") == "devices"), None)
    if found is None:
        return NotAvailable(f"CUDA device list not read (exit {outcome.returncode}: "
                            f"{outcome.stderr_tail[-200:]})"), []
    devs = tuple(CudaDevice(**d) for d in found)
    by_bus = {bus_key(d.pci_bus_id): d.cuda_index for d in devs if d.pci_bus_id}
    by_uuid = {str(d.uuid).lower(): d.cuda_index for d in devs if d.uuid}
    pairs = []
    for g in gpus:
        bus = None if is_na(g.pci_bus_id) else bus_key(g.pci_bus_id)
        uuid = None if is_na(g.uuid) else str(g.uuid).lower()
        if bus in by_bus:
            pairs.append((g.index, by_bus[bus]))
        elif uuid in by_uuid:  # a torch without bus ids in its device properties
            pairs.append((g.index, by_uuid[uuid]))
    if not pairs and len(devs) == len(gpus):
        pairs = [(g.index, g.index) for g in gpus]  # nothing to match on: index, and cuda_map says so
    return devs, pairs


def _window(plan: Any, pairs: list[tuple[int, int]], device_type: str, reader: Reader,
            n: int, load_s: float) -> tuple[list[dict[str, Any]], ChildOutcome, dict[int, list[dict[str, Any]]]]:
    specs = [{"phase": "window", "device_type": device_type, "targets": [list(p)], "load_s": load_s,
              "matmul_n": plan.matmul_n, "copy_bytes": plan.copy_bytes} for p in pairs]
    with Sampler(reader, n, period=1.0) as sampler:
        records, outcome = run_children(specs, timeout_s=load_s + plan.startup_s + 30.0)
    return records, outcome, sampler.readings


def _micro(plan: Any, pairs: list[tuple[int, int]], device_type: str,
           progress: Progress) -> tuple[list[dict[str, Any]], ChildOutcome]:
    spec = {"phase": "micro", "device_type": device_type, "targets": [list(p) for p in pairs],
            "copy_bytes": plan.copy_bytes, "matmul_n": plan.matmul_n, "pcie_bytes": plan.pcie_bytes,
            "iters": plan.iters, "precisions": ["bf16", "fp16", "fp8"],
            "memtest_fraction": plan.memtest_fraction}
    total = max(1, 7 * len(pairs))
    done: list[int] = []

    def seen(record: dict[str, Any]) -> None:
        done.append(1)
        progress(f"bench {record.get('kind')} GPU{record.get('index')}", 0.5 + 0.3 * min(1.0, len(done) / total))

    return run_children([spec], timeout_s=plan.startup_s + plan.bench_timeout_s * len(pairs), on_record=seen)


def run_loaded(plan: Any, gpus: tuple[GpuSnapshot, ...], reader: Reader, progress: Progress,
               device_type: str = "cuda", load_s: float | None = None) -> Loaded:
    seconds = plan.load_s if load_s is None else load_s
    progress("CUDA devices", 0.15)
    devs, pairs = map_devices(gpus, device_type)
    if not pairs:
        why = devs.reason if is_na(devs) else "CUDA sees none of the GPUs NVML lists"
        na = NotAvailable(why)
        return Loaded(na, na, devs, ChildOutcome(1, False, 0.0, why))
    progress(f"sustained load {seconds:.0f} s, {len(pairs)} GPU(s) together", 0.2)
    w_records, w_outcome, readings = _window(plan, pairs, device_type, reader, len(gpus), seconds)
    m_records, m_outcome = _micro(plan, pairs, device_type, progress)
    load = tuple(_fold_load(g.index, w_records, readings.get(g.index, [])) for g in gpus)
    # a GPU whose sustained window raised (a CUDA error, Xid, ECC) crashed a benchmark: it fails
    crashed_window = [r for r in w_records if r.get("kind") == "load" and "error" in r]
    return Loaded(fold_bench(gpus, pairs, m_records + crashed_window), load, devs,
                  worst_outcome([w_outcome, m_outcome]))


def _fold_load(index: int, records: list[dict[str, Any]], readings: list[dict[str, Any]]) -> LoadSample:
    mine = [r for r in records if r.get("index") == index]
    rates = [(float(r["t"]), float(r["flops_per_s"])) for r in mine if r.get("kind") == "rate"]
    end = next((r for r in mine if r.get("kind") == "load"), None)
    seconds: Any = end["result"]["seconds"] if end and "result" in end else (
        rates[-1][0] if rates else 0.0)
    return merge_load(index, readings, rates, seconds=seconds)


def fold_bench(gpus: tuple[GpuSnapshot, ...], pairs: list[tuple[int, int]],
               records: list[dict[str, Any]]) -> tuple[GpuBench, ...]:
    """One GpuBench per benchmarked GPU: results, crashes (BenchError), unsupported precisions.
    GPUs CUDA could not see get no entry: the judge calls them incomplete."""
    out = []
    for index, _ in pairs:
        mine = [r for r in records if r.get("index") == index]
        errors = tuple(BenchError(r["kind"], str(r["error"]), r.get("precision")) for r in mine if "error" in r)
        fields: dict[str, Any] = {}
        for kind, key in (("mem_bw", "mem_bw_bytes_per_s"), ("h2d", "h2d_bytes_per_s"),
                          ("d2h", "d2h_bytes_per_s")):
            rec = next((r for r in mine if r["kind"] == kind), None)
            fields[key] = (rec["result"]["bytes_per_s"] if rec and "result" in rec
                           else NotAvailable("crashed" if rec else "did not finish (deadline or the child died)"))
            if kind == "mem_bw" and rec and "result" in rec:
                fields["mem_bw_spread"] = rec["result"].get("spread", 0.0)
        mem = next((r for r in mine if r["kind"] == "memtest" and "result" in r), None)
        if mem:
            fields["memtest"] = MemTest(**mem["result"])
        runs = tuple(MatmulRun(**r["result"]) for r in mine if r["kind"] == "matmul" and "result" in r)
        skipped = tuple((r["precision"], str(r["skipped"])) for r in mine
                        if r["kind"] == "matmul" and "skipped" in r)
        out.append(GpuBench(index=index, matmul=runs, matmul_skipped=skipped, errors=errors, **fields))
    return tuple(out)
