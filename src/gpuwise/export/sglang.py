"""`python -m sglang.launch_server` command line for an inference plan.

Every flag used here appears in the recorded SGLang 0.5.23 flag list
(tests/fixtures/engines/sglang-0.5.23.launch-server.flags.txt). mem_fraction_static is left to
SGLang: gpuwise sized the plan with SGLang's own default (data/engines.toml, rule sglang-0.5).
"""

from __future__ import annotations

import math

from gpuwise.export._common import check_serving, online_quantization, serving_notes, shell_join
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["emit", "launch_tokens"]

SERVE_PORT = 30000  # SGLang's default --port (fields/serving.py)
# --kv-cache-dtype: gpuwise's fp8 is e4m3 (SGLang's choices: auto, fp8_e5m2, fp8_e4m3, bf16, ...)
_KV = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def launch_tokens(plan: Plan, *, one_engine: bool = False) -> list[str]:
    """The command as a list of arguments. A node's replicas run as SGLang data parallel
    (--dp-size) unless a scheduler runs each apart (`one_engine`)."""
    check_serving("sglang", "SGLang", plan, tuple(_KV))
    t = ["python", "-m", "sglang.launch_server", "--model-path", plan.deploy_model, "--tp-size", str(plan.tp)]
    if plan.pp > 1:
        t += ["--pp-size", str(plan.pp)]
    if plan.replicas_per_node > 1 and not one_engine:
        t += ["--dp-size", str(plan.replicas_per_node)]
    if plan.context:
        t += ["--context-length", str(plan.context)]
    if plan.kv_dtype in _KV:
        t += ["--kv-cache-dtype", _KV[plan.kv_dtype]]
    if plan.cpu_offload_gb > 0:  # whole GB per GPU (SGLang's cpu_offload_gb is an int), rounded up
        t += ["--cpu-offload-gb", str(math.ceil(plan.cpu_offload_gb))]
    quant = online_quantization("sglang", "SGLang", plan)
    if quant:
        t += ["--quantization", quant]
    if plan.concurrency:  # per engine replica
        t += ["--max-running-requests", str(-(-plan.concurrency // plan.replicas))]
    if plan.max_num_batched_tokens:
        t += ["--chunked-prefill-size", str(plan.max_num_batched_tokens)]
    return [*t, "--host", "0.0.0.0", "--port", str(SERVE_PORT)]


def notes(plan: Plan) -> list[str]:
    out = serving_notes(plan, "The plan was sized with vLLM's memory rules; SGLang sizes its KV pool from "
                        "mem_fraction_static (gpuwise estimate --engine sglang gives its figures).")
    if plan.nodes > 1:
        out.append(f"Run this line on each of the {plan.nodes} nodes and put a load balancer in front of "
                   f"port {SERVE_PORT}.")
    return out


def emit(plan: Plan) -> str:
    lines = [f"# {comment_line(n)}" for n in notes(plan)]
    return "\n".join([*lines, shell_join(launch_tokens(plan))]) + "\n"
