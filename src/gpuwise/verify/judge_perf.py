"""Performance checks (bandwidth, matmul, PCIe copy, all-reduce, completion, timing spread);
the software checks live in judge_software.py and run with these.

Bandwidths are bytes/s inside and GB/s (1e9) in the report; matmul is TFLOPS (1e12).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.i18n import Text
from gpuwise.units import GB, TERA
from gpuwise.verify import judge_software
from gpuwise.verify.checks import (
    CheckResult,
    Status,
    Thresholds,
    incomplete,
    ratio_status,
    skipped,
)
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.judge_software import torch_wheel_command
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS", "pcie_theoretical_bytes_per_s", "torch_wheel_command"]

_NO_BENCH = Text("Benchmarks were not run (inventory only, or torch missing): "
                 "`pip install 'gpuwise[verify]'` and run `gpuwise verify --quick`.",
                 "未运行基准测试（仅清单，或缺少 torch）：`pip install 'gpuwise[verify]'` 后运行 "
                 "`gpuwise verify --quick`。")


# Files saved before `GpuBench.errors` folded a raised benchmark into its slot as
# "ExceptionType: message"; such a reason is a crash, any other is a result that never came.
_CRASH = re.compile(r"^[A-Za-z_.]*(Error|Exception)\b")
_NOT_RUN = Text("No result: the benchmark did not finish on this GPU (deadline, or the "
                "benchmark process died).", "没有结果：该 GPU 上的测试未完成（超时或测试进程退出）。")


def _slowest(i: int) -> Text:
    return Text(f"slowest GPU{i}", f"最慢的 GPU{i}")


def _bench(cx: Context) -> list[Any]:
    return [] if is_na(cx.ev.bench) else list(cx.ev.bench)


def typical(cx: Context, key: str, unit: str) -> Text:
    """" A healthy H20 measures ~3400 GB/s (derived, unverified)." from data/verify_expected.toml."""
    from gpuwise.verify.checks import load_data

    card_id = getattr(cx.card, "id", None)
    row = next((r for r in load_data("verify_expected.toml").get("card", []) if r["card"] == card_id), None)
    if row is None or key not in row:
        return Text("", "")
    how = " (derived, unverified)" if key in row.get("unverified", []) else ""
    how_zh = "（推算值，未经实测核实）" if how else ""
    return Text(f" A healthy {card_id} measures ~{row[key]:g} {unit}{how}.",
                f" 健康的 {card_id} 实测约 {row[key]:g} {unit}{how_zh}。")


def _with_typical(result: CheckResult, cx: Context, key: str, unit: str) -> CheckResult:
    return replace(result, detail=result.detail + typical(cx, key, unit))


def not_measured(cx: Context, name: str, unit: str) -> CheckResult:
    """No benchmark evidence at all: incomplete when the run was asked to benchmark."""
    bench = cx.ev.bench
    if not cx.benchmarked:
        return skipped(name, Text(f"Not measured: an {cx.ev.mode} run loads no GPU.",
                                  f"未测量：{cx.ev.mode} 模式不加负载。"), unit)
    why = bench.reason if is_na(bench) else "no GPU has a result"
    return incomplete(name, Text(f"Not measured ({why}): the verdict cannot pass without it. ",
                                 f"未测量（{why}）：缺少它结论不能为通过。") + _NO_BENCH, unit)


def _errors(b: Any, kind: str, precision: str | None = None) -> list[str]:
    return [e.message for e in b.errors if e.kind == kind and (precision is None or e.precision == precision)]


def gather(cx: Context, kind: str, get: Callable[[Any], Any]
           ) -> tuple[list[tuple[int, Any]], list[tuple[int, str]], list[tuple[int, str]]]:
    """(values, missing, crashed) per GPU that NVML lists, for one benchmark slot."""
    by_index = {b.index: b for b in _bench(cx)}
    values, missing, crashed = [], [], []
    for g in cx.ev.gpus:
        b = by_index.get(g.index)
        if b is None:
            missing.append((g.index, "no result"))
            continue
        errs = _errors(b, kind)
        v = get(b)
        if errs:
            crashed.append((g.index, errs[0]))
        elif is_na(v):
            (crashed if _CRASH.match(v.reason) else missing).append((g.index, v.reason))
        elif isinstance(v, (int, float)) and not _real(v):
            missing.append((g.index, f"{v!r} is not a finite number >= 0"))
        else:
            values.append((g.index, v))
    return values, missing, crashed


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def finish(result: CheckResult, what: Text, missing: list[tuple[int, str]],
           crashed: list[tuple[int, str]]) -> CheckResult:
    """A crash on any GPU fails; else a failure stands; else a missing GPU makes it incomplete."""
    if crashed:
        i, msg = crashed[0]
        return CheckResult(result.name, "fail", "crashed", result.expected, result.unit, Text(
            f"The {what.en} benchmark crashed on {gpu_list([c[0] for c in crashed])} (GPU{i}: "
            f"{msg[:160]}): a GPU that cannot finish a benchmark is faulty. Ask the provider to "
            "check or replace it (look for Xid errors in `dmesg`).",
            f"{what.zh}测试在 {gpu_list([c[0] for c in crashed])} 上崩溃（GPU{i}：{msg[:160]}）："
            "无法完成测试的 GPU 有故障。请服务商检查或更换（在 `dmesg` 中查 Xid）。"))
    if result.status == "fail" or not missing:
        return result
    i, why = missing[0]
    return CheckResult(result.name, "incomplete", result.measured, result.expected, result.unit,
                       Text(f"{what.en}: no result for {gpu_list([m[0] for m in missing])} "
                            f"(GPU{i}: {why}). ", f"{what.zh}：{gpu_list([m[0] for m in missing])} "
                            f"没有结果{_why_zh(i, why)}。") + _NOT_RUN + Text(" ", " ") + result.detail)


def _why_zh(i: int, why: str) -> str:
    """The Chinese of a missing result's reason: gpuwise's own words translated; a reason the probe
    recorded (an exception's text, NVML's words) quoted as it is."""
    if why == "no result":  # the GPU has no benchmark entry at all: 没有结果 says it already
        return ""
    number = re.match(r"(.*) is not a finite number >= 0$", why)
    return f"（GPU{i}：{number.group(1)} 不是不小于 0 的有限数）" if number else f"（GPU{i}：{why}）"


def _judge_ratio(name: str, who: Text, value: float, ref: float | None, floor: float | None,
                 pass_ratio: float, fail_ratio: float, unit_scale: float, unit: str,
                 what: Text) -> CheckResult:
    """Shared verdict for 'measured vs datasheet x fraction' checks, plus a contract floor."""
    shown = round(value / unit_scale, 1)
    head = what + Text(f": {who.en} {shown:g} {unit}", f"：{who.zh} {shown:g} {unit}")
    if floor is not None and value < floor * unit_scale:
        return CheckResult(name, "fail", shown, f">= {floor:g}", unit, head + Text(
            f", below the contract's {floor:g} {unit}.", f"，低于合同的 {floor:g} {unit}。"))
    if ref is None:
        status: Status = "pass" if floor is not None else "skipped"
        return CheckResult(name, status, shown, f">= {floor:g}" if floor else None, unit,
                           head + Text(" (no datasheet value to compare).", "（没有可比对的规格值）。"))
    ratio = value / ref
    status = ratio_status(ratio, pass_ratio, fail_ratio)
    expected = round(ref * pass_ratio / unit_scale, 1)
    tail = Text(f", {ratio:.0%} of the {ref / unit_scale:.1f} {unit} reference (pass at "
                f"{pass_ratio:.0%}, fail below {fail_ratio:.0%}).",
                f"，为参考值 {ref / unit_scale:.1f} {unit} 的 {ratio:.0%}（≥{pass_ratio:.0%} 通过，"
                f"<{fail_ratio:.0%} 失败）。")
    return CheckResult(name, status, shown, f">= {expected:g}", unit, head + tail)


def check_mem_bw(cx: Context) -> CheckResult:
    name, what = "performance.mem_bw", Text("device copy", "显存拷贝")
    rows, missing, crashed = gather(cx, "mem_bw", lambda b: b.mem_bw_bytes_per_s)
    if not rows:
        base = not_measured(cx, name, "GB/s")
        return finish(base, what, [], crashed) if crashed else base
    i, v = min(rows, key=lambda r: r[1])
    ref = getattr(cx.card, "mem_bw_gbps", None)
    result = _judge_ratio(name, _slowest(i), v, ref * GB if ref else None,
                          cx.term("min_mem_bw_gbps"), cx.th.get("mem_bw", "pass_ratio"),
                          cx.th.get("mem_bw", "fail_ratio"), GB, "GB/s",
                          Text("Device copy, read+write counted", "显存拷贝（读+写计数）"))
    return finish(_with_typical(result, cx, "mem_copy_gbps", "GB/s"), what, missing, crashed)


def _dense_ref(card: Any, precision: str) -> float | None:
    if card is None:
        return None
    try:
        value = card.dense_tflops(precision)
    except (AttributeError, GpuwiseError):
        value = getattr(card, f"{precision}_dense_tflops", None)
    return float(value) * TERA if value else None


def _matmul_check(precision: str) -> Callable[[Context], CheckResult]:
    name = f"performance.matmul_{precision}"

    def check(cx: Context) -> CheckResult:
        runs, missing, crashed, unsupported = _matmul_runs(cx, precision)
        what = Text(f"{precision} matmul", f"{precision} 矩阵乘")
        if not runs:
            if unsupported and not missing and not crashed:
                reason = unsupported[0][1]
                return skipped(name, Text(f"{precision}: {reason}", f"{precision}：{reason}"), "TFLOPS")
            base = not_measured(cx, name, "TFLOPS")
            return finish(base, what, [], crashed) if crashed else base
        result = _judge_matmul(cx, name, precision, runs)
        if precision == "bf16":
            result = _with_typical(result, cx, "bf16_tflops", "TFLOPS")
        return finish(result, what, missing, crashed)

    return check


def _matmul_runs(cx: Context, precision: str) -> tuple[list[tuple[int, Any]], list[tuple[int, str]],
                                                       list[tuple[int, str]], list[tuple[int, str]]]:
    """(runs, missing, crashed, unsupported) per GPU for one precision."""
    by_index = {b.index: b for b in _bench(cx)}
    runs, missing, crashed, unsupported = [], [], [], []
    for g in cx.ev.gpus:
        b = by_index.get(g.index)
        if b is None:
            missing.append((g.index, "no result"))
            continue
        errs = _errors(b, "matmul", precision)
        mine = [r for r in b.matmul if r.precision == precision]
        skip = [reason for p, reason in b.matmul_skipped if p == precision]
        if errs or (skip and _CRASH.match(skip[0])):
            crashed.append((g.index, (errs or skip)[0]))
        elif mine and not _real(mine[0].flops_per_s):
            missing.append((g.index, f"{mine[0].flops_per_s!r} is not a finite number >= 0"))
        elif mine:
            runs.append((g.index, mine[0]))
        elif skip:
            unsupported.append((g.index, skip[0]))
        else:
            missing.append((g.index, "no result"))
    return runs, missing, crashed, unsupported


def _judge_matmul(cx: Context, name: str, precision: str, runs: list[tuple[int, Any]]) -> CheckResult:
    wrong = [(i, r) for i, r in runs if r.rel_error > r.tolerance]
    if wrong:
        i, r = wrong[0]
        return CheckResult(name, "fail", f"err {r.rel_error:.2g}", f"<= {r.tolerance:g}", "", Text(
            f"{precision} matmul gave WRONG results on {gpu_list([w[0] for w in wrong])} "
            f"(relative error {r.rel_error:.2g} vs fp32 reference): a faulty GPU. Stop using it.",
            f"{gpu_list([w[0] for w in wrong])} 的 {precision} 矩阵乘结果错误（相对误差 "
            f"{r.rel_error:.2g}，对照 fp32 参考）：GPU 有故障，请停止使用。"))
    i, r = min(runs, key=lambda p: p[1].flops_per_s)
    table = "matmul_fp8" if precision == "fp8" else "matmul"  # fp8 judged on its own fractions
    result = _judge_ratio(name, _slowest(i), r.flops_per_s, _dense_ref(cx.card, precision),
                          cx.term(f"min_{precision}_tflops"), cx.th.get(table, "pass_ratio"),
                          cx.th.get(table, "fail_ratio"), TERA, "TFLOPS",
                          Text(f"{precision} dense matmul n={r.n}", f"{precision} 稠密矩阵乘 n={r.n}"))
    best = max(run.flops_per_s for _, run in runs)
    spread = 1 - r.flops_per_s / best
    if result.status == "pass" and spread > float(cx.th.get("matmul", "spread_warn")):
        return CheckResult(name, "warn", result.measured, result.expected, result.unit,
                           result.detail + Text(f" GPU{i} is {spread:.0%} slower than the best GPU.",
                                                f" GPU{i} 比最快的 GPU 慢 {spread:.0%}。"))
    return result


def pcie_theoretical_bytes_per_s(th: Thresholds, gen: int, width: int) -> float | None:
    per_lane = th.per_lane_gbps(gen)
    return per_lane * width * GB if per_lane else None


def _pcie_check(direction: str) -> Callable[[Context], CheckResult]:
    name = f"performance.{direction}"
    field = f"{direction}_bytes_per_s"

    def check(cx: Context) -> CheckResult:
        what = Text(f"{direction} copy", f"{direction} 拷贝")
        rows, missing, crashed = gather(cx, direction, lambda b: getattr(b, field))
        if not rows:
            base = not_measured(cx, name, "GB/s")
            return finish(base, what, [], crashed) if crashed else base
        result = _judge_pcie(cx, name, direction, rows)
        if direction == "h2d":
            result = _with_typical(result, cx, "h2d_gbps", "GB/s")
        return finish(result, what, missing, crashed)

    return check


def _judge_pcie(cx: Context, name: str, direction: str, rows: list[tuple[int, Any]]) -> CheckResult:
    i, v = min(rows, key=lambda r: r[1])
    g = next((g for g in cx.ev.gpus if g.index == i), None)
    ref = None
    if g is not None and not is_na(g.pcie_gen_max) and not is_na(g.pcie_width_max):
        ref = pcie_theoretical_bytes_per_s(cx.th, int(g.pcie_gen_max), int(g.pcie_width_max))
    label = Text("Pinned host->device copy", "锁页内存 主机->设备 拷贝") if direction == "h2d" \
        else Text("Pinned device->host copy", "锁页内存 设备->主机 拷贝")
    floor = cx.term("min_h2d_gbps") if direction == "h2d" else None
    return _judge_ratio(name, _slowest(i), v, ref, floor, cx.th.get("pcie_bw", "pass_ratio"),
                        cx.th.get("pcie_bw", "fail_ratio"), GB, "GB/s", label)


def _allreduce_ref(cx: Context) -> tuple[float | None, bool]:
    """(reference busbw in bytes/s, may_fail). PCIe references are too weak to fail on."""
    card = cx.card
    if card is None:
        return None, False
    for row in cx.th.allreduce_references():
        if str(row["card"]) == card.id:
            return float(row["busbw_gbps"]) * GB, True
    link = str(getattr(card, "interconnect", ""))
    if link.startswith("nvlink") and getattr(card, "interconnect_bw_gbps", None):
        frac = float(cx.th.get("allreduce", "nvlink_fraction"))
        # SXM/HGX boards promise their fabric; a bridge's rate is a datasheet figure nobody has
        # measured for us, so a bridged all-reduce below it only warns.
        return frac * float(card.interconnect_bw_gbps) / 2 * GB, link == "nvlink"  # one direction
    g = cx.ev.gpus[0]
    if is_na(g.pcie_gen_max) or is_na(g.pcie_width_max):
        return None, False
    pcie = pcie_theoretical_bytes_per_s(cx.th, int(g.pcie_gen_max), int(g.pcie_width_max))
    return (float(cx.th.get("allreduce", "pcie_fraction")) * pcie if pcie else None), False


def check_allreduce(cx: Context) -> CheckResult:
    name = "performance.allreduce"
    if cx.n < 2:
        return skipped(name, Text("One GPU: no all-reduce.", "只有一块 GPU：不做 all-reduce。"), "GB/s")
    run = cx.ev.allreduce
    if is_na(run):
        if not cx.benchmarked:
            return skipped(name, Text(f"All-reduce not run: {run.reason}.", f"未运行 all-reduce：{run.reason}。"),
                           "GB/s")
        return incomplete(name, Text(
            f"The all-reduce did not complete ({run.reason}): a hang or a lost rank is the classic "
            "sign of a broken GPU-to-GPU path (P2P, ACS/IOMMU, NVLink fabric); rerun with "
            "NCCL_DEBUG=INFO and ask the provider.",
            f"all-reduce 未完成（{run.reason}）：卡死或丢失进程通常说明 GPU 间通路有问题"
            "（P2P、ACS/IOMMU、NVLink fabric）；用 NCCL_DEBUG=INFO 重跑并联系服务商。"), "GB/s")
    if not run.correct:
        return CheckResult(name, "fail", "wrong", "correct", "", Text(
            "All-reduce returned wrong sums: a faulty GPU or link.", "all-reduce 求和结果错误：GPU 或链路有故障。"))
    if run.n_gpus < cx.n or not run.points:
        return incomplete(name, Text(
            f"The all-reduce ran on {run.n_gpus} of {cx.n} GPUs ({len(run.points)} sizes): the "
            "others were lost or hidden (CUDA_VISIBLE_DEVICES).",
            f"all-reduce 只在 {cx.n} 块中的 {run.n_gpus} 块 GPU 上运行（{len(run.points)} 个尺寸）："
            "其余丢失或被隐藏（CUDA_VISIBLE_DEVICES）。"), "GB/s")
    top = max(run.points, key=lambda p: p.size_bytes)
    ref, may_fail = _allreduce_ref(cx)
    fail_ratio = float(cx.th.get("allreduce", "fail_ratio")) if may_fail else 0.0
    result = _judge_ratio(name, Text("busbw", "总线带宽"), top.busbw_bytes_per_s, ref,
                          cx.term("min_allreduce_busbw_gbps"), cx.th.get("allreduce", "pass_ratio"),
                          fail_ratio, GB, "GB/s",
                          Text(f"{run.backend} all-reduce bus bandwidth, {run.n_gpus} GPUs, "
                               f"{top.size_bytes / 2**20:g} MiB",
                               f"{run.backend} all-reduce 总线带宽，{run.n_gpus} 块 GPU，"
                               f"{top.size_bytes / 2**20:g} MiB"))
    return _with_typical(result, cx, "allreduce8_busbw_gbps", "GB/s") if cx.n == 8 else result


def check_spread(cx: Context) -> CheckResult:
    """Timing noise: a large spread of per-iteration times means the GPU was shared or unstable."""
    name = "performance.spread"
    rows = []
    for b in _bench(cx):
        if not is_na(b.mem_bw_spread) and isinstance(b.mem_bw_spread, (int, float)):
            rows.append((b.index, "device copy", float(b.mem_bw_spread)))
        rows += [(b.index, f"{r.precision} matmul", float(r.spread)) for r in b.matmul if r.spread is not None]
    if not rows:
        return skipped(name, Text("No per-iteration spread in this evidence.", "此证据中没有逐次耗时的离散度。"))
    limit = float(cx.th.get("measurement", "spread_warn"))
    i, what, top = max(rows, key=lambda r: r[2])
    if top > limit:
        return CheckResult(name, "warn", round(top, 3), f"<= {limit:g}", "", Text(
            f"GPU{i} {what} times vary by {top:.0%} ((p90 - p10) / median): the GPU was shared (time "
            "slicing, a noisy neighbour) or its clocks moved; rerun and compare.",
            f"GPU{i} {what} 的耗时离散 {top:.0%}（(p90 - p10) / 中位数）：GPU 被共享（分时、邻居干扰）或频率波动；"
            "请重跑对比。"))
    return CheckResult(name, "pass", round(top, 3), f"<= {limit:g}", "", Text(
        f"Timings are medians of per-iteration CUDA events; the largest spread is {top:.1%} (GPU{i} {what}).",
        f"耗时取逐次 CUDA 事件的中位数；最大离散度 {top:.1%}（GPU{i} {what}）。"))


def check_completed(cx: Context) -> CheckResult:
    """Did every benchmark finish on every GPU? The benchmark process's own end, plus crashes."""
    name = "performance.completed"
    if not cx.benchmarked:
        return skipped(name, Text(f"No benchmarks in an {cx.ev.mode} run.", f"{cx.ev.mode} 模式不运行测试。"))
    crashed = sorted({b.index for b in _bench(cx) if b.errors})
    if crashed:
        first = next(b for b in _bench(cx) if b.errors).errors[0]
        return CheckResult(name, "fail", f"{len(crashed)} GPU(s) crashed", "none", "", Text(
            f"Benchmarks crashed on {gpu_list(crashed)} ({first.kind}: {first.message[:160]}): those "
            "GPUs fail. Look for Xid errors in `dmesg` and ask the provider to replace them.",
            f"测试在 {gpu_list(crashed)} 上崩溃（{first.kind}：{first.message[:160]}）：这些 GPU 判为失败。"
            "请在 `dmesg` 中查 Xid，并请服务商更换。"))
    proc = cx.ev.bench_process
    if is_na(cx.ev.bench):
        return not_measured(cx, name, "")
    have = {b.index for b in _bench(cx)}
    lost = [g.index for g in cx.ev.gpus if g.index not in have]
    if not is_na(proc) and (proc.timed_out or proc.returncode != 0):
        how = (f"was killed at its deadline after {proc.wall_s:.0f} s" if proc.timed_out
               else f"exited with code {proc.returncode}")
        how_zh = (f"运行 {proc.wall_s:.0f} 秒后被超时终止" if proc.timed_out else f"以退出码 {proc.returncode} 结束")
        return incomplete(name, Text(f"The benchmark process {how}: {proc.stderr_tail[-160:]!r}. "
                                     "What it did not finish is not judged.",
                                     f"测试进程{how_zh}：{proc.stderr_tail[-160:]!r}。未完成的部分无法评判。"))
    if lost:
        return incomplete(name, Text(f"No benchmark result at all for {gpu_list(lost)}.",
                                     f"{gpu_list(lost)} 完全没有测试结果。"))
    return CheckResult(name, "pass", len(have), cx.n, "GPUs", Text(
        "Every benchmark finished on every GPU.", "每块 GPU 上的每项测试都已完成。"))


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_completed, check_spread, check_mem_bw, _matmul_check("bf16"), _matmul_check("fp16"), _matmul_check("fp8"),
    _pcie_check("h2d"), _pcie_check("d2h"), check_allreduce, *judge_software.CHECKS,
)
