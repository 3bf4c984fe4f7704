"""The exporters: each output is read back by the tool's own parser when it is installed,
otherwise checked against recorded help texts and key lists (tests/fixtures/help/README.md)."""

from __future__ import annotations

import ast
import itertools
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuwise.errors import InputError, UnknownNameError
from gpuwise.export import INFERENCE_TARGETS, TARGETS, _yaml, emit
from gpuwise.export import ray as ray_export
from tests.export_samples import (
    HELP,
    INFER,
    ONE_GPU,
    PAIRS,
    PLANS,
    TRAIN,
    expand,
    make,
    needs,
    recorded_flags,
    recorded_sections,
)

# ------------------------------------------------------------------ dispatch and errors

def test_the_targets_are_the_eleven_tools_in_order() -> None:
    assert TARGETS == ("vllm", "deepspeed", "accelerate", "torchrun", "skypilot", "dstack",
                       "k8s", "ray", "docker", "sglang", "trtllm")


# TensorRT-LLM has no weight offload: it refuses offloading plans (tests/test_serving_export.py)
@pytest.mark.parametrize("name,target", [(n, t) for n, t in PAIRS
                                         if not (t == "trtllm" and PLANS[n]["parallelism"]["cpu_offload_gb"])])
def test_every_applicable_target_emits_text_for_every_sample_plan(name: str, target: str) -> None:
    text = emit(PLANS[name], target)
    assert text.endswith("\n") and len(text) > 20


def test_an_unknown_target_suggests_the_close_name() -> None:
    with pytest.raises(UnknownNameError) as info:
        emit(INFER, "vlm")
    assert "vllm" in info.value.suggestions and "导出目标" in info.value.message.zh


def test_common_spellings_of_a_target_are_accepted() -> None:
    assert emit(INFER, "Kubernetes") == emit(INFER, "k8s")
    assert emit(INFER, "sky") == emit(INFER, "skypilot")


@pytest.mark.parametrize("target", ["deepspeed", "accelerate", "torchrun"])
def test_training_targets_refuse_an_inference_plan_in_both_languages(target: str) -> None:
    with pytest.raises(InputError) as info:
        emit(INFER, target)
    assert "inference plan" in info.value.message.en and "推理计划" in info.value.message.zh


def test_vllm_refuses_a_training_plan() -> None:
    with pytest.raises(InputError, match="training plan"):
        emit(TRAIN, "vllm")


@pytest.mark.parametrize("plan", [
    make(INFER, gpus="two"), make(INFER, gpus=3, nodes=2), make(INFER, parallelism=[1]),
    make(INFER, workload__task="serve"), make(INFER, workload={"task": "infer"}),
    make(INFER, workload__gpu_memory_utilization=1.5), make(INFER, gpus=8, nodes=2, gpus_per_node=8),
], ids=["gpus-text", "uneven-nodes", "parallelism-list", "bad-task", "no-model", "util-1.5",
        "per-node-mismatch"])
def test_a_malformed_plan_is_an_input_error_not_a_traceback(plan: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        emit(plan, "k8s")


def test_a_minimal_plan_fills_in_defaults_for_every_inference_target() -> None:
    minimal = {"card": "h100-sxm", "workload": {"model": "Qwen/Qwen2.5-7B-Instruct"},
               "card_info": {"skypilot_name": "H100"}}
    for target in INFERENCE_TARGETS:
        assert "Qwen/Qwen2.5-7B-Instruct" in emit(minimal, target)


# ------------------------------------------------------------------ vllm

def vllm_args(plan: dict[str, Any]) -> list[str]:
    lines = [ln for ln in emit(plan, "vllm").splitlines() if not ln.startswith("#")]
    assert len(lines) == 1
    return shlex.split(lines[0])


@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "vllm"])
def test_every_vllm_flag_and_choice_is_in_the_recorded_vllm_serve_help(name: str) -> None:
    flags = recorded_flags("vllm-serve-0.33.0.flags.txt")
    args = vllm_args(PLANS[name])
    assert args[:2] == ["vllm", "serve"]
    for flag, value in itertools.pairwise(args):
        if flag.startswith("--"):
            assert flag in flags, flag
            assert flags[flag] is None or value in flags[flag], (flag, value)


def test_vllm_carries_the_plan_sizes_into_its_flags() -> None:
    args = vllm_args(PLANS["infer-fp8-offload-pp"])
    pairs = dict(zip(args[3::2], args[4::2]))
    assert pairs == {"--tensor-parallel-size": "2", "--pipeline-parallel-size": "2",
                     "--max-model-len": "16000", "--gpu-memory-utilization": "0.9",
                     "--kv-cache-dtype": "fp8", "--cpu-offload-gb": "6.3",
                     "--quantization": "fp8", "--max-num-seqs": "8"}


def test_vllm_asks_no_on_the_fly_quantization_of_an_fp8_checkpoint() -> None:
    args = vllm_args(make(INFER, weights="fp8", workload__hf_id="RedHatAI/Llama-3.1-8B-FP8"))
    assert "--quantization" not in args


def test_vllm_refuses_int4_weights_on_the_presets_16bit_checkpoint() -> None:
    # the plan dict says nothing of `quantization` (as plans saved before the field did): the loader
    # recomputes it from the preset, so the export refuses instead of serving the bf16 repo
    with pytest.raises(InputError, match="not stored as int4"):
        emit(make(INFER, weights="int4"), "vllm")
    assert not emit(make(INFER, weights="int4", workload__hf_id="Qwen/Qwen2.5-7B-AWQ"),
                    "vllm").startswith("#")


def test_vllm_refuses_a_plan_sized_for_llama_cpp() -> None:
    with pytest.raises(InputError, match="llamacpp"):
        emit(make(INFER, parallelism__engine="llamacpp"), "vllm")


def test_vllm_refuses_more_parallel_ranks_than_gpus() -> None:
    with pytest.raises(InputError, match="GPU counts disagree"):
        emit(make(INFER, gpus=1), "vllm")


def test_vllm_quotes_a_model_path_with_spaces() -> None:
    assert vllm_args(make(INFER, workload__hf_id="/models/my model"))[2] == "/models/my model"


# ------------------------------------------------------------------ torchrun

def torchrun_line(plan: dict[str, Any]) -> str:
    return next(ln for ln in emit(plan, "torchrun").splitlines() if not ln.startswith("#"))


@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "torchrun"])
def test_every_torchrun_flag_is_in_the_recorded_torchrun_help(name: str) -> None:
    flags = recorded_flags("torchrun-2.13.0.usage.txt")
    args = expand(torchrun_line(PLANS[name]), NODE_RANK="1", MASTER_ADDR="10.0.0.1")
    launcher = args[1:args.index("train.py")]
    assert args[0] == "torchrun" and all(a in flags for a in launcher if a.startswith("--"))


@needs("torch")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "torchrun"])
def test_torch_parses_the_torchrun_line(name: str) -> None:
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(
        expand(torchrun_line(PLANS[name]), NODE_RANK="1", MASTER_ADDR="10.0.0.1")[1:])
    plan = PLANS[name]
    assert args.nproc_per_node == str(plan["gpus"] // plan["nodes"])
    assert args.standalone == (plan["nodes"] == 1)
    if plan["nodes"] > 1:
        assert (args.node_rank, args.rdzv_endpoint) == (1, "10.0.0.1:29400")


def test_torchrun_points_the_script_at_its_sharding_config() -> None:
    assert torchrun_line(TRAIN).endswith("train.py --deepspeed ds_config.json")
    assert torchrun_line(PLANS["fsdp-cpu-offload"]).endswith(
        "train.py --fsdp 'full_shard offload auto_wrap'")


# ------------------------------------------------------------------ deepspeed

def ds_config(plan: dict[str, Any]) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads(emit(plan, "deepspeed"))
    return cfg


@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "deepspeed"])
def test_every_deepspeed_key_is_one_deepspeed_0_19_knows(name: str) -> None:
    known = recorded_sections("deepspeed-0.19.8.config-keys.txt")
    cfg = ds_config(PLANS[name])
    assert set(cfg) <= known["top"]
    zero = cfg["zero_optimization"]
    assert set(zero) - {"offload_param", "offload_optimizer"} <= known["zero_optimization"]
    for section in ("offload_param", "offload_optimizer"):
        assert set(zero.get(section, {})) <= known[section]


@needs("deepspeed")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "deepspeed"])
def test_deepspeed_accepts_the_config(name: str) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    cfg = ds_config(PLANS[name])
    parsed = DeepSpeedConfig(cfg)
    assert parsed.zero_optimization_stage == cfg["zero_optimization"]["stage"]
    assert parsed.gradient_accumulation_steps == PLANS[name]["workload"]["grad_accum"]


def test_deepspeed_offloads_parameters_only_at_stage_3() -> None:
    assert "offload_param" not in ds_config(TRAIN)["zero_optimization"]
    zero = ds_config(PLANS["zero3-nvme-2-nodes"])["zero_optimization"]
    assert zero["offload_param"] == {"device": "nvme", "pin_memory": True, "nvme_path": "/local_nvme"}
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True


def test_deepspeed_uses_fp16_on_a_card_without_bf16() -> None:
    v100 = make(TRAIN, card="v100-sxm2-32gb", card_info={"memory_gb": 32, "bf16": False,
                                                          "compute_capability": "7.0"})
    cfg = ds_config(v100)
    assert cfg["fp16"]["enabled"] and not cfg["bf16"]["enabled"]
    assert ds_config(make(TRAIN, card_info__compute_capability="7.5"))["fp16"]["enabled"]
    assert ds_config(TRAIN)["bf16"] == {"enabled": True}


def test_offload_without_a_zero_stage_is_refused() -> None:
    with pytest.raises(InputError, match="ZeRO"):
        emit(make(TRAIN, parallelism__zero=0), "deepspeed")


# ------------------------------------------------------------------ accelerate

@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "accelerate"])
def test_accelerate_keys_are_its_config_fields_and_launch_options(name: str) -> None:
    fields = recorded_sections("accelerate-1.15.0.cluster-config-fields.txt")[""]
    options = recorded_flags("accelerate-launch-1.15.0.usage.txt")
    cfg = yaml.safe_load(emit(PLANS[name], "accelerate"))
    assert set(cfg) <= fields
    for section in ("deepspeed_config", "fsdp_config"):
        assert all(f"--{key}" in options for key in cfg.get(section, {}))


@pytest.mark.parametrize("name,kind", [("zero2-cpu-offload", "DEEPSPEED"), ("ddp-lora", "MULTI_GPU"),
                                       ("fsdp-cpu-offload", "FSDP"), ("single-gpu-qlora", "NO"),
                                       ("zero3-nvme-2-nodes", "DEEPSPEED")])
def test_accelerate_picks_the_plans_distributed_type(name: str, kind: str) -> None:
    cfg = yaml.safe_load(emit(PLANS[name], "accelerate"))
    assert cfg["distributed_type"] == kind and cfg["num_processes"] == PLANS[name]["gpus"]


@needs("accelerate")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "accelerate"])
def test_accelerate_launch_reads_the_config(name: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    monkeypatch.chdir(tmp_path)
    Path("ds_config.json").write_text(emit(PLANS[name], "deepspeed"))
    Path("accelerate.yaml").write_text(emit(PLANS[name], "accelerate"))
    args = launch_command_parser().parse_args(["--config_file", "accelerate.yaml", "--machine_rank",
                                               "0", "--main_process_ip", "10.0.0.1", "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        _, env = prepare_deepspeed_cmd_env(args)
        assert env["ACCELERATE_USE_DEEPSPEED"] == "true"
    elif args.use_fsdp or args.multi_gpu:
        env = prepare_multi_gpu_env(args)
        assert env.get("FSDP_VERSION", "2") == "2"
    assert args.num_processes == PLANS[name]["gpus"]


# ------------------------------------------------------------------ skypilot

def sky_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((HELP / "skypilot-0.14.1.task-schema.json").read_text())
    return schema


@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "skypilot"])
def test_the_skypilot_task_matches_skypilots_recorded_schema(name: str) -> None:
    import jsonschema

    cfg = yaml.safe_load(emit(PLANS[name], "skypilot"))
    jsonschema.validate(cfg, sky_schema()["task"])
    jsonschema.validate(cfg["resources"], sky_schema()["resources"])


@needs("sky")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "skypilot"])
def test_skypilot_loads_the_task(name: str) -> None:
    import sky

    task = sky.Task.from_yaml_config(yaml.safe_load(emit(PLANS[name], "skypilot")))
    plan = PLANS[name]
    assert task.num_nodes == plan["nodes"]
    (res,) = task.resources
    assert res.accelerators == {plan["card_info"]["skypilot_name"]: plan["gpus"] // plan["nodes"]}


def test_skypilot_runs_the_vllm_line_and_multi_node_torchrun_with_its_env() -> None:
    serve = yaml.safe_load(emit(INFER, "skypilot"))
    assert serve["resources"]["accelerators"] == "H100:2" and serve["resources"]["ports"] == 8000
    assert serve["run"].startswith("vllm serve meta-llama/Llama-3.1-8B")
    train = yaml.safe_load(emit(make(PLANS["zero3-nvme-2-nodes"], cost__billing="spot"), "skypilot"))
    assert train["num_nodes"] == 2 and train["resources"]["use_spot"] is True
    assert "SKYPILOT_NODE_IPS" in train["run"] and "ds_config.json" in train["run"]


def test_a_card_without_a_skypilot_name_is_refused_with_the_listing_command() -> None:
    with pytest.raises(InputError, match="sky show-gpus"):
        emit(make(INFER, card_info={"memory_gb": 80}), "skypilot")


@pytest.mark.parametrize("target", ["skypilot", "dstack", "ray"])
def test_only_kubernetes_requests_a_mig_slice(target: str) -> None:
    with pytest.raises(InputError, match="MIG"):
        emit(make(ONE_GPU, mig_profile="1g.10gb"), target)


# ------------------------------------------------------------------ dstack

@needs("dstack")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "dstack"])
def test_dstack_parses_the_configuration(name: str) -> None:
    from dstack._internal.core.models.configurations import parse_run_configuration

    conf = parse_run_configuration(yaml.safe_load(emit(PLANS[name], "dstack")))
    plan = PLANS[name]
    assert conf.type == ("service" if plan["workload"]["task"] == "infer" else "task")
    assert conf.resources.gpu.count.min == plan["gpus"] // plan["nodes"]


@pytest.mark.parametrize("card_info,spec", [
    ({"skypilot_name": "H100", "memory_gb": 80}, "H100:80GB:2"),
    ({"skypilot_name": "A100-80GB", "memory_gb": 80}, "A100:80GB:2"),
    ({"memory_gb": 24}, "24GB:2"),
])
def test_dstack_names_the_gpu_by_model_memory_and_count(card_info: dict[str, Any], spec: str) -> None:
    conf = yaml.safe_load(emit(make(INFER, card_info=card_info), "dstack"))
    assert conf["resources"]["gpu"] == spec and conf["port"] == 8000 and conf["type"] == "service"


def test_a_dstack_multi_node_task_sets_the_rendezvous_in_the_launch_command() -> None:
    conf = yaml.safe_load(emit(PLANS["zero3-nvme-2-nodes"], "dstack"))
    assert conf["type"] == "task" and conf["nodes"] == 2
    assert conf["commands"][-1].startswith("export MASTER_ADDR=$DSTACK_MASTER_NODE_IP")


# ------------------------------------------------------------------ kubernetes

K8S_MODELS = {"Deployment": "V1Deployment", "Service": "V1Service", "Job": "V1Job"}


def k8s_docs(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(emit(plan, "k8s")))


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    workload = next(d for d in docs if d["kind"] in ("Deployment", "Job"))
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def as_text(value: Any) -> Any:
    """Scalars as text, for comparing with the client's string-typed quantities."""
    if isinstance(value, dict):
        return {k: as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_text(v) for v in value]
    return str(value)


@needs("kubernetes")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "k8s"])
def test_every_k8s_field_survives_the_kubernetes_clients_models(name: str) -> None:
    from kubernetes.client import ApiClient

    api = ApiClient()
    for doc in k8s_docs(PLANS[name]):
        # kubernetes 37 takes the response text; older clients took a response object.
        model = api.deserialize(json.dumps(doc), K8S_MODELS[doc["kind"]], "application/json")
        assert as_text(api.sanitize_for_serialization(model)) == as_text(doc)


def test_k8s_requests_whole_gpus_on_the_named_product() -> None:
    pod = container(k8s_docs(INFER))
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_k8s_requests_a_mig_slice_when_the_plan_has_one() -> None:
    pod = container(k8s_docs(make(ONE_GPU, mig_profile="1g.10gb")))
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}


def test_k8s_requests_amd_gpus_by_their_device_plugins_name() -> None:
    docs = k8s_docs(make(INFER, card="mi300x", card_info={"memory_gb": 192, "vendor": "amd",
                                                          "software": "rocm"}))
    assert container(docs)["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "2"}


def test_k8s_suggests_the_cards_mig_profiles_for_an_unknown_one() -> None:
    with pytest.raises(UnknownNameError) as info:
        emit(make(ONE_GPU, mig_profile="1g.10g"), "k8s")
    assert "1g.10gb" in info.value.suggestions


def test_k8s_runs_multi_node_training_as_an_indexed_job_behind_a_headless_service() -> None:
    service, job = k8s_docs(PLANS["zero3-nvme-2-nodes"])
    assert service["spec"]["clusterIP"] == "None" and job["spec"]["completionMode"] == "Indexed"
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "MASTER_ADDR=qwen2-5-14b-0.qwen2-5-14b" in script and "$JOB_COMPLETION_INDEX" in script


def test_an_engine_spanning_nodes_is_refused_for_every_scheduler() -> None:
    for target in ("k8s", "skypilot", "dstack", "docker", "vllm"):
        with pytest.raises(InputError, match="Ray cluster"):
            emit(make(INFER, gpus=4, nodes=2, parallelism__pp=2), target)


def test_ray_refuses_serving_replicas_across_nodes() -> None:
    with pytest.raises(InputError, match="independent replicas"):
        emit(make(INFER, gpus=4, nodes=2, replicas=2), "ray")


# ------------------------------------------------------------------ ray

def ray_plan(name: str) -> Any:
    from gpuwise.export._plan import parse_plan

    return parse_plan(PLANS[name])


@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "ray"])
def test_the_ray_script_is_python_and_uses_only_options_ray_knows(name: str) -> None:
    known = recorded_sections("ray-2.60.0.options.txt")
    compile(emit(PLANS[name], "ray"), "ray_launch.py", "exec")
    opts = ray_export.options(ray_plan(name))
    assert set(opts) <= known["task_options"]
    assert opts.get("accelerator_type", "A100") in known["accelerator_type"]


def test_ray_uses_the_accelerator_constant_and_puts_it_in_every_bundle() -> None:
    tree = ast.parse(emit(PLANS["zero3-nvme-2-nodes"], "ray"))
    bundles = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", "") == "BUNDLES")
    assert bundles == [{"CPU": 1, "GPU": 8, "accelerator_type:A100-80G": 0.001}] * 2
    assert "accelerator_type='A100-80G'" in emit(PLANS["zero3-nvme-2-nodes"], "ray")


def test_ray_falls_back_to_a_custom_resource_for_a_card_without_a_constant() -> None:
    text = emit(make(ONE_GPU, card="rtx-4090", card_info={"memory_gb": 24}), "ray")
    assert "resources={'rtx4090': 1}" in text and "ray start --resources='{\"rtx4090\": 1}'" in text


@needs("ray")
@pytest.mark.parametrize("name", [n for n, t in PAIRS if t == "ray"])
def test_ray_accepts_the_remote_options(name: str) -> None:
    import ray
    from ray._common import ray_option_utils

    opts = ray_export.options(ray_plan(name))
    ray_option_utils.validate_task_options(opts, in_options=False)
    assert ray.remote(**opts)(lambda: None) is not None


# ------------------------------------------------------------------ the YAML writer

_scalars = (st.none() | st.booleans() | st.integers() | st.text()
            | st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@given(st.dictionaries(st.text(max_size=8), _values, max_size=5))
def test_the_yaml_writer_round_trips_through_pyyaml(doc: dict[str, Any]) -> None:
    assert yaml.safe_load(_yaml.dump(doc)) == (doc or None)


@pytest.mark.parametrize("word", ["yes", "No", "on", "null", "~", "1.0", "0x10", "H100:8", "- a",
                                  "#x", "a: b", "@x", "*x", "", " lead", "多卡", "1e3"])
def test_the_yaml_writer_keeps_words_that_look_like_other_types_as_strings(word: str) -> None:
    assert yaml.safe_load(_yaml.dump({"k": word})) == {"k": word}


def test_the_yaml_writer_writes_scripts_as_literal_blocks() -> None:
    assert _yaml.dump({"run": "a\n  b\n"}) == "run: |\n  a\n    b\n"
