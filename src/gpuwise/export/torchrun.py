"""`torchrun` launch line for a training plan.

Flags: shared/research/ecosystem.md section 2.3; each one appears in the recorded
`torchrun --help` under tests/fixtures/help/, and tests parse the line with torch's own
argument parser (torch.distributed.run.get_args_parser).
"""

from __future__ import annotations

from gpuwise.export._common import (
    DS_CONFIG_FILE,
    TRAIN_SCRIPT,
    Env,
    check_training,
    script_notes,
    shell_join,
    train_script,
    uses_deepspeed,
    uses_fsdp,
    zero_stage,
)
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["RDZV_PORT", "emit", "launch_tokens"]

# The c10d rendezvous port of the torchrun docs' multi-node example.
RDZV_PORT = 29400


def script_args(plan: Plan) -> list[str]:
    """The training script and its sharding arguments, in the Hugging Face Trainer's
    vocabulary (`--deepspeed FILE`, `--fsdp "full_shard auto_wrap"`)."""
    script = train_script(plan)
    if uses_deepspeed(plan):
        return [script, "--deepspeed", DS_CONFIG_FILE]
    if uses_fsdp(plan):
        shard = "full_shard" if zero_stage(plan) == 3 else "shard_grad_op"
        offload = " offload" if plan.offload == "cpu" else ""
        return [script, "--fsdp", f"{shard}{offload} auto_wrap"]
    return [script]


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
    notes = [] if plan.script else [
        f"# {TRAIN_SCRIPT} is a placeholder: replace it, or plan with --script (and --workdir)."]
    if plan.workdir:
        notes.append(f"# Run from {comment_line(plan.workdir)}")
    if plan.nodes > 1:
        notes.append("# Run on every node with NODE_RANK (0..N-1) and MASTER_ADDR (node 0) set.")
    if uses_deepspeed(plan):
        notes.append(f"# {DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    notes.extend(f"# {comment_line(note)}" for note in script_notes(plan))
    return "\n".join([*notes, shell_join(launch_tokens(plan))]) + "\n"
