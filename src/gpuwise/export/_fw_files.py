"""The frameworks whose run reads a file gpuwise writes: LLaMA-Factory (a YAML for
`llamafactory-cli train`), torchtitan (a job TOML) and Unsloth (a Python script). Each `*_file`
returns the file's text; `*_tokens` the command that runs it. Sources: export/framework.py."""

from __future__ import annotations

import unicodedata
from typing import Any

from gpuwise.export import _yaml
from gpuwise.export._common import DS_CONFIG_FILE, half_precision, shell_join, zero_stage
from gpuwise.export._fw_common import (
    DATASET,
    SIZE,
    adapters,
    comments,
    hf_optim,
    lora_rank,
    multinode_note,
    refuse,
    seq_len,
    torchrun_prefix,
)
from gpuwise.export._plan import Plan
from gpuwise.textsafe import comment_line

__all__ = ["LF_FILE", "TITAN_FILE", "UNSLOTH_FILE", "lf_file", "lf_tokens", "titan_file",
           "titan_tokens", "unsloth_file", "unsloth_tokens"]

LF_FILE = "llamafactory_train.yaml"
TITAN_FILE = "torchtitan_job.toml"
UNSLOTH_FILE = "unsloth_train.py"


# -- LLaMA-Factory -----------------------------------------------------------------------------
# Keys: hiyouga/LLaMA-Factory src/llamafactory/hparams/{model,data,finetuning}_args.py and the
# transformers TrainingArguments its training_args.py extends, @ 7af909522a95 (v0.9.5); the
# launcher's environment (FORCE_TORCHRUN, NNODES, NPROC_PER_NODE) from src/llamafactory/launcher.py.
def lf_config(plan: Plan) -> dict[str, Any]:
    cfg: dict[str, Any] = {"model_name_or_path": plan.deploy_model,
                           "stage": "pt" if plan.task == "pretrain" else "sft", "do_train": True,
                           "finetuning_type": "lora" if adapters(plan) else "full"}
    if plan.task == "qlora":
        cfg.update(quantization_bit=4, quantization_method="bnb")
    if plan.padding_free:
        raise refuse(plan, "LLaMA-Factory v0.9.5's `llamafactory-cli train` has no padding-free collator (data_args.py "
                     "packing / neat_packing bin samples to cutoff_len; padding_free is only in its experimental "
                     "v1 trainer, src/llamafactory/v1). Re-plan with --packing instead of --padding-free.",
                     "LLaMA-Factory v0.9.5 的 `llamafactory-cli train` 没有 padding-free（data_args.py 的 packing / "
                     "neat_packing 按 cutoff_len 打包；padding_free 只在实验性的 v1 训练器中）。"
                     "请用 --packing 代替 --padding-free 重新规划。")
    if adapters(plan):
        cfg.update(lora_rank=lora_rank(plan), lora_target="all")
        # finetuning_args.py@7af90952 LoraArguments: use_dora (line 103), additional_target (line 59: modules
        # trained and saved beside LoRA, comma-separated)
        if plan.dora:
            cfg["use_dora"] = True
        if plan.modules_to_save:
            cfg["additional_target"] = ",".join(plan.modules_to_save)
    if zero_stage(plan):
        cfg["deepspeed"] = DS_CONFIG_FILE
    cfg.update(dataset=DATASET, template="default", cutoff_len=seq_len(plan), packing=plan.packing,
               output_dir=f"saves/{plan.name}", per_device_train_batch_size=plan.micro_batch,
               gradient_accumulation_steps=plan.grad_accum, optim=hf_optim(plan))
    cfg[half_precision(plan)] = True
    cfg.update(disable_gradient_checkpointing=plan.grad_ckpt == "none" and not plan.activation_offload,
               # Unsloth's checkpointing offloads the checkpointed activations to CPU memory.
               use_unsloth_gc=plan.activation_offload, use_unsloth=False,
               enable_liger_kernel=plan.loss == "fused")
    return cfg


def lf_tokens(plan: Plan, file: str = LF_FILE) -> list[str]:
    env = ["env", "FORCE_TORCHRUN=1", f"NPROC_PER_NODE={plan.gpus_per_node}"] if plan.gpus_total > 1 else []
    if plan.nodes > 1:
        env.append(f"NNODES={plan.nodes}")  # NODE_RANK and MASTER_ADDR are read from the environment
    return [*env, "llamafactory-cli", "train", file]


def lf_file(plan: Plan) -> str:
    notes = ["LLaMA-Factory: keys from hiyouga/LLaMA-Factory src/llamafactory/hparams/*.py",
             "@ 7af909522a95 (v0.9.5).", f"Save as {LF_FILE}, then run:", f"  {shell_join(lf_tokens(plan))}",
             f"Replace {DATASET} and the template with yours (data/dataset_info.json)."]
    if zero_stage(plan):
        notes.append(f"{DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    return _yaml.dump(lf_config(plan), [*notes, *multinode_note(plan)])


# -- torchtitan --------------------------------------------------------------------------------
# Keys: pytorch/torchtitan torchtitan/config/job_config.py @ 73a0e6979dd1 (v0.2.2, the last
# release configured by TOML; later releases take Python configs), its llama3 and qwen3 flavors,
# and run_train.sh's torchrun line.
TITAN_VERSION = "0.2.2"
_TITAN_MODELS = (("llama-3", "llama3"), ("llama3", "llama3"), ("qwen3", "qwen3"))


def toml_str(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped (TOML 1.0), lone
    surrogates (which UTF-8 cannot hold) replaced."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\uFFFD")
        elif code < 0x20 or code == 0x7F or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return toml_str(str(value))


def _titan_model(plan: Plan) -> tuple[str, str]:
    name = plan.deploy_model.lower()
    family = next((f for key, f in _TITAN_MODELS if key in name), "llama3")
    size = SIZE.search(name.split("/")[-1])
    return family, f"{size.group(1)}B" if size else "8B"


def titan_config(plan: Plan) -> dict[str, dict[str, Any]]:
    if adapters(plan):
        raise refuse(plan, "torchtitan trains every weight (pretraining); it has no LoRA. Re-plan "
                     "with --task pretrain or full.", "torchtitan 训练全部权重，不含 LoRA；请用 "
                     "--task pretrain 或 full 重新规划。")
    if plan.padding_free:
        raise refuse(plan, "torchtitan has no padding-free batches: its datasets concatenate documents into "
                     "seq_len samples (packing). Re-plan with --packing instead of --padding-free.",
                     "torchtitan 没有 padding-free：其数据集把文档拼成 seq_len 长的样本（打包）。"
                     "请用 --packing 代替 --padding-free 重新规划。")
    family, flavor = _titan_model(plan)
    ckpt = plan.grad_ckpt
    ac: dict[str, Any] = {"mode": "none" if ckpt == "none" else "full" if ckpt == "full" else "selective"}
    if ac["mode"] == "selective":
        ac["selective_ac_option"] = ckpt.removeprefix("every-") if ckpt.startswith("every-") else "op"
    model: dict[str, Any] = {"name": family, "flavor": flavor,
                             "hf_assets_path": "./assets/hf/" + plan.deploy_model.rsplit("/", 1)[-1]}
    if plan.float8:
        model["converters"] = ["quantize.linear.float8"]
    return {
        "model": model,
        "optimizer": {"name": "AdamW", "early_step_in_backward": plan.optimizer_in_backward},
        "training": {"local_batch_size": plan.micro_batch, "global_batch_size": plan.global_batch,
                     "seq_len": seq_len(plan), "dataset": DATASET,
                     "mixed_precision_param": "bfloat16" if half_precision(plan) == "bf16" else "float32",
                     "enable_cpu_offload": plan.offload == "cpu"},
        # DDP replicates; any ZeRO stage is FSDP2 sharding over the data-parallel ranks.
        "parallelism": {"data_parallel_replicate_degree": 1 if zero_stage(plan) else plan.dp,
                        "data_parallel_shard_degree": plan.dp if zero_stage(plan) else 1,
                        "tensor_parallel_degree": plan.tp, "pipeline_parallel_degree": plan.pp,
                        "fsdp_reshard_after_forward": "never" if zero_stage(plan) == 2 else "default"},
        "activation_checkpoint": ac,
        "compile": {"enable": plan.compile, "components": ["model", "loss"]},
        **({"quantize.linear.float8": {"enable_fsdp_float8_all_gather": True,
                                       "precompute_float8_dynamic_scale_for_fsdp": True,
                                       "filter_fqns": ["output"]}} if plan.float8 else {}),
    }


def titan_tokens(plan: Plan, file: str = TITAN_FILE) -> list[str]:
    return [*torchrun_prefix(plan), "-m", "torchtitan.train", "--job.config_file", file]


def titan_file(plan: Plan) -> str:
    notes = ["torchtitan: keys from pytorch/torchtitan torchtitan/config/job_config.py @ 73a0e6979dd1",
             f"(v{TITAN_VERSION}, the last TOML-configured release: pip install torchtitan=={TITAN_VERSION}).",
             f"Save as {TITAN_FILE}, then run:", f"  {shell_join(titan_tokens(plan))}",
             (f"Fetch the tokenizer first: python scripts/download_hf_assets.py --repo_id "
             f"{shell_join([plan.deploy_model])} --assets tokenizer"),
             f"Replace {DATASET} with a registered dataset (c4, c4_test)."]
    if plan.optimizer != "adamw":
        notes.append(f"torchtitan {TITAN_VERSION} has Adam and AdamW only: AdamW stands in for {plan.optimizer}.")
    lines = comments([*notes, *multinode_note(plan)])
    for section, body in titan_config(plan).items():
        lines += ["", f"[{section}]"] + [f"{key} = {_toml_value(v)}" for key, v in body.items()]
    return "\n".join(lines) + "\n"


# -- Unsloth -----------------------------------------------------------------------------------
# Names: unslothai/unsloth README.md @ 0acd1c7eec2a (its last README with the fine-tuning example):
# FastLanguageModel.from_pretrained / get_peft_model, TRL's SFTTrainer and SFTConfig.
_UNSLOTH_TEMPLATE = '''\
# Unsloth fine-tuning script, generated by gpuwise.
# Names from unslothai/unsloth README.md @ 0acd1c7eec2a.
{header}
from datasets import load_dataset
from trl import SFTConfig, SFTTrainer
from unsloth import FastLanguageModel

MODEL = {model}
MAX_SEQ_LENGTH = {seq}
DATASET = {dataset}

model, tokenizer = FastLanguageModel.from_pretrained(
    model_name=MODEL,
    max_seq_length=MAX_SEQ_LENGTH,
    load_in_4bit={qlora},
    full_finetuning={full},
)
{peft}
trainer = SFTTrainer(
    model=model,
    train_dataset=load_dataset(DATASET, split="train"),
    tokenizer=tokenizer,
    args=SFTConfig(
        max_seq_length=MAX_SEQ_LENGTH,
        per_device_train_batch_size={micro},
        gradient_accumulation_steps={accum},
        packing={packing},{padding_free}
        optim={optim!r},
        {precision}=True,
        output_dir={output!r},
    ),
)
trainer.train()
'''

_PEFT = '''
model = FastLanguageModel.get_peft_model(
    model,
    r={rank},
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    lora_alpha={rank},
    lora_dropout=0,
    bias="none",
    use_gradient_checkpointing={ckpt},
    max_seq_length=MAX_SEQ_LENGTH,{extra}
)
'''


def unsloth_tokens(plan: Plan, file: str = UNSLOTH_FILE) -> list[str]:
    if plan.gpus_total == 1:
        return ["python", file]
    return [*torchrun_prefix(plan), file]


def unsloth_file(plan: Plan) -> str:
    if zero_stage(plan) or plan.tp > 1 or plan.pp > 1:
        raise refuse(plan, "Unsloth trains data-parallel only (no ZeRO, tensor or pipeline "
                     "parallelism). Re-plan with --zero 0 or another --framework.",
                     "Unsloth 只支持数据并行（无 ZeRO、张量或流水线并行）；请用 --zero 0 或其他框架重新规划。")
    ckpt = '"unsloth"' if plan.grad_ckpt != "none" or plan.activation_offload else "False"
    header = [f"Run: {shell_join(unsloth_tokens(plan))}", f"Replace {DATASET} with your dataset."]
    # unsloth/models/llama.py@015bdef0d94a get_peft_model: modules_to_save (line 3083), use_dora through **kwargs
    # into PEFT's LoraConfig (line 3166); TRL SFTConfig padding_free
    extra = "".join(f"\n    {k}={v!r}," for k, v in (("use_dora", plan.dora),
                                                      ("modules_to_save", list(plan.modules_to_save))) if v)
    peft = _PEFT.format(rank=lora_rank(plan), ckpt=ckpt, extra=extra) if adapters(plan) else ""
    # repr() keeps the exact model id (a path may hold any character) and escapes every
    # non-printable one, so the literal stays on its line.
    return _UNSLOTH_TEMPLATE.format(
        header="\n".join(f"# {comment_line(h)}" for h in header), model=repr(plan.deploy_model),
        seq=seq_len(plan), dataset=repr(DATASET), qlora=plan.task == "qlora", full=not adapters(plan),
        peft=peft, micro=plan.micro_batch, accum=plan.grad_accum, packing=plan.packing,
        padding_free="\n        padding_free=True," if plan.padding_free else "",
        optim=hf_optim(plan), precision=half_precision(plan), output=f"outputs/{plan.name}")
