"""`trtllm-serve` command line and its --config YAML for an inference plan.

Every flag appears in tests/fixtures/engines/trtllm-serve-00209af.flags.txt and every YAML key in
trtllm-llm-api-options.keys.txt (TensorRT-LLM's LlmArgs, which forbid unknown keys). The KV pool
is kv_cache_config.free_gpu_memory_fraction of the memory left free after the weights and the
profiling forward (data/engines.toml, rule trtllm-0.5); gpuwise keeps TensorRT-LLM's 0.9.
"""

from __future__ import annotations

from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._common import check_serving, not_for, online_quantization, serving_notes, shell_join
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["CONFIG_FILE", "emit", "launch_tokens", "llm_api_options"]

CONFIG_FILE = "extra-llm-api-config.yml"
SERVE_PORT = 8000  # trtllm-serve --port default
FREE_FRACTION = 0.9  # KvCacheConfig.free_gpu_memory_fraction default
_KV = {"fp8": "fp8", "fp8_e4m3": "fp8"}


def _check(plan: Plan) -> None:
    check_serving("trtllm", "TensorRT-LLM", plan, tuple(_KV))
    online_quantization("trtllm", "TensorRT-LLM", plan)  # refuses a checkpoint not in the plan's format
    if plan.cpu_offload_gb > 0:
        raise not_for("trtllm", plan, f"it keeps {plan.cpu_offload_gb:g} GiB of weights per GPU in CPU RAM; "
                      "TensorRT-LLM has no weight offload. Re-plan with more GPUs, lower-bit weights, or "
                      "--engine vllm.",
                      f"它把每卡 {plan.cpu_offload_gb:g} GiB 权重放在内存中；TensorRT-LLM 不支持权重卸载。"
                      "请增加 GPU、降低权重位数，或用 --engine vllm 重新规划。")


def _per_engine(plan: Plan) -> int | None:
    return -(-plan.concurrency // plan.replicas) if plan.concurrency else None


def llm_api_options(plan: Plan) -> dict[str, Any]:
    """The --config YAML: the KV cache and CUDA-graph settings (keys of LlmArgs)."""
    kv: dict[str, Any] = {"free_gpu_memory_fraction": FREE_FRACTION, "enable_block_reuse": True}
    if plan.kv_dtype in _KV:
        kv["dtype"] = _KV[plan.kv_dtype]
    out: dict[str, Any] = {"kv_cache_config": kv}
    seqs = _per_engine(plan)
    if seqs:  # decode CUDA graphs up to the batch the plan serves, padded to a captured size
        out["cuda_graph_config"] = {"enable_padding": True, "max_batch_size": seqs}
    return out


def launch_tokens(plan: Plan) -> list[str]:
    _check(plan)
    t = ["trtllm-serve", plan.deploy_model, "--backend", "pytorch", "--tp_size", str(plan.tp)]
    if plan.pp > 1:
        t += ["--pp_size", str(plan.pp)]
    if plan.context:
        t += ["--max_seq_len", str(plan.context)]
    seqs = _per_engine(plan)
    if seqs:
        t += ["--max_batch_size", str(seqs)]
    if plan.max_num_batched_tokens:
        t += ["--max_num_tokens", str(plan.max_num_batched_tokens)]
    return [*t, "--kv_cache_free_gpu_memory_fraction", str(FREE_FRACTION), "--host", "0.0.0.0",
            "--port", str(SERVE_PORT), "--config", CONFIG_FILE]


def notes(plan: Plan) -> list[str]:
    out = serving_notes(plan, "The plan was sized with vLLM's memory rules; TensorRT-LLM gives its KV cache 0.9 "
                        "of the memory left free (gpuwise estimate --engine trtllm gives its figures).")
    if plan.replicas_per_node > 1:
        out.append(f"Start {plan.replicas_per_node} of these per node, each on its own "
                   f"{plan.tp * plan.pp} GPUs (CUDA_VISIBLE_DEVICES) and port.")
    return out


def emit(plan: Plan) -> str:
    """A shell snippet: the YAML written with a here-document, then the serve line."""
    lines = [f"# {comment_line(n)}" for n in notes(plan)]
    yaml_text = _yaml.dump(llm_api_options(plan))
    return "\n".join([*lines, f"cat > {CONFIG_FILE} <<'EOF'", yaml_text.rstrip("\n"), "EOF",
                      shell_join(launch_tokens(plan))]) + "\n"
