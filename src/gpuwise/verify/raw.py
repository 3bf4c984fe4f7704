"""The raw evidence a verify run collects, and its JSON form (`--save`, `--from`).

Measurements only, no verdicts: `judge.judge()` turns evidence into pass/warn/fail, so
saved evidence can be judged again later against another card or contract. Units are
in the field names; bandwidths are bytes per second, throughput FLOP/s. A reading a
card could not give is `NotAvailable(reason)`, stored in JSON as `{"na": reason}`.

Schema history: 1 = first release. Fields added within 1 (a file saved before them loads
with each of them "not read" / "not run", so old files still judge): `GpuSnapshot.pci_device_id`;
then the error sources and identity (`pci_bus_id`, `numa_node`, `memory_used_bytes`,
`compute_mode`, `virtualization_mode`, `pcie_replay_count`, `nvlink_*_errors`, SRAM/DRAM
uncorrectable counters, `fabric_*`, `xid_events`, `sm_clock_max_mhz`), `GpuBench.errors` and
spreads, the sustained-window fields of `LoadSample`, and `Evidence.cuda_devices`, `host_info`,
`bench_process`, `load_seconds`, `raw_outputs`. raw_schema.py checks every field's type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text, read_reason
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
    "BenchError",
    "ChildOutcome",
    "CudaDevice",
    "Evidence",
    "GpuBench",
    "GpuSnapshot",
    "HostInfo",
    "LoadSample",
    "MatmulRun",
    "MemTest",
    "ProcessInfo",
    "SoftwareInfo",
    "XidEvent",
    "content_hash",
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
class XidEvent:
    """An Xid the driver logged for this GPU (NVML event or `NVRM: Xid` kernel-log line)."""

    xid: int
    source: str  # "nvml" or "kernel log"
    during_load: bool = False
    text: str = ""


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
    pci_bus_id: Any = NOT_READ  # "00000000:18:00.0", as NVML and CUDA print it
    numa_node: Any = NOT_READ  # the host NUMA node the GPU hangs off (sysfs numa_node)
    memory_used_bytes: Any = NOT_READ  # before gpuwise started anything
    compute_mode: Any = NOT_READ  # "default", "exclusive_process", "prohibited"
    virtualization_mode: Any = NOT_READ  # "none", "passthrough", "vgpu", "host_vgpu"
    pcie_replay_count: Any = NOT_READ  # link-level retransmissions since driver load
    nvlink_crc_errors: Any = NOT_READ  # flit + data CRC, summed over the links
    nvlink_replay_errors: Any = NOT_READ
    nvlink_recovery_errors: Any = NOT_READ
    remapped_rows_correctable: Any = NOT_READ
    ecc_sram_uncorrected_volatile: Any = NOT_READ
    ecc_sram_uncorrected_aggregate: Any = NOT_READ
    ecc_dram_uncorrected_aggregate: Any = NOT_READ
    fabric_state: Any = NOT_READ  # NVSwitch systems: "completed", "in_progress", "not_started"
    fabric_status: Any = NOT_READ  # 0 = success (nvmlReturn_t of the fabric registration)
    xid_events: Any = ()  # tuple[XidEvent, ...]
    sm_clock_max_mhz: Any = NOT_READ


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
    # The sustained window (every GPU loaded together), sampled about once a second:
    seconds: Any = NOT_SAMPLED  # how long this GPU was loaded
    pcie_gen_min: Any = NOT_SAMPLED  # lowest link seen under load: below the max = downtrained
    pcie_width_min: Any = NOT_SAMPLED
    sm_clock_min_mhz: Any = NOT_SAMPLED
    sm_clock_median_mhz: Any = NOT_SAMPLED
    power_median_w: Any = NOT_SAMPLED
    ecc_uncorrected_delta: Any = NOT_SAMPLED  # volatile uncorrectable count, end minus start
    burst_flops_per_s: Any = NOT_SAMPLED  # bf16 GEMM rate over the first 10 % of the window
    sustained_flops_per_s: Any = NOT_SAMPLED  # ... and over its second half
    series: Any = ()  # tuple of [t_s, sm_mhz, power_w, temp_c, pcie_gen, pcie_width, reasons]


@dataclass(frozen=True)
class MatmulRun:
    precision: str
    flops_per_s: float
    n: int
    rel_error: float
    tolerance: float
    iters: int | None = None  # timed iterations (each timed with its own CUDA events)
    spread: float | None = None  # (p90 - p10) / median of the per-iteration times


@dataclass(frozen=True)
class BenchError:
    """A benchmark that raised on a GPU: the GPU crashed it (a CUDA error, ECC, a lost GPU)."""

    kind: str  # "mem_bw", "matmul", "h2d", "d2h", "memtest", "load"
    message: str
    precision: str | None = None


@dataclass(frozen=True)
class MemTest:
    """Write a pattern over most of the free memory and read it back."""

    bytes_tested: int
    fraction_of_free: float
    mismatches: int


@dataclass(frozen=True)
class GpuBench:
    index: int
    # device copy, counted as read + write (2 x bytes copied per copy)
    mem_bw_bytes_per_s: Any = NOT_RUN
    matmul: Any = ()  # tuple[MatmulRun, ...]
    matmul_skipped: Any = ()  # tuple[(precision, reason), ...]
    h2d_bytes_per_s: Any = NOT_RUN
    d2h_bytes_per_s: Any = NOT_RUN
    errors: Any = ()  # tuple[BenchError, ...]
    mem_bw_spread: Any = NOT_RUN  # (p90 - p10) / median of the per-iteration copy times
    memtest: Any = NOT_RUN  # MemTest


@dataclass(frozen=True)
class CudaDevice:
    """A GPU as CUDA (torch) numbers it; matched to NVML's by PCI bus id, never by index."""

    cuda_index: int
    name: str
    pci_bus_id: str  # "0000:18:00.0"
    sm_count: int
    total_memory_bytes: int
    uuid: str | None = None


@dataclass(frozen=True)
class ChildOutcome:
    """How the benchmark child process ended."""

    returncode: int
    timed_out: bool  # killed by the deadline
    wall_s: float
    stderr_tail: str = ""


@dataclass(frozen=True)
class HostInfo:
    """The host around the GPUs: what a contract may promise besides the GPUs."""

    cpu_cores: Any = NOT_READ  # logical CPUs online
    cpu_model: Any = NOT_READ
    ram_bytes: Any = NOT_READ
    numa_nodes: Any = NOT_READ
    disk_path: Any = NOT_READ  # the file system measured (the working directory's)
    disk_bytes: Any = NOT_READ
    disk_free_bytes: Any = NOT_READ
    disk_write_bytes_per_s: Any = NOT_RUN
    disk_read_bytes_per_s: Any = NOT_RUN
    kernel_modules: Any = NOT_READ  # the loaded ones among nvidia*, nouveau
    dev_nvidia_uvm: Any = NOT_READ  # /dev/nvidia-uvm exists
    fabric_manager: Any = NOT_READ  # systemd state of nvidia-fabricmanager, "not installed"
    kernel_log: Any = NOT_READ  # "read" or why not (dmesg needs privileges on many hosts)


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
    cuda_devices: Any = NOT_RUN  # tuple[CudaDevice, ...], from the benchmark child
    host_info: Any = NOT_READ  # HostInfo
    bench_process: Any = NOT_RUN  # ChildOutcome
    load_seconds: Any = NOT_RUN  # the planned length of the sustained window
    raw_outputs: Any = NOT_READ  # {"nvidia-smi -q -x": text, "nvidia-smi topo -m": ..., "lspci": ...}
    # Set when read back: "verified" (content_sha256 matches), "edited" (it does not), "no hash".
    integrity: Any = NOT_READ


_NESTED: dict[str, type] = {
    "processes": ProcessInfo, "gpus": GpuSnapshot, "load": LoadSample, "bench": GpuBench,
    "matmul": MatmulRun, "points": AllReducePoint, "allreduce": AllReduceRun,
    "software": SoftwareInfo, "xid_events": XidEvent, "errors": BenchError, "memtest": MemTest,
    "cuda_devices": CudaDevice, "host_info": HostInfo, "bench_process": ChildOutcome,
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
    out.pop("integrity", None)
    out["content_sha256"] = content_hash(out)
    return out


def content_hash(data: dict[str, Any]) -> str:
    """SHA-256 of the evidence's canonical JSON (sorted keys, no spaces), without the hash and
    the read-back integrity field: any edit after saving changes it."""
    import hashlib

    body = {k: v for k, v in data.items() if k not in ("content_sha256", "integrity")}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
    from gpuwise.verify.raw_schema import check_evidence_dict

    check_evidence_dict(data, origin)
    stored = data.get("content_sha256")
    integrity = "no hash" if not isinstance(stored, str) else (
        "verified" if stored == content_hash(data) else "edited")
    try:
        ev: Evidence = _build(Evidence, data)
        return replace(ev, integrity=integrity)
    except (TypeError, ValueError) as exc:
        raise DataError(Text(f"{origin} is malformed: {exc}", f"{origin} 格式错误：{exc}")) from exc


def save_evidence(evidence: Evidence, path: str | Path) -> bool:
    """Strict JSON, written whole and never through a link; True when it replaced a file."""
    from gpuwise.jsonable import dumps
    from gpuwise.safefile import write_output

    return write_output(path, dumps(evidence_to_dict(evidence), indent=2) + "\n", replace=True)


def load_evidence(path: str | Path) -> Evidence:
    """Evidence from a `--save` file; DataError (never a traceback) for anything else: a missing,
    huge or binary file, JSON with NaN, too deeply nested, or fields of the wrong type."""
    from gpuwise import safefile
    from gpuwise.verify.raw_schema import MAX_FILE_BYTES

    p = Path(path)
    try:
        if not p.exists():
            raise FileNotFoundError(p)
        if p.is_dir():
            raise DataError(Text(f"{p} is a directory, not a verify file.", f"{p} 是目录，不是 verify 文件。"))
        # only a regular file, its size counted while reading (a FIFO or /dev/zero cannot hang it)
        raw = safefile.read_bytes(p, MAX_FILE_BYTES, Text("verify file", "verify 文件"))
        if b"\0" in raw:
            raise DataError(Text(f"{p} is a binary file, not the JSON `gpuwise verify --save` writes.",
                                 f"{p} 是二进制文件，不是 `gpuwise verify --save` 写出的 JSON。"))
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError as exc:
        raise DataError(Text(f"No such file: {p}", f"文件不存在：{p}")) from exc
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = read_reason(exc)
        raise DataError(Text(f"Cannot read {p} as JSON: {why.en}", f"无法按 JSON 读取 {p}：{why.zh}。")) from exc
    if not isinstance(data, dict):
        raise DataError(Text(f"{p} is not a JSON object.", f"{p} 不是 JSON 对象。"))
    return evidence_from_dict(data, origin=str(p))
