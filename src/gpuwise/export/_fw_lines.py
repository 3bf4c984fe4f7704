"""The frameworks whose run is one command line: torchtune (`tune run`), ms-swift (`swift sft`) and
Megatron-LM (`torchrun ... pretrain_gpt.py`). Sources: export/framework.py's docstring."""

from __future__ import annotations

import re

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
    torch_dtype,
    torchrun_prefix,
)
from gpuwise.export._plan import Plan

__all__ = ["megatron_tokens", "swift_tokens", "torchtune_config", "torchtune_tokens"]

# -- torchtune ---------------------------------------------------------------------------------
# torchtune/_recipe_registry.py@bd2a0fc7: config folders by model family, and the config names
# `{folder}/{size}B_{lora|full}` (+ `_single_device` for the single-device recipes).
_TT_FAMILIES = ((r"llama-?3\.3", "llama3_3"), (r"llama-?3\.2", "llama3_2"), (r"llama-?3\.1", "llama3_1"),
                (r"llama-?3", "llama3"), (r"llama-?2", "llama2"), (r"qwen-?3", "qwen3"),
                (r"qwen-?2\.5", "qwen2_5"), (r"qwen-?2", "qwen2"), (r"mistral", "mistral"),
                (r"gemma-?2", "gemma2"), (r"gemma", "gemma"), (r"phi-?4", "phi4"))
TT_PLACEHOLDER = "my_config.yaml"
# torchtune/modules/loss/__init__.py@bd2a0fc7: LinearCrossEntropyLoss chunks the output projection
# with the loss (fused); CEWithChunkedOutputLoss chunks the logits; one chunk is the plain loss.
_TT_LOSS = {"fused": "torchtune.modules.loss.LinearCrossEntropyLoss",
            "chunked": "torchtune.modules.loss.CEWithChunkedOutputLoss",
            "full": "torchtune.modules.loss.CEWithChunkedOutputLoss"}
_TT_OPTIM = {"adamw": "torch.optim.AdamW", "adamw8bit": "bitsandbytes.optim.AdamW8bit",
             "paged-adamw8bit": "bitsandbytes.optim.PagedAdamW8bit", "sgd": "torch.optim.SGD",
             "adafactor": "torch.optim.Adafactor"}


def _b(flag: bool) -> str:
    return "True" if flag else "False"


def torchtune_recipe(plan: Plan) -> str:
    kind = "lora" if adapters(plan) else "full"
    return f"{kind}_finetune_{'single_device' if plan.gpus_total == 1 else 'distributed'}"


def torchtune_config(plan: Plan) -> str | None:
    """The shipped config for the plan's model family and size, guessed from its names; None
    when no family matches (the user copies the nearest one with `tune cp`)."""
    name = f"{plan.deploy_model} {plan.model}".lower()
    folder = next((f for pattern, f in _TT_FAMILIES if re.search(pattern, name)), None)
    size = SIZE.search(name.split("/")[-1]) or SIZE.search(name)
    if folder is None or size is None:
        return None
    kind = "lora" if adapters(plan) else "full"
    return f"{folder}/{size.group(1)}B_{kind}{'_single_device' if plan.gpus_total == 1 else ''}"


def _tt_overrides(plan: Plan) -> list[str]:
    o = [f"batch_size={plan.micro_batch}", f"gradient_accumulation_steps={plan.grad_accum}",
         f"tokenizer.max_seq_len={seq_len(plan)}", f"dataset.packed={_b(plan.packing)}",
         f"enable_activation_checkpointing={_b(plan.grad_ckpt != 'none' or plan.activation_offload)}",
         f"enable_activation_offloading={_b(plan.activation_offload)}", f"compile={_b(plan.compile)}",
         f"optimizer._component_={_TT_OPTIM.get(plan.optimizer, 'torch.optim.AdamW')}",
         f"loss._component_={_TT_LOSS[plan.loss]}"]
    if plan.loss == "full":
        o.append("loss.num_output_chunks=1")
    if not adapters(plan):  # only the full-finetune recipes read optimizer_in_bwd
        o.append(f"optimizer_in_bwd={_b(plan.optimizer_in_backward)}")
    else:
        o.append(f"model.lora_rank={lora_rank(plan)}")
        if plan.dora:  # every lora_* model builder takes use_dora (llama3_1/_model_builders.py@bd2a0fc7 line 90)
            o.append("model.use_dora=True")
    if plan.task == "qlora":
        # torchtune/models/llama3_1/_model_builders.py@bd2a0fc7: every qlora_* builder is its
        # lora_* builder with quantize_base=True, so this works for families without one.
        o.append("model.quantize_base=True")
    if plan.gpus_total > 1:
        # recipes/*_distributed.py: FSDP2 shards always; ZeRO-2-like keeps params after forward.
        o += [f"fsdp_reshard_after_forward={_b(zero_stage(plan) != 2)}",
              f"fsdp_cpu_offload={_b(plan.offload == 'cpu')}"]
    if plan.tp > 1 and not adapters(plan):
        o.append(f"tensor_parallel_dim={plan.tp}")
    o.append(f"dtype={'bf16' if half_precision(plan) == 'bf16' else 'fp32'}")
    return o


def torchtune_tokens(plan: Plan) -> list[str]:
    if plan.offload == "nvme":
        raise refuse(plan, "torchtune offloads to CPU memory only (fsdp_cpu_offload); re-plan "
                     "with --offload cpu.", "torchtune 只能卸载到 CPU 内存；请用 --offload cpu 重新规划。")
    if plan.modules_to_save:
        raise refuse(plan, "torchtune's LoRA recipes train no embedding or output copy beside the adapters "
                     "(no modules_to_save; apply_lora_to_output puts LoRA on the head instead). Re-plan "
                     "without --modules-to-save, or with --framework ms-swift, llama-factory or unsloth.",
                     "torchtune 的 LoRA 配方不在适配器旁整体训练 embedding 或输出层（没有 modules_to_save；"
                     "apply_lora_to_output 只在输出层上加 LoRA）。请去掉 --modules-to-save，或改用 "
                     "--framework ms-swift、llama-factory 或 unsloth 重新规划。")
    if plan.padding_free:
        raise refuse(plan, "torchtune has no padding-free collator: its datasets pad each batch or pack "
                     "(dataset.packed). Re-plan with --packing instead of --padding-free.",
                     "torchtune 没有 padding-free 的拼接方式：其数据集按 batch 填充或打包（dataset.packed）。"
                     "请用 --packing 代替 --padding-free 重新规划。")
    head = ["tune", "run"]
    if plan.gpus_total > 1:
        head += torchrun_prefix(plan)[1:]
    config = torchtune_config(plan) or TT_PLACEHOLDER
    return [*head, torchtune_recipe(plan), "--config", config, *_tt_overrides(plan)]


def torchtune_emit(plan: Plan) -> str:
    notes = ["torchtune: names from pytorch/torchtune torchtune/_recipe_registry.py,",
             "torchtune/modules/loss/__init__.py, torchtune/config/_utils.py @ bd2a0fc7c314",
             "(LinearCrossEntropyLoss is on main after 0.6.1).",
             (f"Download first: tune download {shell_join([plan.deploy_model])} --output-dir "
             "<the config's checkpoint_dir>")]
    if torchtune_config(plan) is None:
        notes.append(f"No shipped config matches this model: `tune ls`, then `tune cp <nearest> "
                     f"{TT_PLACEHOLDER}` and point its model and checkpointer at the checkpoint.")
    if plan.optimizer != "adamw":
        notes.append("If the config's optimizer sets fused: True, add ~optimizer.fused.")
    if adapters(plan) and plan.optimizer_in_backward:
        notes.append("The LoRA recipes have no optimizer_in_bwd: the plan's in-backward step is not set.")
    if half_precision(plan) != "bf16":
        notes.append("torchtune trains in bf16 or fp32 only; this card has no bf16, so dtype=fp32.")
    notes += multinode_note(plan)
    return "\n".join([*comments(notes), shell_join(torchtune_tokens(plan))]) + "\n"


# -- ms-swift ----------------------------------------------------------------------------------
# docs/source_en/Instruction/Command-line-parameters.md@ff51287 (v4.5.2): `--tuner_type` (it was
# --train_type before 4.0), booleans as true/false, torchrun settings from the environment.
def _swift_deepspeed(plan: Plan) -> str | None:
    stage = zero_stage(plan)
    if not stage:
        return None
    if plan.offload == "nvme":
        return DS_CONFIG_FILE  # the built-in configs offload to CPU only
    return f"zero{stage}" + ("_offload" if plan.offload == "cpu" and stage in (2, 3) else "")


def swift_env(plan: Plan) -> list[str]:
    """NPROC_PER_NODE / NNODES for swift's torchrun (NODE_RANK and MASTER_ADDR are read as set)."""
    if plan.gpus_total == 1:
        return []
    env = ["env", f"NPROC_PER_NODE={plan.gpus_per_node}"]
    return env + ([f"NNODES={plan.nodes}"] if plan.nodes > 1 else [])


def swift_tokens(plan: Plan) -> list[str]:
    t = [*swift_env(plan), "swift", "pt" if plan.task == "pretrain" else "sft",
         "--model", plan.deploy_model, "--use_hf", "true",
         "--tuner_type", "lora" if adapters(plan) else "full"]
    if plan.task == "qlora":
        t += ["--quant_method", "bnb", "--quant_bits", "4"]
    if adapters(plan):
        t += ["--lora_rank", str(lora_rank(plan)), "--target_modules", "all-linear"]
        # Command-line-parameters.md@ff5128777dd3 lines 349 (--use_dora) and 331 (--modules_to_save embed_tokens
        # lm_head, space-separated)
        t += ["--use_dora", "true"] if plan.dora else []
        t += ["--modules_to_save", *plan.modules_to_save] if plan.modules_to_save else []
    t += ["--torch_dtype", torch_dtype(plan),
          "--per_device_train_batch_size", str(plan.micro_batch),
          "--gradient_accumulation_steps", str(plan.grad_accum), "--max_length", str(seq_len(plan)),
          "--gradient_checkpointing", "true" if plan.grad_ckpt != "none" else "false",
          "--optim", hf_optim(plan), "--use_liger_kernel", "true" if plan.loss == "fused" else "false"]
    if plan.packing:
        t += ["--packing", "true"]
    if plan.padding_free:  # Command-line-parameters.md@ff5128777dd3 lines 121-122: with --attn_impl flash_attn
        t += ["--padding_free", "true"]
    if plan.packing or plan.padding_free:
        t += ["--attn_impl", "flash_attn"]  # packing and padding_free need flash attention
    ds = _swift_deepspeed(plan)
    if ds:
        t += ["--deepspeed", ds]
    return [*t, "--dataset", DATASET]


def swift_emit(plan: Plan) -> str:
    notes = ["ms-swift: flags from modelscope/ms-swift docs/source_en/Instruction/",
             "Command-line-parameters.md @ ff5128777dd3 (v4.5.2); needs ms-swift>=4 (--tuner_type).",
             f"Replace {DATASET} with your dataset."]
    if _swift_deepspeed(plan) == DS_CONFIG_FILE:
        notes.append(f"{DS_CONFIG_FILE}: this plan's DeepSpeed export (target 'deepspeed').")
    notes += multinode_note(plan)
    return "\n".join([*comments(notes), shell_join(swift_tokens(plan))]) + "\n"


# -- Megatron-LM -------------------------------------------------------------------------------
# megatron/training/arguments.py, megatron/training/argument_utils.py (dataclass field -> --flag),
# megatron/core/model_parallel_config.py, megatron/core/transformer/transformer_config.py
# @ d98e8a64ddf3.
MEGATRON_SCRIPT = "pretrain_gpt.py"


def _recompute(plan: Plan) -> list[str]:
    ckpt = plan.grad_ckpt
    if ckpt == "none":
        return []
    if ckpt in ("selective", "op-sac"):  # selective: core attention (TransformerConfig)
        return ["--recompute-granularity", "selective"]
    every = ckpt.removeprefix("every-") if ckpt.startswith("every-") else "1"
    return ["--recompute-granularity", "full", "--recompute-method", "uniform",
            "--recompute-num-layers", every]


# ZeRO stage -> Megatron-LM flags. --use-distributed-optimizer alone shards the optimizer states and main
# params (ZeRO-1); gradients and weights shard only under Megatron-FSDP, whose 'Required Configurations'
# are these five flags with --data-parallel-sharding-strategy optim_grads (ZeRO-2) or optim_grads_params
# (ZeRO-3) (NVIDIA/Megatron-LM examples/megatron_fsdp/README.md@fb154fb353211ca1fbeedc6dbbff221afbcbf7b2).
_MEGATRON_FSDP = {2: "optim_grads", 3: "optim_grads_params"}


def _megatron_sharding(stage: int) -> list[str]:
    if stage == 0:
        return []
    if stage == 1:
        return ["--use-distributed-optimizer"]
    return ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", _MEGATRON_FSDP[stage],
            "--no-gradient-accumulation-fusion", "--use-distributed-optimizer", "--ckpt-format", "fsdp_dtensor"]


def megatron_tokens(plan: Plan) -> list[str]:
    if adapters(plan):
        raise refuse(plan, f"Megatron-LM's {MEGATRON_SCRIPT} trains every weight; LoRA is not in it. "
                     "Re-plan with --task full or pretrain, or --framework ms-swift or llama-factory.",
                     f"Megatron-LM 的 {MEGATRON_SCRIPT} 训练全部权重，不含 LoRA；请改用 --task full 或 "
                     "pretrain，或 --framework ms-swift / llama-factory。")
    if plan.padding_free:
        raise refuse(plan, f"Megatron-LM's {MEGATRON_SCRIPT} has no padding-free batches: its GPT dataset "
                     "concatenates documents into --seq-length samples (packing). Re-plan with --packing "
                     "instead of --padding-free.",
                     f"Megatron-LM 的 {MEGATRON_SCRIPT} 没有 padding-free：其 GPT 数据集把文档拼成 "
                     "--seq-length 长的样本（打包）。请用 --packing 代替 --padding-free 重新规划。")
    if plan.offload != "none":
        raise refuse(plan, "Megatron-LM does not offload ZeRO state; re-plan with --offload none.",
                     "Megatron-LM 不卸载 ZeRO 状态；请用 --offload none 重新规划。")
    t = [*torchrun_prefix(plan), plan.script or MEGATRON_SCRIPT,
         "--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp),
         "--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch),
         "--seq-length", str(seq_len(plan)), "--max-position-embeddings", str(seq_len(plan)),
         *_recompute(plan), f"--{half_precision(plan)}",
         "--optimizer", "sgd" if plan.optimizer == "sgd" else "adam"]
    t += _megatron_sharding(zero_stage(plan))
    if plan.tp > 1:
        t.append("--sequence-parallel")
    if plan.loss == "fused":
        t.append("--cross-entropy-loss-fusion")
    if plan.float8:
        t += ["--fp8-format", "hybrid"]
    return [*t, "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", plan.deploy_model,
            "--data-path", DATASET]


def megatron_emit(plan: Plan) -> str:
    notes = ["Megatron-LM: flags from NVIDIA/Megatron-LM megatron/training/arguments.py and the",
             "config dataclasses it turns into flags @ d98e8a64ddf3.",
             "Run from a Megatron-LM checkout; add the model's --num-layers, --hidden-size,",
             f"--num-attention-heads ... and replace {DATASET} with your preprocessed data prefix."]
    if plan.optimizer not in ("adamw", "sgd"):
        notes.append(f"Megatron has no {plan.optimizer}: its adam (decoupled weight decay) stands in.")
    if plan.float8:
        notes.append("--fp8-format needs Transformer Engine.")
    if zero_stage(plan) >= 2:
        what = "gradients and weights" if zero_stage(plan) == 3 else "gradients"
        notes.append(f"Megatron-FSDP (--use-megatron-fsdp) shards the {what} as the plan does; it saves "
                     "fsdp_dtensor checkpoints (examples/megatron_fsdp).")
    notes += multinode_note(plan)
    return "\n".join([*comments(notes), shell_join(megatron_tokens(plan))]) + "\n"
