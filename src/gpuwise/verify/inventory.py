"""Read the GPUs at rest through NVML: identity, health counters, links, topology.

Read-only (see nvml.py). Every field may come back as NotAvailable with a reason; the
judge decides what a missing value means for each check.
"""

from __future__ import annotations

import os
from typing import Any

from gpuwise.verify.nvml import NotAvailable, Nvml, is_na
from gpuwise.verify.raw import GpuSnapshot, ProcessInfo, pci_id
from gpuwise.verify.window import IDLE_BIT, merge_load

__all__ = [
    "cuda_version_str",
    "merge_load",
    "process_owner_is_me",
    "read_gpu",
    "read_load_sample",
    "read_system",
    "read_topology",
]

_ = (IDLE_BIT, merge_load)  # re-exported: the load readings are folded in window.py


def cuda_version_str(value: Any) -> Any:
    """12080 -> '12.8' (nvmlSystemGetCudaDriverVersion_v2 encodes major*1000 + minor*10)."""
    if is_na(value):
        return value
    return f"{int(value) // 1000}.{(int(value) % 1000) // 10}"


def read_system(nv: Nvml) -> tuple[Any, Any]:
    driver = nv.query("nvmlSystemGetDriverVersion")
    cuda = nv.query("nvmlSystemGetCudaDriverVersion_v2")
    if is_na(cuda):
        cuda = nv.query("nvmlSystemGetCudaDriverVersion")
    return driver, cuda_version_str(cuda)


def _mw_to_w(value: Any) -> Any:
    return value if is_na(value) else round(float(value) / 1000.0, 1)


def _flag(value: Any) -> Any:
    return value if is_na(value) else bool(value)


def _pair(value: Any) -> tuple[Any, Any]:
    if is_na(value):
        return value, value
    return bool(value[0]), bool(value[1])


def process_owner_is_me(pid: int) -> bool | None:
    """True when /proc says the process runs as our user; None when it cannot be seen."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1]) == os.getuid()
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return None


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _processes(nv: Nvml, h: Any) -> Any:
    procs = nv.query("nvmlDeviceGetComputeRunningProcesses", h)
    if is_na(procs):
        return procs
    out = []
    for p in procs:
        pid = int(getattr(p, "pid", 0))
        used = getattr(p, "usedGpuMemory", None)
        out.append(ProcessInfo(pid=pid, name=_process_name(pid),
                               used_memory_bytes=int(used) if isinstance(used, int) else None,
                               same_user=process_owner_is_me(pid)))
    return tuple(out)


def _ecc(nv: Nvml, h: Any) -> dict[str, Any]:
    unc = nv.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    cor = nv.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    vol, agg = nv.const("NVML_VOLATILE_ECC", 0), nv.const("NVML_AGGREGATE_ECC", 1)
    current, pending = _pair(nv.query("nvmlDeviceGetEccMode", h))
    return {
        "ecc_current": current, "ecc_pending": pending,
        "ecc_uncorrected_volatile": nv.query("nvmlDeviceGetTotalEccErrors", h, unc, vol),
        "ecc_uncorrected_aggregate": nv.query("nvmlDeviceGetTotalEccErrors", h, unc, agg),
        "ecc_corrected_volatile": nv.query("nvmlDeviceGetTotalEccErrors", h, cor, vol),
    }


def _remap(nv: Nvml, h: Any) -> dict[str, Any]:
    rows = nv.query("nvmlDeviceGetRemappedRows", h)  # (corr, unc, isPending, failureOccurred)
    if is_na(rows):
        out: dict[str, Any] = {"remap_pending": rows, "remap_failure": rows,
                               "remapped_rows_uncorrectable": rows}
    else:
        out = {"remap_pending": bool(rows[2]), "remap_failure": bool(rows[3]),
               "remapped_rows_uncorrectable": int(rows[1])}
    # Pre-Ampere cards retire pages instead of remapping rows.
    pending = nv.query("nvmlDeviceGetRetiredPagesPendingStatus", h)
    out["retired_pages_pending"] = _flag(pending)
    cause = nv.const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    pages = nv.query("nvmlDeviceGetRetiredPages", h, cause)
    out["retired_pages_count"] = pages if is_na(pages) else len(pages)
    return out


def _pcie(nv: Nvml, h: Any) -> dict[str, Any]:
    return {
        "pcie_gen_max": nv.query("nvmlDeviceGetMaxPcieLinkGeneration", h),
        "pcie_gen_gpu_max": nv.query("nvmlDeviceGetGpuMaxPcieLinkGeneration", h),
        "pcie_width_max": nv.query("nvmlDeviceGetMaxPcieLinkWidth", h),
        "pcie_gen_idle": nv.query("nvmlDeviceGetCurrPcieLinkGeneration", h),
        "pcie_width_idle": nv.query("nvmlDeviceGetCurrPcieLinkWidth", h),
    }


def _nvlink(nv: Nvml, h: Any) -> dict[str, Any]:
    up = down = 0
    first_na: Any = None
    for link in range(int(nv.const("NVML_NVLINK_MAX_LINKS", 18))):
        state = nv.query("nvmlDeviceGetNvLinkState", h, link)
        if is_na(state):
            first_na = first_na or state
            continue
        if state:
            up += 1
        else:
            down += 1
    if up == 0 and down == 0:
        na = first_na or NotAvailable("no NVLink on this card")
        return {"nvlink_up": na, "nvlink_down": na}
    return {"nvlink_up": up, "nvlink_down": down}


def _pci_device_id(nv: Nvml, h: Any) -> Any:
    """"10de:2330" from nvmlDeviceGetPciInfo's pciDeviceId (device << 16 | vendor)."""
    pci = nv.query("nvmlDeviceGetPciInfo", h)
    if is_na(pci):
        return pci
    combined = getattr(pci, "pciDeviceId", None)
    if not isinstance(combined, int) or combined <= 0:
        return NotAvailable("NVML PciInfo has no pciDeviceId")
    return pci_id(combined)


_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_VIRT_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


def _word(table: dict[int, str], value: Any) -> Any:
    return value if is_na(value) else table.get(int(value), f"unknown ({value})")


def _nvlink_errors(nv: Nvml, h: Any) -> dict[str, Any]:
    """CRC (flit + data), replay and recovery counters summed over the links that are up
    (nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3)."""
    sums = {"nvlink_replay_errors": 0, "nvlink_recovery_errors": 0, "nvlink_crc_errors": 0}
    read = False
    for link in range(int(nv.const("NVML_NVLINK_MAX_LINKS", 18))):
        state = nv.query("nvmlDeviceGetNvLinkState", h, link)
        if is_na(state) or not state:
            continue
        for counter, key in ((0, "nvlink_replay_errors"), (1, "nvlink_recovery_errors"),
                             (2, "nvlink_crc_errors"), (3, "nvlink_crc_errors")):
            value = nv.query("nvmlDeviceGetNvLinkErrorCounter", h, link, counter)
            if not is_na(value):
                sums[key] += int(value)
                read = True
    if not read:
        na = NotAvailable("NVLink error counters not reported")
        return {k: na for k in sums}
    return dict(sums)


def _sram_dram(nv: Nvml, h: Any) -> dict[str, Any]:
    """Uncorrectable ECC by location (nvmlMemoryLocation_t: DRAM 2, SRAM 7)."""
    unc = nv.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    vol, agg = nv.const("NVML_VOLATILE_ECC", 0), nv.const("NVML_AGGREGATE_ECC", 1)
    sram, dram = nv.const("NVML_MEMORY_LOCATION_SRAM", 7), nv.const("NVML_MEMORY_LOCATION_DRAM", 2)
    return {
        "ecc_sram_uncorrected_volatile": nv.query("nvmlDeviceGetMemoryErrorCounter", h, unc, vol, sram),
        "ecc_sram_uncorrected_aggregate": nv.query("nvmlDeviceGetMemoryErrorCounter", h, unc, agg, sram),
        "ecc_dram_uncorrected_aggregate": nv.query("nvmlDeviceGetMemoryErrorCounter", h, unc, agg, dram),
    }


def _fabric(nv: Nvml, h: Any) -> dict[str, Any]:
    info = nv.query("nvmlDeviceGetGpuFabricInfo", h)
    if is_na(info):
        return {"fabric_state": info, "fabric_status": info}
    return {"fabric_state": _word(_FABRIC_STATES, getattr(info, "state", 0)),
            "fabric_status": int(getattr(info, "status", 0))}


def _bus_id(nv: Nvml, h: Any) -> Any:
    pci = nv.query("nvmlDeviceGetPciInfo", h)
    return pci if is_na(pci) else (_decode_bus(pci) or NotAvailable("NVML PciInfo has no busId"))


def _numa_node(nv: Nvml, h: Any, bus: Any) -> Any:
    node = nv.query("nvmlDeviceGetNumaNodeId", h)
    if not is_na(node) or is_na(bus):
        return node
    try:  # sysfs names the device by its 4-digit domain: 0000:18:00.0
        domain, rest = str(bus).lower().split(":", 1)
        with open(f"/sys/bus/pci/devices/{int(domain, 16):04x}:{rest}/numa_node", encoding="ascii") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return node


def _extra(nv: Nvml, h: Any, mem: Any) -> dict[str, Any]:
    """The error sources, tenancy and placement fields (raw.py schema history)."""
    rows = nv.query("nvmlDeviceGetRemappedRows", h)
    bus = _bus_id(nv, h)
    return {
        "pci_bus_id": bus, "numa_node": _numa_node(nv, h, bus),
        "memory_used_bytes": mem if is_na(mem) else int(mem.used),
        "compute_mode": _word(_COMPUTE_MODES, nv.query("nvmlDeviceGetComputeMode", h)),
        "virtualization_mode": _word(_VIRT_MODES, nv.query("nvmlDeviceGetVirtualizationMode", h)),
        "pcie_replay_count": nv.query("nvmlDeviceGetPcieReplayCounter", h),
        "remapped_rows_correctable": rows if is_na(rows) else int(rows[0]),
        "sm_clock_max_mhz": nv.query("nvmlDeviceGetMaxClockInfo", h, nv.const("NVML_CLOCK_SM", 1)),
        **_nvlink_errors(nv, h), **_sram_dram(nv, h), **_fabric(nv, h),
    }


def _throttle(nv: Nvml, h: Any) -> Any:
    value = nv.query("nvmlDeviceGetCurrentClocksEventReasons", h)
    if is_na(value):  # drivers before the 535 rename
        value = nv.query("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    return value


def _temperature(nv: Nvml, h: Any) -> Any:
    return nv.query("nvmlDeviceGetTemperature", h, nv.const("NVML_TEMPERATURE_GPU", 0))


def read_gpu(nv: Nvml, index: int) -> GpuSnapshot:
    h = nv.handle(index)
    if is_na(h):
        return GpuSnapshot(index=index, name=f"GPU {index} ({h.reason})")
    mem = nv.query("nvmlDeviceGetMemoryInfo", h)
    cc = nv.query("nvmlDeviceGetCudaComputeCapability", h)
    mig_current, mig_pending = _pair(nv.query("nvmlDeviceGetMigMode", h))
    slow = nv.const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)
    return GpuSnapshot(
        index=index, name=str(nv.query("nvmlDeviceGetName", h)), pci_device_id=_pci_device_id(nv, h),
        uuid=nv.query("nvmlDeviceGetUUID", h), serial=nv.query("nvmlDeviceGetSerial", h),
        memory_total_bytes=mem if is_na(mem) else int(mem.total),
        vbios=nv.query("nvmlDeviceGetVbiosVersion", h),
        compute_capability=cc if is_na(cc) else f"{cc[0]}.{cc[1]}",
        persistence_mode=_flag(nv.query("nvmlDeviceGetPersistenceMode", h)),
        mig_current=mig_current, mig_pending=mig_pending,
        **_ecc(nv, h), **_remap(nv, h), **_pcie(nv, h),
        power_limit_w=_mw_to_w(nv.query("nvmlDeviceGetEnforcedPowerLimit", h)),
        power_default_w=_mw_to_w(nv.query("nvmlDeviceGetPowerManagementDefaultLimit", h)),
        temperature_c=_temperature(nv, h),
        temperature_slowdown_c=nv.query("nvmlDeviceGetTemperatureThreshold", h, slow),
        throttle_reasons_idle=_throttle(nv, h),
        **_nvlink(nv, h), processes=_processes(nv, h), **_extra(nv, h, mem),
    )


# nvmlGpuTopologyLevel_t -> the words `nvidia-smi topo -m` prints.
_TOPO_WORDS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def _nvlink_peers(nv: Nvml, handles: list[Any], buses: list[str]) -> list[dict[int, int]]:
    """Per GPU: peer index -> active links. Links into an NVSwitch reach every GPU."""
    switch = nv.const("NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    out: list[dict[int, int]] = []
    for i, h in enumerate(handles):
        peers: dict[int, int] = {}
        to_switch = 0
        for link in range(int(nv.const("NVML_NVLINK_MAX_LINKS", 18))):
            state = nv.query("nvmlDeviceGetNvLinkState", h, link)
            if is_na(state) or not state:
                continue
            kind = nv.query("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
            remote = nv.query("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            bus = "" if is_na(remote) else str(_decode_bus(remote)).lower()
            if kind == switch:
                to_switch += 1
            elif bus in buses:
                peers[buses.index(bus)] = peers.get(buses.index(bus), 0) + 1
        if to_switch:
            peers.update({j: to_switch for j in range(len(handles)) if j != i})
        out.append(peers)
    return out


def _decode_bus(pci: Any) -> str:
    bus = getattr(pci, "busId", "") or getattr(pci, "busIdLegacy", "")
    return bus.decode() if isinstance(bus, bytes) else str(bus)


def read_topology(nv: Nvml, n: int) -> tuple[Any, Any]:
    """The `nvidia-smi topo -m` matrix and the P2P read-capability matrix."""
    if n < 2:
        return NotAvailable("one GPU: no pairs"), NotAvailable("one GPU: no pairs")
    handles = [nv.handle(i) for i in range(n)]
    buses = []
    for h in handles:
        pci = nv.query("nvmlDeviceGetPciInfo", h)
        buses.append("" if is_na(pci) else _decode_bus(pci).lower())
    peers = _nvlink_peers(nv, handles, buses)
    read_idx = nv.const("NVML_P2P_CAPS_INDEX_READ", 0)
    topo, p2p = [], []
    for i in range(n):
        row, prow = [], []
        for j in range(n):
            if i == j:
                row.append("X")
                prow.append("X")
                continue
            # both ends must see the link: a GPU whose links are all down reads NV# from no one
            links = min(peers[i].get(j, 0), peers[j].get(i, 0))
            if links:
                row.append(f"NV{links}")
            else:
                level = nv.query("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
                row.append("?" if is_na(level) else _TOPO_WORDS.get(int(level), "SYS"))
            status = nv.query("nvmlDeviceGetP2PStatus", handles[i], handles[j], read_idx)
            prow.append("OK" if status == 0 else ("NS" if not is_na(status) else status.reason))
        topo.append(tuple(row))
        p2p.append(tuple(prow))
    return tuple(topo), tuple(p2p)


def read_load_sample(nv: Nvml, index: int) -> dict[str, Any]:
    """One quick reading during load: link, clocks-event reasons, temperature, power."""
    h = nv.handle(index)
    if is_na(h):
        return {}
    return {
        "pcie_gen": nv.query("nvmlDeviceGetCurrPcieLinkGeneration", h),
        "pcie_width": nv.query("nvmlDeviceGetCurrPcieLinkWidth", h),
        "throttle": _throttle(nv, h),
        "temperature": _temperature(nv, h),
        "power_w": _mw_to_w(nv.query("nvmlDeviceGetPowerUsage", h)),
        "sm_mhz": nv.query("nvmlDeviceGetClockInfo", h, nv.const("NVML_CLOCK_SM", 1)),
        "ecc_unc": nv.query("nvmlDeviceGetTotalEccErrors", h, nv.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                            nv.const("NVML_VOLATILE_ECC", 0)),
    }
