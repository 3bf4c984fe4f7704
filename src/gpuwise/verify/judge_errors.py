"""Error sources: XIDs, PCIe replays, NVLink error counters, the NVSwitch fabric, kernel modules.

Thresholds and the XID classes live in data/verify_errors.toml, each with its source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Status, incomplete, load_data, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS", "error_rules"]


def error_rules() -> dict[str, Any]:
    return load_data("verify_errors.toml")


# host.kernel_log as verify/host.py records it, in Chinese
_KERNEL_LOG_ZH = {"read": "已读取", "not read": "未读取",
                  "dmesg not readable (needs root or kernel.dmesg_restrict=0)":
                      "dmesg 无法读取（需要 root 或 kernel.dmesg_restrict=0）"}


def check_xid(cx: Context) -> CheckResult:
    name = "health.xid"
    rules = error_rules()["xid"]
    events = [(g.index, e) for g in cx.ev.gpus for e in g.xid_events]
    host = cx.ev.host_info
    log = "not read" if is_na(host) or is_na(host.kernel_log) else str(host.kernel_log)
    if not events:
        return CheckResult(name, "pass", 0, 0, "Xids", Text(
            f"No Xid error reported (NVML events during the run; kernel log: {log}).",
            f"未报告 Xid 错误（运行期间的 NVML 事件；内核日志：{_KERNEL_LOG_ZH.get(log, log)}）。"))
    fatal = [(i, e) for i, e in events if e.xid in rules["fail"]]
    shown = "; ".join(f"GPU{i} Xid {e.xid}" + (" (during load)" if e.during_load else "")
                      for i, e in (fatal or events)[:6])
    shown_zh = "；".join(f"GPU{i} Xid {e.xid}" + ("（负载期间）" if e.during_load else "")
                        for i, e in (fatal or events)[:6])
    if fatal:
        return CheckResult(name, "fail", shown, "none", "", Text(
            f"Hardware Xid errors: {shown}. These mean the GPU, its memory or its links failed: ask "
            "the provider to reset or replace the GPU (NVIDIA XID catalog, recommended actions).",
            f"硬件类 Xid 错误：{shown_zh}。表示 GPU、显存或链路出错：请服务商重置或更换 GPU"
            "（参见 NVIDIA XID 目录的建议处理）。"))
    return CheckResult(name, "warn", shown, "none", "", Text(
        f"Xid errors usually caused by an application: {shown}. Find which job ran then; if it was "
        "gpuwise's own benchmark, the GPU is suspect.",
        f"通常由应用引起的 Xid 错误：{shown_zh}。请查明当时运行的任务；若是 gpuwise 自身的测试，则该 GPU 可疑。"))


def _counter_check(name: str, field: str, rule: str, label: Text,
                   fix: Text) -> Callable[[Context], CheckResult]:
    def check(cx: Context) -> CheckResult:
        table, key = rule.split(".")
        limits = error_rules()[table]
        warn_at, fail_at = int(limits[f"{key}warn_above"]), int(limits[f"{key}fail_above"])
        values = {g.index: int(getattr(g, field)) for g in cx.ev.gpus if not is_na(getattr(g, field))}
        if not values:
            return skipped(name, label + Text(": not reported by this card or driver.",
                                              "：此卡或驱动不报告。"))
        top_i = max(values, key=lambda i: values[i])
        top = values[top_i]
        status: Status
        if top > fail_at:
            status = "fail"
        elif top > warn_at:
            status = "warn"
        else:
            return CheckResult(name, "pass", top, f"<= {warn_at}", "", label + Text(
                f": {top} at most.", f"：至多 {top}。"))
        over = sorted(i for i, v in values.items() if v > warn_at)
        return CheckResult(name, status, top, f"<= {fail_at}", "", label + Text(
            f" on {gpu_list(over)} (GPU{top_i}: {top}; fail above {fail_at}). ",
            f"：{gpu_list(over)}（GPU{top_i}：{top}；超过 {fail_at} 判为失败）。") + fix)

    return check


check_pcie_replay = _counter_check(
    "health.pcie_replay", "pcie_replay_count", "pcie_replay.",
    Text("PCIe replays (link retransmissions)", "PCIe 重传次数"),
    Text("A marginal slot, riser or cable: ask the provider to reseat the card.",
         "插槽、转接卡或线缆接触不良：请服务商重新插拔。"))


def _nvlink_fix() -> Text:
    return Text("A flaky NVLink: ask the provider to check the board and NVSwitch trays.",
                "NVLink 链路不稳定：请服务商检查基板与 NVSwitch。")


CHECK_NVLINK_COUNTERS = (
    _counter_check("health.nvlink_crc", "nvlink_crc_errors", "nvlink_errors.crc_",
                   Text("NVLink CRC errors", "NVLink CRC 错误"), _nvlink_fix()),
    _counter_check("health.nvlink_replay", "nvlink_replay_errors", "nvlink_errors.replay_",
                   Text("NVLink replay errors", "NVLink 重放错误"), _nvlink_fix()),
    _counter_check("health.nvlink_recovery", "nvlink_recovery_errors", "nvlink_errors.recovery_",
                   Text("NVLink recovery events (link retrains)", "NVLink 恢复事件（链路重训练）"), _nvlink_fix()),
)


def check_fabric(cx: Context) -> CheckResult:
    """NVSwitch fabric: the GPU's own fabric state (Hopper+), else the fabric manager service."""
    name = "links.fabric"
    ok = str(error_rules()["fabric"]["ok_state"])
    states = {g.index: (g.fabric_state, g.fabric_status) for g in cx.ev.gpus
              if not is_na(g.fabric_state) and g.fabric_state != "not_supported"}
    board = str(getattr(cx.card, "interconnect", "")) == "nvlink" and cx.n >= 4
    wanted = bool(cx.term("fabric"))
    if states:
        bad = sorted(i for i, (st, code) in states.items()
                     if st != ok or (not is_na(code) and code not in (0, None)))
        if bad:
            st, code = states[bad[0]]
            return CheckResult(name, "fail", str(st), ok, "", Text(
                f"The NVLink fabric is not set up on {gpu_list(bad)} (GPU{bad[0]}: state {st}, status "
                f"{code}): CUDA fails with error 802 until it is. Ask the provider to start "
                "nvidia-fabricmanager (its version must match the driver's).",
                f"{gpu_list(bad)} 的 NVLink fabric 未就绪（GPU{bad[0]}：状态 {st}，代码 {code}）："
                "在此之前 CUDA 报错 802。请服务商启动 nvidia-fabricmanager（版本须与驱动一致）。"))
        return CheckResult(name, "pass", ok, ok, "", Text(
            "The NVSwitch fabric is set up on every GPU.", "每块 GPU 的 NVSwitch fabric 均已就绪。"))
    host = cx.ev.host_info
    fm = None if is_na(host) or is_na(host.fabric_manager) else str(host.fabric_manager)
    if board and fm in ("inactive", "failed"):
        return CheckResult(name, "fail", fm, "active", "", Text(
            f"nvidia-fabricmanager is {fm} on an NVSwitch board: multi-GPU CUDA will fail (error 802).",
            f"NVSwitch 基板上的 nvidia-fabricmanager 状态为 {fm}：多卡 CUDA 会失败（错误 802）。"))
    if wanted:
        return incomplete(name, Text("The contract asks for the NVSwitch fabric, but neither the GPUs' "
                                     "fabric state nor the fabric manager service could be read.",
                                     "合同要求 NVSwitch fabric，但既读不到 GPU 的 fabric 状态，"
                                     "也读不到 fabric manager 服务。"))
    if fm is not None and board:
        return CheckResult(name, "pass", fm, "active", "", Text(
            f"nvidia-fabricmanager: {fm}.", f"nvidia-fabricmanager：{fm}。"))
    return skipped(name, Text("No NVSwitch fabric reported here.", "此处未报告 NVSwitch fabric。"))


def check_modules(cx: Context) -> CheckResult:
    """The kernel modules CUDA needs (nvidia, nvidia_uvm, /dev/nvidia-uvm); nouveau must not load."""
    name = "software.kernel_modules"
    host = cx.ev.host_info
    if is_na(host) or is_na(host.kernel_modules):
        return skipped(name, Text("Kernel modules not read (not Linux, or an old evidence file).",
                                  "未读取内核模块（非 Linux，或旧的证据文件）。"))
    mods = set(host.kernel_modules)
    if "nouveau" in mods:
        return CheckResult(name, "fail", "nouveau", "nvidia", "", Text(
            "The open-source nouveau driver is loaded: it blocks NVIDIA's. Blacklist it and reboot "
            "(`gpuwise doctor` shows how).", "已加载开源 nouveau 驱动，会阻止 NVIDIA 驱动。请将其加入黑名单并重启"
            "（`gpuwise doctor` 给出方法）。"))
    uvm_dev = host.dev_nvidia_uvm
    if "nvidia_uvm" not in mods or uvm_dev is False:
        return CheckResult(name, "fail", "no nvidia_uvm", "nvidia_uvm", "", Text(
            "nvidia_uvm is not loaded or /dev/nvidia-uvm is missing: CUDA programs cannot start. "
            "Run `sudo modprobe nvidia-uvm` (or `nvidia-modprobe -u -c=0`); in a container, the "
            "device must be passed in.",
            "未加载 nvidia_uvm 或缺少 /dev/nvidia-uvm：CUDA 程序无法启动。运行 `sudo modprobe nvidia-uvm`"
            "（或 `nvidia-modprobe -u -c=0`）；容器中需要传入该设备。"))
    note = Text("", "") if "nvidia_peermem" in mods else Text(
        " nvidia_peermem is not loaded: needed only for GPUDirect RDMA across nodes (InfiniBand/RoCE).",
        " 未加载 nvidia_peermem：仅跨节点 GPUDirect RDMA（InfiniBand/RoCE）需要。")
    return CheckResult(name, "pass", ", ".join(sorted(mods)), "nvidia_uvm", "", Text(
        "The NVIDIA kernel modules CUDA needs are loaded.", "CUDA 所需的 NVIDIA 内核模块均已加载。") + note)


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_xid, check_pcie_replay, *CHECK_NVLINK_COUNTERS, check_fabric, check_modules,
)
