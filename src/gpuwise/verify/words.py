"""The words of a check's measured and expected values: numbers or short English words in a unit
("8 GPUs", "on", "idle", "<= 512 rows"), said in Chinese under --lang zh by the terminal view and
the Markdown and HTML reports alike (the JSON keeps them as they are)."""

from __future__ import annotations

import re
from typing import Any

from gpuwise.i18n import Lang

__all__ = ["fmt_value", "value_words"]

# A unit after a count: "8 GPUs" -> "8 块 GPU".
_UNITS_ZH = {"GPUs": "块 GPU", "errors": "个错误", "processes": "个进程", "rows": "行", "links": "条链路",
             "cores": "核", "nodes": "个节点", "Xids": "个 Xid", "words": "个字", "of free": "倍可用显存"}
# A measured or expected word that is not a name (driver, module or card names stay as they are).
_WORDS_ZH = {"on": "开", "off": "关", "none": "无", "idle": "空闲", "verified": "已校验", "edited": "已改动",
             "collected": "已采集", "OK": "正常", "correct": "正确", "wrong": "错误", "pending": "待处理",
             "failure": "失败", "prohibited": "禁止", "default": "默认", "active": "已激活", "all": "全部",
             "n/a": "不适用", "crashed": "崩溃", "completed": "已完成", "CUDA build": "CUDA 版",
             "CUDA available": "CUDA 可用", "one version": "同一版本", "NV# every pair": "每对均为 NV#",
             "NV# for every pair": "每对均为 NV#", "one NV# for every pair": "每对一条 NV#",
             "a NUMA node per GPU": "每块 GPU 一个 NUMA 节点", "inactive": "未激活", "not_started": "未启动",
             "vgpu": "vGPU"}
# Values that carry a number and a word (judge_health '<= 512 rows', judge_errors 'GPU0 Xid 94 (during
# load)', judge_perf '1 GPU(s) crashed', 'err 0.4', judge_software 'no nvidia_uvm').
_PHRASES_ZH = ((re.compile(r"^(.*\d) (" + "|".join(map(re.escape, _UNITS_ZH)) + r")$"),
                lambda m: f"{m.group(1)} {_UNITS_ZH[m.group(2)]}"),
               (re.compile(r" \(during load\)"), lambda m: "（负载期间）"),
               (re.compile(r"^(\d+) GPU\(s\) crashed$"), lambda m: f"{m.group(1)} 块 GPU 崩溃"),
               (re.compile(r"^err (\S+)$"), lambda m: f"误差 {m.group(1)}"),
               (re.compile(r"^no (\S+)$"), lambda m: f"缺少 {m.group(1)}"))


def fmt_value(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        value = f"{value:,.1f}".rstrip("0").rstrip(".")
    return f"{value} {unit}".strip() if unit else str(value)


def value_words(value: Any, unit: str, lang: Lang) -> str:
    """A check's measured or expected value with its unit, in the user's language."""
    if lang != "zh":
        return fmt_value(value, unit)
    if isinstance(value, str):
        value = _WORDS_ZH.get(value, value)
        for pattern, words in _PHRASES_ZH:
            value = pattern.sub(words, value)
    return fmt_value(value, _UNITS_ZH.get(unit, unit))
