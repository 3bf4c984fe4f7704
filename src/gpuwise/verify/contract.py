"""A rental contract in TOML: what the provider promised. docs/verify.md documents it.

Every key is optional; a key that is present turns its check from advice into a term:
falling short of it fails. Unknown keys are errors (with a "did you mean").
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

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
    source: str | None = None            # the file it came from (set by the loader)


_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "card": (str,), "count": (int,), "memory_gb": (int, float),
    "pcie_gen": (int,), "pcie_width": (int,), "nvlink": (bool,), "power_limit_w": (int, float),
    "driver_min": (str,), "cuda_min": (str,), "ecc": (bool,), "mig": (bool,),
    "exclusive": (bool,),
}


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
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
        raise _bad(origin, Text(f"'{key}' must be positive, got {value}.",
                                f"“{key}”必须为正数，实际为 {value}。"))
    return float(value) if allowed == (int, float) else value  # type: ignore[arg-type]


def parse_contract(data: dict[str, Any], origin: str = "contract") -> Contract:
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
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(Text(f"No such contract file: {p}", f"合同文件不存在：{p}")) from exc
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _bad(str(p), Text(f"not valid TOML: {exc}", f"不是有效的 TOML：{exc}")) from exc
    return parse_contract(data, origin=str(p))
