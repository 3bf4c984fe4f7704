"""SkyPilot task YAML (`sky launch task.yaml`) for a plan.

Keys: shared/research/ecosystem.md section 2.4: `resources.accelerators` is NAME:COUNT per
node, `num_nodes`, `setup` and `run` scripts; SKYPILOT_NODE_IPS / SKYPILOT_NODE_RANK give
each node its rendezvous address and rank. Tests load the output with SkyPilot's own
`sky.Task.from_yaml_config` when skypilot is installed.
"""

from __future__ import annotations

from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._launch import (
    check_scheduler,
    disk_gb,
    gpu_name,
    launch_line,
    multinode_env,
    setup_lines,
)
from gpuwise.export._plan import Plan
from gpuwise.export.vllm import SERVE_PORT

__all__ = ["config", "emit"]


def _resources(plan: Plan) -> dict[str, Any]:
    res: dict[str, Any] = {"accelerators": f"{gpu_name(plan, 'skypilot')}:{plan.gpus_per_node}"}
    if plan.spot:
        res["use_spot"] = True
    res["disk_size"] = disk_gb(plan)
    if not plan.training:
        res["ports"] = SERVE_PORT
    return res


def _run(plan: Plan) -> str:
    lines = setup_lines(plan, install=False)
    if plan.nodes > 1:
        lines.append(multinode_env('$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
                                   "$SKYPILOT_NODE_RANK"))
    return "\n".join([*lines, launch_line(plan)]) + "\n"


def config(plan: Plan) -> dict[str, Any]:
    check_scheduler(plan, "skypilot")
    cfg: dict[str, Any] = {"name": plan.name, "resources": _resources(plan)}
    if plan.nodes > 1:
        cfg["num_nodes"] = plan.nodes
    cfg["envs"] = {"HF_TOKEN": ""}  # filled from `sky launch --env HF_TOKEN` for gated models
    cfg["setup"] = "\n".join(setup_lines(plan)[:1]) + "\n"
    cfg["run"] = _run(plan)
    return cfg


def emit(plan: Plan) -> str:
    comments = [(f"SkyPilot task for {plan.model} on {plan.nodes} x {plan.gpus_per_node} "
                f"{plan.card_name or plan.card}. Launch: sky launch -c {plan.name} task.yaml")]
    return _yaml.dump(config(plan), comments)
