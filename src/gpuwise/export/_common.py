"""Pieces several exporters share: shell quoting with env references, precision, errors, and the
plan's software stack (pinned images, visible-devices variable) read as data by its id."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from gpuwise.catalog.stacks import SoftwareStack, stacks
from gpuwise.errors import InputError
from gpuwise.export._plan import Plan
from gpuwise.i18n import Text

__all__ = [
    "DS_CONFIG_FILE",
    "KV_DEFAULT",
    "TRAIN_SCRIPT",
    "Env",
    "check_serving",
    "check_training",
    "half_precision",
    "image_version",
    "not_for",
    "num",
    "online_quantization",
    "script_base_note",
    "script_notes",
    "script_peft_note",
    "serve_image",
    "serving_notes",
    "shell_join",
    "stack",
    "stack_note",
    "train_image",
    "train_script",
    "uses_deepspeed",
    "uses_fsdp",
    "zero_stage",
]

# Placeholders the user replaces: their training entry point and where the DeepSpeed JSON goes.
TRAIN_SCRIPT = "train.py"
DS_CONFIG_FILE = "ds_config.json"


# What a non-CUDA stack's images are, for the comment every output on them carries: a
# serving line and a training line, by stack id (the stack names its images, not their kind).
_BUILDS = {"rocm": ("AMD's ROCm build of vLLM", "AMD's ROCm build of PyTorch"),
           "cann": ("vllm-ascend (the vLLM plugin for Ascend NPUs)", "torch_npu (PyTorch for Ascend NPUs)")}


class Env(str):
    """A command token that refers to shell variables: double-quoted so that they expand."""


def shell_join(tokens: Sequence[str]) -> str:
    """One command line: literal tokens quoted with shlex, `Env` tokens inside double quotes."""
    return " ".join(f'"{t}"' if isinstance(t, Env) else shlex.quote(t) for t in tokens)


def num(value: float) -> str:
    """A number as a short command-line value: 0.9, 12, 3.5."""
    return f"{value:g}"


def half_precision(plan: Plan) -> str:
    """'bf16' or 'fp16' for mixed-precision training on the plan's card."""
    if plan.weights == "fp16" or not plan.card_facts.bf16:
        return "fp16"
    cc = plan.card_facts.compute_capability
    major = str(cc).split(".")[0] if cc else ""
    # bf16 tensor cores start at compute capability 8.0 (Ampere); torch.cuda.is_bf16_supported()
    # checks the same major >= 8 (pytorch torch/cuda/__init__.py). AMD CDNA3 ("gfx942") has bf16.
    if major.isdigit() and int(major) < 8:
        return "fp16"
    return "bf16"


def vendor(plan: Plan) -> str:
    """The card's maker, as the plan recorded it."""
    return plan.card_facts.vendor


def not_for(target: str, plan: Plan, en: str, zh: str) -> InputError:
    """The standard 'this target does not apply to this plan' error."""
    return InputError(Text(f"Cannot export '{target}' for this plan: {en}",
                           f"无法为此计划导出“{target}”：{zh}"))


# KV cache dtypes that mean "the engine's default" (the model's own 16-bit type)
KV_DEFAULT = ("auto", "bf16", "fp16", "bfloat16", "float16")


def check_serving(target: str, tool: str, plan: Plan, kv: Sequence[str]) -> None:
    """What every serving engine's export refuses: a training plan, a plan sized for another engine
    (or a GGUF file), one engine spanning nodes, and a KV cache type the engine lacks (`kv`: its
    own names for the non-default types)."""
    if plan.training:
        raise not_for(target, plan, f"it is a training plan (task '{plan.task}'); {tool} serves models.",
                      f"这是训练计划（task “{plan.task}”），{tool} 只做推理服务。")
    if plan.engine not in (None, "vllm", target) or plan.weights.startswith("gguf"):
        engine = plan.engine or plan.weights
        raise not_for(target, plan, f"it was sized for the '{engine}' engine, whose memory use differs. "
                      f"Re-plan with --engine {target}.",
                      f"它是按“{engine}”引擎估算的，显存占用不同；请用 --engine {target} 重新规划。")
    if plan.tp * plan.pp > plan.gpus_per_node:
        raise not_for(target, plan, f"one engine (tensor x pipeline = {plan.tp} x {plan.pp}) spans nodes of "
                      f"{plan.gpus_per_node} GPUs; gpuwise exports {tool} replicas that each fit on one node.",
                      f"单个引擎（张量 × 流水线 = {plan.tp} × {plan.pp}）跨越每节点 {plan.gpus_per_node} 张卡的节点；"
                      f"gpuwise 只导出每个副本位于单节点的 {tool} 方案。")
    if plan.kv_dtype not in (*kv, *KV_DEFAULT):
        raise not_for(target, plan, f"{tool} has no KV cache type '{plan.kv_dtype}'; use auto or fp8.",
                      f"{tool} 没有 KV 缓存类型“{plan.kv_dtype}”；请用 auto 或 fp8。")


# What each serving engine quantises as it loads a 16-bit checkpoint: the plan's `quantization` (the
# format its checkpoint still needs) -> the engine's --quantization value.
#   vLLM: "Dynamic quantization of an original precision BF16/FP16 model to FP8 ... specifying
#     --quantization="fp8"" (docs.vllm.ai/en/v0.5.4/quantization/fp8.html, "Online Dynamic
#     Quantization"; `fp8` is still a --quantization choice in the recorded vLLM 0.33 help).
#   SGLang: "To enable fp8 weight quantization, add --quantization fp8 on a fp16 checkpoint"
#     (docs.sglang.io/docs/advanced_features/server_arguments).
#   TensorRT-LLM: none; `trtllm-serve` reads the quantisation of a pre-quantised (NVIDIA ModelOpt)
#     checkpoint, and its serve flags and LlmArgs keys recorded here have no on-load method.
# No engine here quantises to int4/int8/nf4 as it loads (those need calibrated AWQ/GPTQ weights).
ONLINE = {"vllm": {"fp8": "fp8"}, "sglang": {"fp8": "fp8"}, "trtllm": {}}


def online_quantization(target: str, tool: str, plan: Plan) -> str | None:
    """The engine's --quantization value for the plan, None when its checkpoint is already in the
    plan's format; InputError when the checkpoint is not and the engine cannot quantise it as it
    loads: the export would deploy another precision (more memory) than the plan sized."""
    need = plan.quantization
    if not need:
        return None
    method = ONLINE.get(target, {}).get(need)
    if method is not None:
        return method
    raise _checkpoint_error(target, tool, plan, need, _how_to_get(need, target))


def _how_to_get(fmt: str, target: str) -> Text:
    """Where a checkpoint in `fmt` comes from, and the re-plan that needs none."""
    if fmt == "fp8" and target == "trtllm":
        return Text(" (one quantised with NVIDIA ModelOpt), or re-plan with --engine vllm, which quantises "
                    "a 16-bit checkpoint to FP8 as it loads (--quantization fp8)",
                    "（例如用 NVIDIA ModelOpt 量化的版本），或用 --engine vllm 重新规划（vLLM 加载时把 16 位"
                    "检查点在线量化为 FP8，--quantization fp8）")
    if fmt in ("int4", "int8"):
        alt = "bf16" if target == "trtllm" else "fp8"
        return Text(f" (an AWQ or GPTQ repo), or re-plan with --weights {alt}",
                    f"（AWQ 或 GPTQ 版本），或用 --weights {alt} 重新规划")
    return Text("", "")


def _checkpoint_error(target: str, tool: str, plan: Plan, fmt: str, how: Text) -> InputError:
    return not_for(target, plan,
                   f"it was sized for {fmt} weights, but {plan.deploy_model} is not stored as {fmt} and "
                   f"{tool} does not quantise to {fmt} as it loads, so the export would deploy another "
                   f"precision than the plan sized. Pass a checkpoint of the model stored as {fmt} with "
                   f"--deploy-model{how.en}.",
                   f"方案按 {fmt} 权重估算，但 {plan.deploy_model} 不是 {fmt} 检查点，{tool} 加载时也不会"
                   f"量化为 {fmt}，导出的配置会部署另一种精度（显存占用与方案不同）。请用 --deploy-model "
                   f"指定该模型的 {fmt} 检查点{how.zh}。")


def serving_notes(plan: Plan, vllm_sized: str) -> list[str]:
    """A serving export's comment lines: `vllm_sized` (how this engine's sizing differs) when the plan
    was sized with vLLM's rules, the build note, then the plan's own notes."""
    out = [n.en for n in plan.notes]
    build = stack_note(plan)
    if build:
        out.insert(0, build)
    if plan.engine == "vllm":
        out.insert(0, vllm_sized)
    return out


# The base-weight loading a user's own training script must do for a plan sized on quantised base
# weights (QLoRA): transformers' bitsandbytes integration, BitsAndBytesConfig(load_in_4bit=True,
# bnb_4bit_quant_type="nf4") / (load_in_8bit=True) (huggingface.co/docs/transformers/quantization/
# bitsandbytes); the QLoRA recipe computes in bf16 over NF4 storage (Dettmers et al. 2023, s.3).
_SCRIPT_BASE = {"nf4": 'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", '
                       "bnb_4bit_compute_dtype=torch.bfloat16)",
                "int8": "BitsAndBytesConfig(load_in_8bit=True)"}


def script_base_note(plan: Plan) -> str | None:
    """For a training plan on quantised base weights run by the user's script: how to load them,
    since a 16-bit base would need several times the weight memory the plan sized."""
    how = _SCRIPT_BASE.get(plan.weights) if plan.training else None
    if how is None:
        return None
    return (f"The plan sizes {plan.task} on a base stored in {plan.weights}: load {plan.deploy_model} in your "
            f"script with quantization_config={how}; a 16-bit base needs 2-4x the weight memory the plan sized.")


def script_peft_note(plan: Plan) -> str | None:
    """For a plan run by the user's own script (the HF Trainer forms, accelerate, torchrun): the LoRA and
    collation knobs it was sized for, in PEFT's and TRL's words: peft LoraConfig(use_dora=...,
    modules_to_save=[...]) (src/peft/tuners/lora/config.py), TRL SFTConfig(padding_free=True) with a
    flash-attention model (transformers attn_implementation='flash_attention_2')."""
    parts = []
    if plan.dora:
        parts.append("use_dora=True")
    if plan.modules_to_save:
        parts.append(f"modules_to_save={list(plan.modules_to_save)!r}")
    words = [f"peft LoraConfig({', '.join(parts)})"] if parts else []
    if plan.padding_free:
        words.append("TRL SFTConfig(padding_free=True) with attn_implementation='flash_attention_2'")
    if not words:
        return None
    return f"The plan is sized for {' and '.join(words)}: set them in your script."



def script_notes(plan: Plan) -> list[str]:
    """What a user's own training script must do to run the plan: load the quantised base, set the PEFT knobs."""
    return [note for note in (script_base_note(plan), script_peft_note(plan)) if note]

def zero_stage(plan: Plan) -> int:
    """The plan's ZeRO stage; an FSDP plan without one is full sharding, i.e. stage 3."""
    return plan.zero or (3 if plan.fsdp else 0)


def uses_fsdp(plan: Plan) -> bool:
    """FSDP when the plan allows it (its memory equals ZeRO-3's); NVMe offload needs DeepSpeed
    (ZeRO-Infinity), since FSDP offloads to CPU memory only."""
    return plan.fsdp and plan.offload != "nvme"


def uses_deepspeed(plan: Plan) -> bool:
    """DeepSpeed runs the sharding whenever there is a ZeRO stage and FSDP does not take it."""
    return zero_stage(plan) > 0 and not uses_fsdp(plan)


def check_training(plan: Plan, target: str) -> None:
    """The training targets need a training plan whose offload has a ZeRO stage to live in."""
    if not plan.training:
        raise not_for(target, plan, "it is an inference plan; DeepSpeed, accelerate and torchrun "
                      "configure training. Use vllm (or a scheduler target).",
                      "这是推理计划；DeepSpeed、accelerate 和 torchrun 用于训练，"
                      "请导出 vllm（或调度器目标）。")
    if plan.offload != "none" and zero_stage(plan) == 0:
        raise not_for(target, plan, "offload needs ZeRO stage 1 or higher; re-plan with --zero 2.",
                      "卸载需要 ZeRO stage 1 以上；请用 --zero 2 重新规划。")


def train_script(plan: Plan) -> str:
    """The training entry point (relative to the plan's workdir); `train.py` is a placeholder."""
    return plan.script or TRAIN_SCRIPT


def stack(plan: Plan) -> SoftwareStack:
    """The software stack row of the plan's card (software_stacks.toml, by id: data, not the
    card catalog)."""
    return stacks()[plan.card_facts.software]


def serve_image(plan: Plan) -> str:
    """The serving container: `--image`, else the stack's pinned vLLM image."""
    return plan.image or stack(plan).vllm_image


def train_image(plan: Plan) -> str:
    """The training container: `--image`, else the stack's pinned PyTorch image."""
    return plan.image or stack(plan).train_image


def image_version(image: str, package: str) -> str | None:
    """The version of `package` an image tag names: `..._vllm_0.23.0` or `..._pytorch_release_2.10.0`
    inside the tag, else a leading version (`v0.33.0`, `2.11.0-cuda12.8-cudnn9-runtime`)."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2].split("@")[0]
    inner = re.search(rf"(?:^|[_-]){re.escape(package)}[_-](?:release[_-])?v?(\d+\.\d+(?:\.\d+)?)", tag)
    lead = re.match(r"v?(\d+\.\d+(?:\.\d+)?)(?=$|[-_])", tag)
    found = inner or lead
    return found.group(1) if found else None


def stack_note(plan: Plan) -> str | None:
    """For a ROCm or CANN plan: which build the output runs and which variable selects devices;
    None on CUDA. Never a plain CUDA line on another stack without saying so."""
    row = stack(plan)
    if row.id not in _BUILDS:
        return None
    serving, training = _BUILDS[row.id]
    image = train_image(plan) if plan.training else serve_image(plan)
    return (f"{row.name} stack: this runs {training if plan.training else serving}, image "
            f"{image}, not the CUDA build; {row.visible_devices_env} selects the devices "
            "(not CUDA_VISIBLE_DEVICES).")
