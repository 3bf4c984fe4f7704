"""Link checks: PCIe generation and width under load, NVLink links, topology matrix, P2P."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Status, incomplete, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import NotAvailable, is_na

__all__ = ["check_nvlink", "check_p2p", "check_pcie", "check_topology", "expected_nvlinks"]


def _load(cx: Context) -> list[Any]:
    return [] if is_na(cx.ev.load) else list(cx.ev.load)


def _link(g: Any, load: dict[int, Any]) -> tuple[Any, Any]:
    """The lowest link seen under load (the window's minimum when sampled, else the max)."""
    s = load.get(g.index)
    if s is None:
        return None, None
    gens = [v for v in (s.pcie_gen_min, s.pcie_gen) if not is_na(v)]
    widths = [v for v in (s.pcie_width_min, s.pcie_width) if not is_na(v)]
    return (min(gens) if gens else s.pcie_gen), (min(widths) if widths else s.pcie_width)


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
    read = {i for i, s in load.items() if not is_na(s.pcie_gen)}
    unseen = [g.index for g in rows if g.index not in read]
    if cx.benchmarked and unseen:
        return incomplete("links.pcie", Text(
            f"The link of {gpu_list(unseen)} was never read under load (idle links drop, so only a "
            "reading under load shows downtraining).",
            f"{gpu_list(unseen)} 的链路在负载下从未被读取（空闲时链路会降速，只有负载下的读数能发现降级）。"))
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


def _board(cx: Context) -> bool:
    """An SXM/HGX board: NVLink (through NVSwitch or a mesh) to every GPU, by design."""
    return str(getattr(cx.card, "interconnect", "")) == "nvlink"


def _nvlink_expected(cx: Context) -> bool:
    """True when the card (SXM/HGX) or the contract says GPUs talk over NVLink."""
    return bool(cx.term("nvlink")) or _board(cx)


def _matrix(cx: Context) -> Any:
    """The topology matrix when it is a real n x n one, else None (not read, empty, malformed)."""
    topo = cx.ev.topology
    if is_na(topo) or len(topo) != cx.n or any(len(r) != cx.n for r in topo):
        return None
    return topo


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
    """Links judged by design: an SXM/HGX GPU must have all its links up; on PCIe cards
    (bridged pairs, H100 NVL) inactive links are the ones no bridge uses, not faults."""
    name = "links.nvlink"
    expected = expected_nvlinks(cx) if _board(cx) else None
    rows = [(g.index, g.nvlink_up) for g in cx.ev.gpus if not is_na(g.nvlink_up)]
    promised = bool(cx.term("nvlink"))
    if cx.n < 2 and not promised:
        return skipped(name, Text(
            "One GPU: NVLink carries no traffic (a slice of an HGX board may show its links "
            "inactive or unreported; that is not a fault).",
            "只有一块 GPU：NVLink 不承载流量（HGX 整板的切片可能显示链路未激活或不报告，这不是故障）。"), "links")
    if not rows:
        if promised or (_board(cx) and cx.n > 1):
            return CheckResult(name, "fail", 0, expected, "links", Text(
                "NVLink is expected (" + ("the contract" if promised else "an SXM/HGX card") + ") but no "
                "GPU reports any NVLink link: a VM that hides NVLink, or the links are down.",
                "应有 NVLink（" + ("合同约定" if promised else "SXM/HGX 板卡") + "），但没有 GPU 报告任何 "
                "NVLink 链路：虚拟机隐藏了 NVLink，或链路断开。"))
        return skipped(name, Text("No NVLink on these GPUs (PCIe only), or not reported.",
                                  "这些 GPU 没有 NVLink（仅 PCIe），或未报告。"), "links")
    least_i, least = min(rows, key=lambda r: r[1])
    if expected is not None:
        short = [i for i, up in rows if up < expected]
        missing = [g.index for g in cx.ev.gpus if is_na(g.nvlink_up)]
        if short or missing:
            where = gpu_list(sorted(set(short + missing)))
            return CheckResult(name, "fail", least, expected, "links", Text(
                f"NVLink links are down on {where} (GPU{least_i} has {least} up, expected {expected}): "
                "GPU-to-GPU traffic falls back to slower paths. Ask the provider to check the "
                "NVLink/NVSwitch fabric (and the fabric manager service).",
                f"{where} 有 NVLink 链路断开（GPU{least_i} 仅 {least} 条可用，应为 {expected}）："
                "GPU 间通信退回较慢路径。请服务商检查 NVLink/NVSwitch 与 fabric manager 服务。"))
        return CheckResult(name, "pass", least, expected, "links", Text(
            f"All NVLink links are up ({least} per GPU).", f"所有 NVLink 链路均已连通（每块 GPU {least} 条）。"))
    bare = [i for i, up in rows if up == 0]
    if promised and bare:
        return CheckResult(name, "fail", least, ">= 1", "links", Text(
            f"The contract promises NVLink, but {gpu_list(bare)} have no active link (no bridge).",
            f"合同约定有 NVLink，但 {gpu_list(bare)} 没有任何激活链路（未接桥）。"))
    if max(up for _, up in rows) == 0:
        return CheckResult(name, "pass", 0, None, "links", Text(
            "No NVLink bridge is connected (optional on this card): GPUs talk over PCIe.",
            "未连接 NVLink 桥（此卡为可选）：GPU 之间经 PCIe 通信。"))
    return CheckResult(name, "pass", least, None, "links", Text(
        f"NVLink bridges: {least}-{max(up for _, up in rows)} active links per GPU; the card's other "
        "links are unused by design, not down.",
        f"NVLink 桥：每块 GPU {least}-{max(up for _, up in rows)} 条激活链路；其余链路按设计不使用，并非断开。"))


def check_topology(cx: Context) -> CheckResult:
    name = "links.topology"
    if cx.n < 2:
        return skipped(name, Text("One GPU: no GPU pairs.", "只有一块 GPU：没有 GPU 对。"))
    topo = _matrix(cx)
    if topo is None:
        raw = cx.ev.topology
        why = raw.reason if is_na(raw) else f"a {len(raw)}-row matrix for {cx.n} GPUs"
        if _nvlink_expected(cx):
            return incomplete(name, Text(
                f"Topology not read ({why}): NVLink between the GPUs cannot be confirmed, and an "
                "empty matrix never satisfies an NVLink term.",
                f"未读取拓扑（{why}）：无法确认 GPU 间的 NVLink，空矩阵不能满足 NVLink 条款。"))
        return skipped(name, Text(f"Topology not read: {why}.", f"未读取拓扑：{why}。"))
    nv, other, words = _nv_pairs(topo)
    measured = " / ".join(sorted(words | {o.split()[-1] for o in other}))
    lonely = [i for i in range(cx.n) if not any(str(c).startswith("NV") for j, c in enumerate(topo[i]) if j != i)]
    if _board(cx) and other:
        return CheckResult(name, "fail", measured, "NV# for every pair", "", Text(
            "Some GPU pairs are not connected by NVLink: " + "; ".join(other[:6])
            + ". Tensor parallel across them will be slow (a VM may hide NVLink, or links are down).",
            "部分 GPU 对之间没有 NVLink：" + "；".join(other[:6])
            + "。跨这些 GPU 的张量并行会很慢（虚拟机可能隐藏了 NVLink，或链路断开）。"))
    if cx.term("nvlink") and lonely:
        return CheckResult(name, "fail", measured, "an NV# peer for every GPU", "", Text(
            f"The contract promises NVLink, but {gpu_list(lonely)} have no NVLink peer in the topology.",
            f"合同约定有 NVLink，但拓扑中 {gpu_list(lonely)} 没有 NVLink 对端。"))
    linked = [g.index for g in cx.ev.gpus if not is_na(g.nvlink_up) and g.nvlink_up > 0]
    disagree = [i for i in linked if i in lonely and i < cx.n]
    if disagree:
        return CheckResult(name, "warn", measured, None, "", Text(
            f"{gpu_list(disagree)} report active NVLinks, but the topology shows no NVLink peer: "
            "the links may go nowhere (a fabric not set up).",
            f"{gpu_list(disagree)} 报告有激活的 NVLink，但拓扑中没有 NVLink 对端：链路可能未接通（fabric 未就绪）。"))
    if _board(cx) and len(words) > 1:
        return CheckResult(name, "warn", measured, "one NV# for every pair", "", Text(
            f"GPU pairs have different NVLink widths ({', '.join(sorted(words))}).",
            f"各 GPU 对的 NVLink 宽度不一致（{', '.join(sorted(words))}）。"))
    sys_pairs = [o for o in other if o.endswith("SYS")]
    note = Text(f" {len(sys_pairs)} pair(s) cross CPU sockets (SYS).",
                f" {len(sys_pairs)} 对跨 CPU 插槽（SYS）。") if sys_pairs else Text("", "")
    expected = "NV# every pair" if _board(cx) else None
    return CheckResult(name, "pass", measured, expected, "", Text(
        f"{len(nv)} of {len(nv) + len(other)} GPU pairs over NVLink.",
        f"{len(nv) + len(other)} 对 GPU 中有 {len(nv)} 对经 NVLink 相连。") + note)


def check_p2p(cx: Context) -> CheckResult:
    if cx.n < 2:
        return skipped("links.p2p", Text("One GPU: no peer-to-peer.", "只有一块 GPU：无点对点。"))
    p2p = cx.ev.p2p
    if not is_na(p2p) and len(p2p) != cx.n:
        p2p = NotAvailable(f"a {len(p2p)}-row matrix for {cx.n} GPUs")
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
