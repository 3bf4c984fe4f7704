"""Pieces the framework-native exports share (export/framework.py): the plan's knobs in the words
several frameworks have in common, the torchrun prefix, the refusal and the comment header."""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpuwise.errors import InputError
from gpuwise.export import torchrun
from gpuwise.export._common import half_precision, not_for, zero_stage
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["DATASET", "DEFAULT_LORA_RANK", "DEFAULT_SEQ_LEN", "SIZE", "adapters", "comments", "hf_optim",
           "lora_rank", "refuse", "seq_len", "torch_dtype", "torchrun_prefix", "zero_stage"]

# The dataset is the user's: every export names this placeholder and says so.
DATASET = "YOUR_DATASET"
# Hugging Face's and LLaMA-Factory's default cutoff when the plan names no sequence length.
DEFAULT_SEQ_LEN = 2048
# A model size in its name: "8b" of Llama-3.1-8B, "0.5b" of Qwen2.5-0.5B (not "fp8b", not "8bit").
SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z])")
# estimate/workload.py's default LoRA rank (what the plan was sized for when it names none).
DEFAULT_LORA_RANK = 16

# gpuwise optimizer -> transformers OptimizerNames (training_args.py): the names the HF Trainer,
# LLaMA-Factory (`optim`), ms-swift (`--optim`) and Unsloth's SFTConfig all take.
_HF_OPTIM = {"adamw": "adamw_torch", "adamw8bit": "adamw_8bit", "paged-adamw8bit": "paged_adamw_8bit",
             "sgd": "sgd", "adafactor": "adafactor"}


def hf_optim(plan: Plan) -> str:
    return _HF_OPTIM.get(plan.optimizer, "adamw_torch")


def seq_len(plan: Plan) -> int:
    return plan.seq_len or DEFAULT_SEQ_LEN


def lora_rank(plan: Plan) -> int:
    return plan.lora_rank or DEFAULT_LORA_RANK


def adapters(plan: Plan) -> bool:
    """LoRA adapters on a frozen base (QLoRA: on a 4-bit base)."""
    return plan.task in ("lora", "qlora")


def torch_dtype(plan: Plan) -> str:
    """'bfloat16' or 'float16', as torch names them."""
    return "bfloat16" if half_precision(plan) == "bf16" else "float16"


def torchrun_prefix(plan: Plan) -> list[str]:
    """`torchrun --nproc-per-node N ...` without the script: what torchtitan and Megatron start."""
    tokens = torchrun.launch_tokens(plan)
    return tokens[:len(tokens) - len(torchrun.script_args(plan))]


def refuse(plan: Plan, en: str, zh: str) -> InputError:
    return not_for("framework", plan, en, zh)


def comments(lines: Sequence[str]) -> list[str]:
    """`# ...` lines, each cleaned to one line (a model name may hold newlines)."""
    return [f"# {comment_line(line)}" if line else "#" for line in lines]


def multinode_note(plan: Plan) -> list[str]:
    return ["Run on every node with NODE_RANK (0..N-1) and MASTER_ADDR (node 0) set."] \
        if plan.nodes > 1 else []


def sharding_words(plan: Plan) -> str:
    """The plan's sharding in a sentence, for the comment header."""
    stage = zero_stage(plan)
    return f"ZeRO-{stage}" + (f", {plan.offload} offload" if plan.offload != "none" else "") \
        if stage else "no sharding"
