"""A rental contract in TOML: what the provider promised. docs/verify.md documents it.

Every key is optional; a key that is present turns its check from advice into a term:
falling short of it fails. Unknown keys are errors (with a "did you mean"), and so is a value
that cannot be read as what the key means (`driver_min = "abc.def"`, `min_mem_bw_gbps = nan`,
`pcie_gen = 9`): a term that cannot be read is never silently dropped.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpuwise import safefile
from gpuwise.errors import DataError, close_matches
from gpuwise.i18n import Text

__all__ = ["Contract", "load_contract", "parse_contract"]


@dataclass(frozen=True)
class Contract:
    name: str | None = None              # free text: provider, order number
    card: str | None = None              # a catalog name or alias: "H100-SXM"
    count: int | None = None             # GPUs in the server
    memory_gb: float | None = None       # per GPU, as marketed (GB = 1e9 bytes)
    pcie_gen: int | None = None          # minimum link generation under load
    pcie_width: int | None = None        # minimum link width under load
    nvlink: bool | None = None           # true: every GPU pair is NV# in the topology
    power_limit_w: float | None = None   # minimum enforced power limit per GPU
    driver_min: str | None = None        # oldest acceptable driver, "550.54.15"
    cuda_min: str | None = None          # oldest CUDA the driver must support, "12.4"
    ecc: bool | None = None              # true: ECC must be on
    mig: bool | None = None              # false: MIG must be off
    exclusive: bool | None = None        # true: no other tenant's process on the GPUs
    min_mem_bw_gbps: float | None = None           # GB/s, device copy, read+write counted
    min_bf16_tflops: float | None = None
    min_fp16_tflops: float | None = None
    min_fp8_tflops: float | None = None
    min_h2d_gbps: float | None = None              # pinned host->device, GB/s
    min_allreduce_busbw_gbps: float | None = None  # NCCL all-reduce bus bandwidth, GB/s
    min_sustained_bf16_tflops: float | None = None  # every GPU, over the sustained window
    max_temperature_c: float | None = None  # hottest GPU over the sustained window
    fabric: bool | None = None           # true: the NVSwitch fabric must be up on every GPU
    cpu_cores: int | None = None         # logical CPUs the host must have, at least
    host_ram_gb: float | None = None     # host memory, GB (1e9 bytes), at least
    disk_gb: float | None = None         # size of the working directory's file system, GB
    disk_free_gb: float | None = None    # free space there, GB
    numa_affinity: bool | None = None    # true: every GPU reports its NUMA node (not flattened)
    source: str | None = None            # the file it came from (set by the loader)


_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "card": (str,), "count": (int,), "memory_gb": (int, float),
    "pcie_gen": (int,), "pcie_width": (int,), "nvlink": (bool,), "power_limit_w": (int, float),
    "driver_min": (str,), "cuda_min": (str,), "ecc": (bool,), "mig": (bool,),
    "exclusive": (bool,), "fabric": (bool,), "cpu_cores": (int,), "numa_affinity": (bool,),
}
# Ranges a real server can have; outside them the value is a typo, not a term.
_RANGES: dict[str, tuple[float, float]] = {
    "count": (1, 1024), "memory_gb": (1, 2048), "pcie_gen": (1, 6), "pcie_width": (1, 32),
    "power_limit_w": (10, 5000), "min_mem_bw_gbps": (1, 100_000), "min_bf16_tflops": (0.1, 100_000),
    "min_fp16_tflops": (0.1, 100_000), "min_fp8_tflops": (0.1, 100_000),
    "min_h2d_gbps": (0.1, 10_000), "min_allreduce_busbw_gbps": (0.1, 100_000),
    "min_sustained_bf16_tflops": (0.1, 100_000), "max_temperature_c": (20, 120),
    "cpu_cores": (1, 100_000), "host_ram_gb": (1, 1_000_000), "disk_gb": (1, 10_000_000),
    "disk_free_gb": (0.1, 10_000_000),
}
_VERSION = re.compile(r"\d{1,4}(\.\d{1,4}){0,3}")


def _bad(origin: str, message: Text) -> DataError:
    return DataError(Text(f"{origin}: ", f"{origin}：") + message,
                     hint=Text("See docs/verify.md (contract file) and examples/contract.toml.",
                               "参见 docs/verify.md（合同文件）与 examples/contract.toml。"))


def _check_value(origin: str, key: str, value: Any) -> Any:
    allowed = _TYPES.get(key, (int, float))
    if isinstance(value, bool) and bool not in allowed:
        raise _bad(origin, Text(f"'{key}' must be a number, not {value}.",
                                f"“{key}”应为数字，而不是 {value}。"))
    if not isinstance(value, allowed):
        want = "/".join(t.__name__ for t in allowed)
        raise _bad(origin, Text(f"'{key}' must be {want}, got {value!r}.",
                                f"“{key}”应为 {want}，实际为 {value!r}。"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or value <= 0:
            raise _bad(origin, Text(f"'{key}' must be a finite positive number, got {value}.",
                                    f"“{key}”必须为有限正数，实际为 {value}。"))
        low, high = _RANGES.get(key, (0, math.inf))
        if not low <= value <= high:
            raise _bad(origin, Text(f"'{key}' = {value} is outside {low:g}-{high:g}.",
                                    f"“{key}” = {value} 超出 {low:g}-{high:g}。"))
    if key in ("driver_min", "cuda_min") and not _VERSION.fullmatch(str(value).strip()):
        example = "550.54.15" if key == "driver_min" else "12.4"
        raise _bad(origin, Text(f"'{key}' = {value!r} is not a version like \"{example}\".",
                                f"“{key}” = {value!r} 不是形如“{example}”的版本号。"))
    return float(value) if allowed == (int, float) and isinstance(value, (int, float)) else value


def parse_contract(data: dict[str, Any], origin: str = "contract") -> Contract:
    if not isinstance(data, dict):
        raise _bad(origin, Text("a contract must be a table of keys.", "合同必须是键值表。"))
    data = dict(data)
    data.pop("schema_version", None)
    known = [f.name for f in fields(Contract) if f.name != "source"]
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            matches = close_matches(key, known)
            hint = f" Did you mean '{matches[0]}'?" if matches else ""
            hint_zh = f"您是否想输入“{matches[0]}”？" if matches else ""
            raise _bad(origin, Text(f"unknown key '{key}'.{hint}", f"未知的键“{key}”。{hint_zh}"))
        values[key] = _check_value(origin, key, value)
    return Contract(**values, source=origin)


def load_contract(path: str | Path) -> Contract:
    p = Path(path)
    try:
        data = safefile.read_toml(p, 1 << 20, "contract")  # bounded: no FIFO, size, depth, NaN
    except FileNotFoundError as exc:
        raise DataError(Text(f"No such contract file: {p}", f"合同文件不存在：{p}")) from exc
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        raise _bad(str(p), Text(f"not valid TOML: {exc}", f"不是有效的 TOML：{exc}")) from exc
    return parse_contract(data, origin=str(p))
