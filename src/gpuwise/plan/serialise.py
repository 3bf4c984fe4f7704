"""A ranked plan as the JSON object `gpuwise plan --json` documents (and the exporters read)."""

from __future__ import annotations

from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.memory_infer import tensor_parallel
from gpuwise.i18n import Text
from gpuwise.plan.search import Candidate
from gpuwise.units import GiB

# Names other tools use for a card (ecosystem.md s.2.4): SkyPilot accelerators, Ray constants.
_SKYPILOT = {"h100-sxm": "H100", "h100-pcie": "H100", "h200-sxm": "H200", "a100-80gb-sxm": "A100-80GB",
             "a100-80gb-pcie": "A100-80GB", "a100-40gb-sxm": "A100", "a100-40gb-pcie": "A100",
             "l40s": "L40S", "l4": "L4", "rtx-4090": "RTX4090", "rtx-6000-ada": "RTX6000-Ada",
             "rtx-a6000": "RTXA6000", "t4": "T4", "a10g": "A10G", "mi300x": "MI300X", "b200": "B200"}
_RAY = {"h100-sxm": "H100", "h100-pcie": "H100", "h200-sxm": "H200", "a100-80gb-sxm": "A100-80G",
        "a100-80gb-pcie": "A100-80G", "a100-40gb-sxm": "A100-40G", "a100-40gb-pcie": "A100-40G",
        "l40s": "L40S", "l4": "L4", "h20": "H20", "t4": "T4", "a10g": "A10G", "b200": "B200"}


def _k8s_product(name: str) -> str:
    """GPU Feature Discovery label: the nvidia-smi product name with spaces as dashes."""
    return name.replace(" ", "-")


def candidate_dict(c: Candidate, model: ModelArch, reason: Text, req: Any) -> dict[str, Any]:
    d, w = c.deployment, c.workload
    smi_names = [a for a in d.card.aliases if a.startswith("NVIDIA ")]
    infer = not w.is_training
    tp = tensor_parallel(model, d) if infer else (d.tp or 1)
    offloaded = c.memory.host.cpu_ram / max(d.gpus, 1) if infer else 0.0
    return {
        "card": d.card.id, "card_name": d.card.name, "gpus": d.gpus * d.nodes, "gpus_per_node": d.gpus,
        "nodes": d.nodes, "weights": w.weights,
        "parallelism": {"engine": d.engine if infer else None, "tp": tp, "pp": d.pp,
                        "dp": 1 if infer else d.gpus * d.nodes // tp, "zero": d.zero, "fsdp": d.zero == 3,
                        "offload": d.offload, "cpu_offload_gb": round(offloaded / GiB, 1)},
        "memory": {**c.memory.breakdown.to_dict(), "usable_bytes": round(c.memory.usable),
                   "fits": c.memory.fits},
        "speed": c.speed.to_dict() if c.speed else None,
        "cost": c.cost.to_dict() if c.cost else None,
        "reasons": [reason.en], "reasons_zh": [reason.zh],
        "workload": {"task": w.task, "model": model.name, "hf_id": _hf_id(req.model, model),
                     "context": w.context, "concurrency": w.concurrency, "kv_dtype": w.kv_dtype,
                     "gpu_memory_utilization": d.gpu_memory_utilization, "max_num_batched_tokens": None,
                     "seq_len": w.seq_len, "micro_batch": w.micro_batch, "grad_accum": 1,
                     "grad_ckpt": w.grad_ckpt, "optimizer": w.optimizer, "lora_rank": w.lora_rank},
        "card_info": {"skypilot_name": _SKYPILOT.get(d.card.id, d.card.id.upper()),
                      "ray_accelerator_type": _RAY.get(d.card.id),
                      "k8s_product": _k8s_product(smi_names[0]) if smi_names else None,
                      "memory_gb": d.card.memory_gb, "mig_profiles": list(d.card.mig_profiles)},
        "mig_profile": None,
    }


def _hf_id(src: str, model: ModelArch) -> str:
    from gpuwise.catalog.presets import find_preset

    preset = find_preset(src)
    return preset.hf_id if preset else src
