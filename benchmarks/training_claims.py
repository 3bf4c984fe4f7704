"""The guides' training claims, answered by gpuwise's estimates (printed as markdown tables).

Run: python -m benchmarks.training_claims
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpuwise.service import EstimateRequest, estimate_json

GIB = 2**30
LLAMA2_13B = str(ROOT / "validation" / "models" / "meta-llama--Llama-2-13b-hf")
LLAMA2_7B = str(ROOT / "validation" / "models" / "meta-llama--Llama-2-7b-hf")
# torchtune v0.2 README (pytorch/torchtune README.md@135cf2ef), 'Training Speed (tokens/sec)': the recipes'
# own log metric tokens_per_second_per_gpu (the rank's tokens.numel(), padding included, / time per step,
# full_finetune_distributed.py): compared with gpuwise asked with packing on, which counts every computed token
TORCHTUNE_V02 = (("1 x RTX 4090, LoRA r8 q,v, batch 4", 1, "lora", 2582.0),
                 ("2 x RTX 4090, LoRA r8 q,v, batch 4, FSDP", 2, "lora", 2768.0),
                 ("4 x RTX 4090, full, batch 4, FSDP", 4, "full", 1388.0))


def est(**kw: Any) -> dict[str, Any]:
    return estimate_json(EstimateRequest(**kw))


def fits_row(label: str, **kw: Any) -> str:
    r = est(**kw)
    m = r["memory"]
    return (f"| {label} | {r['fit']} | {m['required'] / GIB:.1f} | {m.get('allocated_peak', 0) / GIB:.1f} | "
            f"{r['usable_bytes'] / GIB:.1f} |")


def main() -> None:
    print("## 7B LoRA on one RTX 4090 (qwen2.5-7b, seq 2048, micro-batch 2, each framework's defaults)\n")
    print("| framework | verdict | device total GiB | allocated GiB | usable GiB |\n|---|---|---|---|---|")
    for fw in ("hf", "hf-liger", "llama-factory", "unsloth", "torchtune", "ms-swift", "deepspeed"):
        print(fits_row(fw, model="qwen2.5-7b", card="rtx-4090", task="lora", seq_len=2048, micro_batch=2,
                       framework=fw))
    print("\n## 13B LoRA (and QLoRA) with full checkpointing on one RTX 4090 (seq 2048, micro-batch 1)\n")
    print("| model, framework | verdict | device total GiB | allocated GiB | usable GiB |\n|---|---|---|---|---|")
    for label, model in (("Llama-2-13B", LLAMA2_13B), ("qwen2.5-14b", "qwen2.5-14b")):
        for task, fw in (("lora", "hf"), ("lora", "llama-factory"), ("lora", "torchtune"),
                         ("qlora", "llama-factory"), ("qlora", "torchtune")):
            print(fits_row(f"{label}, {task}, {fw}", model=model, card="rtx-4090", task=task, seq_len=2048,
                           micro_batch=1, grad_ckpt="full", framework=fw))
    print("\n## 7B full fine-tune: more than 40 GB? "
          "(qwen2.5-7b, seq 2048, micro-batch 1, full checkpointing, one H100)\n")
    print("| framework (precision) | verdict | device total GiB | allocated GiB | usable GiB |\n|---|---|---|---|---|")
    for fw, what in (("deepspeed", "bf16 + fp32 master, AdamW"), ("hf", "pure bf16 load, AdamW"),
                     ("torchtune", "pure bf16, paged 8-bit AdamW in backward")):
        print(fits_row(f"{fw} ({what})", model="qwen2.5-7b", card="h100-sxm", task="full", seq_len=2048,
                       micro_batch=1, grad_ckpt="full", framework=fw))
    print("\n## Scaling 1 -> 4 GPUs (seq 2048, full checkpointing; speed-up = 4 x the estimate's scaling efficiency, "
          "i.e. against 4 x one GPU doing the same per-GPU work without communication)\n")
    print("| card | job | fits on 4 | step s | exposed DP comm s | speed-up on 4 |\n|---|---|---|---|---|---|")
    jobs = (("llama-3.2-1b full, DDP, mb 1", {"model": "llama-3.2-1b", "task": "full", "zero": 0, "micro_batch": 1,
                                                  "framework": "deepspeed"}),
            ("llama-3.2-1b full, DDP, mb 4", {"model": "llama-3.2-1b", "task": "full", "zero": 0, "micro_batch": 4,
                                                  "framework": "deepspeed"}),
            ("llama-3.2-3b full, ZeRO-3, mb 1", {"model": "llama-3.2-3b", "task": "full", "zero": 3, "micro_batch": 1,
                                                     "framework": "deepspeed"}),
            ("llama-3.1-8b full, FSDP2, mb 1", {"model": "llama-3.1-8b", "task": "full", "zero": 3, "micro_batch": 1,
                                                    "framework": "torchtitan"}),
            ("qwen2.5-7b LoRA, DDP, mb 2", {"model": "qwen2.5-7b", "task": "lora", "zero": 0, "micro_batch": 2,
                                                "framework": "torchtune"}),
            ("llama-2-7b full, FSDP, mb 4", {"model": LLAMA2_7B, "task": "full", "zero": 3, "micro_batch": 4,
                                                 "framework": "torchtune"}))
    for card in ("rtx-4090", "a100-80gb-sxm", "h100-sxm"):
        for label, kw in jobs:
            r = est(card=card, gpus=4, seq_len=2048, grad_ckpt="full", **kw)
            s = r["speed"]
            print(f"| {card} | {label} | {r['fit']} | {s['step_time_s']:.2f} | "
                  f"{s['step_breakdown_s'].get('dp_comm_exposed', 0):.2f} | {4 * s['scaling_efficiency']:.2f}x |")
    _measured_4090()
    print("\n## A100 40GB vs 80GB (llama-3.2-1b full fine-tune, seq 2048, micro-batch 4)\n")
    print("| card | step s | memory-bound s | tok/s |\n|---|---|---|---|")
    for card in ("a100-40gb-sxm", "a100-80gb-sxm"):
        s = est(model="llama-3.2-1b", card=card, task="full", seq_len=2048, micro_batch=4)["speed"]
        print(f"| {card} | {s['step_time_s']:.3f} | {s['step_breakdown_s'].get('memory_bound', 0):.3f} | "
              f"{s['tokens_per_s']:,.0f} |")


def _measured_4090() -> None:
    print("\n## RTX 4090 over PCIe (no peer-to-peer), measured: torchtune v0.2 README, Llama-2-7B, seq 2048 "
          "(tokens/s per GPU, the recipes' own metric)\n")
    print("| run | measured tok/s/GPU | gpuwise tok/s/GPU | error | measured speed-up over 1 GPU's rate | "
          "gpuwise speed-up (n x scaling efficiency) |\n|---|---|---|---|---|---|")
    one = TORCHTUNE_V02[0][3]
    for label, gpus, task, measured in TORCHTUNE_V02:
        kw: dict[str, Any] = {"lora_rank": 8, "lora_targets": "q,v"} if task == "lora" else {}
        s = est(model=LLAMA2_7B, card="rtx-4090", task=task, framework="torchtune", gpus=gpus, seq_len=2048,
                micro_batch=4, zero=3 if gpus > 1 else 0, packing=True, **kw)["speed"]  # counts padded tokens
        per_gpu = s["tokens_per_s"] / gpus
        speedup = f"{gpus * measured / one:.2f}x" if task == "lora" else "(no 1-GPU row: 7B full needs 4)"
        print(f"| {label} | {measured:,.0f} | {per_gpu:,.0f} | {per_gpu / measured - 1:+.0%} | {speedup} | "
              f"{gpus * s['scaling_efficiency']:.2f}x |")


if __name__ == "__main__":
    main()
