"""`vllm serve` command line for an inference plan.

Flags and meanings: shared/research/ecosystem.md section 2.2 (vLLM 0.33); every flag used here
appears in the recorded `vllm serve --help` flag list under tests/fixtures/help/.
"""

from __future__ import annotations

import math
import re

from gpuwise.export._common import not_for, num, online_quantization, shell_join, stack_note
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["emit", "serve_tokens"]

# --kv-cache-dtype values we pass through; "auto" (and bf16/fp16, the model dtype) are vLLM's
# default and need no flag (vLLM docs, --kv-cache-dtype choices auto|fp8|fp8_e4m3|fp8_e5m2).
_KV_FLAGS = ("fp8", "fp8_e4m3", "fp8_e5m2")
_KV_DEFAULT = ("auto", "bf16", "fp16", "bfloat16", "float16")
# Repository names that announce a checkpoint already quantized (vLLM then reads its
# quantization_config and needs no --quantization flag).
_PREQUANT = re.compile(r"(awq|gptq|int4|int8|w4a16|w8a8|w8a16|4bit|8bit|bnb|fp8|nvfp4|mxfp4)",
                       re.IGNORECASE)
SERVE_PORT = 8000  # vLLM's default --port


def _check(plan: Plan) -> None:
    if plan.training:
        raise not_for("vllm", plan, f"it is a training plan (task '{plan.task}'); vLLM serves "
                      "models. Use deepspeed, accelerate or torchrun.",
                      f"这是训练计划（task “{plan.task}”），vLLM 只做推理服务；"
                      "请导出 deepspeed、accelerate 或 torchrun。")
    if plan.engine not in (None, "vllm") or plan.weights.startswith("gguf"):
        engine = plan.engine or plan.weights
        raise not_for("vllm", plan, f"it was sized for the '{engine}' engine, whose memory use "
                      "differs. Re-plan with --engine vllm.",
                      f"它是按“{engine}”引擎估算的，显存占用不同；请用 --engine vllm 重新规划。")
    if plan.tp * plan.pp > plan.gpus_per_node:
        raise not_for("vllm", plan, f"one engine (tensor x pipeline = {plan.tp} x {plan.pp}) "
                      f"spans nodes of {plan.gpus_per_node} GPUs; vLLM across nodes runs on a Ray "
                      "cluster of its own (`ray start` on each node, the vllm line on the head). "
                      "gpuwise exports replicas that each fit on one node.",
                      f"单个引擎（张量 × 流水线 = {plan.tp} × {plan.pp}）跨越每节点 "
                      f"{plan.gpus_per_node} 张卡的节点；跨节点的 vLLM 需要自建 Ray 集群（每个节点 "
                      "`ray start`，在头节点运行 vllm 命令）。gpuwise 只导出每个副本位于单节点的方案。")
    if plan.tp * plan.pp * plan.replicas_per_node > plan.gpus_per_node:
        raise not_for("vllm", plan, f"tensor x pipeline x data parallel = {plan.tp} x {plan.pp} "
                      f"x {plan.replicas_per_node} needs more than the node's {plan.gpus_per_node} GPUs.",
                      f"张量 × 流水线 × 数据并行 = {plan.tp} × {plan.pp} × {plan.replicas_per_node}，"
                      f"超过每节点的 {plan.gpus_per_node} 张卡。")
    if plan.kv_dtype not in _KV_FLAGS + _KV_DEFAULT:
        raise not_for("vllm", plan, f"vLLM has no KV cache type '{plan.kv_dtype}'; use auto or "
                      "fp8.", f"vLLM 没有 KV 缓存类型“{plan.kv_dtype}”；请用 auto 或 fp8。")


def _quantization(plan: Plan) -> str | None:
    """--quantization: the plan's online quantisation of a 16-bit checkpoint ("fp8": dynamic
    per-tensor FP8, vLLM FP8 docs). 4- and 8-bit integer weights need a quantised checkpoint
    (vLLM 0.33 has no in-flight int4 method), which --deploy-model names: without one the export
    is refused (export/_common.online_quantization) rather than deploying 16-bit weights."""
    if plan.quantization and _PREQUANT.search(plan.deploy_model):
        return None
    return online_quantization("vllm", "vLLM", plan)


def serve_tokens(plan: Plan, *, one_engine: bool = False) -> list[str]:
    """The command as a list of arguments (for YAML `args:` lists and shell lines alike).
    One process serves a node's replicas with vLLM's data parallel; `one_engine` is for the
    schedulers that run each replica apart (a Kubernetes pod, a dstack or SkyServe replica)."""
    _check(plan)
    t = ["vllm", "serve", plan.deploy_model, "--tensor-parallel-size", str(plan.tp)]
    if plan.pp > 1:
        t += ["--pipeline-parallel-size", str(plan.pp)]
    if plan.replicas_per_node > 1 and not one_engine:
        # vLLM's data parallel: the node's replicas behind vLLM's own load balancer.
        t += ["--data-parallel-size", str(plan.replicas_per_node)]
    if plan.context:
        t += ["--max-model-len", str(plan.context)]
    t += ["--gpu-memory-utilization", num(plan.gpu_memory_utilization)]
    if plan.kv_dtype in _KV_FLAGS:
        t += ["--kv-cache-dtype", plan.kv_dtype]
    if plan.cpu_offload_gb > 0:
        # GiB per GPU, rounded up to 0.1 so the plan's offload is not undershot.
        t += ["--cpu-offload-gb", num(math.ceil(plan.cpu_offload_gb * 10) / 10)]
    quant = _quantization(plan)
    if quant:
        t += ["--quantization", quant]
    if plan.concurrency:  # per engine replica
        t += ["--max-num-seqs", str(-(-plan.concurrency // plan.replicas))]
    if plan.max_num_batched_tokens:
        t += ["--max-num-batched-tokens", str(plan.max_num_batched_tokens)]
    return t


def notes(plan: Plan, *, per_node: bool = True) -> list[str]:
    """What the command alone cannot carry: the plan's notes, one line each. `per_node`: the
    line runs on each node by hand (False where a scheduler places the replicas)."""
    out = [n.en for n in plan.notes]
    build = stack_note(plan)
    if build:
        out.insert(0, build)
    low_bit = plan.weights in ("int4", "int8", "nf4") and not _PREQUANT.search(plan.deploy_model)
    if low_bit and not any("AWQ/GPTQ" in n for n in out):
        out.insert(0, f"The plan assumes {plan.weights} weights: point the model at an AWQ/GPTQ "
                   f"checkpoint of {plan.model} (--deploy-model); vLLM reads its quantization "
                   "from config.json.")
    if plan.nodes > 1 and per_node:
        out.append(f"Run this line on each of the {plan.nodes} nodes ({plan.replicas} independent "
                   f"replicas in all) and put a load balancer in front of port {SERVE_PORT}.")
    return out


def emit(plan: Plan) -> str:
    lines = [f"# {comment_line(n)}" for n in notes(plan)]
    return "\n".join([*lines, shell_join(serve_tokens(plan))]) + "\n"
