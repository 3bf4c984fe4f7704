"""Health checks: ECC mode and errors, row remapping, throttling under load, temperature."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Status, skipped
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

_BITS = {"sw_power_cap": 0x4, "hw_slowdown": 0x8, "sw_thermal_slowdown": 0x20,
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


def check_ecc_errors(cx: Context) -> CheckResult:
    unc = {}
    cor = {}
    for g in cx.ev.gpus:
        vals = [v for v in (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) if not is_na(v)]
        if vals:
            unc[g.index] = max(vals)
        if not is_na(g.ecc_corrected_volatile):
            cor[g.index] = g.ecc_corrected_volatile
    if not unc and not cor:
        return skipped("health.ecc_errors", Text("No ECC error counters on this card.", "此卡没有 ECC 错误计数器。"))
    bad = [i for i, v in unc.items() if v > 0]
    if bad:
        worst_n = max(unc[i] for i in bad)
        return CheckResult("health.ecc_errors", "fail", worst_n, 0, "errors", Text(
            f"Uncorrectable ECC errors on {gpu_list(bad)} (up to {worst_n}): this memory has "
            "corrupted data. Ask the provider to replace or reset the GPU.",
            f"{gpu_list(bad)} 有不可纠正的 ECC 错误（最多 {worst_n} 个）：显存已损坏数据。"
            "请服务商更换或重置该 GPU。"))
    limit = int(cx.th.get("ecc", "corrected_warn"))
    noisy = [i for i, v in cor.items() if v >= limit]
    if noisy:
        return CheckResult("health.ecc_errors", "warn", max(cor.values()), 0, "errors", Text(
            f"Corrected ECC errors since the driver loaded on {gpu_list(noisy)}: watch them; a rising "
            "count precedes failures.",
            f"{gpu_list(noisy)} 自驱动加载以来有已纠正的 ECC 错误：请关注，持续增长往往预示故障。"))
    return CheckResult("health.ecc_errors", "pass", 0, 0, "errors", Text("No ECC errors.", "无 ECC 错误。"))


def check_remap(cx: Context) -> CheckResult:
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
        return skipped("health.memory_remap", Text(
            "This card reports neither row remapping nor page retirement.",
            "此卡既不报告行重映射也不报告页退役。"))
    if failed:
        return CheckResult("health.memory_remap", "fail", "failure", "none", "", Text(
            f"Row remapping FAILED on {gpu_list(failed)}: the memory has run out of spare rows. "
            "The GPU must be replaced.",
            f"{gpu_list(failed)} 行重映射失败：显存备用行已耗尽，必须更换 GPU。"))
    if pending or retired:
        where = gpu_list(sorted(set(pending + retired)))
        return CheckResult("health.memory_remap", "fail", "pending", "none", "", Text(
            f"A row remap (or page retirement) is pending on {where}: a memory error happened and "
            "the fix only applies after a GPU reset. Ask the provider to reset the GPU.",
            f"{where} 有待生效的行重映射（或页退役）：发生过显存错误，需重置 GPU 才能生效。请服务商重置 GPU。"))
    return CheckResult("health.memory_remap", "pass", "none", "none", "",
                       Text("No pending or failed row remapping.", "没有待处理或失败的行重映射。"))


def check_throttle(cx: Context) -> CheckResult:
    samples = [s for s in _load(cx) if not is_na(s.throttle_reasons)]
    if not samples:
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
        return CheckResult("health.throttle", "warn", "sw_power_cap", "none", "", Text(
            f"The power cap slowed the clocks under load on {gpu_list(sorted(warning))}: normal at "
            "full load, but together with a lowered power limit it costs speed.",
            f"{gpu_list(sorted(warning))} 负载下触发功耗上限降频：满载时常见，若功耗上限被调低则会损失速度。"))
    return CheckResult("health.throttle", "pass", "none", "none", "",
                       Text("No slowdown under load (idle excluded).", "负载下无降频（已排除空闲）。"))


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
    if hot >= warn_c:
        return CheckResult("health.temperature", "warn", hot, warn_c, "C", text + Text(
            f", at or above {warn_c} C.", f"，不低于 {warn_c} C。"))
    return CheckResult("health.temperature", "pass", hot, warn_c, "C", text + Text(".", "。"))
