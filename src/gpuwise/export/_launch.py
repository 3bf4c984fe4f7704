"""What the scheduler targets (SkyPilot, dstack, Kubernetes, Ray) run: setup and launch lines."""

from __future__ import annotations

import json
import shlex

from gpuwise.export import deepspeed, torchrun, vllm
from gpuwise.export._common import DS_CONFIG_FILE, not_for, shell_join, uses_deepspeed
from gpuwise.export._plan import Plan

__all__ = ["check_scheduler", "gpu_name", "launch_line", "launch_tokens", "setup_lines"]


def check_scheduler(plan: Plan, target: str, *, mig_ok: bool = False) -> None:
    """Refuse what a scheduler export cannot express: MIG slices, multi-node vLLM."""
    if plan.mig_profile and not mig_ok:
        raise not_for(target, plan, f"it runs on a MIG slice ({plan.mig_profile}); only the k8s "
                      "target requests MIG devices.",
                      f"它运行在 MIG 切片（{plan.mig_profile}）上；只有 k8s 目标能申请 MIG 设备。")
    if not plan.training and plan.nodes > 1:
        raise not_for(target, plan, f"vLLM across {plan.nodes} nodes runs on a Ray cluster of its "
                      "own (`ray start` on each node, the vllm line on the head); gpuwise exports "
                      "single-node serving only.",
                      f"跨 {plan.nodes} 个节点的 vLLM 需要自建 Ray 集群（每个节点 `ray start`，"
                      "在头节点运行 vllm 命令）；gpuwise 只导出单节点推理服务。")


def launch_tokens(plan: Plan) -> list[str]:
    """`vllm serve ...` for inference, `torchrun ...` for training."""
    return torchrun.launch_tokens(plan) if plan.training else vllm.serve_tokens(plan)


def launch_line(plan: Plan) -> str:
    return shell_join(launch_tokens(plan))


def _packages(plan: Plan) -> list[str]:
    if not plan.training:
        return ["vllm"]
    pkgs = ["torch", "transformers", "accelerate"]
    if uses_deepspeed(plan):
        pkgs.append("deepspeed")
    if plan.task in ("lora", "qlora"):
        pkgs.append("peft")
    if plan.task == "qlora" or plan.weights == "nf4":
        pkgs.append("bitsandbytes")
    return pkgs


def setup_lines(plan: Plan, *, install: bool = True) -> list[str]:
    """Shell lines before the launch: installs, and the DeepSpeed config written in place."""
    lines = [f"pip install {' '.join(_packages(plan))}"] if install else []
    if plan.training and uses_deepspeed(plan):
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


def disk_gb(plan: Plan) -> int:
    """Disk to ask for, in GB: a checkpoint that fits the node's GPUs (plus vLLM's CPU offload)
    is at most their memory; x2 leaves room for the download cache and a saved or converted
    copy; at least 100 GB for the image, packages and logs. Rounded up to 50 GB."""
    memory = plan.card_facts.memory_gb
    per_gpu = float(memory) if isinstance(memory, (int, float)) and memory > 0 else 80.0
    total = (per_gpu + plan.cpu_offload_gb) * plan.gpus_per_node * 2
    return max(100, -(-int(total) // 50) * 50)


def multinode_env(master: str, rank: str) -> str:
    """The line that sets MASTER_ADDR and NODE_RANK, which the torchrun line reads."""
    return f"export MASTER_ADDR={master} NODE_RANK={rank}"
