"""Link checks: PCIe generation and width under load, NVLink links, topology matrix, P2P."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Status, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import is_na

__all__ = ["check_nvlink", "check_p2p", "check_pcie", "check_topology", "expected_nvlinks"]


def _load(cx: Context) -> list[Any]:
    return [] if is_na(cx.ev.load) else list(cx.ev.load)


def _link(g: Any, load: dict[int, Any]) -> tuple[Any, Any]:
    s = load.get(g.index)
    if s is None:
        return None, None
    return s.pcie_gen, s.pcie_width


def check_pcie(cx: Context) -> CheckResult:
    rows = [g for g in cx.ev.gpus if not is_na(g.pcie_gen_max) and not is_na(g.pcie_width_max)]
    if not rows:
        return skipped("links.pcie", Text("PCIe link not reported.", "未报告 PCIe 链路。"))
    load = {s.index: s for s in _load(cx)}
    want_gen = cx.term("pcie_gen") or getattr(cx.card, "pcie_gen", None)
    want_w = cx.term("pcie_width") or getattr(cx.card, "pcie_lanes", None)
    from_contract = cx.term("pcie_gen") is not None or cx.term("pcie_width") is not None
    down, short, worst = [], [], None
    for g in rows:
        gen, width = _link(g, load)
        measured_load = gen is not None and not is_na(gen) and not is_na(width)
        if measured_load and (gen < g.pcie_gen_max or width < g.pcie_width_max):
            down.append(f"GPU{g.index} Gen{gen} x{width} (max Gen{g.pcie_gen_max} x{g.pcie_width_max})")
        cur_gen = gen if gen is not None and not is_na(gen) else g.pcie_gen_max
        cur_w = width if width is not None and not is_na(width) else g.pcie_width_max
        if worst is None or (cur_gen, cur_w) < worst:
            worst = (cur_gen, cur_w)
        if (want_gen and g.pcie_gen_max < want_gen) or (want_w and g.pcie_width_max < want_w):
            short.append(f"GPU{g.index} max Gen{g.pcie_gen_max} x{g.pcie_width_max}")
    measured = f"Gen{worst[0]} x{worst[1]}" if worst else None
    expected = f"Gen{want_gen} x{want_w}" if want_gen and want_w else None
    if down:
        return CheckResult("links.pcie", "fail", measured, expected, "", Text(
            "PCIe link downtrained under load: " + "; ".join(down) + ". Reseat the card or "
            "riser, or ask the provider to check the slot.",
            "负载下 PCIe 链路降级：" + "；".join(down) + "。请重新插拔显卡或转接卡，或请服务商检查插槽。"))
    if short:
        status: Status = "fail" if from_contract else "warn"
        return CheckResult("links.pcie", status, measured, expected, "", Text(
            "The slot cannot reach the expected link: " + "; ".join(short) + " (a riser, an older "
            "platform or a BIOS setting).",
            "插槽达不到预期链路：" + "；".join(short) + "（转接卡、旧平台或 BIOS 设置所致）。"))
    if not load:
        return CheckResult("links.pcie", "pass", measured, expected, "", Text(
            "Maximum link is as expected; the current link was not judged because links drop "
            "at idle (run with load to check it).",
            "最大链路符合预期；空闲时链路会降速，因此未判断当前链路（加负载运行以检查）。"))
    return CheckResult("links.pcie", "pass", measured, expected, "",
                       Text("PCIe links ran at full generation and width under load.",
                            "负载下 PCIe 链路达到满代数与满宽度。"))


def expected_nvlinks(cx: Context) -> int | None:
    card = cx.card
    gen = getattr(card, "nvlink_gen", None)
    bw = getattr(card, "interconnect_bw_gbps", None)
    per_link = cx.th.get("nvlink", "per_link_gbps").get(str(gen)) if gen else None
    # Only SXM/HGX parts promise their links; a PCIe card's bridge is optional.
    if not per_link or not bw or getattr(card, "interconnect", "") != "nvlink":
        return None
    return max(1, round(float(bw) / float(per_link)))


def _nvlink_expected(cx: Context) -> bool:
    """True when the card (SXM/HGX) or the contract says GPUs talk over NVLink."""
    return bool(cx.term("nvlink")) or str(getattr(cx.card, "interconnect", "")) == "nvlink"


def _nv_pairs(topo: Any) -> tuple[list[str], list[str], set[str]]:
    """(NV# pairs, other pairs, NV# words) in the upper triangle of the matrix."""
    nv, other, words = [], [], set()
    for i, row in enumerate(topo):
        for j in range(i + 1, len(row)):
            cell = str(row[j])
            if cell.startswith("NV"):
                nv.append(f"GPU{i}-GPU{j}")
                words.add(cell)
            else:
                other.append(f"GPU{i}-GPU{j} {cell}")
    return nv, other, words


def check_nvlink(cx: Context) -> CheckResult:
    expected = expected_nvlinks(cx)
    rows = [(g.index, g.nvlink_up, g.nvlink_down) for g in cx.ev.gpus if not is_na(g.nvlink_up)]
    if not rows:
        if _nvlink_expected(cx) and is_na(cx.ev.topology):
            return CheckResult("links.nvlink", "fail", 0, expected, "links", Text(
                "NVLink is expected on this card but no GPU reports any NVLink link.",
                "此卡应有 NVLink，但没有 GPU 报告任何 NVLink 链路。"))
        return skipped("links.nvlink", Text("No NVLink on these GPUs (PCIe only), or not reported.",
                                            "这些 GPU 没有 NVLink（仅 PCIe），或未报告。"), "links")
    least_i, least, _ = min(rows, key=lambda r: r[1])
    if not _nvlink_expected(cx) and least == 0 and max(r[1] for r in rows) == 0:
        return CheckResult("links.nvlink", "pass", 0, None, "links", Text(
            "No NVLink bridge is connected (optional on this card): GPUs talk over PCIe.",
            "未连接 NVLink 桥（此卡为可选）：GPU 之间经 PCIe 通信。"))
    down = [i for i, _, d in rows if not is_na(d) and d > 0]
    short = [i for i, up, _ in rows if expected is not None and up < expected]
    if down or short:
        where = gpu_list(sorted(set(down + short)))
        return CheckResult("links.nvlink", "fail", least, expected, "links", Text(
            f"NVLink links are down on {where} (GPU{least_i} has {least} up"
            + (f", expected {expected})" if expected else ")")
            + ": GPU-to-GPU traffic falls back to slower paths. Ask the provider to check the "
            "NVLink/NVSwitch fabric (and the fabric manager service).",
            f"{where} 有 NVLink 链路断开（GPU{least_i} 仅 {least} 条可用"
            + (f"，应为 {expected}）" if expected else "）")
            + "：GPU 间通信退回较慢路径。请服务商检查 NVLink/NVSwitch 与 fabric manager 服务。"))
    return CheckResult("links.nvlink", "pass", least, expected, "links",
                       Text(f"All NVLink links are up ({least} per GPU).",
                            f"所有 NVLink 链路均已连通（每块 GPU {least} 条）。"))


def check_topology(cx: Context) -> CheckResult:
    if cx.n < 2:
        return skipped("links.topology", Text("One GPU: no GPU pairs.", "只有一块 GPU：没有 GPU 对。"))
    topo = cx.ev.topology
    if is_na(topo):
        return skipped("links.topology", Text(f"Topology not read: {topo.reason}.",
                                              f"未读取拓扑：{topo.reason}。"))
    nv, other, words = _nv_pairs(topo)
    measured = " / ".join(sorted(words | {o.split()[-1] for o in other}))
    if _nvlink_expected(cx):
        if other:
            return CheckResult("links.topology", "fail", measured, "NV# for every pair", "", Text(
                "Some GPU pairs are not connected by NVLink: " + "; ".join(other[:6])
                + ". Tensor parallel across them will be slow (a VM may hide NVLink, or links are down).",
                "部分 GPU 对之间没有 NVLink：" + "；".join(other[:6])
                + "。跨这些 GPU 的张量并行会很慢（虚拟机可能隐藏了 NVLink，或链路断开）。"))
        if len(words) > 1:
            return CheckResult("links.topology", "warn", measured, "one NV# for every pair", "", Text(
                f"GPU pairs have different NVLink widths ({', '.join(sorted(words))}).",
                f"各 GPU 对的 NVLink 宽度不一致（{', '.join(sorted(words))}）。"))
    sys_pairs = [o for o in other if o.endswith("SYS")]
    note = Text(f" {len(sys_pairs)} pair(s) cross CPU sockets (SYS).",
                f" {len(sys_pairs)} 对跨 CPU 插槽（SYS）。") if sys_pairs else Text("", "")
    expected = "NV# every pair" if _nvlink_expected(cx) else None
    return CheckResult("links.topology", "pass", measured, expected, "", Text(
        f"{len(nv)} of {len(nv) + len(other)} GPU pairs over NVLink.",
        f"{len(nv) + len(other)} 对 GPU 中有 {len(nv)} 对经 NVLink 相连。") + note)


def check_p2p(cx: Context) -> CheckResult:
    if cx.n < 2:
        return skipped("links.p2p", Text("One GPU: no peer-to-peer.", "只有一块 GPU：无点对点。"))
    p2p = cx.ev.p2p
    if is_na(p2p):
        return skipped("links.p2p", Text(f"P2P capability not read: {p2p.reason}.",
                                         f"未读取 P2P 能力：{p2p.reason}。"))
    cells = [(i, j, str(p2p[i][j])) for i in range(len(p2p)) for j in range(len(p2p)) if i != j]
    bad = [f"GPU{i}-GPU{j}" for i, j, c in cells if c != "OK"]
    total = len(cells)
    if not bad:
        return CheckResult("links.p2p", "pass", "OK", "OK", "", Text(
            "Every GPU pair can read peer memory directly.", "每对 GPU 都能直接读取对方显存。"))
    if _nvlink_expected(cx):
        return CheckResult("links.p2p", "fail", f"{total - len(bad)}/{total}", "all", "", Text(
            f"Peer-to-peer is unavailable for {', '.join(bad[:6])}: NCCL will stage through host memory.",
            f"{', '.join(bad[:6])} 无法点对点访问：NCCL 将经主机内存中转。"))
    if len(bad) == total:
        return CheckResult("links.p2p", "pass", "none", None, "", Text(
            "No GPU peer-to-peer (usual for GeForce and many PCIe servers): multi-GPU traffic goes "
            "through host memory.",
            "GPU 间不支持点对点（GeForce 与许多 PCIe 服务器常见）：多卡通信经主机内存。"))
    return CheckResult("links.p2p", "warn", f"{total - len(bad)}/{total}", "all", "", Text(
        f"Only some pairs support peer-to-peer; not: {', '.join(bad[:6])}.",
        f"只有部分 GPU 对支持点对点；不支持：{', '.join(bad[:6])}。"))
