"""A placement in words and settings: per-GPU memory, transfers, throughput, and what to set.

Settings are text for the user to apply: transformers `device_map={"": N}` / `.to("cuda:N")`,
one `vllm serve` per stage pinned with CUDA_VISIBLE_DEVICES and given its share of the GPU
(`--gpu-memory-utilization` is a fraction of the whole GPU per instance, so instances that
share a GPU must add up to at most the budget), and the ComfyUI-MultiGPU loader per component.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from gpuwise.fleet.place import Placement
from gpuwise.fleet.place_stage import StageCost
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["notes", "placement_dict", "settings"]

_BASE_PORT = 8000  # vLLM's default --port


def _shares(p: Placement, gpu: int) -> dict[str, float]:
    """--gpu-memory-utilization per vLLM stage on a GPU: its need plus an even part of the spare budget."""
    total = p.card.memory_cuda_gib * GiB
    served = [c for c in p.on(gpu) if c.kind.estimate != "declared"]
    if not served:
        return {}
    budget = p.budget_bytes / total
    need = {c.spec.name: c.memory_bytes / total for c in served}
    others = sum(c.memory_bytes for c in p.on(gpu) if c.kind.estimate == "declared") / total
    spare = max(budget - others - sum(need.values()), 0.0) / len(served)
    return {n: max(math.floor((v + spare) * 100) / 100, math.ceil(v * 100) / 100) for n, v in need.items()}


def _python_line(c: StageCost, gpu: int) -> str:
    var, ckpt = c.spec.name.replace("-", "_"), c.hf_id or c.spec.name
    if c.kind.estimate == "generate":
        return f'{var} = AutoModelForCausalLM.from_pretrained({ckpt!r}, torch_dtype="auto", device_map={{"": {gpu}}})'
    if c.kind.estimate == "encode":
        return f'{var} = AutoModel.from_pretrained({ckpt!r}, torch_dtype="auto").to("cuda:{gpu}")'
    return f'{var}.to("cuda:{gpu}")  # {c.kind.id}'


def settings(p: Placement) -> dict[str, Any]:
    python, vllm, comfy = [], [], []
    port = _BASE_PORT
    for gpu in range(p.gpus):
        shares = _shares(p, gpu)
        for c in p.on(gpu):
            python.append(_python_line(c, gpu))
            if c.kind.comfyui_node:
                comfy.append({"stage": c.spec.name, "node": c.kind.comfyui_node, "device": f"cuda:{gpu}"})
            if c.spec.name in shares:
                args = ["vllm", "serve", c.hf_id or c.spec.name, "--port", str(port),
                        "--gpu-memory-utilization", f"{shares[c.spec.name]:.2f}", "--max-model-len",
                        str(c.spec.tokens), "--max-num-seqs", str(c.spec.batch), *c.kind.vllm_flags]
                vllm.append(f"CUDA_VISIBLE_DEVICES={gpu} " + shlex.join(args))
                port += 1
    return {"python": python, "vllm": vllm, "comfyui_multigpu": comfy}


def placement_dict(p: Placement) -> dict[str, Any]:
    where, seconds = p.bottleneck
    slow = p.slowest_stage
    return {
        "schema_version": 1, "kind": "gpuwise.place", "card": p.card.id, "gpus": p.gpus,
        "budget_gib_per_gpu": round(p.budget_bytes / GiB, 2),
        "stages": [{"name": c.spec.name, "kind": c.kind.id, "model": c.spec.model,
                    "gpus": list(p.gpu_of[c.spec.name]),
                    "memory_gib": round(c.memory_bytes / GiB, 2), "calls_per_s_alone": round(c.calls_per_s, 3),
                    "seconds_per_call": round(c.seconds_per_call, 6),
                    "calls_per_request": c.spec.calls_per_request, "source": c.source} for c in p.costs],
        "per_gpu": [{"gpu": g, "stages": [c.spec.name for c in p.on(g)], "memory_gib": round(p.memory(g) / GiB, 2),
                     "busy_seconds_per_request": round(p.busy_seconds(g), 6)} for g in range(p.gpus)],
        "transfers": [{"from": t.src, "to": t.dst, "from_gpus": list(t.src_gpus), "to_gpus": list(t.dst_gpus),
                       "bytes_per_request": round(t.bytes_per_request), "seconds_per_request":
                       round(t.seconds_per_request, 9)} for t in p.transfers],
        "link_gbps": round(p.link_bytes_per_s / 1e9, 1),
        "throughput_requests_per_s": round(p.requests_per_s, 3), "bottleneck": where,
        "bottleneck_seconds_per_request": round(seconds, 6),
        "slowest_stage": {"name": slow.spec.name, "replicas": len(p.gpu_of[slow.spec.name]),
                          "requests_per_s": round(1 / p.work(slow), 3)},
        "settings": settings(p),
        "notes": [n.en for n in notes(p)], "notes_zh": [n.zh for n in notes(p)],
    }


def notes(p: Placement) -> list[Text]:
    out = []
    idle = [g for g in range(p.gpus) if not p.on(g)]
    if idle:
        out.append(Text(f"GPU {', '.join(map(str, idle))} holds nothing: no placement there makes the pipeline "
                        "faster (it is free for another job).",
                        f"GPU {', '.join(map(str, idle))} 上没有放置任何阶段：放在那里不会更快（可留给其他任务）。"))
    if any(c.kind.comfyui_node for c in p.costs):
        out.append(Text("ComfyUI runs a workflow's components one after another: spreading them over GPUs saves "
                        "loading and frees memory for larger latents, it does not add speed; a second ComfyUI "
                        "instance does.",
                        "ComfyUI 按顺序执行工作流中的组件：分到多卡可免去反复加载并腾出显存给更大的 latent，"
                        "但不会更快；要提速需再开一个 ComfyUI 实例。"))
    return out
