"""The `framework` target: each training framework's own launch form, read back by the real parser
of its format (shlex for command lines, PyYAML, tomllib, ast), with every planned knob set; a
hostile model id stays inert; the scheduler targets launch the same form.

The key lists below were checked against each framework's source at the commits that
export/framework.py cites."""

from __future__ import annotations

import ast
import dataclasses
import json
import shlex
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from gpuwise.errors import InputError
from gpuwise.export import INFERENCE_TARGETS, TRAINING_TARGETS, emit, framework
from gpuwise.export._launch import launch_line, packages, setup_lines
from gpuwise.export._plan import parse_plan
from tests.export_samples import INFER, TRAIN, make

# A LoRA run on 8 GPUs with every knob away from its default.
LORA = make(TRAIN, parallelism__zero=2, parallelism__offload="none", workload__task="lora",
            workload__hf_id="meta-llama/Llama-3.1-8B", workload__model="llama-3.1-8b",
            workload__lora_rank=32, workload__loss="fused", workload__packing=True,
            workload__activation_offload=True, workload__compile=True,
            workload__optimizer="paged-adamw8bit")
QLORA_1 = make(LORA, gpus=1, parallelism__zero=0, workload__task="qlora", weights="nf4")
# Pretraining on 2 nodes x 8 GPUs, tensor parallel 2 (data parallel 8), fp8, selective recompute.
PRETRAIN = make(TRAIN, gpus=16, nodes=2, parallelism__zero=1, parallelism__offload="none",
                parallelism__tp=2, workload__task="pretrain", workload__hf_id="Qwen/Qwen3-8B",
                workload__model="qwen3-8b", workload__float8=True, workload__compile=True,
                workload__grad_ckpt="selective", workload__loss="fused")
HOSTILE = "evil'\"$(touch PWNED)`touch PWNED`\n; touch PWNED #\u2028x\\y"
# The id as the plan keeps it (the loader cleans it to one line); quotes, `$(...)`, backticks,
# `;`, `#` and backslashes are still there for each exporter to quote.
HOSTILE_ID = parse_plan(make(TRAIN, workload__hf_id=HOSTILE)).deploy_model


def fw(plan: dict[str, Any], name: str, **changes: Any) -> dict[str, Any]:
    return make(plan, workload__framework=name, **changes)


def command(text: str) -> list[str]:
    """The command after the leading `#` lines, split as a POSIX shell splits it."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return shlex.split("\n".join(lines[start:]))


def flags(tokens: list[str]) -> dict[str, str]:
    """`--flag value` pairs (a flag followed by another flag counts as a switch: "")."""
    out: dict[str, str] = {}
    for i, tok in enumerate(tokens):
        if tok.startswith("--"):
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
            out[tok] = "" if nxt.startswith("--") else nxt
    return out


def comment_yaml(text: str) -> tuple[list[str], Any]:
    return [ln[2:] for ln in text.splitlines() if ln.startswith("# ")], yaml.safe_load(text)


# ------------------------------------------------------------------ dispatch

def test_the_hostile_id_keeps_its_shell_and_quote_characters() -> None:
    assert all(c in HOSTILE_ID for c in ("'", '"', "$(", "`", ";", "#", "\\"))


def test_framework_is_the_first_training_target_and_no_inference_target() -> None:
    assert TRAINING_TARGETS[0] == "framework" and "framework" not in INFERENCE_TARGETS


def test_the_framework_target_refuses_an_inference_plan() -> None:
    with pytest.raises(InputError, match="inference plan"):
        emit(INFER, "framework")


def test_an_unknown_framework_is_an_input_error_naming_the_known_ones() -> None:
    with pytest.raises(InputError) as info:
        emit(fw(LORA, "axolotl"), "framework")
    assert "torchtune" in info.value.message.en and "llama-factory" in info.value.message.en


# ------------------------------------------------------------------ torchtune

@pytest.mark.parametrize("task,gpus,recipe,config", [
    ("lora", 8, "lora_finetune_distributed", "llama3_1/8B_lora"),
    ("lora", 1, "lora_finetune_single_device", "llama3_1/8B_lora_single_device"),
    ("qlora", 1, "lora_finetune_single_device", "llama3_1/8B_lora_single_device"),
    ("full", 8, "full_finetune_distributed", "llama3_1/8B_full"),
    ("full", 1, "full_finetune_single_device", "llama3_1/8B_full_single_device"),
])
def test_torchtune_picks_the_recipe_by_task_and_gpu_count(task: str, gpus: int, recipe: str,
                                                          config: str) -> None:
    plan = fw(LORA, "torchtune", gpus=gpus, workload__task=task)
    if gpus == 1:
        plan = make(plan, parallelism__zero=0)
    args = command(emit(plan, "framework"))
    assert args[:2] == ["tune", "run"]
    at = args.index(recipe)
    assert args[at + 1:at + 3] == ["--config", config]
    if gpus > 1:
        assert flags(args[:at])["--nproc-per-node"] == str(gpus)
    else:
        assert at == 2  # a single-device run takes no torchrun flags


def test_torchtune_sets_every_planned_knob_as_an_override() -> None:
    args = command(emit(fw(LORA, "torchtune"), "framework"))
    overrides = dict(a.split("=", 1) for a in args if "=" in a)
    assert overrides == {
        "batch_size": "2", "gradient_accumulation_steps": "4", "tokenizer.max_seq_len": "4096",
        "dataset.packed": "True", "enable_activation_checkpointing": "True",
        "enable_activation_offloading": "True", "compile": "True",
        "optimizer._component_": "bitsandbytes.optim.PagedAdamW8bit",
        "loss._component_": "torchtune.modules.loss.LinearCrossEntropyLoss",
        "model.lora_rank": "32", "fsdp_reshard_after_forward": "False", "fsdp_cpu_offload": "False",
        "dtype": "bf16"}


def test_torchtune_qlora_quantizes_the_lora_builders_base_and_full_runs_set_optimizer_in_bwd() -> None:
    qlora = command(emit(fw(QLORA_1, "torchtune"), "framework"))
    assert "model.quantize_base=True" in qlora
    full = command(emit(fw(QLORA_1, "torchtune", workload__task="full",
                           workload__optimizer_in_backward=True, workload__loss="full"), "framework"))
    assert "optimizer_in_bwd=True" in full and "loss.num_output_chunks=1" in full
    assert not any(a.startswith("model.lora_rank") for a in full)


def test_torchtune_names_a_placeholder_config_for_a_model_it_does_not_ship() -> None:
    text = emit(fw(LORA, "torchtune", workload__hf_id="acme/Foo-7B", workload__model="foo"), "framework")
    assert "my_config.yaml" in command(text) and "tune cp" in text


# ------------------------------------------------------------------ ms-swift

def test_ms_swift_sets_every_planned_knob_as_a_flag() -> None:
    args = command(emit(fw(LORA, "ms-swift", workload__task="qlora"), "framework"))
    assert args[:3] == ["env", "NPROC_PER_NODE=8", "swift"] and args[3] == "sft"
    assert flags(args) == {
        "--model": "meta-llama/Llama-3.1-8B", "--use_hf": "true", "--tuner_type": "lora",
        "--quant_method": "bnb", "--quant_bits": "4", "--lora_rank": "32",
        "--target_modules": "all-linear", "--torch_dtype": "bfloat16",
        "--per_device_train_batch_size": "2", "--gradient_accumulation_steps": "4",
        "--max_length": "4096", "--gradient_checkpointing": "true", "--optim": "paged_adamw_8bit",
        "--use_liger_kernel": "true", "--packing": "true", "--attn_impl": "flash_attn",
        "--deepspeed": "zero2", "--dataset": "YOUR_DATASET"}


def test_ms_swift_uses_its_offload_config_and_the_planned_json_for_nvme() -> None:
    cpu = flags(command(emit(fw(LORA, "ms-swift", parallelism__zero=3, parallelism__offload="cpu"),
                             "framework")))
    assert cpu["--deepspeed"] == "zero3_offload" and cpu["--tuner_type"] == "lora"
    nvme = make(LORA, parallelism__zero=3, parallelism__offload="nvme", workload__task="full")
    assert flags(command(emit(fw(nvme, "ms-swift"), "framework")))["--deepspeed"] == "ds_config.json"


# ------------------------------------------------------------------ Megatron-LM

def test_megatron_passes_parallelism_batch_recompute_and_fp8() -> None:
    args = command(emit(fw(PRETRAIN, "megatron"), "framework"))
    assert args[0] == "torchrun" and "pretrain_gpt.py" in args
    f = flags(args[args.index("pretrain_gpt.py"):])
    assert {k: f[k] for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                              "--micro-batch-size", "--global-batch-size", "--seq-length",
                              "--recompute-granularity", "--fp8-format", "--tokenizer-model")} == {
        "--tensor-model-parallel-size": "2", "--pipeline-model-parallel-size": "1",
        "--micro-batch-size": "2", "--global-batch-size": "64", "--seq-length": "4096",
        "--recompute-granularity": "selective", "--fp8-format": "hybrid",
        "--tokenizer-model": "Qwen/Qwen3-8B"}
    assert {"--bf16", "--use-distributed-optimizer", "--cross-entropy-loss-fusion"} <= set(f)


@pytest.mark.parametrize(("zero", "strategy"), [(2, "optim_grads"), (3, "optim_grads_params")])
def test_megatron_shards_gradients_and_weights_with_megatron_fsdp_not_the_distributed_optimizer_alone(
        zero: int, strategy: str) -> None:
    # --use-distributed-optimizer alone is ZeRO-1: a ZeRO-2/3 plan exported with it holds whole gradients
    # (and weights) on every GPU, more than the plan sized (examples/megatron_fsdp/README.md@fb154fb)
    f = flags(command(emit(fw(PRETRAIN, "megatron", parallelism__zero=zero), "framework")))
    assert f["--data-parallel-sharding-strategy"] == strategy and f["--ckpt-format"] == "fsdp_dtensor"
    assert {"--use-megatron-fsdp", "--use-distributed-optimizer", "--no-gradient-accumulation-fusion"} <= set(f)
    one = flags(command(emit(fw(PRETRAIN, "megatron", parallelism__zero=1), "framework")))
    assert "--use-distributed-optimizer" in one and "--use-megatron-fsdp" not in one


def test_megatron_full_recompute_every_n_layers_and_refuses_lora() -> None:
    f = flags(command(emit(fw(PRETRAIN, "megatron", workload__grad_ckpt="every-2"), "framework")))
    assert (f["--recompute-granularity"], f["--recompute-method"], f["--recompute-num-layers"]) == \
        ("full", "uniform", "2")
    with pytest.raises(InputError, match="LoRA"):
        emit(fw(LORA, "megatron"), "framework")


# ------------------------------------------------------------------ LLaMA-Factory

# src/llamafactory/hparams/*.py @ v0.9.5 plus the transformers TrainingArguments it extends.
LF_KEYS = {"model_name_or_path", "stage", "do_train", "finetuning_type", "quantization_bit",
           "quantization_method", "lora_rank", "lora_target", "deepspeed", "dataset", "template",
           "cutoff_len", "packing", "output_dir", "per_device_train_batch_size",
           "gradient_accumulation_steps", "optim", "bf16", "fp16", "disable_gradient_checkpointing",
           "use_unsloth_gc", "use_unsloth", "enable_liger_kernel"}


def test_llama_factory_yaml_sets_every_planned_knob() -> None:
    notes, cfg = comment_yaml(emit(fw(LORA, "llama-factory", workload__task="qlora"), "framework"))
    assert set(cfg) <= LF_KEYS
    assert cfg == {**cfg, "model_name_or_path": "meta-llama/Llama-3.1-8B", "stage": "sft",
                   "finetuning_type": "lora", "quantization_bit": 4, "lora_rank": 32,
                   "lora_target": "all", "per_device_train_batch_size": 2,
                   "gradient_accumulation_steps": 4, "cutoff_len": 4096, "bf16": True,
                   "enable_liger_kernel": True, "use_unsloth": False, "use_unsloth_gc": True,
                   "disable_gradient_checkpointing": False, "packing": True,
                   "deepspeed": "ds_config.json", "optim": "paged_adamw_8bit"}
    launch = shlex.split(next(n for n in notes if "llamafactory-cli" in n))
    assert launch == ["env", "FORCE_TORCHRUN=1", "NPROC_PER_NODE=8", "llamafactory-cli", "train",
                      "llamafactory_train.yaml"]


def test_llama_factory_pretraining_is_stage_pt_full_without_deepspeed_when_unsharded() -> None:
    cfg = yaml.safe_load(emit(fw(QLORA_1, "llama-factory", workload__task="pretrain",
                                 workload__grad_ckpt="none", workload__activation_offload=False),
                              "framework"))
    assert (cfg["stage"], cfg["finetuning_type"], cfg["disable_gradient_checkpointing"]) == \
        ("pt", "full", True)
    assert "deepspeed" not in cfg and "lora_rank" not in cfg and "quantization_bit" not in cfg


# ------------------------------------------------------------------ torchtitan

# torchtitan/config/job_config.py @ v0.2.2: the sections and fields the job TOML may set.
TITAN_FIELDS = {
    "model": {"name", "flavor", "hf_assets_path", "converters"},
    "optimizer": {"name", "early_step_in_backward"},
    "training": {"local_batch_size", "global_batch_size", "seq_len", "dataset",
                 "mixed_precision_param", "enable_cpu_offload"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "tensor_parallel_degree", "pipeline_parallel_degree", "fsdp_reshard_after_forward"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components"},
    "quantize": {"linear"},
}


def test_torchtitan_toml_sets_every_planned_knob() -> None:
    text = emit(fw(PRETRAIN, "torchtitan", workload__optimizer_in_backward=True), "framework")
    job = tomllib.loads(text)
    for section, body in job.items():
        assert set(body) <= TITAN_FIELDS[section], section
    assert job["model"] == {"name": "qwen3", "flavor": "8B", "hf_assets_path": "./assets/hf/Qwen3-8B",
                            "converters": ["quantize.linear.float8"]}
    assert job["training"]["local_batch_size"] == 2 and job["training"]["seq_len"] == 4096
    assert job["training"]["global_batch_size"] == 64
    assert job["parallelism"]["data_parallel_shard_degree"] == 8
    assert job["parallelism"]["tensor_parallel_degree"] == 2
    assert job["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert job["compile"]["enable"] is True and job["optimizer"]["early_step_in_backward"] is True
    assert set(job["quantize"]["linear"]["float8"]) == {
        "enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp", "filter_fqns"}
    launch = next(ln for ln in text.splitlines() if "torchtitan.train" in ln)
    assert shlex.split(launch[2:])[-4:] == ["-m", "torchtitan.train", "--job.config_file",
                                            "torchtitan_job.toml"]


def test_torchtitan_full_checkpointing_and_ddp_replication_and_no_lora() -> None:
    job = tomllib.loads(emit(fw(PRETRAIN, "torchtitan", parallelism__zero=0, parallelism__tp=1,
                                workload__grad_ckpt="full", workload__float8=False), "framework"))
    assert job["activation_checkpoint"] == {"mode": "full"} and "quantize" not in job
    assert (job["parallelism"]["data_parallel_replicate_degree"],
            job["parallelism"]["data_parallel_shard_degree"]) == (16, 1)
    with pytest.raises(InputError, match="LoRA"):
        emit(fw(LORA, "torchtitan"), "framework")


# ------------------------------------------------------------------ Unsloth

def calls(tree: ast.AST) -> dict[str, dict[str, Any]]:
    """Each call's name and its literal keyword arguments."""
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            out[name] = {k.arg: ast.literal_eval(k.value) for k in node.keywords
                         if k.arg and isinstance(k.value, ast.Constant)}
    return out


def test_the_unsloth_script_parses_and_sets_every_planned_knob() -> None:
    tree = ast.parse(emit(fw(QLORA_1, "unsloth"), "framework"))
    c = calls(tree)
    assert c["from_pretrained"] == {"load_in_4bit": True, "full_finetuning": False}
    assert c["get_peft_model"] == {"r": 32, "lora_alpha": 32, "lora_dropout": 0, "bias": "none",
                                   "use_gradient_checkpointing": "unsloth"}
    assert c["SFTConfig"] == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4,
                              "packing": True, "optim": "paged_adamw_8bit", "bf16": True,
                              "output_dir": "outputs/llama-3-1-8b"}
    consts = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
              for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
    assert consts["MODEL"] == "meta-llama/Llama-3.1-8B" and consts["MAX_SEQ_LENGTH"] == 4096


def test_unsloth_full_finetuning_has_no_adapters_and_sharding_is_refused() -> None:
    c = calls(ast.parse(emit(fw(QLORA_1, "unsloth", workload__task="full"), "framework")))
    assert c["from_pretrained"]["full_finetuning"] is True and "get_peft_model" not in c
    with pytest.raises(InputError, match="data-parallel"):
        emit(fw(LORA, "unsloth"), "framework")


# ------------------------------------------------------------------ hf, hf-liger, deepspeed

@pytest.mark.parametrize("name", ["hf", "hf-liger"])
def test_hf_frameworks_write_the_accelerate_config_and_the_trainer_flags(name: str) -> None:
    notes, cfg = comment_yaml(emit(fw(LORA, name), "framework"))
    assert cfg == yaml.safe_load(emit(fw(LORA, name), "accelerate"))
    launch = shlex.split(next(n for n in notes if n.strip().startswith("accelerate launch")))
    f = flags(launch)
    assert (f["--per_device_train_batch_size"], f["--gradient_accumulation_steps"], f["--optim"],
            f["--torch_compile"]) == ("2", "4", "paged_adamw_8bit", "True")
    assert ("--use_liger_kernel" in f) == (name == "hf-liger")


def test_the_deepspeed_framework_writes_the_deepspeed_json() -> None:
    assert json.loads(emit(fw(LORA, "deepspeed"), "framework")) == \
        json.loads(emit(fw(LORA, "deepspeed"), "deepspeed"))


# ------------------------------------------------------------------ hostile model ids

STUBS = ("tune() { printf '%s\\0' tune \"$@\"; }; swift() { printf '%s\\0' swift \"$@\"; }; "
         "env() { printf '%s\\0' env \"$@\"; }; torchrun() { printf '%s\\0' torchrun \"$@\"; }\n")


@pytest.mark.parametrize("name,plan", [("torchtune", LORA), ("ms-swift", LORA), ("megatron", PRETRAIN)])
def test_a_hostile_model_id_stays_one_inert_argument_of_the_command(name: str, plan: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    text = emit(fw(plan, name, workload__hf_id=HOSTILE), "framework")
    out = subprocess.run(["bash", "-c", STUBS + text], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", "NODE_RANK": "0", "MASTER_ADDR": "h"})
    assert not (tmp_path / "PWNED").exists()
    args = out.stdout.split("\0")[:-1]
    assert args == command(text) or name == "megatron"  # megatron's "$VARS" expand in bash
    if name != "torchtune":  # torchtune's line names a config, not the model
        assert HOSTILE_ID in args


@pytest.mark.parametrize("name,plan", [("llama-factory", LORA), ("torchtitan", PRETRAIN),
                                       ("unsloth", QLORA_1)])
def test_a_hostile_model_id_reads_back_unchanged_from_the_config(name: str, plan: dict[str, Any]) -> None:
    text = emit(fw(plan, name, workload__hf_id=HOSTILE), "framework")
    if name == "llama-factory":
        assert yaml.safe_load(text)["model_name_or_path"] == HOSTILE_ID
    elif name == "torchtitan":
        assert tomllib.loads(text)["model"]["hf_assets_path"].endswith(HOSTILE_ID.rsplit("/", 1)[-1])
    else:
        tree = ast.parse(text)
        assert set(calls(tree)) <= {"from_pretrained", "get_peft_model", "SFTTrainer", "SFTConfig",
                                    "load_dataset", "train"}
        model = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", "") == "MODEL")
        assert ast.literal_eval(model) == HOSTILE_ID


@pytest.mark.parametrize("name,plan", [("torchtune", LORA), ("ms-swift", LORA), ("megatron", PRETRAIN),
                                       ("llama-factory", LORA), ("torchtitan", PRETRAIN),
                                       ("unsloth", QLORA_1)])
def test_a_raw_id_with_newlines_built_in_python_stays_inert_too(name: str, plan: dict[str, Any],
                                                              tmp_path: Path) -> None:
    """A `Plan` made in Python skips the loader's cleaning: each writer still quotes the raw id."""
    raw = dataclasses.replace(parse_plan(fw(plan, name)), deploy_model=HOSTILE)
    text = framework.emit(raw)
    if name in ("torchtune", "ms-swift", "megatron"):
        out = subprocess.run(["bash", "-c", STUBS + text], cwd=tmp_path, capture_output=True,
                             text=True, check=True, env={"PATH": "/usr/bin:/bin"})
        assert name == "torchtune" or HOSTILE in out.stdout.split("\0")
    elif name == "llama-factory":
        assert yaml.safe_load(text)["model_name_or_path"] == HOSTILE
    elif name == "torchtitan":
        assert tomllib.loads(text)["model"]["hf_assets_path"] == "./assets/hf/" + HOSTILE
    else:
        model = next(n.value for n in ast.parse(text).body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", "") == "MODEL")
        assert ast.literal_eval(model) == HOSTILE
    assert not (tmp_path / "PWNED").exists()


# ------------------------------------------------------------------ scheduler targets

@pytest.mark.parametrize("name,head", [("torchtune", "tune run"), ("ms-swift", "swift sft"),
                                       ("llama-factory", "llamafactory-cli train")])
def test_scheduler_targets_launch_the_frameworks_own_form(name: str, head: str) -> None:
    plan = parse_plan(fw(LORA, name))
    assert head in launch_line(plan)
    assert head in emit(fw(LORA, name), "k8s") and head in emit(fw(LORA, name), "skypilot")
    assert "transformers" not in " ".join(packages(plan))


def test_the_setup_writes_the_frameworks_files_which_parse_back(tmp_path: Path) -> None:
    plan = parse_plan(fw(LORA, "llama-factory", workload__hf_id=HOSTILE))
    script = "\n".join(setup_lines(plan, install=False))
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
    assert yaml.safe_load((tmp_path / "llamafactory_train.yaml").read_text())["model_name_or_path"] == HOSTILE_ID
    assert json.loads((tmp_path / "ds_config.json").read_text())["zero_optimization"]["stage"] == 2
    assert not (tmp_path / "PWNED").exists()


def test_hf_plans_keep_the_torchrun_launch() -> None:
    assert launch_line(parse_plan(fw(LORA, "hf"))).startswith("torchrun ")


# ------------------------------------------------------------------ the CLI

def cli(*args: str) -> Any:
    from gpuwise.cli import plan_cmd

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """gpuwise (test shell)."""

    plan_cmd.register(app)
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_gpuwise_plan_emits_the_framework_target_for_the_planned_framework() -> None:
    out = cli("plan", "qwen2.5-7b", "--task", "lora", "--framework", "hf", "--emit", "framework", "--json")
    assert out["target"] == "framework" and "accelerate launch" in out["config"]


@pytest.mark.parametrize("name,check", [
    ("torchtune", lambda cfg: command(cfg)[:2] == ["tune", "run"]),
    ("llama-factory", lambda cfg: yaml.safe_load(cfg)["finetuning_type"] == "lora"),
])
def test_gpuwise_plan_emits_a_saved_plan_in_its_frameworks_form(name: str, check: Any,
                                                                tmp_path: Path) -> None:
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(parse_plan(fw(LORA, name)).to_dict()))
    out = cli("plan", "--emit", "framework", "--from", str(saved), "--json")
    assert out["plan"]["workload"]["framework"] == name and check(out["config"])


@pytest.mark.parametrize("name", ["torchtune", "llama-factory"])
def test_gpuwise_plan_with_a_catalogued_framework_emits_its_form(name: str) -> None:
    from gpuwise.catalog.frameworks import frameworks

    if name not in frameworks():
        pytest.skip(f"{name} is not in data/frameworks.toml yet")
    out = cli("plan", "qwen2.5-7b", "--task", "lora", "--framework", name, "--emit", "framework", "--json")
    assert out["plan"]["workload"]["framework"] == name
    assert ("tune run" if name == "torchtune" else "llamafactory-cli train") in out["config"]
