"""Kubernetes manifests: a vLLM Deployment + Service, or a training Job.

GPU requests follow shared/research/ecosystem.md section 2.4: `resources.limits` with
`nvidia.com/gpu: N`, or `nvidia.com/mig-<profile>: 1` under the device plugin's "mixed" MIG
strategy; a nodeSelector on GPU Feature Discovery's `nvidia.com/gpu.product` label. A
multi-node training run is an Indexed Job with a headless Service, the pattern of the
Kubernetes docs' "Job with Pod-to-Pod Communication": pod NAME-0 is reachable as NAME-0.NAME,
and JOB_COMPLETION_INDEX is each pod's node rank. Tests check the manifests against the
`kubernetes` client's model classes.
"""

from __future__ import annotations

from typing import Any

from gpuwise.errors import unknown_name
from gpuwise.export import _yaml
from gpuwise.export._common import not_for, vendor
from gpuwise.export._launch import (
    check_scheduler,
    launch_line,
    launch_tokens,
    multinode_env,
    setup_lines,
)
from gpuwise.export._plan import Plan
from gpuwise.export.torchrun import RDZV_PORT
from gpuwise.export.vllm import SERVE_PORT
from gpuwise.i18n import Text

__all__ = ["emit", "gpu_limits", "manifests"]

VLLM_IMAGE = "vllm/vllm-openai:latest"  # vLLM's official serving image
TRAIN_IMAGE = "pytorch/pytorch:latest"  # PyTorch's official image; replace with your own
HF_SECRET = {"name": "hf-token", "key": "token", "optional": True}
# Extended resource names of the vendors' device plugins (NVIDIA k8s-device-plugin, ROCm
# k8s-device-plugin); Ascend's plugin names one resource per chip model, so it is not guessed.
_DEVICE_RESOURCE = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def gpu_limits(plan: Plan) -> dict[str, str]:
    """The extended resource to request: whole GPUs or MIG slices. Quantities are strings in
    the Kubernetes API schema (the python client's models reject a bare int)."""
    count = str(plan.gpus_per_node)
    if not plan.mig_profile:
        maker = vendor(plan)
        if maker not in _DEVICE_RESOURCE:
            raise not_for("k8s", plan, f"gpuwise knows no device-plugin resource name for "
                          f"{maker} cards.", f"gpuwise 不知道 {maker} 加速卡的设备插件资源名。")
        return {_DEVICE_RESOURCE[maker]: count}
    profiles = list(plan.card_facts.mig_profiles)
    if isinstance(profiles, list) and profiles and plan.mig_profile not in profiles:
        raise unknown_name(Text("MIG profile", "MIG 配置"), plan.mig_profile,
                           [str(p) for p in profiles], f"gpuwise cards {plan.card}")
    return {f"nvidia.com/mig-{plan.mig_profile}": count}


def _pod_spec(plan: Plan, container: dict[str, Any]) -> dict[str, Any]:
    container["resources"] = {"limits": gpu_limits(plan)}
    # Shared memory for NCCL and the data loaders: the container default of 64 MiB is too small.
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    spec: dict[str, Any] = {}
    product = plan.info_str("k8s_product")
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    spec["containers"] = [container]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    return spec


def _token_env() -> list[dict[str, Any]]:
    return [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": dict(HF_SECRET)}}]


def _serving(plan: Plan) -> list[dict[str, Any]]:
    name, labels = plan.name, {"app": plan.name}
    tokens = launch_tokens(plan)
    container = {"name": "vllm", "image": plan.image or VLLM_IMAGE, "command": tokens[:2],
                 "args": tokens[2:], "env": _token_env(),
                 "ports": [{"name": "http", "containerPort": SERVE_PORT}],
                 "readinessProbe": {"httpGet": {"path": "/health", "port": SERVE_PORT},
                                    "initialDelaySeconds": 60, "periodSeconds": 10}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "labels": labels},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels},
                                        "spec": _pod_spec(plan, container)}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": labels,
                        "ports": [{"name": "http", "port": SERVE_PORT, "targetPort": SERVE_PORT}]}}
    return [deployment, service]


def _script(plan: Plan) -> str:
    lines = setup_lines(plan)
    if plan.nodes > 1:
        lines.append(multinode_env(f"{plan.name}-0.{plan.name}", "$JOB_COMPLETION_INDEX"))
    return "\n".join(["set -e", *lines, launch_line(plan)]) + "\n"


def _training(plan: Plan) -> list[dict[str, Any]]:
    name = plan.name
    container = {"name": "train", "image": plan.image or TRAIN_IMAGE,
                 "command": ["bash", "-c", _script(plan)], "env": _token_env()}
    pod = _pod_spec(plan, container)
    pod["restartPolicy"] = "Never"
    spec: dict[str, Any] = {"backoffLimit": 0}
    if plan.nodes > 1:
        pod["subdomain"] = name
        spec.update(completionMode="Indexed", completions=plan.nodes, parallelism=plan.nodes)
    spec["template"] = {"spec": pod}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
    if plan.nodes == 1:
        return [job]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"job-name": name},
                        "ports": [{"name": "rdzv", "port": RDZV_PORT}]}}
    return [service, job]


def manifests(plan: Plan) -> list[dict[str, Any]]:
    check_scheduler(plan, "k8s", mig_ok=True)
    return _training(plan) if plan.training else _serving(plan)


def emit(plan: Plan) -> str:
    comments = [(f"Kubernetes manifests for {plan.model} ({plan.gpus_per_node} GPU per pod"
                f"{', ' + str(plan.nodes) + ' pods' if plan.nodes > 1 else ''}). "
                "Apply: kubectl apply -f gpuwise.yaml"),
                "Gated models: kubectl create secret generic hf-token --from-literal=token=hf_..."]
    return _yaml.dump_all(manifests(plan), comments)
