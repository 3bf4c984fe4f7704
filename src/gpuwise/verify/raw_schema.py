"""The types of a raw evidence file, checked before it is judged (`verify --from`, `--calibration`).

A file is data from outside: a wrong type, a NaN, a negative count or a 10 000-GPU list must
be refused with the field's path ("gpus[3].memory_total_bytes must be a whole number >= 0,
got 'x'"), never reach a check as a value it cannot compare. Every field whose value may be
"not available" also accepts `{"na": "reason"}`. Unknown keys are ignored (newer files).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text

__all__ = ["MAX_FILE_BYTES", "MAX_GPUS", "check_evidence_dict", "check_measurements"]

MAX_FILE_BYTES = 32 << 20  # an 8-GPU file with a 10-minute sample series is ~2 MiB
MAX_GPUS = 64  # one node; NVSwitch systems top out at 8-72 GPUs per NVLink domain
_MAX_LIST = 100_000  # series samples, processes, points: far beyond a real run

# Kinds: meas (a measurement: any number; a NaN, infinite or negative one is refused by
# `check_measurements` with the GPU and what it measured), int (whole, >= 0), sint (whole, any sign),
# num (finite, >= 0), bool, str, list:<Class>,
# obj:<Class>, matrix (square, strings), pairs (list of [str, str]), series (list of number
# lists), strs (list of str), dict:str (str -> str). "?" = may be {"na": ...}; "|null" = may be null.
_KINDS: dict[str, dict[str, str]] = {
    "Evidence": {
        "schema_version": "int", "collected_at": "str", "host": "str", "source": "str",
        "mode": "str", "driver_version": "str?", "cuda_driver_version": "str?",
        "gpus": "list:GpuSnapshot", "topology": "matrix?", "p2p": "matrix?",
        "load": "list:LoadSample?", "software": "obj:SoftwareInfo", "bench": "list:GpuBench?",
        "allreduce": "obj:AllReduceRun?", "notes": "strs", "cuda_devices": "list:CudaDevice?",
        "host_info": "obj:HostInfo?", "bench_process": "obj:ChildOutcome?", "load_seconds": "num?",
        "raw_outputs": "dict:str?", "content_sha256": "str",
    },
    "GpuSnapshot": {
        "index": "int", "name": "str", "pci_device_id": "str?", "uuid": "str?", "serial": "str?",
        "memory_total_bytes": "int?", "vbios": "str?", "compute_capability": "str?",
        "persistence_mode": "bool?", "mig_current": "bool?", "mig_pending": "bool?",
        "ecc_current": "bool?", "ecc_pending": "bool?", "ecc_uncorrected_volatile": "int?",
        "ecc_uncorrected_aggregate": "int?", "ecc_corrected_volatile": "int?",
        "remap_pending": "bool?", "remap_failure": "bool?", "remapped_rows_uncorrectable": "int?",
        "retired_pages_pending": "bool?", "retired_pages_count": "int?", "pcie_gen_max": "int?",
        "pcie_gen_gpu_max": "int?", "pcie_width_max": "int?", "pcie_gen_idle": "int?",
        "pcie_width_idle": "int?", "power_limit_w": "num?", "power_default_w": "num?",
        "temperature_c": "sint?", "temperature_slowdown_c": "sint?", "throttle_reasons_idle": "int?",
        "nvlink_up": "int?", "nvlink_down": "int?", "processes": "list:ProcessInfo?",
        "pci_bus_id": "str?", "numa_node": "sint?", "memory_used_bytes": "int?",
        "compute_mode": "str?", "virtualization_mode": "str?", "pcie_replay_count": "int?",
        "nvlink_crc_errors": "int?", "nvlink_replay_errors": "int?", "nvlink_recovery_errors": "int?",
        "remapped_rows_correctable": "int?", "ecc_sram_uncorrected_volatile": "int?",
        "ecc_sram_uncorrected_aggregate": "int?", "ecc_dram_uncorrected_aggregate": "int?",
        "fabric_state": "str?", "fabric_status": "sint?", "xid_events": "list:XidEvent",
        "sm_clock_max_mhz": "int?",
    },
    "ProcessInfo": {"pid": "int", "name": "str", "used_memory_bytes": "int|null",
                    "same_user": "bool|null"},
    "XidEvent": {"xid": "int", "source": "str", "during_load": "bool", "text": "str"},
    "LoadSample": {
        "index": "int", "samples": "int", "pcie_gen": "int?", "pcie_width": "int?",
        "throttle_reasons": "int?", "temperature_max_c": "sint?", "power_max_w": "num?",
        "seconds": "num?", "pcie_gen_min": "int?", "pcie_width_min": "int?",
        "sm_clock_min_mhz": "int?", "sm_clock_median_mhz": "num?", "power_median_w": "num?",
        "ecc_uncorrected_delta": "int?", "burst_flops_per_s": "num?",
        "sustained_flops_per_s": "num?", "series": "series",
    },
    "MatmulRun": {"precision": "str", "flops_per_s": "meas", "n": "int", "rel_error": "num",
                  "tolerance": "num", "iters": "int|null", "spread": "num|null"},
    "BenchError": {"kind": "str", "message": "str", "precision": "str|null"},
    "MemTest": {"bytes_tested": "int", "fraction_of_free": "num", "mismatches": "int"},
    "GpuBench": {
        "index": "int", "mem_bw_bytes_per_s": "meas?", "matmul": "list:MatmulRun",
        "matmul_skipped": "pairs", "h2d_bytes_per_s": "meas?", "d2h_bytes_per_s": "meas?",
        "errors": "list:BenchError", "mem_bw_spread": "num?", "memtest": "obj:MemTest?",
    },
    "AllReducePoint": {"size_bytes": "int", "seconds": "num", "algbw_bytes_per_s": "num",
                       "busbw_bytes_per_s": "num"},
    "AllReduceRun": {"n_gpus": "int", "backend": "str", "points": "list:AllReducePoint",
                     "correct": "bool"},
    "SoftwareInfo": {"torch_version": "str?", "torch_cuda": "str|null?", "cuda_available": "bool?",
                     "cuda_device_count": "int?", "nccl_version": "str|null?",
                     "cuda_visible_devices": "str|null"},
    "CudaDevice": {"cuda_index": "int", "name": "str", "pci_bus_id": "str", "sm_count": "int",
                   "total_memory_bytes": "int", "uuid": "str|null"},
    "ChildOutcome": {"returncode": "sint", "timed_out": "bool", "wall_s": "num",
                     "stderr_tail": "str"},
    "HostInfo": {
        "cpu_cores": "int?", "cpu_model": "str?", "ram_bytes": "int?", "numa_nodes": "int?",
        "disk_path": "str?", "disk_bytes": "int?", "disk_free_bytes": "int?",
        "disk_write_bytes_per_s": "num?", "disk_read_bytes_per_s": "num?",
        "kernel_modules": "strs?", "dev_nvidia_uvm": "bool?", "fabric_manager": "str?",
        "kernel_log": "str?",
    },
}
# Fields a file must have (the rest default to "not read" for files saved before them).
_REQUIRED = {"Evidence": ("collected_at", "host", "gpus"), "GpuSnapshot": ("index", "name"),
             "MatmulRun": ("precision", "flops_per_s", "n", "rel_error", "tolerance"),
             "AllReduceRun": ("n_gpus", "backend", "points", "correct"),
             "AllReducePoint": ("size_bytes", "seconds", "algbw_bytes_per_s", "busbw_bytes_per_s"),
             "LoadSample": ("index", "samples"), "GpuBench": ("index",),
             "ProcessInfo": ("pid",), "XidEvent": ("xid", "source"),
             "BenchError": ("kind", "message"), "CudaDevice": ("cuda_index", "name", "pci_bus_id")}
_WORDS = {
    "int": ("a whole number >= 0", "不小于 0 的整数"), "sint": ("a whole number", "整数"),
    "num": ("a finite number >= 0", "不小于 0 的有限数"), "meas": ("a number", "数字"),
    "bool": ("true or false", "true 或 false"),
    "str": ("a string", "字符串"), "matrix": ("a square matrix of strings", "字符串方阵"),
    "pairs": ("a list of [string, string]", "[字符串, 字符串] 列表"),
    "series": ("a list of number lists", "数值列表的列表"), "strs": ("a list of strings", "字符串列表"),
    "dict:str": ("an object of strings", "字符串对象"),
}


class _Bad(Exception):
    def __init__(self, path: str, en: str, zh: str) -> None:
        super().__init__(path)
        self.path, self.en, self.zh = path, en, zh


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _scalar_ok(kind: str, v: Any) -> bool:
    checks: dict[str, Callable[[], bool]] = {
        "int": lambda: _is_int(v) and v >= 0, "sint": lambda: _is_int(v),
        "num": lambda: _is_num(v) and v >= 0, "meas": lambda: _is_int(v) or isinstance(v, float),
        "bool": lambda: isinstance(v, bool),
        "str": lambda: isinstance(v, str) and len(v) <= 1_000_000,
        "strs": lambda: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "pairs": lambda: isinstance(v, list) and all(
            isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in v),
        "series": lambda: isinstance(v, list) and all(
            isinstance(x, list) and all(_is_num(y) or (_is_int(y)) for y in x) for x in v),
        "dict:str": lambda: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    }
    return bool(checks[kind]())


def _matrix_ok(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(r, list) and len(r) == len(v) and all(isinstance(c, str) for c in r) for r in v)


def _check_value(path: str, kind: str, v: Any) -> None:
    if kind.endswith("?"):
        if isinstance(v, dict) and set(v) == {"na"}:
            if not isinstance(v["na"], str):
                raise _Bad(path, "'na' must hold a reason string", "“na”应为原因字符串")
            return
        kind = kind[:-1]
    if kind.endswith("|null"):
        if v is None:
            return
        kind = kind[: -len("|null")]
    if kind.startswith("list:"):
        if not isinstance(v, list) or len(v) > _MAX_LIST:
            raise _Bad(path, f"must be a list (at most {_MAX_LIST} items), got {_show(v)}",
                       f"应为列表（至多 {_MAX_LIST} 项），实际为 {_show(v)}")
        for i, item in enumerate(v):
            _check_obj(f"{path}[{i}]", kind[5:], item)
        return
    if kind.startswith("obj:"):
        _check_obj(path, kind[4:], v)
        return
    ok = _matrix_ok(v) if kind == "matrix" else _scalar_ok(kind, v)
    if not ok:
        en, zh = _WORDS[kind]
        raise _Bad(path, f"must be {en}, got {_show(v)}", f"应为{zh}，实际为 {_show(v)}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_obj(path: str, cls: str, v: Any) -> None:
    if not isinstance(v, dict):
        raise _Bad(path, f"must be an object, got {_show(v)}", f"应为对象，实际为 {_show(v)}")
    for key in _REQUIRED.get(cls, ()):
        if key not in v:
            raise _Bad(path, f"lacks '{key}'", f"缺少“{key}”")
    for key, kind in _KINDS[cls].items():
        if key in v:
            _check_value(f"{path}.{key}" if path else key, kind, v[key])


def _check_shape(data: dict[str, Any]) -> None:
    """What types alone cannot say: how many GPUs, unique indices, matrices n x n."""
    gpus = data["gpus"]
    if not gpus:
        return  # nothing to compare with: the judge says "no GPU", calibration refuses it
    if len(gpus) > MAX_GPUS:
        raise _Bad("gpus", f"lists {len(gpus)} GPUs; one node has at most {MAX_GPUS}",
                   f"列出 {len(gpus)} 块 GPU；单台服务器至多 {MAX_GPUS} 块")
    indices = [g["index"] for g in gpus]
    if len(set(indices)) != len(indices):
        raise _Bad("gpus", "has two GPUs with the same index", "有两块 GPU 的 index 相同")
    for key in ("topology", "p2p"):
        m = data.get(key)
        if isinstance(m, list) and len(m) != len(gpus):
            raise _Bad(key, f"is {len(m)} x {len(m)} for {len(gpus)} GPUs",
                       f"为 {len(m)} x {len(m)}，而 GPU 有 {len(gpus)} 块")
    for key in ("bench", "load"):
        rows = data.get(key)
        if isinstance(rows, list):
            stray = [r["index"] for r in rows if r["index"] not in indices]
            if stray:
                raise _Bad(key, f"has GPU index {stray[0]}, which is not in 'gpus'",
                           f"含有 GPU 序号 {stray[0]}，但 gpus 中没有")


def check_evidence_dict(data: dict[str, Any], origin: str) -> None:
    """DataError naming the first field of `data` that is not what `gpuwise verify --save` writes."""
    try:
        _check_obj("", "Evidence", data)
        _check_shape(data)
    except _Bad as bad:
        where = bad.path or "the file"
        raise DataError(Text(f"{origin}: {where} {bad.en}.", f"{origin}：{where} {bad.zh}。"),
                        hint=Text("This is not a file `gpuwise verify --save` wrote, or it was edited: "
                                  "save it again with `gpuwise verify --save raw.json`.",
                                  "这不是 `gpuwise verify --save` 写出的文件，或已被改动："
                                  "请用 `gpuwise verify --save raw.json` 重新保存。")) from None


_MEASURED = (("mem_bw_bytes_per_s", "memory bandwidth", "显存带宽"),
             ("h2d_bytes_per_s", "host-to-device copy", "主机到设备拷贝"),
             ("d2h_bytes_per_s", "device-to-host copy", "设备到主机拷贝"))


def check_measurements(ev: Any, origin: str) -> None:
    """InputError for a benchmark reading that is not a finite number >= 0 (an edited or broken
    file): it would otherwise compare as neither fast nor slow."""
    from gpuwise.errors import InputError
    from gpuwise.verify.nvml import is_na

    bench = [] if is_na(ev.bench) else list(ev.bench)
    for b in bench:
        readings = [(getattr(b, f), en, zh) for f, en, zh in _MEASURED]
        readings += [(r.flops_per_s, f"{r.precision} matmul", f"{r.precision} 矩阵乘") for r in b.matmul]
        for value, en, zh in readings:
            if is_na(value) or (math.isfinite(value) and value >= 0):
                continue
            raise InputError(Text(f"{origin}: GPU {b.index} {en} is {value}, not a finite number >= 0.",
                                  f"{origin}：GPU {b.index} {zh}为 {value}，不是不小于 0 的有限数。"),
                             hint=Text("The file was edited or its benchmark broke: run `gpuwise verify "
                                       "--save raw.json` on the server again.",
                                       "文件被改动或测试出错：请在服务器上重新运行 `gpuwise verify --save raw.json`。"))
