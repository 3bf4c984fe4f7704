"""Fallback when NVML is unusable: parse `nvidia-smi -q -x` and `nvidia-smi topo -m`.

Handles both layouts seen in the wild: drivers before 535 (`clocks_throttle_reasons`,
`power_readings`, `single_bit`/`double_bit` ECC counters) and after
(`clocks_event_reasons`, `gpu_power_readings`, `sram_*`/`dram_*` counters).
"N/A" and missing elements become NotAvailable with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from typing import Any

from gpuwise.verify.nvml import NOT_ON_CARD, NotAvailable, is_na
from gpuwise.verify.raw import GpuSnapshot, ProcessInfo, pci_id

__all__ = ["SmiXml", "load_reading_from_xml", "parse_smi_xml", "parse_topo_matrix", "run_smi"]

# nvml.h clocks-event reason bits, keyed by the suffix nvidia-smi uses in its XML.
_REASON_BITS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4,
    "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_UNIT_BYTES = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


class SmiXml:
    """Parsed `nvidia-smi -q -x`: driver and CUDA versions, one GpuSnapshot per GPU."""

    def __init__(self, driver: Any, cuda: Any, gpus: tuple[GpuSnapshot, ...],
                 gpu_elements: tuple[ET.Element, ...]) -> None:
        self.driver_version = driver
        self.cuda_driver_version = cuda
        self.gpus = gpus
        self.gpu_elements = gpu_elements


def _text(el: ET.Element | None, path: str) -> Any:
    node = el.find(path) if el is not None else None
    if node is None or node.text is None:
        return NotAvailable(f"nvidia-smi does not report {path}")
    value = node.text.strip()
    if value in ("N/A", "", "Requested functionality has been deprecated", "[N/A]"):
        return NotAvailable(NOT_ON_CARD if value == "N/A" else f"nvidia-smi: {value or 'empty'}")
    return value


def _num(el: ET.Element | None, path: str, cast: type = int) -> Any:
    value = _text(el, path)
    if is_na(value):
        return value
    match = _NUM.search(value)
    return cast(float(match.group())) if match else NotAvailable(f"cannot read '{value}'")


def _bool(el: ET.Element | None, path: str) -> Any:
    value = _text(el, path)
    if is_na(value):
        return value
    return value.lower() in ("enabled", "yes", "active", "on")


def _bytes(el: ET.Element | None, path: str) -> Any:
    value = _text(el, path)
    if is_na(value):
        return value
    parts = value.split()
    if len(parts) == 2 and parts[1] in _UNIT_BYTES:
        return int(float(parts[0]) * _UNIT_BYTES[parts[1]])
    return NotAvailable(f"cannot read '{value}'")


def _sum(el: ET.Element | None, paths: tuple[str, ...]) -> Any:
    values = [_num(el, p) for p in paths]
    good = [v for v in values if not is_na(v)]
    return sum(good) if good else values[0]


def _ecc_counts(gpu: ET.Element, scope: str) -> tuple[Any, Any]:
    """(uncorrected, corrected) for 'volatile' or 'aggregate', either layout."""
    base = f"ecc_errors/{scope}"
    if gpu.find(f"{base}/dram_uncorrectable") is not None:
        unc = _sum(gpu, (f"{base}/dram_uncorrectable", f"{base}/sram_uncorrectable",
                         f"{base}/sram_uncorrectable_parity", f"{base}/sram_uncorrectable_secded"))
        cor = _sum(gpu, (f"{base}/dram_correctable", f"{base}/sram_correctable"))
        return unc, cor
    return _num(gpu, f"{base}/double_bit/total"), _num(gpu, f"{base}/single_bit/total")


def throttle_bits(gpu: ET.Element) -> Any:
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if block is None:
        return NotAvailable("nvidia-smi does not report clocks-event reasons")
    bits = 0
    for child in block:
        bit = _REASON_BITS.get(child.tag.removeprefix(prefix))
        if bit and (child.text or "").strip() == "Active":
            bits |= bit
    return bits


def _power(gpu: ET.Element) -> tuple[Any, Any]:
    block = gpu.find("gpu_power_readings")
    if block is not None:
        return _num(block, "current_power_limit", float), _num(block, "default_power_limit", float)
    block = gpu.find("power_readings")
    limit = _num(block, "enforced_power_limit", float)
    if is_na(limit):
        limit = _num(block, "power_limit", float)
    return limit, _num(block, "default_power_limit", float)


def _processes(gpu: ET.Element) -> Any:
    block = gpu.find("processes")
    if block is None:
        return NotAvailable("nvidia-smi does not report processes")
    out = []
    for p in block.findall("process_info"):
        if (p.findtext("type") or "C").strip() == "G":  # graphics-only clients (display)
            continue
        pid = _num(p, "pid")
        used = _bytes(p, "used_memory")
        out.append(ProcessInfo(pid=0 if is_na(pid) else pid, name=p.findtext("process_name") or "?",
                               used_memory_bytes=None if is_na(used) else used, same_user=None))
    return tuple(out)


def _remap(gpu: ET.Element) -> dict[str, Any]:
    rr = gpu.find("remapped_rows")
    return {
        "remap_pending": _bool(rr, "remapped_row_pending") if rr is not None and len(rr)
        else NotAvailable(NOT_ON_CARD),
        "remap_failure": _bool(rr, "remapped_row_failure") if rr is not None and len(rr)
        else NotAvailable(NOT_ON_CARD),
        "remapped_rows_uncorrectable": _num(rr, "remapped_row_unc") if rr is not None and len(rr)
        else NotAvailable(NOT_ON_CARD),
        "retired_pages_pending": _bool(gpu, "retired_pages/pending_retirement"),
        "retired_pages_count": _num(gpu, "retired_pages/double_bit_retirement/retired_count"),
    }


def _pci_device_id(gpu: ET.Element) -> Any:
    """"10de:2330" from <pci><pci_device_id>0x233010DE</pci_device_id> (device, then vendor)."""
    value = _text(gpu, "pci/pci_device_id")
    if is_na(value):
        return value
    try:
        return pci_id(int(value, 16))
    except ValueError:
        return NotAvailable(f"cannot read '{value}'")


def _word(gpu: ET.Element, path: str) -> Any:
    """"Exclusive_Process" -> "exclusive_process"; "In Progress" -> "in_progress"."""
    value = _text(gpu, path)
    return value if is_na(value) else str(value).strip().lower().replace(" ", "_")


def _sram_dram(gpu: ET.Element) -> dict[str, Any]:
    """Modern layout only (driver >= 535): uncorrectable SRAM (parity + SEC-DED) and DRAM."""
    sram = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded")
    if gpu.find("ecc_errors/aggregate/dram_uncorrectable") is None:
        na = NotAvailable("nvidia-smi reports no SRAM/DRAM split (driver before 535)")
        return {"ecc_sram_uncorrected_volatile": na, "ecc_sram_uncorrected_aggregate": na,
                "ecc_dram_uncorrected_aggregate": na}
    return {"ecc_sram_uncorrected_volatile": _sum(gpu, tuple(f"ecc_errors/volatile/{s}" for s in sram)),
            "ecc_sram_uncorrected_aggregate": _sum(gpu, tuple(f"ecc_errors/aggregate/{s}" for s in sram)),
            "ecc_dram_uncorrected_aggregate": _num(gpu, "ecc_errors/aggregate/dram_uncorrectable")}


def _extra(gpu: ET.Element) -> dict[str, Any]:
    """The fields NVML gives directly that nvidia-smi also prints (raw.py schema history)."""
    fabric = _word(gpu, "fabric/state")
    status = _text(gpu, "fabric/status")
    rr = gpu.find("remapped_rows")
    return {
        "pci_bus_id": _text(gpu, "pci/pci_bus_id"), "memory_used_bytes": _bytes(gpu, "fb_memory_usage/used"),
        "compute_mode": _word(gpu, "compute_mode"),
        "virtualization_mode": _word(gpu, "gpu_virtualization_mode/virtualization_mode"),
        "pcie_replay_count": _num(gpu, "pci/replay_counter"),
        "remapped_rows_correctable": _num(rr, "remapped_row_corr") if rr is not None and len(rr)
        else NotAvailable(NOT_ON_CARD),
        "fabric_state": "completed" if fabric == "completed" else fabric,
        "fabric_status": status if is_na(status) else (0 if str(status).lower() == "success" else 1),
        "sm_clock_max_mhz": _num(gpu, "max_clocks/sm_clock"), **_sram_dram(gpu),
    }


def _gpu(index: int, gpu: ET.Element) -> GpuSnapshot:
    link = "pci/pci_gpu_link_info"
    unc_v, cor_v = _ecc_counts(gpu, "volatile")
    unc_a, _ = _ecc_counts(gpu, "aggregate")
    limit, default = _power(gpu)
    gpu_max = _num(gpu, f"{link}/pcie_gen/max_device_link_gen")
    return GpuSnapshot(
        index=index, name=str(_text(gpu, "product_name")), pci_device_id=_pci_device_id(gpu),
        uuid=_text(gpu, "uuid"),
        serial=_text(gpu, "serial"), memory_total_bytes=_bytes(gpu, "fb_memory_usage/total"),
        vbios=_text(gpu, "vbios_version"),
        compute_capability=NotAvailable("nvidia-smi -q -x does not report it"),
        persistence_mode=_bool(gpu, "persistence_mode"),
        mig_current=_bool(gpu, "mig_mode/current_mig"), mig_pending=_bool(gpu, "mig_mode/pending_mig"),
        ecc_current=_bool(gpu, "ecc_mode/current_ecc"), ecc_pending=_bool(gpu, "ecc_mode/pending_ecc"),
        ecc_uncorrected_volatile=unc_v, ecc_uncorrected_aggregate=unc_a, ecc_corrected_volatile=cor_v,
        **_remap(gpu),
        pcie_gen_max=_num(gpu, f"{link}/pcie_gen/max_link_gen"),
        pcie_gen_gpu_max=gpu_max if not is_na(gpu_max) else _num(gpu, f"{link}/pcie_gen/max_link_gen"),
        pcie_width_max=_num(gpu, f"{link}/link_widths/max_link_width"),
        pcie_gen_idle=_num(gpu, f"{link}/pcie_gen/current_link_gen"),
        pcie_width_idle=_num(gpu, f"{link}/link_widths/current_link_width"),
        power_limit_w=limit, power_default_w=default,
        temperature_c=_num(gpu, "temperature/gpu_temp"),
        temperature_slowdown_c=_num(gpu, "temperature/gpu_temp_slow_threshold"),
        throttle_reasons_idle=throttle_bits(gpu),
        nvlink_up=NotAvailable("nvidia-smi -q -x does not report NVLink; see the topology"),
        nvlink_down=NotAvailable("nvidia-smi -q -x does not report NVLink; see the topology"),
        processes=_processes(gpu), **_extra(gpu),
    )


def parse_smi_xml(text: str) -> SmiXml:
    """Parse the XML text; raises ValueError when it is not nvidia-smi output."""
    if "<!ENTITY" in text:
        raise ValueError("refusing XML with entity declarations")
    root = ET.fromstring(text.strip())
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"not nvidia-smi XML (root <{root.tag}>)")
    elements = tuple(root.findall("gpu"))
    gpus = tuple(_gpu(i, g) for i, g in enumerate(elements))
    return SmiXml(_text(root, "driver_version"), _text(root, "cuda_version"), gpus, elements)


def load_reading_from_xml(gpu: ET.Element) -> dict[str, Any]:
    """The readings a load sampler needs, from one <gpu> element."""
    link = "pci/pci_gpu_link_info"
    block = gpu.find("gpu_power_readings")
    if block is None:
        block = gpu.find("power_readings")
    power = _num(block, "power_draw", float)
    if is_na(power):
        power = _num(block, "instant_power_draw", float)
    return {"pcie_gen": _num(gpu, f"{link}/pcie_gen/current_link_gen"),
            "pcie_width": _num(gpu, f"{link}/link_widths/current_link_width"),
            "throttle": throttle_bits(gpu), "temperature": _num(gpu, "temperature/gpu_temp"),
            "power_w": power, "sm_mhz": _num(gpu, "clocks/sm_clock"),
            "ecc_unc": _ecc_counts(gpu, "volatile")[0]}


def parse_topo_matrix(text: str) -> tuple[tuple[str, ...], ...]:
    """The GPU x GPU block of `nvidia-smi topo -m` ("X", "NV18", "PIX", "SYS"...)."""
    rows = []
    for line in text.splitlines():
        cells = line.split()
        # A row starts with GPUn; the header line starts with GPU0 GPU1 ... and is skipped.
        if len(cells) > 1 and re.fullmatch(r"GPU\d+", cells[0]) and not cells[1].startswith("GPU"):
            rows.append(cells[1:])
    n = len(rows)
    return tuple(tuple(r[:n]) for r in rows)


def run_smi(args: list[str], timeout_s: float = 30.0) -> str | None:
    """Run nvidia-smi with `args`; None when it is missing, fails or hangs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None
