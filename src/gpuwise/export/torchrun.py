"""`torchrun` launch line for a training plan.

Flags: shared/research/ecosystem.md section 2.3; each one appears in the recorded
`torchrun --help` under tests/fixtures/help/, and tests parse the line with torch's own
argument parser (torch.distributed.run.get_args_parser).
"""

from __future__ import annotations

from gpuwise.export._common import (DS_CONFIG_FILE, TRAIN_SCRIPT, Env, check_training,
                                    shell_join, zero_stage)
from gpuwise.export._plan import Plan

__all__ = ["launch_tokens", "emit", "RDZV_PORT"]

# The c10d rendezvous port of the torchrun docs' multi-node example.
RDZV_PORT = 29400


def uses_deepspeed(plan: Plan) -> bool:
    """DeepSpeed runs the sharding (a ZeRO stage) unless the plan chose FSDP."""
    return zero_stage(plan) > 0 and not plan.fsdp


def script_args(plan: Plan) -> list[str]:
    """The training script and its arguments; `--deepspeed FILE` is the Hugging Face Trainer's."""
    return [TRAIN_SCRIPT, *(["--deepspeed", DS_CONFIG_FILE] if uses_deepspeed(plan) else [])]


def launch_tokens(plan: Plan) -> list[str]:
    """torchrun with one process per GPU; NODE_RANK and MASTER_ADDR come from the environment."""
    check_training(plan, "torchrun")
    t = ["torchrun", "--nproc-per-node", str(plan.gpus_per_node)]
    if plan.nodes == 1:
        t.append("--standalone")
    else:
        t += ["--nnodes", str(plan.nodes), "--node-rank", Env("$NODE_RANK"),
              "--rdzv-backend", "c10d", "--rdzv-endpoint", Env(f"$MASTER_ADDR:{RDZV_PORT}"),
              "--rdzv-id", "gpuwise"]
    return t + script_args(plan)


def emit(plan: Plan) -> str:
    notes = [f"# Replace {TRAIN_SCRIPT} with your training script."]
    if plan.nodes > 1:
        notes.append("# Run on every node with NODE_RANK (0..N-1) and MASTER_ADDR (node 0) set.")
    if uses_deepspeed(plan):
        notes.append(f"# {DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    return "\n".join([*notes, shell_join(launch_tokens(plan))]) + "\n"
