"""Pieces several exporters share: shell quoting with env references, precision, errors."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from gpuwise.errors import InputError
from gpuwise.export._plan import Plan
from gpuwise.i18n import Text

__all__ = [
    "DS_CONFIG_FILE",
    "TRAIN_SCRIPT",
    "Env",
    "check_training",
    "half_precision",
    "not_for",
    "num",
    "shell_join",
    "uses_deepspeed",
    "uses_fsdp",
    "zero_stage",
]

# Placeholders the user replaces: their training entry point and where the DeepSpeed JSON goes.
TRAIN_SCRIPT = "train.py"
DS_CONFIG_FILE = "ds_config.json"


class Env(str):
    """A command token that refers to shell variables: double-quoted so that they expand."""


def shell_join(tokens: Sequence[str]) -> str:
    """One command line: literal tokens quoted with shlex, `Env` tokens inside double quotes."""
    return " ".join(f'"{t}"' if isinstance(t, Env) else shlex.quote(t) for t in tokens)


def num(value: float) -> str:
    """A number as a short command-line value: 0.9, 12, 3.5."""
    return f"{value:g}"


def half_precision(plan: Plan) -> str:
    """'bf16' or 'fp16' for mixed-precision training on the plan's card."""
    if plan.weights == "fp16" or not plan.card_facts.bf16:
        return "fp16"
    cc = plan.card_facts.compute_capability
    major = str(cc).split(".")[0] if cc else ""
    # bf16 tensor cores start at compute capability 8.0 (Ampere); torch.cuda.is_bf16_supported()
    # checks the same major >= 8 (pytorch torch/cuda/__init__.py). AMD CDNA3 ("gfx942") has bf16.
    if major.isdigit() and int(major) < 8:
        return "fp16"
    return "bf16"


def vendor(plan: Plan) -> str:
    """The card's maker, as the plan recorded it."""
    return plan.card_facts.vendor


def not_for(target: str, plan: Plan, en: str, zh: str) -> InputError:
    """The standard 'this target does not apply to this plan' error."""
    return InputError(Text(f"Cannot export '{target}' for this plan: {en}",
                           f"无法为此计划导出“{target}”：{zh}"))


def zero_stage(plan: Plan) -> int:
    """The plan's ZeRO stage; an FSDP plan without one is full sharding, i.e. stage 3."""
    return plan.zero or (3 if plan.fsdp else 0)


def uses_fsdp(plan: Plan) -> bool:
    """FSDP when the plan allows it (its memory equals ZeRO-3's); NVMe offload needs DeepSpeed
    (ZeRO-Infinity), since FSDP offloads to CPU memory only."""
    return plan.fsdp and plan.offload != "nvme"


def uses_deepspeed(plan: Plan) -> bool:
    """DeepSpeed runs the sharding whenever there is a ZeRO stage and FSDP does not take it."""
    return zero_stage(plan) > 0 and not uses_fsdp(plan)


def check_training(plan: Plan, target: str) -> None:
    """The training targets need a training plan whose offload has a ZeRO stage to live in."""
    if not plan.training:
        raise not_for(target, plan, "it is an inference plan; DeepSpeed, accelerate and torchrun "
                      "configure training. Use vllm (or a scheduler target).",
                      "这是推理计划；DeepSpeed、accelerate 和 torchrun 用于训练，"
                      "请导出 vllm（或调度器目标）。")
    if plan.offload != "none" and zero_stage(plan) == 0:
        raise not_for(target, plan, "offload needs ZeRO stage 1 or higher; re-plan with --zero 2.",
                      "卸载需要 ZeRO stage 1 以上；请用 --zero 2 重新规划。")
