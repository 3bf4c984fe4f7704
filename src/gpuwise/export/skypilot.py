"""SkyPilot task YAML (`sky launch task.yaml`) for a plan.

Keys: shared/research/ecosystem.md section 2.4: `resources.accelerators` is NAME:COUNT per
node, `num_nodes`, `setup` and `run` scripts; SKYPILOT_NODE_IPS / SKYPILOT_NODE_RANK give
each node its rendezvous address and rank. Tests load the output with SkyPilot's own
`sky.Task.from_yaml_config` when skypilot is installed.
"""

from __future__ import annotations

from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._common import serve_image, stack_note, train_image
from gpuwise.export._launch import (
    check_scheduler,
    disk_gb,
    gpu_name,
    install_line,
    launch_line,
    multinode_env,
    runs_in_image,
    setup_lines,
)
from gpuwise.export._plan import Plan
from gpuwise.export.vllm import SERVE_PORT
from gpuwise.export.vllm import notes as serve_notes

__all__ = ["SKY_WORKDIR", "config", "emit"]

# Where SkyPilot syncs `workdir` on every node; setup and run start there.
SKY_WORKDIR = "~/sky_workdir"


def _service(plan: Plan) -> bool:
    """Several serving replicas: a SkyServe service, each replica its own cluster."""
    return not plan.training and plan.replicas > 1


def _gpus(plan: Plan) -> int:
    return plan.gpus_per_replica if _service(plan) else plan.gpus_per_node


def _resources(plan: Plan) -> dict[str, Any]:
    res: dict[str, Any] = {"accelerators": f"{gpu_name(plan, 'skypilot')}:{_gpus(plan)}"}
    if plan.spot:
        res["use_spot"] = True
    res["disk_size"] = disk_gb(plan, _gpus(plan))
    if runs_in_image(plan):  # SkyPilot runs setup and run inside this container
        res["image_id"] = "docker:" + (train_image(plan) if plan.training else serve_image(plan))
    if not plan.training:
        res["ports"] = SERVE_PORT
    return res


def _run(plan: Plan) -> str:
    lines = setup_lines(plan, install=False, code_dir=SKY_WORKDIR)
    if plan.nodes > 1 and plan.training:
        lines.append(multinode_env('$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
                                   "$SKYPILOT_NODE_RANK"))
    return "\n".join([*lines, launch_line(plan, one_engine=_service(plan))]) + "\n"


def config(plan: Plan) -> dict[str, Any]:
    check_scheduler(plan, "skypilot", replicas_ok=True)
    cfg: dict[str, Any] = {"name": plan.name}
    if plan.training and plan.workdir:
        cfg["workdir"] = plan.workdir  # synced to ~/sky_workdir on each node
    cfg["resources"] = _resources(plan)
    if plan.nodes > 1 and plan.training:
        cfg["num_nodes"] = plan.nodes
    if _service(plan):
        # SkyServe: a GET on the path answers 200 once a replica is up (vLLM's /health).
        cfg["service"] = {"readiness_probe": "/health", "replicas": plan.replicas}
    cfg["envs"] = {"HF_TOKEN": ""}  # filled from `sky launch --env HF_TOKEN` for gated models
    install = install_line(plan, in_image=runs_in_image(plan))
    if install:
        cfg["setup"] = install + "\n"
    cfg["run"] = _run(plan)
    return cfg


def emit(plan: Plan) -> str:
    cfg = config(plan)
    if _service(plan):
        head = (f"SkyServe service for {plan.model}: {plan.replicas} replicas x {_gpus(plan)} "
                f"{plan.card_name or plan.card}. Launch: sky serve up -n {plan.name} service.yaml")
    else:
        head = (f"SkyPilot task for {plan.model} on {plan.nodes} x {plan.gpus_per_node} "
                f"{plan.card_name or plan.card}. Launch: sky launch -c {plan.name} task.yaml")
    comments = [head]
    if not plan.training:
        comments += serve_notes(plan, per_node=False)
    else:
        build = stack_note(plan)
        comments += [build] if build else []
        if not plan.script:
            comments.append("train.py is a placeholder: plan with --script and --workdir.")
    return _yaml.dump(cfg, comments)
