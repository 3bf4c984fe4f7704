"""Training frameworks as data: the defaults that decide a run's memory and speed.

Data: src/gpuwise/data/frameworks.toml, one row per framework, every value sourced. `policy()`
turns a framework and the user's explicit flags into the `TrainPolicy` an estimate uses, and
names every default it took from the framework, so the output can say what it assumed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog._datafile import FieldSpec, data_error, id_rows
from gpuwise.errors import unknown_name
from gpuwise.i18n import Text

SHIPPED_FRAMEWORKS = Path(__file__).resolve().parent.parent / "data" / "frameworks.toml"

LOSSES = ("full", "chunked", "fused")
OPTIMIZERS = ("adamw", "adamw8bit", "paged-adamw8bit", "sgd", "adafactor")
# The --zero stage each multi-GPU default sharding amounts to (FSDP / FSDP2 full shard = ZeRO-3)
# zero1/2/3 are DeepSpeed's stages (zero_is_deepspeed); dist-optim is a ZeRO-1 that is not DeepSpeed's:
# Megatron-Core's --use-distributed-optimizer, NeMo's Apex DistributedFusedAdam
SHARDING_ZERO = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3, "fsdp2": 3, "dist-optim": 1}
SHARDING = tuple(SHARDING_ZERO)
PEAKS = ("allocated", "reserved", "nvidia-smi", "none")
# The fp32 master beside 16-bit weights: a copy; remainders, the bf16 weight plus a 16-bit remainder a
# parameter (Apex DistributedFusedAdam store_param_remainders), 2 bytes instead of 4; none: pure bf16
MASTER_WEIGHTS = ("fp32", "remainders", "none")
TRAINING_TASKS = ("lora", "qlora", "full", "pretrain")
_EVERY = re.compile(r"^every-([1-9][0-9]?)$")
FIXES = ("fix_checkpointing", "fix_activation_offload", "fix_fused_loss", "fix_8bit_optimizer",
         "fix_optimizer_offload", "fix_sharding")


def is_grad_ckpt(value: str) -> bool:
    """none | full | selective (Megatron core attention) | op-sac (torchtitan) | every-N."""
    return value in ("none", "full", "selective", "op-sac") or bool(_EVERY.match(value))


def ckpt_every(value: str) -> int:
    """For every-N: N (every Nth layer checkpointed); 1 for full; 0 otherwise."""
    m = _EVERY.match(value)
    return int(m.group(1)) if m else 1 if value == "full" else 0


_F = FieldSpec
FRAMEWORK_FIELDS: dict[str, FieldSpec] = {
    "id": _F("str", required=True), "name": _F("str", required=True), "version": _F("str", required=True),
    "launch": _F("str", required=True), "loss": _F("str", required=True, choices=LOSSES),
    "loss_chunks": _F("int", positive=True), "grad_ckpt": _F("str", required=True),
    "grad_ckpt_pretrain": _F("str"), "activation_offload": _F("bool", required=True),
    "optimizer": _F("str", required=True, choices=OPTIMIZERS), "optimizer_full": _F("str", choices=OPTIMIZERS),
    "optimizer_in_backward": _F("bool", required=True), "optimizer_in_backward_full": _F("bool"),
    "optimizer_full_multi_gpu": _F("str", choices=OPTIMIZERS), "optimizer_in_backward_full_multi_gpu": _F("bool"),
    "adapter_dtype": _F("str", required=True, choices=("fp32", "bf16")),
    "master_weights": _F("str", required=True, choices=MASTER_WEIGHTS),
    "master_weights_full": _F("str", choices=MASTER_WEIGHTS),
    "master_weights_full_sharded": _F("str", choices=MASTER_WEIGHTS),
    "grads_dtype": _F("str", required=True, choices=("bf16", "fp32")),
    "sharding": _F("str", required=True, choices=SHARDING), "fp32_sharded_params": _F("bool", required=True),
    "qlora_fsdp": _F("bool", required=True), "packing": _F("bool", required=True), "padding_free": _F("bool"),
    "loss_in_place": _F("bool"),
    "compile": _F("bool", required=True), "flash_attention": _F("bool", required=True),
    "fused_elementwise": _F("bool"), "pp_unsharded_fsdp": _F("bool"), "qlora_fp32_upcast": _F("bool"),
    "optimizer_foreach": _F("bool"), "loss_compiled": _F("bool"), "variable_length_batches": _F("bool"),
    "loss_parallel": _F("bool"), "logits_fp32": _F("bool"), "loss_logits_kept": _F("bool"),
    "pp_keeps_outputs": _F("bool"), "pp_recv_buffers": _F("bool"), "cp_loss_bf16": _F("bool"),
    "zero_deepspeed": _F("bool"), "tp_sequence_parallel": _F("bool"), "tp_float8_allgather": _F("bool"),
    "sdpa_repeats_kv": _F("bool"), "dora_reruns_base": _F("bool"),
    "peak_reported": _F("str", required=True, choices=PEAKS), "peak_note": _F("str", required=True),
    **{k: _F("str") for k in FIXES},
    "sources": _F("strlist", required=True), "unverified": _F("strlist"), "notes": _F("str"),
    "default_for": _F("strlist", choices=TRAINING_TASKS), "default_reason": _F("str"),
}


@dataclass(frozen=True)
class Framework:
    """One row of frameworks.toml (docs/data-schema.md)."""

    id: str
    name: str
    version: str
    launch: str
    loss: str
    grad_ckpt: str
    activation_offload: bool
    optimizer: str
    optimizer_in_backward: bool
    adapter_dtype: str
    master_weights: str
    grads_dtype: str
    sharding: str
    fp32_sharded_params: bool
    qlora_fsdp: bool
    packing: bool
    compile: bool
    flash_attention: bool
    peak_reported: str
    peak_note: str
    sources: tuple[str, ...]
    loss_chunks: int = 8
    master_weights_full: str | None = None
    master_weights_full_sharded: str | None = None  # full FT under ZeRO/FSDP, where it differs from the above
    grad_ckpt_pretrain: str | None = None
    optimizer_full: str | None = None
    optimizer_in_backward_full: bool | None = None
    optimizer_full_multi_gpu: str | None = None  # the distributed full recipe's, where it differs
    optimizer_in_backward_full_multi_gpu: bool | None = None
    fix_checkpointing: str | None = None
    fix_activation_offload: str | None = None
    fix_fused_loss: str | None = None
    fix_8bit_optimizer: str | None = None
    fix_optimizer_offload: str | None = None
    fix_sharding: str | None = None
    unverified: tuple[str, ...] = ()
    notes: str = ""
    fused_elementwise: bool = False  # norms, RoPE, SwiGLU, softmax run as fused kernels without torch.compile
    # with pipeline parallelism FSDP keeps each stage's params unsharded for the whole step and
    # accumulates unsharded gradients in the reduce dtype until the last micro-batch's backward
    pp_unsharded_fsdp: bool = False
    # QLoRA through peft.prepare_model_for_kbit_training: every non-4-bit parameter (embedding, head,
    # norms) upcast to fp32, so the residual stream that starts at the embedding is fp32 too
    qlora_fp32_upcast: bool = False
    # AdamW runs torch.optim's multi-tensor (foreach) path, which holds one state-sized intermediate
    # during the step (exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)); fused kernels hold none
    optimizer_foreach: bool = False
    # with --compile the loss is compiled too (torchtitan compiles its loss function with the model;
    # HF computes the loss inside the compiled forward); False where the version compiled the model only
    loss_compiled: bool = True
    # unpacked batches padded only to their own longest sample, so lengths vary from step to step and
    # the caching allocator keeps the segments an earlier, shorter batch made for the loss
    variable_length_batches: bool = False
    # the unfused loss kernel saves the logits it is handed and writes their gradient into them (Unsloth
    # 2023.12 Fast_CrossEntropyLoss): no log-probs and no separate gradient, unlike aten's cross-entropy
    loss_in_place: bool = False
    # under tensor parallelism the cross-entropy runs on vocabulary-sharded logits (DTensor loss_parallel),
    # whose log-softmax and backward materialise more fp32 tensors than aten's kernels
    loss_parallel: bool = False
    # the model hands the loss fp32 logits (torchtune's TransformerDecoder: self.output(h).float() outside
    # the chunked path); False: bf16 logits, upcast inside the loss (HF ForCausalLMLoss, torchtitan)
    logits_fp32: bool = False
    # the training loop keeps its name for the shifted logits (logits = logits[..., :-1, :].contiguous())
    # bound through backward and the optimizer step, until the next forward rebinds it (torchtune before
    # 'del logits', #1046 and #1235): one more logits-sized tensor beside the loss, its gradients and the step
    loss_logits_kept: bool = False
    # pipeline parallelism: the last stage keeps every micro-batch's output (the logits) until the step
    # ends, to merge and return them (torch.distributed.pipelining output_chunks; step(return_outputs=False)
    # drops them, torchtitan's since 2025-10)
    pp_keeps_outputs: bool = False
    # pipeline parallelism: each stage keeps one receive buffer per micro-batch for its input (not the first
    # stage) and for its output's gradient (not the last), made once and kept across steps
    # (torch.distributed.pipelining PipelineStage _prepare_forward_infra / _create_grad_recv_info)
    pp_recv_buffers: bool = False
    # under sequence parallelism (--cp) the trainer's own loss runs aten's cross-entropy on the model's bf16
    # logits, no fp32 upcast (ms-swift's loss_scale_sp_func); False: the framework's usual loss
    cp_loss_bf16: bool = False
    # --zero N is DeepSpeed's ZeRO (the framework's --deepspeed zeroN), not FSDP: stage 3 keeps bf16 gradient
    # partitions and steps the optimizer one sub-group at a time (memory_train._deepspeed_stage3)
    zero_deepspeed: bool = False
    # tensor parallel is sequence parallel: each of Megatron's all-reduces is an all-gather before the
    # column-parallel linears and a reduce-scatter after the row-parallel ones (speed_train._tp_exchange_seconds)
    tp_sequence_parallel: bool = False
    # under Float8 tensorwise linears those all-gathers carry FP8 (torchao casts before the all-gather)
    tp_float8_allgather: bool = False
    # the model code repeats K and V to every query head before SDPA (torchtitan's repeat_kv): context
    # parallelism then gathers, passes and accumulates n_heads-wide K/V (activations.sdpa_kv_dim)
    sdpa_repeats_kv: bool = False
    # --dora runs the base linear a second time, F.linear(x, weight) on the cast weight (PEFT <= 0.13, or any PEFT
    # with lora_dropout > 0); false where the DoRA layer reuses the base output (PEFT >= 0.14 at dropout 0,
    # torchtune's DoRALinear): speed_train._dora_seconds
    dora_reruns_base: bool = False
    # a micro-batch's samples concatenated into one unpadded row (ms-swift --padding_free, TRL padding_free): the
    # framework's default for --padding-free
    padding_free: bool = False
    default_for: tuple[str, ...] = ()  # the tasks for which `--framework auto` (the default) picks this row
    default_reason: str = ""

    @property
    def zero_is_deepspeed(self) -> bool:
        """--zero N runs DeepSpeed's ZeRO here (zero_deepspeed, or a zero* default sharding), not FSDP."""
        return self.zero_deepspeed or self.sharding.startswith("zero")


def master_weights_for(fw: Framework, task: str, sharded: bool = False) -> str:
    """fp32 (a master copy in the optimizer), remainders (its low 16 bits beside the bf16 weight) or none
    (pure bf16) for this task; `sharded`: under ZeRO/FSDP, where a framework's launcher upcasts the
    trainable weights (accelerate's FSDP path)."""
    full = task in ("full", "pretrain")
    if full and sharded and fw.master_weights_full_sharded:
        return fw.master_weights_full_sharded
    return fw.master_weights_full if full and fw.master_weights_full else fw.master_weights


def load_frameworks(path: Path) -> dict[str, Framework]:
    """Every framework of one file by id; a bad row is a DataError naming the file and the row."""
    out: dict[str, Framework] = {}
    for where, values in id_rows(path, "framework", FRAMEWORK_FIELDS, Text("framework", "框架")):
        for key in ("grad_ckpt", "grad_ckpt_pretrain"):
            if key in values and not is_grad_ckpt(values[key]):
                raise data_error(path, where, f"{key} '{values[key]}' is not none, full, selective, op-sac or every-N.",
                                 f"{key}“{values[key]}”不是 none、full、selective、op-sac 或 every-N。")
        out[values["id"]] = Framework(**values)
    for task in TRAINING_TASKS:
        rows = [fw.id for fw in out.values() if task in fw.default_for]
        if len(rows) > 1:
            raise data_error(path, Text(f"task '{task}'", f"任务“{task}”"),
                             f"default_for names it in more than one row ({', '.join(rows)}).",
                             f"default_for 在多行中都包含它（{', '.join(rows)}）。")
    return out


@functools.cache
def frameworks() -> dict[str, Framework]:
    """The shipped frameworks by id, read once."""
    return load_frameworks(SHIPPED_FRAMEWORKS)


AUTO = "auto"


def find_framework(name: str, task: str = "") -> Framework:
    """A framework by id; `auto` is the row whose default_for holds `task` (hf when none does)."""
    table = frameworks()
    key = name.strip().lower()
    if key == AUTO:
        return next((fw for fw in table.values() if task in fw.default_for), table["hf"])
    found = table.get(key)
    if found is None:
        raise unknown_name(Text("framework", "训练框架"), name, [AUTO, *table], "gpuwise estimate --help")
    return found


KNOBS = ("loss", "grad_ckpt", "activation_offload", "optimizer", "optimizer_in_backward", "packing",
         "padding_free", "compile", "float8")


def resolve_knobs(fw: Framework, task: str, *, multi_gpu: bool,
                  explicit: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The framework's defaults for `task` with each explicit (non-None) flag winning, and the
    names of the knobs that came from the framework (for the output to say so)."""
    full = task in ("full", "pretrain")
    ckpt = fw.grad_ckpt_pretrain if (task == "pretrain" or multi_gpu and full) and fw.grad_ckpt_pretrain \
        else fw.grad_ckpt
    in_bwd = fw.optimizer_in_backward_full if full and fw.optimizer_in_backward_full is not None \
        else fw.optimizer_in_backward
    optimizer = (fw.optimizer_full or fw.optimizer) if full else fw.optimizer
    if full and multi_gpu:  # distributed full recipes (torchtune full_finetune_distributed) differ
        optimizer = fw.optimizer_full_multi_gpu or optimizer
        if fw.optimizer_in_backward_full_multi_gpu is not None:
            in_bwd = fw.optimizer_in_backward_full_multi_gpu
    base: dict[str, Any] = {
        "loss": fw.loss, "grad_ckpt": ckpt, "activation_offload": fw.activation_offload,
        "optimizer": optimizer, "optimizer_in_backward": in_bwd, "packing": fw.packing,
        "padding_free": fw.padding_free, "compile": fw.compile, "float8": False,
    }
    chosen = {k: explicit[k] for k in KNOBS if explicit.get(k) is not None}
    return {**base, **chosen}, tuple(k for k in KNOBS if k not in chosen and k != "float8")
