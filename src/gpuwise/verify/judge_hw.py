"""Inventory, health and link checks: small functions `Context -> CheckResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.i18n import Text
from gpuwise.units import GB, GiB
from gpuwise.verify.checks import CheckResult, Status, incomplete, skipped
from gpuwise.verify.judge import Context, find_card, gpu_list, version_tuple
from gpuwise.verify.judge_health import (
    check_ecc_errors,
    check_ecc_mode,
    check_remap,
    check_temperature,
    check_throttle,
)
from gpuwise.verify.judge_links import check_nvlink, check_p2p, check_pcie, check_topology
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS"]


def _vals(cx: Context, field: str) -> list[tuple[int, Any]]:
    return [(g.index, getattr(g, field)) for g in cx.ev.gpus]


def _known(pairs: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    return [(i, v) for i, v in pairs if not is_na(v)]


def check_count(cx: Context) -> CheckResult:
    n, want = cx.n, cx.count
    if n == 0:
        if want:
            return CheckResult("inventory.count", "fail", 0, want, "GPUs", Text(
                f"No GPU at all in the evidence, {want} claimed.", f"证据中没有任何 GPU，声明为 {want} 块。"))
        return incomplete("inventory.count", Text(
            "The evidence lists no GPU: there is nothing to accept. Collect it again on the server "
            "with `gpuwise verify --save raw.json`.",
            "证据中没有任何 GPU：无可验收。请在服务器上用 `gpuwise verify --save raw.json` 重新采集。"), "GPUs")
    board = str(getattr(cx.card, "interconnect", "")) == "nvlink"
    if want is None and board and n not in (1, 2, 4, 8):
        return CheckResult("inventory.count", "warn", n, "1, 2, 4 or 8", "GPUs", Text(
            f"{n} GPUs of an SXM/HGX board, which comes with 4 or 8 (VM slices 1 or 2): one may have "
            "fallen off the bus (Xid 79). Claim the count with --gpus to make it a term.",
            f"{n} 块 SXM/HGX 板卡 GPU，而整板为 4 或 8 块（虚拟机切片为 1 或 2）：可能有卡掉线（Xid 79）。"
            "用 --gpus 声明数量即可作为验收条款。"))
    if want is None:
        return CheckResult("inventory.count", "pass", n, None, "GPUs", Text(
            f"{n} GPU(s) found; no count claimed (use --gpus or a contract).",
            f"发现 {n} 块 GPU；未声明数量（可用 --gpus 或合同）。"))
    if n == want:
        return CheckResult("inventory.count", "pass", n, want, "GPUs",
                           Text(f"{n} GPU(s), as claimed.", f"{n} 块 GPU，与声明一致。"))
    if n < want:
        return CheckResult("inventory.count", "fail", n, want, "GPUs", Text(
            f"Only {n} of {want} GPUs are visible: a GPU may have fallen off the bus (look for "
            "Xid 79 in `dmesg`) or the provider gave you fewer. Ask the provider.",
            f"只看到 {want} 块中的 {n} 块：可能有 GPU 掉卡（在 `dmesg` 中查 Xid 79），"
            "或服务商少给了。请联系服务商。"))
    return CheckResult("inventory.count", "warn", n, want, "GPUs", Text(
        f"{n} GPUs found, more than the {want} claimed.", f"发现 {n} 块 GPU，多于声明的 {want} 块。"))


def check_model(cx: Context) -> CheckResult:
    names = sorted({g.name for g in cx.ev.gpus})
    if not names:
        return incomplete("inventory.model", Text("No GPU to identify.", "没有可识别的 GPU。"))
    if cx.card is None:
        return CheckResult("inventory.model", "warn", " / ".join(names), None, "", Text(
            f"'{names[0] if names else '?'}' is not in the card catalog: checks against the "
            "datasheet are skipped. Run `gpuwise cards` to list known cards.",
            f"“{names[0] if names else '?'}”不在显卡目录中：跳过与规格表的比对。"
            "运行 `gpuwise cards` 查看已知显卡。"))
    wrong = [g.index for g in cx.ev.gpus
             if getattr(find_card(g.name), "id", None) != cx.card.id]
    if wrong:
        got = ", ".join(f"GPU{g.index} '{g.name}'" for g in cx.ev.gpus if g.index in wrong)
        status: Status = "fail" if cx.card_claimed else "warn"
        return CheckResult("inventory.model", status, " / ".join(names), cx.card.id, "", Text(
            f"Not all GPUs are {cx.card.id}: {got}.", f"并非全部 GPU 都是 {cx.card.id}：{got}。"))
    how = Text("as claimed", "与声明一致") if cx.card_claimed else Text(
        "recognised from the GPU name (no card claimed)", "由 GPU 名称识别（未声明型号）")
    return CheckResult("inventory.model", "pass", names[0], cx.card.id, "",
                       Text(f"All GPUs are {cx.card.id}, ", f"全部 GPU 为 {cx.card.id}，") + how + Text(".", "。"))


def check_memory(cx: Context) -> CheckResult:
    known = _known(_vals(cx, "memory_total_bytes"))
    if not known:
        return skipped("inventory.memory", Text("No GPU reported its memory size.", "没有 GPU 报告显存容量。"))
    low_i, low = min(known, key=lambda p: p[1])
    high_i, high = max(known, key=lambda p: p[1])
    tol = float(cx.th.get("memory", "tolerance"))
    cuda_gib = getattr(cx.card, "memory_cuda_gib", None)
    if cuda_gib and high > cuda_gib * GiB * (1 + tol):
        return CheckResult("inventory.memory", "fail", round(high / GiB, 1), f"~{cuda_gib:g}", "GiB", Text(
            f"GPU{high_i} reports {high / GiB:.1f} GiB, "
            f"more than any {getattr(cx.card, 'id', '?')} has ({cuda_gib:g} GiB): "
            "a modified board (memory chips swapped, VBIOS reflashed) or another card under this name.",
            f"GPU{high_i} 报告 {high / GiB:.1f} GiB，超过 {getattr(cx.card, 'id', '?')} 的 {cuda_gib:g} GiB："
            "可能是改装卡（更换显存颗粒、刷写 VBIOS）或冒名的其他显卡。"))
    want_gb = cx.term("memory_gb")
    if want_gb is not None:
        floor = want_gb * GB * (1 - tol)
        ok = low >= floor
        expected: Any = f">= {floor / GiB:.1f}"
    elif cx.card is not None and getattr(cx.card, "memory_cuda_gib", None):
        ok = low >= cx.card.memory_cuda_gib * GiB * (1 - tol)
        expected = f"~{cx.card.memory_cuda_gib:g}"
    else:
        return CheckResult("inventory.memory", "pass", round(low / GiB, 1), None, "GiB",
                           Text("No memory size to compare with.", "没有可比对的显存容量。"))
    status: Status = "pass" if ok else "fail"
    detail = Text(f"Smallest GPU memory: {low / GiB:.1f} GiB (GPU{low_i}).",
                  f"最小显存：{low / GiB:.1f} GiB（GPU{low_i}）。")
    if not ok:
        detail = detail + Text(" Less than promised: a different card variant or a vGPU slice.",
                               " 少于承诺：可能是其他型号变体或 vGPU 切片。")
    return CheckResult("inventory.memory", status, round(low / GiB, 1), expected, "GiB", detail)


def check_driver(cx: Context) -> CheckResult:
    drv, cuda = cx.ev.driver_version, cx.ev.cuda_driver_version
    if is_na(drv):
        return skipped("inventory.driver", Text(f"Driver version unknown: {drv.reason}.",
                                                f"驱动版本未知：{drv.reason}。"))
    cuda_s = "?" if is_na(cuda) else cuda
    floor, cuda_floor = cx.term("driver_min"), cx.term("cuda_min")
    problems = []
    if floor and version_tuple(drv) < version_tuple(floor):
        problems.append(Text(f"driver {drv} is older than the contract's {floor}",
                             f"驱动 {drv} 低于合同要求的 {floor}"))
    if cuda_floor and (is_na(cuda) or version_tuple(cuda) < version_tuple(cuda_floor)):
        problems.append(Text(f"driver supports CUDA {cuda_s}, contract needs {cuda_floor}",
                             f"驱动支持 CUDA {cuda_s}，合同要求 {cuda_floor}"))
    expected = f">= {floor}" if floor else None
    if problems:
        joined = Text("; ".join(p.en for p in problems), "；".join(p.zh for p in problems))
        return CheckResult("inventory.driver", "fail", drv, expected, "",
                           joined + Text(". Ask the provider to upgrade the driver.", "。请服务商升级驱动。"))
    return CheckResult("inventory.driver", "pass", drv, expected, "", Text(
        f"Driver {drv}, supports CUDA up to {cuda_s}.", f"驱动 {drv}，最高支持 CUDA {cuda_s}。"))


def check_vbios(cx: Context) -> CheckResult:
    known = _known(_vals(cx, "vbios"))
    if not known:
        return skipped("inventory.vbios", Text("No GPU reported its VBIOS.", "没有 GPU 报告 VBIOS 版本。"))
    versions = sorted({v for _, v in known})
    if len(versions) > 1:
        return CheckResult("inventory.vbios", "warn", " / ".join(versions), "one version", "", Text(
            "GPUs run different VBIOS versions: one may have been swapped or not updated.",
            "各 GPU 的 VBIOS 版本不一致：可能有卡被更换或未更新。"))
    return CheckResult("inventory.vbios", "pass", versions[0], None, "",
                       Text("All GPUs run the same VBIOS.", "所有 GPU 的 VBIOS 版本一致。"))


def check_persistence(cx: Context) -> CheckResult:
    known = _known(_vals(cx, "persistence_mode"))
    if not known:
        return skipped("inventory.persistence", Text("Persistence mode not reported.", "未报告持久模式。"))
    off = [i for i, v in known if not v]
    if off:
        return CheckResult("inventory.persistence", "warn", "off", "on", "", Text(
            f"Persistence mode is off on {gpu_list(off)}: each new process pays GPU start-up and "
            "settings may reset when idle. The provider can run `nvidia-smi -pm 1` (root); "
            "gpuwise never changes it.",
            f"{gpu_list(off)} 未开启持久模式：每个新进程都要付出 GPU 初始化开销，空闲时设置可能被重置。"
            "服务商可执行 `nvidia-smi -pm 1`（需 root）；gpuwise 不会修改它。"))
    return CheckResult("inventory.persistence", "pass", "on", "on", "",
                       Text("Persistence mode is on.", "持久模式已开启。"))


def check_mig(cx: Context) -> CheckResult:
    known = _known(_vals(cx, "mig_current"))
    if not known:
        return CheckResult("inventory.mig", "pass", "n/a", "off", "", Text(
            "MIG is not available on this card: you get whole GPUs.", "此卡不支持 MIG：您得到的是整卡。"))
    on = [i for i, v in known if v]
    pending = [g.index for g in cx.ev.gpus if not is_na(g.mig_pending) and not is_na(g.mig_current)
               and g.mig_pending != g.mig_current]
    if on:
        status: Status = "fail" if cx.term("mig") is False else "warn"
        return CheckResult("inventory.mig", status, "on", "off", "", Text(
            f"MIG is on for {gpu_list(on)}: you get GPU slices, not whole GPUs.",
            f"{gpu_list(on)} 开启了 MIG：您得到的是 GPU 切片而非整卡。"))
    if pending:
        return CheckResult("inventory.mig", "warn", "off", "off", "", Text(
            f"MIG is off but a change is pending on {gpu_list(pending)} (applies at the next reset).",
            f"MIG 当前关闭，但 {gpu_list(pending)} 有待生效的更改（下次重置后生效）。"))
    return CheckResult("inventory.mig", "pass", "off", "off", "", Text("MIG is off.", "MIG 已关闭。"))


def check_processes(cx: Context) -> CheckResult:
    known = _known(_vals(cx, "processes"))
    if not known:
        return skipped("inventory.processes", Text("The process list is not readable.", "无法读取进程列表。"))
    found = [(i, p) for i, procs in known for p in procs]
    if not found:
        return CheckResult("inventory.processes", "pass", 0, 0, "processes",
                           Text("No other process is using the GPUs.", "没有其他进程在使用 GPU。"))
    desc = "; ".join(f"GPU{i}: pid {p.pid} {p.name}" + (
        f" {p.used_memory_bytes / GiB:.1f} GiB" if p.used_memory_bytes else "") for i, p in found)
    other_user = [p for _, p in found if p.same_user is False]
    unseen = [p for _, p in found if p.same_user is None]
    if (other_user or unseen) and cx.term("exclusive") is not False:
        if other_user:  # visible in our /proc, run by another user id
            who = Text("Another user's job is on your GPUs", "有其他用户的任务在您的 GPU 上")
        else:  # NVML reports host PIDs inside a container: the owner cannot be seen from here
            who = Text("Another process, outside what this container or VM can see (NVML reports host "
                       "PIDs), is on your GPUs; if it is not yours, it is another tenant's",
                       "有本容器或虚拟机看不到的进程在您的 GPU 上（NVML 报告的是宿主机 PID）；"
                       "若不是您的，就是其他租户的")
        return CheckResult("inventory.processes", "fail", len(found), 0, "processes", who + Text(
            f" ({desc}): it takes memory and skews every benchmark. Ask the provider.",
            f"（{desc}）：它占用显存并影响所有测试。请联系服务商。"))
    return CheckResult("inventory.processes", "warn", len(found), 0, "processes", Text(
        f"Your own processes use the GPUs ({desc}); stop them for a clean measurement.",
        f"您自己的进程正在使用 GPU（{desc}）；停止它们以获得干净的测量。"))


def check_power(cx: Context) -> CheckResult:
    rows = [(g.index, g.power_limit_w, g.power_default_w) for g in cx.ev.gpus
            if not is_na(g.power_limit_w)]
    if not rows:
        return skipped("inventory.power", Text("Power limit not reported.", "未报告功耗上限。"), "W")
    low_i, low, default = min(rows, key=lambda r: r[1])
    floor = cx.term("power_limit_w")
    if floor is not None and low < floor:
        return CheckResult("inventory.power", "fail", low, floor, "W", Text(
            f"GPU{low_i} is limited to {low:g} W, below the contract's {floor:g} W.",
            f"GPU{low_i} 功耗上限为 {low:g} W，低于合同的 {floor:g} W。"))
    capped = [(i, lim, d) for i, lim, d in rows if not is_na(d) and lim < d * 0.99]
    if capped:
        i, lim, d = capped[0]
        return CheckResult("inventory.power", "warn", lim, d, "W", Text(
            f"Power is capped on {gpu_list([c[0] for c in capped])}: GPU{i} {lim:g} W, default "
            f"{d:g} W. Expect lower clocks under load; ask the provider to restore the default.",
            f"{gpu_list([c[0] for c in capped])} 被限制了功耗：GPU{i} 为 {lim:g} W，默认 {d:g} W。"
            "满载时频率会降低；请服务商恢复默认值。"))
    default_s = default if not is_na(default) else None
    return CheckResult("inventory.power", "pass", low, default_s, "W",
                       Text("Power limits are at their default.", "功耗上限为默认值。"))


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_count, check_model, check_memory, check_driver, check_vbios, check_persistence,
    check_mig, check_processes, check_power,
    check_ecc_mode, check_ecc_errors, check_remap, check_throttle, check_temperature,
    check_pcie, check_nvlink, check_topology, check_p2p,
)
