"""Health checks: ECC mode and errors, row remapping, throttling under load, temperature."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Status, incomplete, skipped
from gpuwise.verify.judge import Context, gpu_list
from gpuwise.verify.nvml import is_na

__all__ = [
    "NO_LOAD",
    "check_ecc_errors",
    "check_ecc_mode",
    "check_remap",
    "check_temperature",
    "check_throttle",
    "throttle_words",
]

_BITS = {"applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal_slowdown": 0x20,
         "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80}
NO_LOAD = Text("No load was run (inventory only, or torch missing): run `gpuwise verify --quick`.",
                "未进行负载测试（仅清单，或缺少 torch）：请运行 `gpuwise verify --quick`。")


def throttle_words(bits: int) -> list[str]:
    return [name for name, bit in _BITS.items() if bits & bit]


def _load(cx: Context) -> list[Any]:
    return [] if is_na(cx.ev.load) else list(cx.ev.load)


def check_ecc_mode(cx: Context) -> CheckResult:
    wants = cx.term("ecc")
    has_ecc = getattr(cx.card, "ecc", None)
    known = [(g.index, g.ecc_current) for g in cx.ev.gpus if not is_na(g.ecc_current)]
    if not known:
        if wants:
            return CheckResult("health.ecc", "fail", "n/a", "on", "", Text(
                "The contract requires ECC but these GPUs do not report ECC at all.",
                "合同要求 ECC，但这些 GPU 根本不报告 ECC。"))
        return skipped("health.ecc", Text("This card has no ECC memory (normal for GeForce).",
                                          "此卡没有 ECC 显存（GeForce 属正常）。"))
    off = [i for i, on in known if not on]
    if off:
        status: Status = "fail" if (wants or has_ecc) else "warn"
        return CheckResult("health.ecc", status, "off", "on", "", Text(
            f"ECC is off on {gpu_list(off)}: memory errors go undetected and silently corrupt "
            "training. Ask the provider to enable it (`nvidia-smi -e 1` and a reboot, root); gpuwise "
            "never changes it.",
            f"{gpu_list(off)} 未开启 ECC：显存错误无法被发现，会悄悄损坏训练。请服务商开启"
            "（`nvidia-smi -e 1` 后重启，需 root）；gpuwise 不会修改它。"))
    return CheckResult("health.ecc", "pass", "on", "on", "", Text("ECC is on.", "ECC 已开启。"))


def _num(v: Any) -> int | None:
    return None if is_na(v) else int(v)


def check_ecc_errors(cx: Context) -> CheckResult:
    """azNHC's rules: uncorrectable errors since the driver loaded, or any in SRAM, fail; old
    DRAM uncorrectable errors whose rows were remapped (no remap pending or failed) only warn:
    once remapped, the memory is healthy (NVIDIA row-remapping guide)."""
    name = "health.ecc_errors"
    volatile, sram, old, cor = {}, {}, {}, {}
    for g in cx.ev.gpus:
        if (v := _num(g.ecc_uncorrected_volatile)) is not None:
            volatile[g.index] = v
        s = [x for x in (_num(g.ecc_sram_uncorrected_volatile), _num(g.ecc_sram_uncorrected_aggregate))
             if x is not None]
        if s:
            sram[g.index] = max(s)
        agg = _num(g.ecc_dram_uncorrected_aggregate)
        agg = agg if agg is not None else _num(g.ecc_uncorrected_aggregate)
        if agg is not None:
            old[g.index] = agg
        if (c := _num(g.ecc_corrected_volatile)) is not None:
            cor[g.index] = c
    if not (volatile or sram or old or cor):
        return skipped(name, Text("No ECC error counters on this card.", "此卡没有 ECC 错误计数器。"))
    bad = {i: v for i, v in volatile.items() if v > 0}
    if bad:
        return CheckResult(name, "fail", max(bad.values()), 0, "errors", Text(
            f"Uncorrectable ECC errors since the driver loaded on {gpu_list(sorted(bad))} (up to "
            f"{max(bad.values())}): data in this memory was corrupted. Ask the provider to reset or "
            "replace the GPU.",
            f"{gpu_list(sorted(bad))} 自驱动加载以来有不可纠正的 ECC 错误（最多 {max(bad.values())} 个）："
            "显存数据已损坏。请服务商重置或更换该 GPU。"))
    bad_sram = {i: v for i, v in sram.items() if v > 0}
    if bad_sram:
        return CheckResult(name, "fail", max(bad_sram.values()), 0, "errors", Text(
            f"Uncorrectable SRAM ECC errors (on-chip caches/registers, not HBM) on "
            f"{gpu_list(sorted(bad_sram))}: no spare rows fix these. The GPU must be replaced.",
            f"{gpu_list(sorted(bad_sram))} 有不可纠正的 SRAM ECC 错误（片上缓存/寄存器，非 HBM）："
            "无法通过备用行修复，必须更换 GPU。"))
    history = {i: v for i, v in old.items() if v > 0}
    if history:
        return CheckResult(name, "warn", max(history.values()), 0, "errors", Text(
            f"Old uncorrectable DRAM errors on {gpu_list(sorted(history))}, already handled by row "
            "remapping or page retirement (see health.memory_remap): healthy now, but watch the count.",
            f"{gpu_list(sorted(history))} 有历史不可纠正 DRAM 错误，已由行重映射或页退役处理"
            "（见 health.memory_remap）：目前健康，请关注计数。"))
    limit = int(cx.th.get("ecc", "corrected_warn"))
    noisy = [i for i, v in cor.items() if v >= limit]
    if noisy:
        return CheckResult(name, "warn", max(cor.values()), 0, "errors", Text(
            f"Corrected ECC errors since the driver loaded on {gpu_list(noisy)}: watch them; a rising "
            "count precedes failures.",
            f"{gpu_list(noisy)} 自驱动加载以来有已纠正的 ECC 错误：请关注，持续增长往往预示故障。"))
    return CheckResult(name, "pass", 0, 0, "errors", Text("No ECC errors.", "无 ECC 错误。"))


def check_remap(cx: Context) -> CheckResult:
    name = "health.memory_remap"
    pending: list[int] = []
    failed: list[int] = []
    retired: list[int] = []
    seen = False
    for g in cx.ev.gpus:
        for value, bucket in ((g.remap_pending, pending), (g.remap_failure, failed),
                              (g.retired_pages_pending, retired)):
            if not is_na(value):
                seen = True
                if value:
                    bucket.append(g.index)
    if not seen:
        return skipped(name, Text(
            "This card reports neither row remapping nor page retirement.",
            "此卡既不报告行重映射也不报告页退役。"))
    max_rows = int(cx.th.get("remap", "max_uncorrectable_rows"))
    rows = {g.index: int(g.remapped_rows_uncorrectable) for g in cx.ev.gpus
            if not is_na(g.remapped_rows_uncorrectable)}
    many = [i for i, v in rows.items() if v > max_rows]
    pages = {g.index: int(g.retired_pages_count) for g in cx.ev.gpus if not is_na(g.retired_pages_count)}
    max_pages = int(cx.th.get("remap", "retired_pages_fail"))
    worn = [i for i, v in pages.items() if v >= max_pages]
    if failed or many or worn:
        where = gpu_list(sorted(set(failed + many + worn)))
        return CheckResult(name, "fail", "failure" if failed else max(rows.get(i, pages.get(i, 0))
                                                                     for i in many + worn),
                           f"<= {max_rows} rows", "", Text(
            f"The memory of {where} has run out of spare rows (remap failure, more than {max_rows} "
            f"uncorrectable remapped rows, or {max_pages}+ retired pages). The GPU must be replaced.",
            f"{where} 的显存备用行已耗尽（重映射失败、超过 {max_rows} 行不可纠正重映射，或退役页达 "
            f"{max_pages}）。必须更换 GPU。"))
    if pending or retired:
        where = gpu_list(sorted(set(pending + retired)))
        return CheckResult(name, "fail", "pending", "none", "", Text(
            f"A row remap (or page retirement) is pending on {where}: a memory error happened and "
            "the fix only applies after a GPU reset. Ask the provider to reset the GPU.",
            f"{where} 有待生效的行重映射（或页退役）：发生过显存错误，需重置 GPU 才能生效。请服务商重置 GPU。"))
    most = max(rows.values(), default=0)
    return CheckResult(name, "pass", most, f"<= {max_rows}", "rows",
                       Text(f"No pending or failed row remapping; at most {most} uncorrectable rows remapped.",
                            f"没有待处理或失败的行重映射；不可纠正重映射至多 {most} 行。"))


def check_throttle(cx: Context) -> CheckResult:
    samples = [s for s in _load(cx) if not is_na(s.throttle_reasons)]
    if not samples:
        if cx.benchmarked:
            why = cx.ev.load.reason if is_na(cx.ev.load) else "no non-idle sample"
            return incomplete("health.throttle", Text(
                f"Clocks-event reasons were never read under load ({why}).",
                f"负载下从未读取降频原因（{why}）。"))
        return skipped("health.throttle", NO_LOAD)
    fail_words = set(cx.th.get("throttle", "fail"))
    warn_words = set(cx.th.get("throttle", "warn"))
    bad = {s.index: throttle_words(int(s.throttle_reasons)) for s in samples}
    failing = {i: w for i, w in bad.items() if fail_words & set(w)}
    warning = {i: w for i, w in bad.items() if warn_words & set(w)}
    if failing:
        desc = "; ".join(f"GPU{i}: {', '.join(w)}" for i, w in failing.items())
        return CheckResult("health.throttle", "fail", desc, "none", "", Text(
            f"Clocks were slowed under load by hardware or thermal limits ({desc}): check "
            "cooling, power supply and airflow with the provider.",
            f"负载下频率被硬件或温度限制拉低（{desc}）：请与服务商检查散热、供电与风道。"))
    if warning:
        desc = "; ".join(f"GPU{i}: {', '.join(w)}" for i, w in warning.items())
        return CheckResult("health.throttle", "warn", desc, "none", "", Text(
            f"Clocks were held down under load by a setting ({desc}): application clocks or a "
            "clock lock set by the provider cost speed; ask them to reset it (`nvidia-smi -rac`, root).",
            f"负载下频率被设置压低（{desc}）：服务商设定的应用频率或锁频会损失速度；"
            "请其复位（`nvidia-smi -rac`，需 root）。"))
    unseen = [g.index for g in cx.ev.gpus if g.index not in bad]
    if cx.benchmarked and unseen:
        return incomplete("health.throttle", Text(
            f"No clocks-event reading under load for {gpu_list(unseen)}: their throttling was not seen.",
            f"{gpu_list(unseen)} 负载下没有降频原因读数：未能观察其降频情况。"))
    capped = sorted(i for i, w in bad.items() if "sw_power_cap" in w)
    note = Text(f" The power cap was reached on {gpu_list(capped)} (normal at full load).",
                f" {gpu_list(capped)} 达到功耗上限（满载时正常）。") if capped else Text("", "")
    return CheckResult("health.throttle", "pass", "none", "none", "",
                       Text("No hardware, thermal or setting slowdown under load (idle excluded).",
                            "负载下无硬件、温度或设置导致的降频（已排除空闲）。") + note)


def check_temperature(cx: Context) -> CheckResult:
    warn_c = int(cx.th.get("temperature", "warn_c"))
    slow = {g.index: g.temperature_slowdown_c for g in cx.ev.gpus if not is_na(g.temperature_slowdown_c)}
    temps = {s.index: s.temperature_max_c for s in _load(cx) if not is_na(s.temperature_max_c)}
    when = Text("under load", "负载下")
    if not temps:
        temps = {g.index: g.temperature_c for g in cx.ev.gpus if not is_na(g.temperature_c)}
        when = Text("at idle (no load run)", "空闲时（未进行负载）")
    if not temps:
        return skipped("health.temperature", Text("No temperature reported.", "未报告温度。"), "C")
    hot_i = max(temps, key=lambda i: temps[i])
    hot = temps[hot_i]
    text = Text(f"Hottest: GPU{hot_i} {hot} C ", f"最高温度：GPU{hot_i} {hot} C ") + when
    if hot_i in slow and hot >= slow[hot_i]:
        return CheckResult("health.temperature", "fail", hot, slow[hot_i], "C", text + Text(
            f", at or above its slowdown threshold {slow[hot_i]} C: cooling is inadequate.",
            f"，达到降频阈值 {slow[hot_i]} C：散热不足。"))
    cap = cx.term("max_temperature_c")
    if cap is not None and hot > cap:
        return CheckResult("health.temperature", "fail", hot, f"<= {cap:g}", "C", text + Text(
            f", above the contract's {cap:g} C.", f"，高于合同的 {cap:g} C。"))
    if hot >= warn_c:
        return CheckResult("health.temperature", "warn", hot, warn_c, "C", text + Text(
            f", at or above {warn_c} C.", f"，不低于 {warn_c} C。"))
    return CheckResult("health.temperature", "pass", hot, warn_c, "C", text + Text(".", "。"))
