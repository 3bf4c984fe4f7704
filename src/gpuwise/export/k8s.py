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

import shlex
from typing import Any

from gpuwise.errors import unknown_name
from gpuwise.export import _yaml
from gpuwise.export._common import serve_image, stack, stack_note, train_image
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
from gpuwise.export.vllm import notes as serve_notes
from gpuwise.i18n import Text

__all__ = ["CODE_DIR", "emit", "gpu_limits", "manifests"]

HF_SECRET = {"name": "hf-token", "key": "token", "optional": True}
CODE_DIR = "/workspace/code"  # where the training code's ConfigMap is mounted


def _gpus(plan: Plan) -> int:
    """GPUs per pod: one serving replica (each pod is one engine), or a training node's."""
    return plan.gpus_per_node if plan.training else plan.gpus_per_replica


def gpu_limits(plan: Plan) -> dict[str, str]:
    """The extended resource to request: whole GPUs (the stack's device-plugin resource) or MIG
    slices. Quantities are strings in the Kubernetes API schema (the python client's models
    reject a bare int)."""
    count = str(_gpus(plan))
    if not plan.mig_profile:
        return {stack(plan).device_resource: count}
    profiles = list(plan.card_facts.mig_profiles)
    if isinstance(profiles, list) and profiles and plan.mig_profile not in profiles:
        raise unknown_name(Text("MIG profile", "MIG 配置"), plan.mig_profile,
                           [str(p) for p in profiles], f"gpuwise cards {plan.card}")
    return {f"nvidia.com/mig-{plan.mig_profile}": count}


def _code(plan: Plan) -> bool:
    """The training code travels in a ConfigMap when the plan names a workdir."""
    return plan.training and bool(plan.workdir)


def _pod_spec(plan: Plan, container: dict[str, Any]) -> dict[str, Any]:
    container["resources"] = {"limits": gpu_limits(plan)}
    # Shared memory for NCCL and the data loaders: the container default of 64 MiB is too small.
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    if _code(plan):
        container["volumeMounts"].append({"name": "code", "mountPath": CODE_DIR})
        volumes.append({"name": "code", "configMap": {"name": f"{plan.name}-code"}})
    spec: dict[str, Any] = {}
    product = plan.info_str("k8s_product")
    if product and plan.card_facts.software == "cuda":  # GPU Feature Discovery's label
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    spec["containers"] = [container]
    spec["volumes"] = volumes
    return spec


def _token_env() -> list[dict[str, Any]]:
    return [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": dict(HF_SECRET)}}]


def _serving(plan: Plan) -> list[dict[str, Any]]:
    name, labels = plan.name, {"app": plan.name}
    tokens = launch_tokens(plan, one_engine=True)  # one engine per pod; the Deployment replicates
    container = {"name": "vllm", "image": serve_image(plan), "command": tokens[:2],
                 "args": tokens[2:], "env": _token_env(),
                 "ports": [{"name": "http", "containerPort": SERVE_PORT}],
                 "readinessProbe": {"httpGet": {"path": "/health", "port": SERVE_PORT},
                                    "initialDelaySeconds": 60, "periodSeconds": 10}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "labels": labels},
                  "spec": {"replicas": plan.replicas, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels},
                                        "spec": _pod_spec(plan, container)}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": labels,
                        "ports": [{"name": "http", "port": SERVE_PORT, "targetPort": SERVE_PORT}]}}
    return [deployment, service]


def _script(plan: Plan) -> str:
    lines = setup_lines(plan, in_image=True, code_dir=CODE_DIR if _code(plan) else None)
    if plan.nodes > 1:
        lines.append(multinode_env(f"{plan.name}-0.{plan.name}", "$JOB_COMPLETION_INDEX"))
    return "\n".join(["set -e", *lines, launch_line(plan)]) + "\n"


def _training(plan: Plan) -> list[dict[str, Any]]:
    name = plan.name
    container = {"name": "train", "image": train_image(plan),
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
    check_scheduler(plan, "k8s", mig_ok=True, replicas_ok=True)
    return _training(plan) if plan.training else _serving(plan)


def _code_comments(plan: Plan) -> list[str]:
    if not plan.training:
        return []
    if not plan.workdir:
        return [("The Job runs the script from the image's working directory: bake your code into "
                "the image (--image) or plan with --workdir and --script.")]
    create = (f"kubectl create configmap {plan.name}-code --from-file="
              f"{shlex.quote(plan.workdir)}")
    return [f"The code is mounted at {CODE_DIR} from a ConfigMap; create it first: {create}",
            ("(a ConfigMap holds the folder's top-level files, 1 MiB in all; for more, bake the code "
            "into your image with --image and drop the 'code' volume).")]


def emit(plan: Plan) -> str:
    pods = plan.nodes if plan.training else plan.replicas
    comments = [(f"Kubernetes manifests for {plan.model} ({_gpus(plan)} GPU per pod"
                f"{', ' + str(pods) + ' pods' if pods > 1 else ''}). "
                "Apply: kubectl apply -f gpuwise.yaml"),
                "Gated models: kubectl create secret generic hf-token --from-literal=token=hf_..."]
    if not plan.training:
        comments += serve_notes(plan, per_node=False)
    else:
        build = stack_note(plan)
        comments += [build] if build else []
    comments += _code_comments(plan)
    return _yaml.dump_all(manifests(plan), comments)
