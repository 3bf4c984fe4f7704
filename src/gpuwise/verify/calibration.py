"""Measured numbers from a saved verify run, for the estimates to use instead of datasheets.

`load_calibration(path)` reads a raw JSON written by `gpuwise verify --save` and keeps,
per precision and link, the slowest GPU's measurement (a job runs at the pace of its
slowest GPU). Units: bytes/s and FLOP/s; memory bandwidth counts read + write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuwise.errors import DataError
from gpuwise.i18n import Text
from gpuwise.verify.nvml import is_na
from gpuwise.verify.raw import Evidence, load_evidence

__all__ = ["Calibration", "calibration_from_evidence", "load_calibration"]


@dataclass(frozen=True)
class Calibration:
    card_id: str | None
    n_gpus: int
    mem_bw_bytes_per_s: float | None            # device copy, read + write counted
    matmul_flops_per_s: MappingProxyType[str, float] = field(
        default_factory=lambda: MappingProxyType({}))  # "bf16" / "fp16" / "fp8"
    pcie_h2d_bytes_per_s: float | None = None
    allreduce_busbw_bytes_per_s: float | None = None  # at the largest message measured
    source: str = ""


def _min(values: list[Any]) -> float | None:
    good = [float(v) for v in values if not is_na(v)]
    return min(good) if good else None


def calibration_from_evidence(ev: Evidence, source: str = "") -> Calibration:
    from gpuwise.verify.judge import find_card

    benches = [] if is_na(ev.bench) else list(ev.bench)
    flops: dict[str, list[float]] = {}
    for b in benches:
        for run in b.matmul:
            flops.setdefault(run.precision, []).append(run.flops_per_s)
    busbw = None
    if not is_na(ev.allreduce) and ev.allreduce.points:
        busbw = max(ev.allreduce.points, key=lambda p: p.size_bytes).busbw_bytes_per_s
    card = find_card(ev.gpus[0].name) if ev.gpus else None
    return Calibration(
        card_id=getattr(card, "id", None), n_gpus=len(ev.gpus),
        mem_bw_bytes_per_s=_min([b.mem_bw_bytes_per_s for b in benches]),
        matmul_flops_per_s=MappingProxyType({p: min(v) for p, v in sorted(flops.items())}),
        pcie_h2d_bytes_per_s=_min([b.h2d_bytes_per_s for b in benches]),
        allreduce_busbw_bytes_per_s=busbw, source=source)


def load_calibration(path: str | Path) -> Calibration:
    """Calibration from a `gpuwise verify --save` file; DataError when it has no measurements."""
    ev = load_evidence(path)
    cal = calibration_from_evidence(ev, source=str(path))
    if cal.mem_bw_bytes_per_s is None and not cal.matmul_flops_per_s:
        raise DataError(Text(f"{path} holds no benchmark measurements (an inventory-only run?).",
                             f"{path} 不含基准测试数据（可能只做了清单检查）。"),
                        hint=Text("Run `gpuwise verify --quick --save raw.json` on the GPU server.",
                                  "在 GPU 服务器上运行 `gpuwise verify --quick --save raw.json`。"))
    return cal
