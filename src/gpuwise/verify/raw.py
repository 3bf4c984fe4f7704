"""The raw evidence a verify run collects, and its JSON form (`--save`, `--from`).

Measurements only, no verdicts: `judge.judge()` turns evidence into pass/warn/fail, so
saved evidence can be judged again later against another card or contract. Units are
in the field names; bandwidths are bytes per second, throughput FLOP/s. A reading a
card could not give is `NotAvailable(reason)`, stored in JSON as `{"na": reason}`.

Schema history: 1 = first release; `GpuSnapshot.pci_device_id` was added within 1 (a file
saved before it loads with the field "not read").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text
from gpuwise.verify.nvml import NotAvailable

SCHEMA_VERSION = 1
KIND = "gpuwise.verify.raw"

# Shared defaults (NotAvailable is frozen, so one instance serves every field).
NOT_READ = NotAvailable("not read")
NOT_SAMPLED = NotAvailable("not sampled")
NOT_RUN = NotAvailable("not run")
NO_TORCH = NotAvailable("torch not installed")

__all__ = [
    "SCHEMA_VERSION",
    "AllReducePoint",
    "AllReduceRun",
    "Evidence",
    "GpuBench",
    "GpuSnapshot",
    "LoadSample",
    "MatmulRun",
    "ProcessInfo",
    "SoftwareInfo",
    "evidence_from_dict",
    "evidence_to_dict",
    "load_evidence",
    "pci_id",
    "save_evidence",
]


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    name: str
    used_memory_bytes: int | None
    same_user: bool | None  # None: the owner could not be read (another container)


@dataclass(frozen=True)
class GpuSnapshot:
    """One GPU at rest, as NVML or nvidia-smi reports it."""

    index: int
    name: str
    pci_device_id: Any = NOT_READ  # "10de:2330": vendor:device, as `lspci -nn` prints it
    uuid: Any = NOT_READ
    serial: Any = NOT_READ
    memory_total_bytes: Any = NOT_READ
    vbios: Any = NOT_READ
    compute_capability: Any = NOT_READ  # "9.0"
    persistence_mode: Any = NOT_READ
    mig_current: Any = NOT_READ
    mig_pending: Any = NOT_READ
    ecc_current: Any = NOT_READ
    ecc_pending: Any = NOT_READ
    ecc_uncorrected_volatile: Any = NOT_READ
    ecc_uncorrected_aggregate: Any = NOT_READ
    ecc_corrected_volatile: Any = NOT_READ
    remap_pending: Any = NOT_READ
    remap_failure: Any = NOT_READ
    remapped_rows_uncorrectable: Any = NOT_READ
    retired_pages_pending: Any = NOT_READ
    retired_pages_count: Any = NOT_READ
    pcie_gen_max: Any = NOT_READ     # what this GPU in this slot can reach
    pcie_gen_gpu_max: Any = NOT_READ  # what the GPU itself supports
    pcie_width_max: Any = NOT_READ
    pcie_gen_idle: Any = NOT_READ
    pcie_width_idle: Any = NOT_READ
    power_limit_w: Any = NOT_READ     # enforced limit now
    power_default_w: Any = NOT_READ
    temperature_c: Any = NOT_READ
    temperature_slowdown_c: Any = NOT_READ
    throttle_reasons_idle: Any = NOT_READ
    nvlink_up: Any = NOT_READ
    nvlink_down: Any = NOT_READ
    processes: Any = NOT_READ  # tuple[ProcessInfo, ...]


def pci_id(combined: int) -> str:
    """NVML's pciDeviceId / nvidia-smi's <pci_device_id> (0x233010DE: device in the upper 16
    bits, vendor in the lower 16, nvml.h nvmlPciInfo_t) -> "10de:2330"."""
    return f"{combined & 0xFFFF:04x}:{(combined >> 16) & 0xFFFF:04x}"


@dataclass(frozen=True)
class LoadSample:
    """What one GPU showed while gpuwise loaded it (max or OR over the samples)."""

    index: int
    samples: int
    pcie_gen: Any = NOT_SAMPLED
    pcie_width: Any = NOT_SAMPLED
    throttle_reasons: Any = NOT_SAMPLED  # OR of bits, idle samples excluded
    temperature_max_c: Any = NOT_SAMPLED
    power_max_w: Any = NOT_SAMPLED


@dataclass(frozen=True)
class MatmulRun:
    precision: str
    flops_per_s: float
    n: int
    rel_error: float
    tolerance: float


@dataclass(frozen=True)
class GpuBench:
    index: int
    # device copy, counted as read + write (2 x bytes copied per copy)
    mem_bw_bytes_per_s: Any = NOT_RUN
    matmul: Any = ()  # tuple[MatmulRun, ...]
    matmul_skipped: Any = ()  # tuple[(precision, reason), ...]
    h2d_bytes_per_s: Any = NOT_RUN
    d2h_bytes_per_s: Any = NOT_RUN


@dataclass(frozen=True)
class AllReducePoint:
    size_bytes: int
    seconds: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float  # algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)


@dataclass(frozen=True)
class AllReduceRun:
    n_gpus: int
    backend: str
    points: tuple[AllReducePoint, ...]
    correct: bool


@dataclass(frozen=True)
class SoftwareInfo:
    torch_version: Any = NO_TORCH
    torch_cuda: Any = NO_TORCH  # torch.version.cuda; None: CPU build
    cuda_available: Any = NO_TORCH
    cuda_device_count: Any = NO_TORCH
    nccl_version: Any = NO_TORCH
    cuda_visible_devices: str | None = None


@dataclass(frozen=True)
class Evidence:
    schema_version: int
    collected_at: str
    host: str
    source: str  # "nvml", "nvidia-smi" or "fixture"
    mode: str  # "quick", "full" or "inventory"
    driver_version: Any
    cuda_driver_version: Any  # the newest CUDA the driver supports, "12.8"
    gpus: tuple[GpuSnapshot, ...]
    topology: Any = NOT_READ  # matrix of "X", "NV18", "PIX", "SYS"...
    p2p: Any = NOT_READ  # matrix of "OK" / reason strings
    load: Any = NOT_RUN  # tuple[LoadSample, ...]
    software: SoftwareInfo = field(default_factory=SoftwareInfo)
    bench: Any = NOT_RUN  # tuple[GpuBench, ...]
    allreduce: Any = NOT_RUN  # AllReduceRun
    notes: tuple[str, ...] = ()


_NESTED: dict[str, type] = {
    "processes": ProcessInfo, "gpus": GpuSnapshot, "load": LoadSample, "bench": GpuBench,
    "matmul": MatmulRun, "points": AllReducePoint, "allreduce": AllReduceRun,
    "software": SoftwareInfo,
}


def _encode(value: Any) -> Any:
    if isinstance(value, NotAvailable):
        return value.to_json()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    return value


def _decode(name: str, value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"na"}:
        return NotAvailable(str(value["na"]))
    cls = _NESTED.get(name)
    if cls is not None and isinstance(value, dict):
        return _build(cls, value)
    if isinstance(value, list):
        return tuple(_decode(name, v) for v in value)
    return value


def _build(cls: type, data: dict[str, Any]) -> Any:
    known = {f.name for f in fields(cls)}
    kwargs = {k: _decode(k, v) for k, v in data.items() if k in known}
    return cls(**kwargs)


def evidence_to_dict(evidence: Evidence) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": KIND}
    out.update(_encode(evidence))
    return out


def evidence_from_dict(data: dict[str, Any], *, origin: str = "<dict>") -> Evidence:
    version = data.get("schema_version")
    if data.get("kind") != KIND or not isinstance(version, int):
        raise DataError(Text(f"{origin} is not a gpuwise verify raw file (no kind/schema_version).",
                             f"{origin} 不是 gpuwise verify 原始数据文件（缺少 kind/schema_version）。"),
                        hint=Text("Create one with `gpuwise verify --save raw.json`.",
                                  "用 `gpuwise verify --save raw.json` 生成。"))
    if version > SCHEMA_VERSION:
        raise DataError(Text(f"{origin} has schema_version {version}; this gpuwise reads up to "
                             f"{SCHEMA_VERSION}.",
                             f"{origin} 的 schema_version 为 {version}；本版本最多支持 {SCHEMA_VERSION}。"),
                        hint=Text("Upgrade gpuwise.", "请升级 gpuwise。"))
    try:
        return _build(Evidence, data)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise DataError(Text(f"{origin} is malformed: {exc}", f"{origin} 格式错误：{exc}")) from exc


def save_evidence(evidence: Evidence, path: str | Path) -> None:
    text = json.dumps(evidence_to_dict(evidence), ensure_ascii=False, indent=2)
    Path(path).write_text(text + "\n", encoding="utf-8")


def load_evidence(path: str | Path) -> Evidence:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(Text(f"No such file: {p}", f"文件不存在：{p}")) from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(Text(f"Cannot read {p} as JSON: {exc}", f"无法按 JSON 读取 {p}：{exc}")) from exc
    if not isinstance(data, dict):
        raise DataError(Text(f"{p} is not a JSON object.", f"{p} 不是 JSON 对象。"))
    return evidence_from_dict(data, origin=str(p))
