"""The sustained all-GPU window (clocks, burst vs sustained, errors during load) and the peer
rule (each GPU against the node median, data/verify_peers.toml)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from gpuwise.i18n import Text
from gpuwise.units import TERA
from gpuwise.verify.checks import CheckResult, Status, incomplete, load_data, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS", "METRICS", "peer_outliers"]


def _load(cx: Context) -> list[Any]:
    return [] if is_na(cx.ev.load) else list(cx.ev.load)


def _num(v: Any) -> float | None:
    return None if v is None or is_na(v) or isinstance(v, bool) else float(v)


def check_window(cx: Context) -> CheckResult:
    name = "load.window"
    if not cx.benchmarked:
        return skipped(name, Text("No load in an inventory run.", "清单模式不加负载。"), "s")
    load, planned = cx.ev.load, cx.ev.load_seconds
    if is_na(load):
        return incomplete(name, Text(f"The GPUs were never loaded ({load.reason}).",
                                     f"GPU 从未被加载（{load.reason}）。"), "s")
    if is_na(planned):
        return CheckResult(name, "warn", None, None, "s", Text(
            "This evidence has no sustained all-GPU window (saved by an older gpuwise): cooling and "
            "power faults that need every GPU hot for minutes were not tested.",
            "此证据没有所有 GPU 同时持续负载的窗口（旧版 gpuwise 保存）："
            "未测试需要所有 GPU 长时间满载才会暴露的散热与供电故障。"))
    need = float(cx.th.get("load", "min_fraction_run")) * float(planned)
    ran = {s.index: _num(s.seconds) or 0.0 for s in _load(cx)}
    short = [g.index for g in cx.ev.gpus if ran.get(g.index, 0.0) < need]
    if short:
        return incomplete(name, Text(
            f"The sustained window was cut short on {gpu_list(short)} (planned {planned:.0f} s, needed "
            f">= {need:.0f} s): the benchmark process stopped or a GPU dropped out.",
            f"{gpu_list(short)} 的持续负载窗口提前结束（计划 {planned:.0f} 秒，至少需 {need:.0f} 秒）："
            "测试进程停止或有 GPU 掉线。"), "s")
    low = min(ran.values()) if ran else 0.0
    return CheckResult(name, "pass", round(low), round(float(planned)), "s", Text(
        f"Every GPU was loaded together for {low:.0f} s (GEMM and memory traffic), sampled about once "
        "a second.", f"所有 GPU 同时负载 {low:.0f} 秒（GEMM 与显存流量），约每秒采样一次。"))


def check_clocks(cx: Context) -> CheckResult:
    name = "load.clocks"
    ratio = float(cx.th.get("load", "clock_warn_ratio"))
    rows = []
    for s in _load(cx):
        g = next((g for g in cx.ev.gpus if g.index == s.index), None)
        med, top = _num(s.sm_clock_median_mhz), _num(getattr(g, "sm_clock_max_mhz", None))
        if med is not None and top:
            rows.append((s.index, med, top))
    if not rows:
        return skipped(name, Text("SM clocks were not sampled under load.", "负载下未采样 SM 频率。"), "MHz")
    i, med, top = min(rows, key=lambda r: r[1] / r[2])
    if med < ratio * top:
        return CheckResult(name, "warn", round(med), f">= {ratio * top:.0f}", "MHz", Text(
            f"GPU{i} ran at a median {med:.0f} MHz under load, {med / top:.0%} of its {top:.0f} MHz max: "
            "power, heat or a clock setting holds it back.",
            f"GPU{i} 负载下频率中位数 {med:.0f} MHz，为最高 {top:.0f} MHz 的 {med / top:.0%}："
            "受功耗、温度或频率设置限制。"))
    return CheckResult(name, "pass", round(med), f">= {ratio * top:.0f}", "MHz", Text(
        f"Lowest median SM clock under load: GPU{i} {med:.0f} of {top:.0f} MHz.",
        f"负载下 SM 频率中位数最低：GPU{i} {med:.0f} / {top:.0f} MHz。"))


def check_sustained(cx: Context) -> CheckResult:
    name = "load.sustained"
    rows: list[tuple[int, float | None, float]] = []
    for s in _load(cx):
        sustained = _num(s.sustained_flops_per_s)
        if sustained is not None:
            rows.append((s.index, _num(s.burst_flops_per_s), sustained))
    floor = cx.term("min_sustained_bf16_tflops")
    if not rows:
        if floor is not None and cx.benchmarked:
            return incomplete(name, Text("No sustained rate was measured: the contract's "
                                         "min_sustained_bf16_tflops cannot be judged.",
                                         "未测得持续速率：无法评判合同的 min_sustained_bf16_tflops。"), "TFLOPS")
        return skipped(name, Text("No sustained rate in this evidence.", "此证据中没有持续速率。"), "TFLOPS")
    i, burst, rate = min(rows, key=lambda r: r[2])
    shown = round(rate / TERA, 1)
    if floor is not None and rate < floor * TERA:
        return CheckResult(name, "fail", shown, f">= {floor:g}", "TFLOPS", Text(
            f"GPU{i} sustained {shown:g} TFLOPS bf16 with every GPU loaded, below the contract's {floor:g}.",
            f"所有 GPU 同时负载时 GPU{i} 持续 bf16 {shown:g} TFLOPS，低于合同的 {floor:g}。"))
    warn_ratio = float(cx.th.get("load", "sustained_warn_ratio"))
    sagged = [(j, b, v) for j, b, v in rows if b and v < warn_ratio * b]
    if sagged:
        j, b, v = min(sagged, key=lambda r: r[2] / r[1])
        return CheckResult(name, "warn", round(v / TERA, 1), f">= {warn_ratio * b / TERA:.0f}", "TFLOPS", Text(
            f"GPU{j} fell from a burst {b / TERA:.0f} to a sustained {v / TERA:.0f} TFLOPS "
            f"({v / b:.0%}) as every GPU stayed loaded: cooling or power supply limits.",
            f"所有 GPU 持续负载时 GPU{j} 从突发 {b / TERA:.0f} 降至持续 {v / TERA:.0f} TFLOPS（{v / b:.0%}）："
            "散热或供电受限。"))
    burst_s = f"{burst / TERA:.0f}" if burst else "?"
    return CheckResult(name, "pass", shown, f">= {floor:g}" if floor else None, "TFLOPS", Text(
        f"Slowest sustained bf16 GEMM with every GPU loaded: GPU{i} {shown:g} TFLOPS (burst {burst_s}).",
        f"所有 GPU 同时负载时最慢的持续 bf16 GEMM：GPU{i} {shown:g} TFLOPS（突发 {burst_s}）。"))


def check_errors_during(cx: Context) -> CheckResult:
    name = "load.ecc_during"
    deltas = {s.index: int(s.ecc_uncorrected_delta) for s in _load(cx) if _num(s.ecc_uncorrected_delta) is not None}
    if not deltas:
        return skipped(name, Text("ECC counters were not compared across the window.",
                                  "未对比负载窗口前后的 ECC 计数。"))
    bad = sorted(i for i, d in deltas.items() if d > 0)
    if bad:
        return CheckResult(name, "fail", max(deltas.values()), 0, "errors", Text(
            f"New uncorrectable ECC errors appeared under load on {gpu_list(bad)}: the memory fails when hot.",
            f"{gpu_list(bad)} 在负载下出现新的不可纠正 ECC 错误：显存在高温下出错。"))
    return CheckResult(name, "pass", 0, 0, "errors", Text(
        "No new uncorrectable ECC error during the load.", "负载期间没有新的不可纠正 ECC 错误。"))


def check_memtest(cx: Context) -> CheckResult:
    """The pattern written over most of the free memory must read back unchanged."""
    name = "health.memtest"
    from gpuwise.verify.judge_perf import finish, gather, not_measured

    rows, missing, crashed = gather(cx, "memtest", lambda b: b.memtest)
    what = Text("memory pattern test", "显存图案测试")
    if not rows:
        if is_na(cx.ev.bench) or crashed:
            return finish(not_measured(cx, name, ""), what, [], crashed) if crashed else not_measured(cx, name, "")
        return skipped(name, Text("No memory pattern test in this evidence (an older gpuwise).",
                                  "此证据中没有显存图案测试（旧版 gpuwise）。"))
    bad = sorted(i for i, m in rows if m.mismatches > 0)
    low = min(m.fraction_of_free for _, m in rows)
    if bad:
        worst_n = max(m.mismatches for _, m in rows)
        result = CheckResult(name, "fail", worst_n, 0, "words", Text(
            f"Memory did not hold what was written on {gpu_list(bad)} (up to {worst_n} wrong 32-bit "
            "words): weak cells or memory that is not really there. The GPU must be replaced.",
            f"{gpu_list(bad)} 的显存读回与写入不一致（最多 {worst_n} 个 32 位字出错）："
            "存在弱单元或虚标容量。必须更换 GPU。"))
    else:
        tested = min(m.bytes_tested for _, m in rows) / 2**30
        result = CheckResult(name, "pass", round(low, 2), None, "of free", Text(
            f"A pattern over {low:.0%} of the free memory (at least {tested:.1f} GiB per GPU) read back "
            "unchanged on every GPU.",
            f"覆盖 {low:.0%} 可用显存（每块 GPU 至少 {tested:.1f} GiB）的图案在每块 GPU 上读回无误。"))
    return finish(result, what, missing, crashed)


# ------------------------------------------------------------------ peers

def _bench_by(cx: Context) -> dict[int, Any]:
    return {} if is_na(cx.ev.bench) else {b.index: b for b in cx.ev.bench}


def _matmul(precision: str) -> Callable[[Context], dict[int, float]]:
    def get(cx: Context) -> dict[int, float]:
        return {i: r.flops_per_s for i, b in _bench_by(cx).items() for r in b.matmul if r.precision == precision}
    return get


def _bench_field(field: str) -> Callable[[Context], dict[int, float]]:
    def get(cx: Context) -> dict[int, float]:
        return {i: float(v) for i, b in _bench_by(cx).items() if (v := _num(getattr(b, field))) is not None}
    return get


def _load_field(field: str) -> Callable[[Context], dict[int, float]]:
    def get(cx: Context) -> dict[int, float]:
        return {s.index: float(v) for s in _load(cx) if (v := _num(getattr(s, field))) is not None}
    return get


METRICS: dict[str, Callable[[Context], dict[int, float]]] = {
    "mem_bw": _bench_field("mem_bw_bytes_per_s"), "matmul_bf16": _matmul("bf16"),
    "matmul_fp16": _matmul("fp16"), "matmul_fp8": _matmul("fp8"),
    "sustained_bf16": _load_field("sustained_flops_per_s"), "sm_clock": _load_field("sm_clock_median_mhz"),
    "h2d": _bench_field("h2d_bytes_per_s"), "d2h": _bench_field("d2h_bytes_per_s"),
}


def peer_outliers(values: dict[int, float], below: float) -> tuple[float, dict[int, float]]:
    """(median, {index: fraction under the median}) for the values more than `below` under it."""
    med = statistics.median(values.values())
    if med <= 0:
        return med, {}
    return med, {i: 1 - v / med for i, v in values.items() if v < med * (1 - below)}


def _peer_check(row: dict[str, Any], rule: dict[str, Any]) -> Callable[[Context], CheckResult]:
    name, what = f"peers.{row['name']}", Text(str(row["what"]), str(row["what_zh"]))
    warn_below = float(row.get("warn_below", rule["warn_below"]))
    fail_raw = row.get("fail_below", rule["fail_below"])
    fail_below = None if fail_raw is False else float(fail_raw)

    def check(cx: Context) -> CheckResult:
        values = METRICS[row["name"]](cx)
        if len(values) < int(rule["min_gpus"]):
            return skipped(name, what + Text(": fewer than two GPUs measured.", "：测得的 GPU 少于两块。"))
        med, off = peer_outliers(values, warn_below)
        if not off:
            low = min(values.values())
            within = Text(f": every GPU within {warn_below:.0%} of the node median.",
                          f"：每块 GPU 都在中位数的 {warn_below:.0%} 以内。")
            return CheckResult(name, "pass", round(1 - low / med, 3) if med else 0, f"<= {warn_below:g}", "",
                               what + within)
        worst_i = max(off, key=lambda i: off[i])
        status: Status = "fail" if fail_below is not None and off[worst_i] > fail_below else "warn"
        listed = ", ".join(f"GPU{i} -{f:.0%}" for i, f in sorted(off.items()))
        limit = f"fail above {fail_below:.0%}" if fail_below is not None else "warn only"
        return CheckResult(name, status, round(off[worst_i], 3), f"<= {warn_below:g}", "", what + Text(
            f": {listed} under the node median (warn above {warn_below:.0%}, {limit}). One GPU slower "
            "than its identical peers is a faulty or throttled GPU: the whole job runs at its pace.",
            f"：{listed} 低于本机中位数（超过 {warn_below:.0%} 警告"
            + (f"，超过 {fail_below:.0%} 失败" if fail_below is not None else "，仅警告")
            + "）。比相同型号的其他 GPU 慢，说明该 GPU 有故障或被降频：整个任务会被它拖慢。"))

    return check


def _peer_checks() -> tuple[Callable[[Context], CheckResult], ...]:
    data = load_data("verify_peers.toml")
    return tuple(_peer_check(row, data["rule"]) for row in data["metric"])


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_window, check_clocks, check_sustained, check_errors_during, check_memtest, *_peer_checks(),
)
