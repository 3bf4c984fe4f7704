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
from gpuwise.export._common import serve_image, stack_note, train_image
from gpuwise.export._launch import (
    check_scheduler,
    disk_gb,
    launch_line,
    multinode_env,
    runs_in_image,
    setup_lines,
)
from gpuwise.export._plan import Plan
from gpuwise.export.vllm import SERVE_PORT
from gpuwise.export.vllm import notes as serve_notes

__all__ = ["CODE_DIR", "config", "emit", "gpu_spec"]

PYTHON = "3.11"  # the Python of dstack's default image that the commands run under
CODE_DIR = "/workspace/code"  # where `files:` puts the plan's workdir in the container


def _gpus(plan: Plan) -> int:
    """GPUs per machine: a serving replica's (dstack runs each replica apart), a node's."""
    return plan.gpus_per_node if plan.training else plan.gpus_per_replica


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
    parts.append(str(_gpus(plan)))
    return ":".join(p for p in parts if p)


def _commands(plan: Plan) -> list[str]:
    code = CODE_DIR if plan.training and plan.workdir else None
    lines = setup_lines(plan, in_image=runs_in_image(plan), code_dir=code)
    launch = launch_line(plan, one_engine=True)  # a service runs one engine per replica
    if plan.nodes > 1 and plan.training:
        # One block, so that the exported variables reach the launch line in the same shell.
        env = multinode_env("$DSTACK_MASTER_NODE_IP", "$DSTACK_NODE_RANK")
        return [*lines, f"{env}\n{launch}\n"]
    return [*lines, launch]


def config(plan: Plan) -> dict[str, Any]:
    check_scheduler(plan, "dstack", replicas_ok=True)
    cfg: dict[str, Any] = {"type": "task" if plan.training else "service", "name": plan.name}
    if plan.nodes > 1 and plan.training:
        cfg["nodes"] = plan.nodes
    if not plan.training and plan.replicas > 1:
        cfg["replicas"] = plan.replicas
    if runs_in_image(plan):  # `image` and `python` are mutually exclusive in dstack
        cfg["image"] = train_image(plan) if plan.training else serve_image(plan)
    else:
        cfg["python"] = PYTHON
    if plan.training and plan.workdir:
        cfg["files"] = [{"local_path": plan.workdir, "path": CODE_DIR}]
        cfg["working_dir"] = CODE_DIR
    cfg.update(env=["HF_TOKEN"], commands=_commands(plan))
    if not plan.training:
        cfg.update(port=SERVE_PORT, model=plan.deploy_model)
    cfg["resources"] = {"gpu": gpu_spec(plan), "disk": f"{disk_gb(plan, _gpus(plan))}GB.."}
    cfg["spot_policy"] = "spot" if plan.spot else "on-demand"
    return cfg


def emit(plan: Plan) -> str:
    comments = [(f"dstack {'task' if plan.training else 'service'} for {plan.model}. "
                "Save as .dstack.yml and run: dstack apply -f .dstack.yml")]
    if not plan.training:
        comments += serve_notes(plan, per_node=False)
    else:
        build = stack_note(plan)
        comments += [build] if build else []
    return _yaml.dump(config(plan), comments)
