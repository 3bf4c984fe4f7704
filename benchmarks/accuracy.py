"""Predicted vs measured, for the golden cases in tests/golden/*.toml (each cited there).

Run: python benchmarks/accuracy.py   (tests/test_golden.py asserts the same cases' tolerances)
"""

from __future__ import annotations

import statistics
import sys
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuwise.service import EstimateRequest, estimate_json

GIB = 2**30
MAX_BATCH = -1  # marker: as many sequences as the KV pool holds, at most 2,048


@dataclass(frozen=True)
class Check:
    case: str  # id in tests/golden/<file>.toml
    file: str
    quantity: str  # key in the case's [measured] table
    request: EstimateRequest
    pick: str  # what to read from the estimate JSON
    tolerance: float  # relative error allowed by tests/test_golden.py
    scale: float = 1.0  # measured value x scale = the unit of `pick`


def _r(**kw: Any) -> EstimateRequest:
    return EstimateRequest(**kw)


# V0-era vLLM logs profile a whole max_model_len prompt (no chunked prefill): the batched tokens
# of those cases are set to max_model_len.
CHECKS = [
    Check("vllm-llama31-8b-rtx3090-mml20000", "memory", "weights_gib",
          _r(model="llama-3.1-8b", card="rtx-3090", context=20000), "memory.weights", 0.02, GIB),
    Check("vllm-llama31-8b-rtx3090-mml20000", "memory", "kv_cache_gib",
          _r(model="llama-3.1-8b", card="rtx-3090", context=20000, max_num_batched_tokens=20000),
          "memory.kv_pool", 0.10, GIB),
    Check("vllm-qwen25-32b-tp2-l40s", "memory", "weights_gib",
          _r(model="qwen2.5-32b", card="l40s", gpus=2, context=10000), "memory.weights", 0.02, GIB),
    Check("vllm-qwen25-32b-tp2-l40s", "memory", "kv_cache_gib",
          _r(model="qwen2.5-32b", card="l40s", gpus=2, context=10000, max_num_batched_tokens=10000),
          "memory.kv_pool", 0.10, GIB),
    Check("vllm-qwen3-30b-a3b-tp4-a10-weights", "memory", "weights_gib",
          _r(model="qwen3-30b-a3b", card="a10", gpus=4, context=1024), "memory.weights", 0.02, GIB),
    Check("vllm-llama32-11b-vision-h100-mml65536", "memory", "weights_gib",
          _r(model="llama-3.2-11b-vision", card="h100-sxm", context=65536), "memory.weights", 0.03, GIB),
    Check("vllm-mistral-7b-h100-10prompts-tpot", "speed", "median_tpot_ms",
          _r(model="mistral-7b-v0.3", card="h100-sxm", context=2000, concurrency=10), "speed.tpot_s", 0.30, 1e-3),
    Check("vllm-mistral-7b-a100-10prompts-tpot", "speed", "median_tpot_ms",
          _r(model="mistral-7b-v0.3", card="a100-80gb-sxm", context=2000, concurrency=10), "speed.tpot_s",
          0.30, 1e-3),
    # TensorRT-LLM offline max throughput (perf-overview tables): fixed ISL/OSL, as many requests
    # in flight as the KV cache holds (capped at 2,048, trtllm-bench's default max batch).
    *[Check(case, "speed", qty, _r(model=m, card=card, gpus=g, weights="fp8", kv_dtype="fp8",
                                   context=isl + osl, output_tokens=osl, concurrency=MAX_BATCH),
            "speed.throughput_tokens_per_s", 0.45 if g == 8 else 0.35)
      # TP8: each GPU's GEMMs are 8x smaller and run below the large-GEMM fraction, which the
      # model does not capture (the 405B row reads +40 %): a known gap, allowed 45 %.
      for case, qty, m, card, g, isl, osl in (
          ("trtllm-llama31-8b-fp8-h100-tp1", "output_tok_s_128_128", "llama-3.1-8b", "h100-sxm", 1, 128, 128),
          ("trtllm-llama31-8b-fp8-h100-tp1", "output_tok_s_2048_128", "llama-3.1-8b", "h100-sxm", 1, 2048, 128),
          ("trtllm-llama31-8b-fp8-h100-tp1", "output_tok_s_2048_2048", "llama-3.1-8b", "h100-sxm", 1, 2048, 2048),
          ("trtllm-llama33-70b-fp8-h100-tp2-h200-tp1", "h100_tp2_output_tok_s_128_128", "llama-3.3-70b",
           "h100-sxm", 2, 128, 128),
          ("trtllm-llama33-70b-fp8-h100-tp2-h200-tp1", "h100_tp2_output_tok_s_2048_2048", "llama-3.3-70b",
           "h100-sxm", 2, 2048, 2048),
          ("trtllm-llama33-70b-fp8-h100-tp2-h200-tp1", "h200_tp1_output_tok_s_2048_2048", "llama-3.3-70b",
           "h200-sxm", 1, 2048, 2048),
          ("trtllm-llama31-405b-fp8-h100-tp8", "output_tok_s_1000_1000", "llama-3.1-405b", "h100-sxm", 8, 1000,
           1000))],
    Check("vllm-llama31-8b-a100-40gb-c1", "speed", "decode_tok_s_c1",
          _r(model="llama-3.1-8b", card="a100-40gb-sxm", context=1152), "speed.decode_tokens_per_s", 0.30),
    Check("llamacpp-llama7b-q8_0-rtx4090", "speed", "tg128_tok_s",
          _r(model="7b", card="rtx-4090", engine="llamacpp", weights="gguf:Q8_0", context=640),
          "speed.decode_tokens_per_s", 0.30),
    Check("llamacpp-llama7b-f16-rtx4090", "speed", "tg128_tok_s",
          _r(model="7b", card="rtx-4090", engine="llamacpp", weights="fp16", context=640),
          "speed.decode_tokens_per_s", 0.30),
    Check("torchtune-llama31-finetune-tokens-per-sec", "speed", "tok_s_8b_lora_4090",
          _r(model="llama-3.1-8b", card="rtx-4090", task="lora", seq_len=2048, micro_batch=2),
          "speed.tokens_per_s", 0.35),
    Check("torchtune-llama31-finetune-tokens-per-sec", "speed", "tok_s_8b_full_4090",
          _r(model="llama-3.1-8b", card="rtx-4090", task="full", seq_len=2048, micro_batch=2, grad_ckpt="full"),
          "speed.tokens_per_s", 0.35),
    Check("torchtune-llama31-finetune-tokens-per-sec", "speed", "tok_s_8b_qlora_4090",
          _r(model="llama-3.1-8b", card="rtx-4090", task="qlora", seq_len=2048, micro_batch=2, grad_ckpt="full"),
          # the table's QLoRA/LoRA ratio (0.78) matches our 1.3x dequantisation cost only if both rows
          # checkpoint; the LoRA row does not say, so this row is allowed 45 %
          "speed.tokens_per_s", 0.45),
    # Megatron-LM README: GPT-3 175B on 96 H100s, 47 % MFU (TP x PP x DP; here TP 8 x DP 12 of a
    # generic 175B decoder, seq 4096, selective recompute, 8 x 400 Gb/s InfiniBand per node).
    Check("megatron-gpt3-175b-strong-scaling-h100", "speed", "mfu_96_gpus",
          _r(model="175b", card="h100-sxm", gpus=8, nodes=12, tp=8, task="pretrain", seq_len=4096,
             micro_batch=1, zero=1, grad_ckpt="selective", inter_node_gbps=3200), "speed.mfu", 0.30),
    Check("torchtitan-llama31-8b-fsdp-8xh100-tps", "speed", "tokens_per_s_per_gpu",
          _r(model="llama-3.1-8b", card="h100-sxm", gpus=8, task="pretrain", seq_len=8192, micro_batch=2,
             zero=3, grad_ckpt="selective"), "speed.tokens_per_s", 0.30, 8.0),
]


def _case(file: str, case_id: str) -> dict[str, Any]:
    data = tomllib.loads((ROOT / "tests" / "golden" / f"{file}.toml").read_text(encoding="utf-8"))
    return next(c for c in data["case"] if c["id"] == case_id)


def _dig(obj: dict[str, Any], path: str) -> float:
    for key in path.split("."):
        obj = obj[key]
    return float(obj)  # type: ignore[arg-type]


def _request(check: Check) -> EstimateRequest:
    if check.request.concurrency != MAX_BATCH:
        return check.request
    probe = estimate_json(replace(check.request, concurrency=1))
    return replace(check.request, concurrency=max(1, min(2048, int(probe["capacity"]["max_concurrency"]))))


def evaluate(check: Check) -> tuple[float, float, float]:
    """(predicted, measured, relative error), both in the unit of `pick`."""
    measured = float(_case(check.file, check.case)["measured"][check.quantity]) * check.scale
    predicted = _dig(estimate_json(_request(check)), check.pick)
    return predicted, measured, (predicted - measured) / measured


def main() -> None:
    errors = []
    print(f"{'case':44s} {'quantity':24s} {'predicted':>12s} {'measured':>12s} {'error':>8s}")
    for check in CHECKS:
        predicted, measured, err = evaluate(check)
        errors.append(abs(err))
        unit = check.scale if check.scale != 1.0 else 1.0
        print(f"{check.case:44s} {check.quantity:24s} {predicted / unit:12,.2f} {measured / unit:12,.2f} "
              f"{err * 100:+7.1f}%")
    print(f"median |error|: {statistics.median(errors) * 100:.1f}%  (n = {len(errors)})")


if __name__ == "__main__":
    main()
