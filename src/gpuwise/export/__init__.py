"""Export a chosen plan as ready-to-use settings in each tool's own vocabulary.

`emit(plan, target)` takes the planner's frozen `Plan` and returns text: the training
framework's own form (target `framework`: `tune run`, `swift sft`, a LLaMA-Factory YAML, a
torchtitan TOML, an Unsloth script, a Megatron line; export/framework.py), a
`vllm serve` line, a `python -m sglang.launch_server` line, a `trtllm-serve` line with its YAML,
a DeepSpeed JSON, an accelerate YAML, a `torchrun` line, a SkyPilot task
or SkyServe service, a dstack configuration, Kubernetes manifests, a Ray driver script, or a
`docker run` line. Presentation only: the
sizes come from the plan, never recomputed here. Flags, keys and emitted configs stay English;
error messages are bilingual.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuwise.errors import unknown_name
from gpuwise.export import (
    accelerate,
    deepspeed,
    docker,
    dstack,
    framework,
    k8s,
    ray,
    sglang,
    skypilot,
    torchrun,
    trtllm,
    vllm,
)
from gpuwise.export._plan import Plan, parse_plan
from gpuwise.i18n import Text

__all__ = ["INFERENCE_TARGETS", "TARGETS", "TRAINING_TARGETS", "emit", "target_key", "targets_for"]

# The tools; `framework` (the plan's own training framework's form) is listed first for
# training plans and accepted everywhere a target is.
TARGETS = ("vllm", "deepspeed", "accelerate", "torchrun", "skypilot", "dstack", "k8s", "ray",
           "docker", "sglang", "trtllm")
INFERENCE_TARGETS = ("vllm", "skypilot", "dstack", "k8s", "ray", "docker", "sglang", "trtllm")
TRAINING_TARGETS = ("framework", "deepspeed", "accelerate", "torchrun", "skypilot", "dstack", "k8s",
                    "ray")
# Other spellings users type for a target.
_ALIASES = {"sky": "skypilot", "kubernetes": "k8s", "kube": "k8s", "ds": "deepspeed",
            "dstack.yml": "dstack", "tensorrt-llm": "trtllm", "trtllm-serve": "trtllm"}

_EMITTERS: dict[str, Callable[[Plan], str]] = {
    "vllm": vllm.emit, "deepspeed": deepspeed.emit, "accelerate": accelerate.emit,
    "torchrun": torchrun.emit, "skypilot": skypilot.emit, "dstack": dstack.emit,
    "k8s": k8s.emit, "ray": ray.emit, "docker": docker.emit, "framework": framework.emit,
    "sglang": sglang.emit, "trtllm": trtllm.emit,
}


def targets_for(plan: Plan | Mapping[str, Any]) -> tuple[str, ...]:
    """The targets that apply to a plan (by its task)."""
    return TRAINING_TARGETS if _typed(plan).training else INFERENCE_TARGETS


def target_key(target: str) -> str:
    """The canonical target name; UnknownNameError with close matches otherwise."""
    key = _ALIASES.get(target.strip().lower(), target.strip().lower())
    if key not in _EMITTERS:
        raise unknown_name(Text("export target", "导出目标"), target, (*TARGETS, "framework"),
                           "gpuwise plan --help")
    return key


def emit(plan: Plan | Mapping[str, Any], target: str) -> str:
    """The plan as `target`'s config text; UnknownNameError or InputError when it cannot be.
    A mapping is a plan file's JSON, checked by `parse_plan` first."""
    return _EMITTERS[target_key(target)](_typed(plan))


def _typed(plan: Plan | Mapping[str, Any]) -> Plan:
    return plan if isinstance(plan, Plan) else parse_plan(plan)
