"""dstack `.dstack.yml`: a `service` on port 8000 for inference, a `task` for training.

Keys: shared/research/ecosystem.md section 2.4 (`resources.gpu` as NAME:MEMORY:COUNT per node,
`spot_policy`); multi-node tasks read DSTACK_MASTER_NODE_IP and DSTACK_NODE_RANK (dstack's
distributed-task docs). Tests parse the output with dstack's own configuration models when
dstack is installed.
"""

from __future__ import annotations

import re
from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._launch import check_scheduler, disk_gb, launch_line, multinode_env, setup_lines
from gpuwise.export._plan import Plan
from gpuwise.export.vllm import SERVE_PORT

__all__ = ["config", "emit", "gpu_spec"]

PYTHON = "3.11"  # the Python of dstack's default image that the commands run under


def gpu_name(plan: Plan) -> str | None:
    """dstack names the bare model (A100, H100, RTX4090) and gives memory apart; SkyPilot
    folds a memory variant into the name (A100-80GB), so that suffix is dropped."""
    name = plan.info_str("dstack_name") or plan.info_str("skypilot_name")
    return re.sub(r"-\d+GB$", "", name, flags=re.IGNORECASE) if name else None


def gpu_spec(plan: Plan) -> str:
    """NAME:MEMORY:COUNT, or MEMORY:COUNT when the card has no scheduler name."""
    memory = plan.card_facts.memory_gb
    parts = [gpu_name(plan)]
    if isinstance(memory, (int, float)) and memory > 0:
        parts.append(f"{memory:g}GB")
    parts.append(str(plan.gpus_per_node))
    return ":".join(p for p in parts if p)


def _commands(plan: Plan) -> list[str]:
    lines = setup_lines(plan)
    if plan.nodes > 1:
        # One block, so that the exported variables reach the launch line in the same shell.
        env = multinode_env("$DSTACK_MASTER_NODE_IP", "$DSTACK_NODE_RANK")
        return [*lines, f"{env}\n{launch_line(plan)}\n"]
    return [*lines, launch_line(plan)]


def config(plan: Plan) -> dict[str, Any]:
    check_scheduler(plan, "dstack")
    cfg: dict[str, Any] = {"type": "task" if plan.training else "service", "name": plan.name}
    if plan.nodes > 1:
        cfg["nodes"] = plan.nodes
    cfg.update(python=PYTHON, env=["HF_TOKEN"], commands=_commands(plan))
    if not plan.training:
        cfg.update(port=SERVE_PORT, model=plan.hf_id)
    cfg["resources"] = {"gpu": gpu_spec(plan), "disk": f"{disk_gb(plan)}GB.."}
    cfg["spot_policy"] = "spot" if plan.spot else "on-demand"
    return cfg


def emit(plan: Plan) -> str:
    comments = [(f"dstack {'task' if plan.training else 'service'} for {plan.model}. "
                "Save as .dstack.yml and run: dstack apply -f .dstack.yml")]
    return _yaml.dump(config(plan), comments)
