"""Identity (PCI device id, SM count), NVML-to-CUDA mapping, tenancy, and the host around the GPUs.

A look-alike card (4090D for 4090, A800 for A100, H800/H20 for H100) has another PCI device
id and often another SM count; data/verify_identity.toml lists the SM counts with sources.
NVML and CUDA number GPUs differently (CUDA_VISIBLE_DEVICES, MIG, FASTEST_FIRST ordering),
so results are matched to GPUs by PCI bus id, never by index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.i18n import Text
from gpuwise.units import GB, GiB
from gpuwise.verify.checks import CheckResult, Status, incomplete, load_data, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS", "bus_key", "cuda_by_gpu", "sm_count_of"]


def bus_key(bus: str) -> str:
    """"00000000:18:00.0" (NVML) and "0000:18:00.0" (CUDA) -> "0000:18:00.0"."""
    text = str(bus).strip().lower()
    if text.count(":") == 2:
        domain, rest = text.split(":", 1)
        return f"{int(domain, 16) if domain else 0:04x}:{rest}"
    return f"0000:{text}"


def cuda_by_gpu(cx: Context) -> dict[int, Any]:
    """NVML index -> the CUDA device on the same PCI bus (only GPUs both sides see)."""
    devs = cx.ev.cuda_devices
    if is_na(devs):
        return {}
    by_bus = {bus_key(d.pci_bus_id): d for d in devs if d.pci_bus_id}
    by_uuid = {str(d.uuid).lower(): d for d in devs if d.uuid}
    out = {}
    for g in cx.ev.gpus:
        bus = None if is_na(g.pci_bus_id) else bus_key(g.pci_bus_id)
        uuid = None if is_na(g.uuid) else str(g.uuid).lower()
        if bus in by_bus:
            out[g.index] = by_bus[bus]
        elif uuid in by_uuid:
            out[g.index] = by_uuid[uuid]
    return out


def sm_count_of(card_id: str) -> tuple[int | None, bool]:
    """(SM count, verified) for a catalog card id; (None, False) when not listed."""
    for row in load_data("verify_identity.toml").get("card", []):
        if row["card"] == card_id:
            return int(row["sm_count"]), not row.get("unverified", False)
    return None, False


def check_identity(cx: Context) -> CheckResult:
    name = "inventory.identity"
    card = cx.card
    if card is None or not cx.ev.gpus:
        return skipped(name, Text("No catalog card to compare the identity with.", "没有可比对身份的目录显卡。"))
    ids = tuple(getattr(card, "pci_device_ids", ()))
    wrong = []
    for g in cx.ev.gpus:
        pci = None if is_na(g.pci_device_id) else str(g.pci_device_id).lower()
        if pci and ids and pci not in ids:
            owner = next((c for c in _catalog() if pci in c.pci_device_ids), None)
            wrong.append(f"GPU{g.index} {pci}" + (f" = {owner.id}" if owner else ""))
    if wrong:
        return CheckResult(name, "fail", "; ".join(wrong[:4]), ", ".join(ids), "", Text(
            f"PCI device id is not {card.id}'s ({', '.join(ids)}): {'; '.join(wrong[:4])}. The board "
            "is another card (a look-alike or a relabelled one), whatever its name says.",
            f"PCI 设备 ID 不是 {card.id} 的（{', '.join(ids)}）：{'；'.join(wrong[:4])}。"
            "无论名称如何，这是另一种显卡（近似型号或改标卡）。"))
    want, verified = sm_count_of(card.id)
    sms = {i: d.sm_count for i, d in cuda_by_gpu(cx).items()}
    odd = {i: n for i, n in sms.items() if want is not None and n != want}
    if odd:
        i = min(odd)
        status: Status = "fail" if verified else "warn"
        return CheckResult(name, status, odd[i], want, "SMs", Text(
            f"GPU{i} has {odd[i]} SMs, {card.id} has {want}: a cut-down or different chip "
            "(4090D for 4090, H20 for H100).",
            f"GPU{i} 有 {odd[i]} 个 SM，而 {card.id} 为 {want} 个："
            "芯片被裁剪或型号不同（如 4090D 冒充 4090、H20 冒充 H100）。"))
    seen = [Text("PCI device id", "PCI 设备 ID")] if ids and any(not is_na(g.pci_device_id) for g in cx.ev.gpus) \
        else []
    if sms and want is not None:
        seen.append(Text(f"{want} SMs", f"{want} 个 SM"))
    if not seen:
        return skipped(name, Text("Neither the PCI device id nor the SM count could be compared.",
                                  "PCI 设备 ID 与 SM 数均无法比对。"))
    return CheckResult(name, "pass", card.id, card.id, "", Text(
        f"{' and '.join(t.en for t in seen)} match {card.id}.",
        f"{'、'.join(t.zh for t in seen)} 与 {card.id} 一致。"))


def _catalog() -> list[Any]:
    from gpuwise.catalog.cards import load_cards

    return list(load_cards())


def check_cuda_map(cx: Context) -> CheckResult:
    name = "inventory.cuda_map"
    devs = cx.ev.cuda_devices
    if is_na(devs):
        if cx.benchmarked and not is_na(cx.ev.bench) and cx.ev.bench:
            return CheckResult(name, "warn", None, None, "", Text(
                f"CUDA's device list was not read ({devs.reason}; an older gpuwise or the nvidia-smi "
                "fallback): results were tied to GPUs by index, which CUDA_VISIBLE_DEVICES or MIG can shift.",
                f"未读取 CUDA 设备列表（{devs.reason}；旧版 gpuwise 或 nvidia-smi 回退）：结果按序号对应到 GPU，"
                "CUDA_VISIBLE_DEVICES 或 MIG 会使其错位。"))
        return skipped(name, Text(f"No CUDA device list ({devs.reason}).", f"没有 CUDA 设备列表（{devs.reason}）。"))
    mapped = cuda_by_gpu(cx)
    hidden = [g.index for g in cx.ev.gpus if g.index not in mapped]
    moved = [f"GPU{i}=cuda:{d.cuda_index}" for i, d in sorted(mapped.items()) if d.cuda_index != i]
    if hidden:
        return CheckResult(name, "warn", f"{len(mapped)}/{cx.n}", cx.n, "GPUs", Text(
            f"CUDA does not see {gpu_list(hidden)} (CUDA_VISIBLE_DEVICES, MIG or a container's device "
            "list): they were not benchmarked.",
            f"CUDA 看不到 {gpu_list(hidden)}（CUDA_VISIBLE_DEVICES、MIG 或容器设备列表）：未对其测试。"))
    tail = Text(f" Order differs: {', '.join(moved[:8])}.", f" 编号不同：{', '.join(moved[:8])}。") if moved \
        else Text("", "")
    return CheckResult(name, "pass", cx.n, cx.n, "GPUs", Text(
        "Every NVML GPU was matched to its CUDA device by PCI bus id.",
        "每块 NVML GPU 都已按 PCI 总线号对应到其 CUDA 设备。") + tail)


def check_tenancy(cx: Context) -> CheckResult:
    """Memory in use with nobody listed, compute mode, vGPU: the hidden-tenant signals."""
    name = "inventory.tenancy"
    limit = float(cx.th.get("tenancy", "used_fail_gib")) * GiB
    used = {g.index: int(g.memory_used_bytes) for g in cx.ev.gpus if not is_na(g.memory_used_bytes)}
    listed = {g.index for g in cx.ev.gpus if not is_na(g.processes) and g.processes}
    hidden = sorted(i for i, v in used.items() if v > limit and i not in listed)
    modes = {g.index: str(g.compute_mode) for g in cx.ev.gpus if not is_na(g.compute_mode)}
    virt = {g.index: str(g.virtualization_mode) for g in cx.ev.gpus if not is_na(g.virtualization_mode)}
    if not used and not modes and not virt:
        return skipped(name, Text("Memory in use, compute and virtualization modes not read.",
                                  "未读取已用显存、计算模式与虚拟化模式。"))
    if hidden:
        top = max(used[i] for i in hidden)
        return CheckResult(name, "fail", round(top / GiB, 1), f"<= {limit / GiB:g}", "GiB", Text(
            f"{gpu_list(hidden)} already hold up to {top / GiB:.1f} GiB with no process listed: "
            "another process outside this container or VM is using them. Ask the provider.",
            f"{gpu_list(hidden)} 在未列出任何进程时已占用最多 {top / GiB:.1f} GiB：本容器或虚拟机之外的进程"
            "正在使用它们。请联系服务商。"))
    shut = sorted(i for i, m in modes.items() if m == "prohibited")
    if shut:
        return CheckResult(name, "fail", "prohibited", "default", "", Text(
            f"Compute mode is 'prohibited' on {gpu_list(shut)}: no CUDA program may run there.",
            f"{gpu_list(shut)} 的计算模式为 prohibited：任何 CUDA 程序都无法运行。"))
    solo = sorted(i for i, m in modes.items() if m == "exclusive_process")
    shared = sorted(i for i, m in virt.items() if m in ("vgpu", "host_vgpu"))
    if solo or shared:
        return CheckResult(name, "warn", "exclusive_process" if solo else "vgpu", "default", "", Text(
            (f"Compute mode is exclusive-process on {gpu_list(solo)} (one process per GPU). " if solo else "")
            + (f"{gpu_list(shared)} are vGPU slices: time-shared with other tenants, expect noisy "
               "neighbours." if shared else ""),
            (f"{gpu_list(solo)} 的计算模式为独占进程（每块 GPU 仅一个进程）。" if solo else "")
            + (f"{gpu_list(shared)} 为 vGPU 切片：与其他租户分时共享，性能可能受干扰。" if shared else "")))
    how = sorted(set(virt.values())) or ["n/a"]
    return CheckResult(name, "pass", "idle", "idle", "", Text(
        f"No hidden use of GPU memory; compute mode default; virtualization: {', '.join(how)}.",
        f"没有隐藏的显存占用；计算模式为默认；虚拟化：{', '.join(how)}。"))


_HOST_UNITS_ZH = {"cores": "核"}  # the Chinese of a host check's unit in its sentence (GB stays GB)


def _host_check(name: str, field: str, term: str, scale: float, unit: str,
                what: Text) -> Callable[[Context], CheckResult]:
    def check(cx: Context) -> CheckResult:
        host = cx.ev.host_info
        value = None if is_na(host) or is_na(getattr(host, field)) else float(getattr(host, field))
        want = cx.term(term)
        if value is None:
            if want is not None:
                return incomplete(name, what + Text(" was not read, so the contract term cannot be judged.",
                                                    "未读取，无法评判合同条款。"), unit)
            return skipped(name, what + Text(" not read.", "未读取。"), unit)
        shown = round(value / scale, 1)
        zh_unit = _HOST_UNITS_ZH.get(unit, unit)
        if want is not None and value < float(want) * scale:
            return CheckResult(name, "fail", shown, f">= {want:g}", unit, what + Text(
                f": {shown:g} {unit}, below the contract's {want:g}.", f"：{shown:g} {zh_unit}，低于合同的 {want:g}。"))
        return CheckResult(name, "pass", shown, f">= {want:g}" if want is not None else None, unit,
                           what + Text(f": {shown:g} {unit}.", f"：{shown:g} {zh_unit}。"))

    return check


def check_numa(cx: Context) -> CheckResult:
    name = "host.numa"
    nodes = {g.index: int(g.numa_node) for g in cx.ev.gpus if not is_na(g.numa_node)}
    host = cx.ev.host_info
    sockets = None if is_na(host) or is_na(host.numa_nodes) else int(host.numa_nodes)
    want = cx.term("numa_affinity")
    if not nodes:
        if want:
            return incomplete(name, Text("GPU NUMA nodes were not read: the contract's numa_affinity "
                                         "cannot be judged.",
                                         "未读取 GPU 的 NUMA 节点：无法评判合同的 numa_affinity。"))
        return skipped(name, Text("GPU NUMA nodes not read.", "未读取 GPU 的 NUMA 节点。"))
    flat = sorted(i for i, n in nodes.items() if n < 0)
    if flat and (want or (sockets or 1) > 1):
        status: Status = "fail" if want else "warn"
        return CheckResult(name, status, "none", "a NUMA node per GPU", "", Text(
            f"{gpu_list(flat)} report no NUMA node on a {sockets or '?'}-node host: the VM flattens "
            "NUMA, so host memory may sit on the far socket and host<->GPU copies slow down.",
            f"{gpu_list(flat)} 在 {sockets or '?'} 个 NUMA 节点的主机上不报告 NUMA 节点：虚拟机抹平了 NUMA，"
            "主机内存可能位于远端插槽，主机与 GPU 间拷贝变慢。"))
    spread = ", ".join(f"GPU{i}:{n}" for i, n in sorted(nodes.items()))
    return CheckResult(name, "pass", len(set(nodes.values())), None, "nodes", Text(
        f"GPU NUMA nodes: {spread}.", f"GPU 的 NUMA 节点：{spread}。"))


def check_evidence(cx: Context) -> CheckResult:
    """Was the evidence file changed after gpuwise saved it? (its content_sha256)"""
    name = "inventory.evidence"
    state = cx.ev.integrity
    if is_na(state):
        return CheckResult(name, "pass", "collected", None, "", Text(
            "Evidence collected on this machine in this run.", "证据由本次运行在本机采集。"))
    if state == "edited":
        return CheckResult(name, "warn", "edited", "verified", "", Text(
            "The file's content does not match the content_sha256 it was saved with: it was edited "
            "after `gpuwise verify --save`. Do not use it as proof in a dispute.",
            "文件内容与保存时的 content_sha256 不符：它在 `gpuwise verify --save` 之后被改动过。"
            "请勿用作争议证据。"))
    if state == "verified":
        return CheckResult(name, "pass", "verified", "verified", "", Text(
            "The file matches the content_sha256 it was saved with.", "文件与保存时的 content_sha256 一致。"))
    return skipped(name, Text("The file has no content hash (saved by an older gpuwise).",
                              "文件没有内容哈希（旧版 gpuwise 保存）。"))


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_evidence, check_identity, check_cuda_map, check_tenancy,
    _host_check("host.cpu", "cpu_cores", "cpu_cores", 1.0, "cores", Text("Logical CPUs", "逻辑 CPU")),
    _host_check("host.ram", "ram_bytes", "host_ram_gb", GB, "GB", Text("Host memory", "主机内存")),
    _host_check("host.disk", "disk_bytes", "disk_gb", GB, "GB",
                Text("Disk size (working directory)", "磁盘容量（工作目录）")),
    _host_check("host.disk_free", "disk_free_bytes", "disk_free_gb", GB, "GB",
                Text("Free disk space (working directory)", "可用磁盘空间（工作目录）")),
    check_numa,
)
