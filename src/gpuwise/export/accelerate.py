"""`accelerate` config YAML (what `accelerate config` writes) for a training plan.

Keys: shared/research/ecosystem.md section 2.3 and accelerate's ClusterConfig; the nested
deepspeed_config / fsdp_config keys are the names of `accelerate launch` options (tests check
both against the installed accelerate when it is there).
"""

from __future__ import annotations

from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._common import (
    DS_CONFIG_FILE,
    TRAIN_SCRIPT,
    check_training,
    half_precision,
    script_notes,
    shell_join,
    train_script,
    uses_deepspeed,
    uses_fsdp,
    zero_stage,
)
from gpuwise.export._plan import Plan
from gpuwise.export.deepspeed import GRAD_CLIP

__all__ = ["CONFIG_FILE", "config", "distributed_type", "emit"]

CONFIG_FILE = "accelerate.yaml"
MAIN_PORT = 29500  # torch.distributed's customary MASTER_PORT, accelerate's default too


def distributed_type(plan: Plan) -> str:
    if uses_fsdp(plan):
        return "FSDP"
    if uses_deepspeed(plan):
        return "DEEPSPEED"
    return "MULTI_GPU" if plan.gpus_total > 1 else "NO"


def uses_ds_file(plan: Plan) -> bool:
    """NVMe offload goes through the DeepSpeed JSON: accelerate 1.15's launcher does not pass
    an inline `offload_*_nvme_path` on to DeepSpeed (prepare_deepspeed_cmd_env drops it)."""
    return distributed_type(plan) == "DEEPSPEED" and plan.offload == "nvme"


def _deepspeed(plan: Plan) -> dict[str, Any]:
    stage = zero_stage(plan)
    if uses_ds_file(plan):
        # With a config file accelerate refuses the inline keys (and mixed_precision).
        return {"deepspeed_config_file": DS_CONFIG_FILE, "deepspeed_multinode_launcher": "standard",
                "zero3_init_flag": stage == 3}
    ds: dict[str, Any] = {
        "deepspeed_multinode_launcher": "standard",
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": GRAD_CLIP,
        "offload_optimizer_device": plan.offload,
        "offload_param_device": plan.offload if stage == 3 else "none",
        "zero_stage": stage,
    }
    if stage == 3:
        # Build the model sharded from the start; save a consolidated 16-bit checkpoint.
        ds.update(zero3_init_flag=True, zero3_save_16bit_model=True)
    return ds


def _fsdp(plan: Plan) -> dict[str, Any]:
    return {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_offload_params": plan.offload == "cpu",
        # Re-shard after forward = full sharding (ZeRO-3); keeping them = ZeRO-2-like.
        "fsdp_reshard_after_forward": zero_stage(plan) == 3,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_activation_checkpointing": plan.grad_ckpt == "full",
    }


def config(plan: Plan) -> dict[str, Any]:
    """The config as a dict, keys in the order `accelerate config` writes them."""
    check_training(plan, "accelerate")
    kind = distributed_type(plan)
    cfg: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "debug": False,
                           "distributed_type": kind}
    if kind == "DEEPSPEED":
        cfg["deepspeed_config"] = _deepspeed(plan)
    elif kind == "FSDP":
        cfg["fsdp_config"] = _fsdp(plan)
    cfg.update(downcast_bf16=False, enable_cpu_affinity=False, machine_rank=0)
    if plan.nodes > 1:
        cfg["main_process_port"] = MAIN_PORT
    cfg["main_training_function"] = "main"
    if not uses_ds_file(plan):
        cfg["mixed_precision"] = half_precision(plan)
    cfg.update(num_machines=plan.nodes, num_processes=plan.gpus_total, rdzv_backend="static",
               same_network=True, use_cpu=False)
    return cfg


def launch_command(plan: Plan) -> str:
    script = shell_join([train_script(plan)])
    if plan.nodes == 1:
        return f"accelerate launch --config_file {CONFIG_FILE} {script}"
    return (f'accelerate launch --config_file {CONFIG_FILE} --machine_rank "$NODE_RANK" '
            f'--main_process_ip "$MASTER_ADDR" {script}')


def emit(plan: Plan) -> str:
    where = f" from {plan.workdir}" if plan.workdir else ""
    how = "" if plan.script else f" (replace {TRAIN_SCRIPT} with your script, or plan with --script)"
    comments = [f"Save as {CONFIG_FILE}, then run{where}{how}:", f"  {launch_command(plan)}"]
    if plan.nodes > 1:
        comments.append("Run on every node with NODE_RANK (0..N-1) and MASTER_ADDR (node 0) set.")
    if uses_ds_file(plan):
        comments.append(f"{DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    comments.extend(script_notes(plan))
    return _yaml.dump(config(plan), comments)
