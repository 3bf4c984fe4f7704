"""What the scheduler targets (SkyPilot, dstack, Kubernetes, Ray) run: setup and launch lines."""

from __future__ import annotations

import json
import shlex

from gpuwise.export import deepspeed, framework, torchrun, vllm
from gpuwise.export._common import (
    DS_CONFIG_FILE,
    image_version,
    not_for,
    shell_join,
    stack,
    uses_deepspeed,
)
from gpuwise.export._plan import Plan

__all__ = ["check_scheduler", "gpu_name", "install_line", "launch_line", "launch_tokens",
           "runs_in_image", "setup_lines"]

# The releases whose config keys and flags tests/fixtures/help records: the accelerate and
# DeepSpeed configs gpuwise writes are checked against these, so the installs pin them.
TESTED_VERSIONS = {"accelerate": "1.15.0", "deepspeed": "0.19.8"}


def check_scheduler(plan: Plan, target: str, *, mig_ok: bool = False,
                    replicas_ok: bool = False) -> None:
    """Refuse what a scheduler export cannot express: MIG slices; serving across nodes where the
    target cannot place independent replicas (`replicas_ok`: it can)."""
    if plan.mig_profile and not mig_ok:
        raise not_for(target, plan, f"it runs on a MIG slice ({plan.mig_profile}); only the k8s "
                      "target requests MIG devices.",
                      f"它运行在 MIG 切片（{plan.mig_profile}）上；只有 k8s 目标能申请 MIG 设备。")
    if not plan.training and plan.nodes > 1 and not replicas_ok:
        raise not_for(target, plan, f"it serves {plan.replicas} independent replicas on "
                      f"{plan.nodes} nodes, which this target cannot place behind one endpoint. "
                      "Use k8s, skypilot, dstack or docker (one line per node behind a load "
                      "balancer).",
                      f"它在 {plan.nodes} 个节点上运行 {plan.replicas} 个独立副本，此目标无法把它们"
                      "放在同一个入口之后；请导出 k8s、skypilot、dstack 或 docker"
                      "（每个节点一条命令，前面加负载均衡）。")


def launch_tokens(plan: Plan, *, one_engine: bool = False) -> list[str]:
    """`vllm serve ...` for inference; for training the framework's own launch (`tune run`,
    `swift sft`, `llamafactory-cli train`, ...) or, for the Hugging Face stack and DeepSpeed,
    `torchrun ...`. `one_engine`: the scheduler runs each serving replica apart, so the line
    serves one engine (no data parallel)."""
    if plan.training:
        if not framework.uses_trainer_stack(plan):
            return framework.launch_tokens(plan)
        return torchrun.launch_tokens(plan)
    return vllm.serve_tokens(plan, one_engine=one_engine)


def launch_line(plan: Plan, *, one_engine: bool = False) -> str:
    return shell_join(launch_tokens(plan, one_engine=one_engine))


def runs_in_image(plan: Plan) -> bool:
    """Whether SkyPilot and dstack run the plan in a container image: the user's `--image`, or
    the stack's own image off CUDA (the ROCm and Ascend builds are not the PyPI wheels)."""
    return plan.image is not None or plan.card_facts.software != "cuda"


def _pin(name: str, version: str | None) -> str:
    return f"{name}=={version}" if version else name


def packages(plan: Plan, *, in_image: bool = False) -> list[str]:
    """What pip installs before the launch, pinned to the stack's images: vLLM at the version of
    the stack's vLLM image, torch at the version of its training image (left out when the
    container already carries them)."""
    row = stack(plan)
    if not plan.training:
        return [] if in_image else [_pin("vllm", image_version(row.vllm_image, "vllm"))]
    pkgs = [] if in_image else [_pin("torch", image_version(row.train_image, "pytorch"))]
    if not framework.uses_trainer_stack(plan):
        return pkgs + [_pin(p, TESTED_VERSIONS.get(p)) for p in framework.packages(plan)]
    pkgs += ["transformers", _pin("accelerate", TESTED_VERSIONS["accelerate"])]
    if uses_deepspeed(plan):
        pkgs.append(_pin("deepspeed", TESTED_VERSIONS["deepspeed"]))
    if plan.task in ("lora", "qlora"):
        pkgs.append("peft")
    if plan.task == "qlora" or plan.weights == "nf4":
        pkgs.append("bitsandbytes")
    return pkgs


def install_line(plan: Plan, *, in_image: bool = False) -> str | None:
    """`pip install ...`, or None when the image carries everything."""
    pkgs = packages(plan, in_image=in_image)
    return f"pip install {shell_join(pkgs)}" if pkgs else None


def setup_lines(plan: Plan, *, install: bool = True, in_image: bool = False,
                code_dir: str | None = None) -> list[str]:
    """Shell lines before the launch: installs, a `cd` into the code, and the DeepSpeed config
    written in place (beside the script). `code_dir` is where the target puts the plan's
    workdir (a fixed, shell-safe path); without one the workdir is used as the plan names it
    (Ray: the nodes see the same path)."""
    line = install_line(plan, in_image=in_image) if install else None
    lines = [line] if line else []
    if plan.training and plan.workdir:
        lines.append(f"cd {code_dir or shlex.quote(plan.workdir)}")
    if plan.training and not framework.uses_trainer_stack(plan):
        # The framework's own config (and the DeepSpeed JSON it names), written in place.
        lines += [f"printf '%s' {shlex.quote(text)} > {name}" for name, text in framework.files(plan)]
    elif plan.training and uses_deepspeed(plan):
        text = json.dumps(deepspeed.config(plan), separators=(",", ":"))
        lines.append(f"printf '%s\\n' {shlex.quote(text)} > {DS_CONFIG_FILE}")
    return lines


def gpu_name(plan: Plan, target: str) -> str:
    """The card's name in SkyPilot's (and dstack's) accelerator vocabulary."""
    name = plan.info_str("skypilot_name")
    if not name:
        raise not_for(target, plan, f"the catalog has no SkyPilot accelerator name for "
                      f"'{plan.card}'. Check `sky show-gpus -a` and add `skypilot_name` to the card.",
                      f"目录中“{plan.card}”没有 SkyPilot 加速器名称；请查 `sky show-gpus -a` "
                      "并为该卡补上 `skypilot_name`。")
    return name


def disk_gb(plan: Plan, gpus: int | None = None) -> int:
    """Disk to ask for, in GB: a checkpoint that fits the machine's `gpus` (default: the node's;
    a serving replica's where each replica is its own machine) plus vLLM's CPU offload is at
    most their memory; x2 leaves room for the download cache and a saved or converted copy; at
    least 100 GB for the image, packages and logs. Rounded up to 50 GB."""
    memory = plan.card_facts.memory_gb
    per_gpu = float(memory) if isinstance(memory, (int, float)) and memory > 0 else 80.0
    total = (per_gpu + plan.cpu_offload_gb) * (gpus or plan.gpus_per_node) * 2
    return max(100, -(-int(total) // 50) * 50)


def multinode_env(master: str, rank: str) -> str:
    """The line that sets MASTER_ADDR and NODE_RANK, which the torchrun line reads."""
    return f"export MASTER_ADDR={master} NODE_RANK={rank}"
