"""Sample plans and helpers for tests/test_export.py: the plan dicts, and readers of the
recorded help texts and key lists in tests/fixtures/help/ (see the README there)."""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpuwise.export import targets_for

HELP = Path(__file__).parent / "fixtures" / "help"

INFER: dict[str, Any] = {
    "card": "h100-sxm", "card_name": "H100 SXM5 80GB", "gpus": 2, "nodes": 1, "weights": "bf16",
    "parallelism": {"engine": "vllm", "tp": 2, "pp": 1, "dp": 1, "zero": 0, "fsdp": False,
                    "offload": "none", "cpu_offload_gb": 0.0},
    "workload": {"task": "infer", "model": "llama-3.1-8b", "hf_id": "meta-llama/Llama-3.1-8B",
                 "context": 16000, "concurrency": 8, "kv_dtype": "auto",
                 "gpu_memory_utilization": 0.9, "max_num_batched_tokens": None},
    "card_info": {"skypilot_name": "H100", "ray_accelerator_type": "H100",
                  "k8s_product": "NVIDIA-H100-80GB-HBM3", "memory_gb": 80,
                  "mig_profiles": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]},
    "mig_profile": None, "cost": {"per_hour": 40.0, "currency": "CNY"},
}
TRAIN: dict[str, Any] = {
    **copy.deepcopy(INFER), "card": "a100-80gb-sxm", "card_name": "A100 SXM4 80GB", "gpus": 8,
    "parallelism": {"engine": None, "tp": 1, "pp": 1, "zero": 2, "fsdp": False,
                    "offload": "cpu", "cpu_offload_gb": 0.0},
    "workload": {"task": "full", "model": "qwen2.5-14b", "hf_id": "Qwen/Qwen2.5-14B",
                 "seq_len": 4096, "micro_batch": 2, "grad_accum": 4, "grad_ckpt": "full",
                 "optimizer": "adamw"},
    "card_info": {"skypilot_name": "A100-80GB", "ray_accelerator_type": "A100-80G",
                  "k8s_product": "NVIDIA-A100-SXM4-80GB", "memory_gb": 80},
}


def make(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a plan with `section__key=value` changes."""
    plan = copy.deepcopy(base)
    for key, value in changes.items():
        *path, last = key.split("__")
        node = plan
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return plan


# One whole GPU (or one MIG slice) serving the same model.
ONE_GPU = make(INFER, gpus=1, parallelism__tp=1)


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not has(module), reason=f"{module} is not installed (see "
                              "tests/fixtures/help/README.md); the recorded-text test covers it")


def recorded_flags(name: str) -> dict[str, set[str] | None]:
    """Flags of a recorded help text (usage block or one-flag-a-line list), with choices."""
    flags: dict[str, set[str] | None] = {}
    for line in (HELP / name).read_text().splitlines():
        if line.startswith("#"):
            continue
        for flag, choices in re.findall(r"(--[\w.-]+)(?: \{([^}]*)\})?", line):
            flags[flag] = set(choices.split(",")) if choices else flags.get(flag)
    return flags


def recorded_sections(name: str) -> dict[str, set[str]]:
    sections: dict[str, set[str]] = {}
    current = ""
    for line in (HELP / name).read_text().splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        elif line and not line.startswith("#"):
            sections.setdefault(current, set()).add(line)
    return sections


PLANS = {
    "infer-2xH100": INFER,
    "infer-fp8-offload-pp": make(INFER, gpus=4, weights="fp8", quantization="fp8", parallelism__pp=2,
                                 parallelism__cpu_offload_gb=6.25, workload__kv_dtype="fp8"),
    "zero2-cpu-offload": TRAIN,
    "zero3-nvme-2-nodes": make(TRAIN, gpus=16, nodes=2, parallelism__zero=3,
                               parallelism__fsdp=True, parallelism__offload="nvme"),
    "fsdp-cpu-offload": make(TRAIN, parallelism__zero=3, parallelism__fsdp=True),
    "ddp-lora": make(TRAIN, parallelism__zero=0, parallelism__offload="none", workload__task="lora"),
    "single-gpu-qlora": make(TRAIN, gpus=1, parallelism__zero=0, parallelism__offload="none",
                             workload__task="qlora", weights="nf4"),
}
PAIRS = [(name, t) for name, p in PLANS.items() for t in targets_for(p)]


def expand(line: str, **env: str) -> list[str]:
    """The arguments bash passes after expanding the line's variables."""
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True,
                         text=True, check=True, env={**os.environ, **env}).stdout
    return out.split("\0")[:-1]
