"""Fold the readings of the sustained window into one `LoadSample` per GPU.

The sampler reads every GPU about once a second (clocks, clocks-event reasons, power,
temperature, PCIe link, volatile ECC); the benchmark child reports its GEMM rate per
interval. Idle samples (the GPU-idle reason bit) are left out of every verdict
(NVSentinel#890): a link that drops at idle is power saving, not downtraining.
"""

from __future__ import annotations

import statistics
from typing import Any

from gpuwise.verify.nvml import NotAvailable, is_na
from gpuwise.verify.raw import LoadSample

__all__ = ["IDLE_BIT", "burst_and_sustained", "merge_load"]

IDLE_BIT = 0x1  # nvmlClocksEventReasonGpuIdle (nvml.h): excluded from throttle verdicts
_SERIES_KEYS = ("t", "sm_mhz", "power_w", "temperature", "pcie_gen", "pcie_width", "throttle")


def _good(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None and not is_na(v)]


def _fold(readings: list[dict[str, Any]], key: str, how: Any) -> Any:
    good = _good([r.get(key) for r in readings])
    if good:
        return how(good)
    first = next((r[key] for r in readings if key in r), None)
    return first if is_na(first) else NotAvailable("no sample taken under load")


def _persistent_min(values: list[Any]) -> Any:
    """The lowest value seen in at least two samples: one reading caught while a link retrains
    up from idle is a transition, not downtraining; a link that drops twice or stays low is."""
    if len(values) < 2:
        return min(values)
    counts: dict[Any, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    repeated = [v for v, c in counts.items() if c >= 2]
    return min(repeated) if repeated else max(values)


def burst_and_sustained(rates: list[tuple[float, float]]) -> tuple[Any, Any]:
    """(rate over the first 10 % of the window, rate over its second half) from (t, FLOP/s)."""
    if len(rates) < 2:
        na = NotAvailable("fewer than two rate intervals")
        return na, na
    end = rates[-1][0]
    burst = [r for t, r in rates if t <= 0.1 * end] or [rates[0][1]]
    late = [r for t, r in rates if t >= 0.5 * end] or [rates[-1][1]]
    return statistics.median(burst), statistics.median(late)


def merge_load(index: int, readings: list[dict[str, Any]],
               rates: list[tuple[float, float]] | None = None, seconds: Any = None) -> LoadSample:
    """Max (and min) of the link, max temperature and power, medians of clocks and power,
    OR of the non-idle clocks-event bits, the ECC delta, burst vs sustained GEMM rates."""
    busy = [r for r in readings
            if not is_na(r.get("throttle", 0)) and not int(r.get("throttle", 0)) & IDLE_BIT]
    use = busy or readings
    bits: Any = NotAvailable("no reading of clocks-event reasons under load")
    vals = [r["throttle"] for r in busy if "throttle" in r]
    if vals:
        bits = 0
        for v in vals:
            bits |= int(v)
    ecc = _good([r.get("ecc_unc") for r in readings])
    burst, sustained = burst_and_sustained(rates) if rates is not None else (NotAvailable("not sampled"),) * 2
    series = tuple(tuple(_plain(r.get(k)) for k in _SERIES_KEYS) for r in readings if "t" in r)
    extra: dict[str, Any] = {}
    if rates is not None or any("sm_mhz" in r for r in readings):
        extra = {
            "sm_clock_min_mhz": _fold(use, "sm_mhz", min),
            "sm_clock_median_mhz": _fold(use, "sm_mhz", statistics.median),
            "power_median_w": _fold(use, "power_w", statistics.median),
            "ecc_uncorrected_delta": (int(ecc[-1]) - int(ecc[0])) if ecc else NotAvailable("ECC not sampled"),
            "burst_flops_per_s": burst, "sustained_flops_per_s": sustained, "series": series,
        }
        if seconds is not None:
            extra["seconds"] = seconds
    # A link is judged only on non-idle samples: at idle it drops by design (power saving).
    link = busy or [{"pcie_gen": NotAvailable("no non-idle sample"), "pcie_width": NotAvailable("no non-idle sample")}]
    if extra:
        extra["pcie_gen_min"] = _fold(link, "pcie_gen", _persistent_min)
        extra["pcie_width_min"] = _fold(link, "pcie_width", _persistent_min)
    return LoadSample(
        index=index, samples=len(busy),
        pcie_gen=_fold(link, "pcie_gen", max), pcie_width=_fold(link, "pcie_width", max),
        throttle_reasons=bits, temperature_max_c=_fold(use, "temperature", max),
        power_max_w=_fold(use, "power_w", max), **extra,
    )


def _plain(value: Any) -> float | int:
    """A series cell: the number, or -1 where the reading was not available."""
    if value is None or is_na(value) or isinstance(value, bool):
        return -1
    return value if isinstance(value, (int, float)) else -1
