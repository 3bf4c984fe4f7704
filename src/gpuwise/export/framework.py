"""The `framework` export target: what a user of the plan's training framework runs, in that
framework's own launch form and config vocabulary, with every planned knob set.

By `plan.framework`:

- torchtune: `tune run <recipe> --config <config> key=value ...` (export/_fw_lines.py);
- ms-swift: `swift sft --model ... --tuner_type ...` (export/_fw_lines.py);
- megatron: `torchrun ... pretrain_gpt.py --tensor-model-parallel-size ...` (export/_fw_lines.py);
- llama-factory: a YAML for `llamafactory-cli train` (export/_fw_files.py);
- torchtitan: a job TOML for `torchrun ... -m torchtitan.train --job.config_file` (export/_fw_files.py);
- unsloth: a Python script with FastLanguageModel and TRL's SFTTrainer (export/_fw_files.py);
- hf, hf-liger: the accelerate YAML, its comment naming the launch with the Trainer's flags
  (`--use_liger_kernel True` for hf-liger); deepspeed: the DeepSpeed JSON.

Names come from each framework's own source, read at these commits (also at the top of each
emitted file):

- pytorch/torchtune torchtune/_recipe_registry.py, torchtune/modules/loss/__init__.py,
  torchtune/config/_utils.py, recipes/lora_finetune_distributed.py,
  torchtune/models/llama3_1/_model_builders.py @ bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1
- hiyouga/LLaMA-Factory src/llamafactory/hparams/{model,data,finetuning,training}_args.py,
  src/llamafactory/launcher.py @ 7af909522a951e3ad9f022ea6f88b6755257eaa5 (v0.9.5)
- modelscope/ms-swift docs/source_en/Instruction/Command-line-parameters.md
  @ ff5128777dd3dc5538f1a95fbcc29442c327d7d2 (v4.5.2)
- unslothai/unsloth README.md @ 0acd1c7eec2a6c6adb43367a333dd0e30332b1b0
- pytorch/torchtitan torchtitan/config/job_config.py, run_train.sh,
  scripts/download_hf_assets.py @ 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce (v0.2.2)
- NVIDIA/Megatron-LM megatron/training/arguments.py, megatron/training/argument_utils.py,
  megatron/core/model_parallel_config.py, megatron/core/transformer/transformer_config.py
  @ d98e8a64ddf34856e74b24714e3bedb2f5a39553

`launch_tokens`, `files` and `packages` give the scheduler targets (export/_launch.py) the same
form: the command, the files to write beside it, and what pip installs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.export import _yaml, accelerate, deepspeed
from gpuwise.export._common import (
    DS_CONFIG_FILE,
    TRAIN_SCRIPT,
    check_training,
    half_precision,
    script_notes,
    shell_join,
    uses_deepspeed,
    zero_stage,
)
from gpuwise.export._fw_common import hf_optim, multinode_note, refuse, seq_len
from gpuwise.export._fw_files import (
    LF_FILE,
    TITAN_FILE,
    TITAN_VERSION,
    UNSLOTH_FILE,
    lf_file,
    lf_tokens,
    titan_file,
    titan_tokens,
    unsloth_file,
    unsloth_tokens,
)
from gpuwise.export._fw_lines import (
    megatron_emit,
    megatron_tokens,
    swift_emit,
    swift_tokens,
    torchtune_emit,
    torchtune_tokens,
)
from gpuwise.export._plan import Plan

__all__ = ["FRAMEWORKS", "NATIVE", "FrameworkForm", "emit", "files", "form", "hf_args", "launch_tokens",
           "packages", "uses_trainer_stack"]


@dataclass(frozen=True)
class FrameworkForm:
    """How one framework runs a plan: the command, the file it reads (name and text; None for
    a pure command line), the target's whole text, and the pip requirements."""

    emit: Callable[[Plan], str]
    tokens: Callable[[Plan], list[str]]
    file: tuple[str, Callable[[Plan], str]] | None
    requirements: Callable[[Plan], list[str]]
    uses_ds_file: Callable[[Plan], bool]


# -- the Hugging Face Trainer forms ------------------------------------------------------------
def hf_args(plan: Plan) -> list[str]:
    """The Trainer's own flags (transformers TrainingArguments) after the user's script."""
    a = ["--per_device_train_batch_size", str(plan.micro_batch),
         "--gradient_accumulation_steps", str(plan.grad_accum),
         "--gradient_checkpointing", str(plan.grad_ckpt != "none"), "--optim", hf_optim(plan),
         f"--{half_precision(plan)}", "True"]
    if plan.compile:
        a += ["--torch_compile", "True"]
    if plan.framework == "hf-liger":
        a += ["--use_liger_kernel", "True"]
    return a


def _hf_emit(plan: Plan) -> str:
    launch = accelerate.launch_command(plan) + " " + shell_join(hf_args(plan))
    notes = [f"Save as {accelerate.CONFIG_FILE}, then run{' from ' + plan.workdir if plan.workdir else ''}:",
             f"  {launch}", f"Sequence length {seq_len(plan)}: your script's max_length / max_seq_length."]
    if not plan.script:
        notes.append(f"{TRAIN_SCRIPT} is a placeholder: replace it, or plan with --script.")
    notes.extend(script_notes(plan))
    if accelerate.uses_ds_file(plan):
        notes.append(f"{DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    return _yaml.dump(accelerate.config(plan), [*notes, *multinode_note(plan)])


def _hf_tokens(plan: Plan) -> list[str]:
    from gpuwise.export import torchrun

    return torchrun.launch_tokens(plan)


def _hf_packages(plan: Plan) -> list[str]:
    return ["liger-kernel"] if plan.framework == "hf-liger" else []


def _none(plan: Plan) -> list[str]:
    return []


def _zero_ds(plan: Plan) -> bool:
    return zero_stage(plan) > 0


def _never(plan: Plan) -> bool:
    return False


def _extras(plan: Plan) -> list[str]:
    """What every framework form needs for QLoRA and for a DeepSpeed file."""
    return (["bitsandbytes"] if plan.task == "qlora" else []) + \
        (["deepspeed"] if _zero_ds(plan) else [])


FRAMEWORKS: dict[str, FrameworkForm] = {
    "hf": FrameworkForm(_hf_emit, _hf_tokens, None, _hf_packages, uses_deepspeed),
    "hf-liger": FrameworkForm(_hf_emit, _hf_tokens, None, _hf_packages, uses_deepspeed),
    "deepspeed": FrameworkForm(deepspeed.emit, _hf_tokens, None, _none, uses_deepspeed),
    "torchtune": FrameworkForm(torchtune_emit, torchtune_tokens, None, lambda p: [
        # LinearCrossEntropyLoss (fused) is on main only; 0.6.1 is the last release.
        "torchtune @ git+https://github.com/pytorch/torchtune@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1"
        if p.loss == "fused" else "torchtune==0.6.1", "torchao",
        *(["bitsandbytes"] if p.optimizer in ("adamw8bit", "paged-adamw8bit") else [])], _never),
    "ms-swift": FrameworkForm(swift_emit, swift_tokens, None, lambda p: [
        "ms-swift>=4", *_extras(p), *(["liger-kernel"] if p.loss == "fused" else [])],
        lambda p: p.offload == "nvme" and _zero_ds(p)),
    "megatron": FrameworkForm(megatron_emit, megatron_tokens, None,
                              lambda p: ["megatron-core", *(["transformer-engine[pytorch]"] if p.float8 else [])],
                              _never),
    "llama-factory": FrameworkForm(lambda p: lf_file(p), lf_tokens, (LF_FILE, lf_file), lambda p: [
        "llamafactory==0.9.5", *_extras(p), *(["liger-kernel"] if p.loss == "fused" else [])], _zero_ds),
    "torchtitan": FrameworkForm(lambda p: titan_file(p), titan_tokens, (TITAN_FILE, titan_file),
                                lambda p: [f"torchtitan=={TITAN_VERSION}", "torchao"], _never),
    "unsloth": FrameworkForm(lambda p: unsloth_file(p), unsloth_tokens, (UNSLOTH_FILE, unsloth_file),
                             lambda p: ["unsloth"], _never),
}
# The frameworks whose own form replaces the torchrun line in the scheduler targets.
NATIVE = frozenset(FRAMEWORKS) - {"hf", "hf-liger", "deepspeed"}


def form(plan: Plan) -> FrameworkForm:
    found = FRAMEWORKS.get(plan.framework)
    if found is None:
        raise refuse(plan, f"gpuwise has no export for framework '{plan.framework}'; known: "
                     f"{', '.join(FRAMEWORKS)}. Re-plan with one of them (--framework).",
                     f"gpuwise 没有框架“{plan.framework}”的导出；可用：{'、'.join(FRAMEWORKS)}。")
    return found


def emit(plan: Plan) -> str:
    check_training(plan, "framework")
    return form(plan).emit(plan)


def launch_tokens(plan: Plan) -> list[str]:
    """The command the framework runs the plan with (its files written first: `files`)."""
    check_training(plan, "framework")
    return form(plan).tokens(plan)


def files(plan: Plan) -> list[tuple[str, str]]:
    """(name, text) of every file the launch reads from the working directory."""
    check_training(plan, "framework")
    fw = form(plan)
    out = [(name, write(plan)) for name, write in ([fw.file] if fw.file else [])]
    if fw.uses_ds_file(plan):
        out.append((DS_CONFIG_FILE, json.dumps(deepspeed.config(plan), separators=(",", ":")) + "\n"))
    return out


def packages(plan: Plan) -> list[str]:
    """pip requirements of the framework (beyond torch) for this plan."""
    return form(plan).requirements(plan)


def uses_trainer_stack(plan: Plan) -> bool:
    """Whether the plan runs the Hugging Face stack the scheduler targets install by default."""
    return plan.framework not in NATIVE

