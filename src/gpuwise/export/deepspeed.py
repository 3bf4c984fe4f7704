"""DeepSpeed JSON config for a training plan.

Keys: shared/research/ecosystem.md section 2.3 and DeepSpeed's config reference
(https://www.deepspeed.ai/docs/config-json/). The file is meant for the usual consumers, the
Hugging Face Trainer (`--deepspeed ds_config.json`) and `accelerate`; both fill in values
written as "auto". Only the optimizer block (written when the optimizer is offloaded) uses
"auto"; plain `deepspeed.initialize` users put a learning rate there.
"""

from __future__ import annotations

import json
from typing import Any

from gpuwise.export._common import check_training, half_precision, zero_stage
from gpuwise.export._plan import Plan

__all__ = ["config", "emit"]

# Where NVMe offload swaps to: the path of DeepSpeed's ZeRO-Infinity examples; the user
# points it at a fast local NVMe mount.
NVME_PATH = "/local_nvme"
# ZeRO-3 knobs at DeepSpeed's documented defaults (deepspeed/runtime/zero/config.py), written
# out so that users see what to tune when memory is tight.
_STAGE3 = {
    "stage3_max_live_parameters": 1_000_000_000,
    "stage3_max_reuse_distance": 1_000_000_000,
    "stage3_prefetch_bucket_size": 50_000_000,
    "stage3_param_persistence_threshold": 100_000,
    "sub_group_size": 1_000_000_000,
    # Save a consolidated 16-bit checkpoint, not only the sharded one (HF Trainer's usual choice).
    "stage3_gather_16bit_weights_on_model_save": True,
}
# Global-norm clipping at 1.0: the Hugging Face Trainer's default max_grad_norm.
GRAD_CLIP = 1.0
# fp16 dynamic loss scaling at DeepSpeed's defaults (loss_scale 0 = dynamic).
_FP16 = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
         "hysteresis": 2, "min_loss_scale": 1}


def _offload(plan: Plan) -> dict[str, Any]:
    block: dict[str, Any] = {"device": plan.offload, "pin_memory": True}
    if plan.offload == "nvme":
        block["nvme_path"] = NVME_PATH
    return block


def _zero(plan: Plan) -> dict[str, Any]:
    stage = zero_stage(plan)
    z: dict[str, Any] = {"stage": stage}
    if stage == 0:
        return z
    # Overlap gradient reduction with backward and keep gradients contiguous: the settings of
    # DeepSpeed's and Hugging Face's ZeRO-2/3 example configs.
    z.update(overlap_comm=True, contiguous_gradients=True)
    if plan.offload != "none":
        z["offload_optimizer"] = _offload(plan)
        if stage == 3:  # parameters can be offloaded at stage 3 only
            z["offload_param"] = _offload(plan)
    if stage == 3:
        z.update(_STAGE3)
    return z


def config(plan: Plan) -> dict[str, Any]:
    """The DeepSpeed config as a dict (what `emit` writes as JSON)."""
    check_training(plan, "deepspeed")
    precision = half_precision(plan)
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": GRAD_CLIP,
        "bf16": {"enabled": precision == "bf16"},
        "fp16": _FP16 if precision == "fp16" else {"enabled": False},
        "zero_optimization": _zero(plan),
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    if plan.offload != "none":
        # DeepSpeed refuses a client torch optimizer with ZeRO-Offload unless told otherwise;
        # naming AdamW here makes it build its fast CPU Adam instead.
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}}
    return cfg


def emit(plan: Plan) -> str:
    return json.dumps(config(plan), indent=2) + "\n"
