"""Exports run what was planned: serving replicas, pinned images per software stack, the docker
target, the user's training code, and the checkpoint / online quantisation of the plan."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwise.catalog.stacks import stacks
from gpuwise.errors import InputError
from gpuwise.export import INFERENCE_TARGETS, TARGETS, emit
from gpuwise.export._common import image_version
from gpuwise.export._launch import setup_lines
from gpuwise.export._plan import parse_plan
from gpuwise.export.docker import docker_tokens
from tests.export_samples import HELP, INFER, TRAIN, make, needs, recorded_flags

# Two replicas of tp=2 on two nodes of two GPUs: independent engines, one per node.
REPLICAS_2_NODES = make(INFER, gpus=4, nodes=2, replicas=2)
# Four replicas of one GPU on one node of four.
REPLICAS_1_NODE = make(INFER, gpus=4, replicas=4, parallelism__tp=1)
ROCM = make(INFER, card="mi300x", card_name="MI300X", card_info={
    "memory_gb": 192, "vendor": "amd", "software": "rocm", "skypilot_name": "MI300X"})
CANN = make(INFER, card="ascend-910b", card_name="Ascend 910B", card_info={
    "memory_gb": 64, "vendor": "huawei", "software": "cann"})
CODE = make(TRAIN, workload__script="src/train.py", workload__workdir="./my project")


def comments(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if ln.startswith("#"))


def command(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert len(lines) == 1
    return shlex.split(lines[0])


def k8s_workload(plan: dict[str, Any]) -> dict[str, Any]:
    docs = list(yaml.safe_load_all(emit(plan, "k8s")))
    doc: dict[str, Any] = next(d for d in docs if d["kind"] in ("Deployment", "Job"))
    return doc


def k8s_container(plan: dict[str, Any]) -> dict[str, Any]:
    box: dict[str, Any] = k8s_workload(plan)["spec"]["template"]["spec"]["containers"][0]
    return box


# ------------------------------------------------------------------ 1. serving replicas

def test_vllm_serves_a_nodes_replicas_with_data_parallel() -> None:
    args = command(emit(REPLICAS_1_NODE, "vllm"))
    assert args[args.index("--data-parallel-size") + 1] == "4"
    assert args[args.index("--max-num-seqs") + 1] == "2"  # 8 users over 4 replicas


def test_the_vllm_line_of_a_multi_node_plan_says_to_run_it_on_each_node_behind_a_balancer() -> None:
    text = emit(REPLICAS_2_NODES, "vllm")
    assert "each of the 2 nodes" in comments(text) and "load balancer" in comments(text)
    assert "--data-parallel-size" not in command(text)


@pytest.mark.parametrize("plan", [REPLICAS_1_NODE, REPLICAS_2_NODES], ids=["one-node", "two-nodes"])
def test_k8s_runs_one_engine_per_pod_and_a_pod_per_replica(plan: dict[str, Any]) -> None:
    p = parse_plan(plan)
    deployment = k8s_workload(plan)
    box = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == p.replicas
    assert box["resources"]["limits"] == {"nvidia.com/gpu": str(p.gpus_per_replica)}
    assert "--data-parallel-size" not in box["args"]


@needs("kubernetes")
def test_the_replicated_deployment_survives_the_kubernetes_clients_model() -> None:
    from kubernetes.client import ApiClient

    model = ApiClient().deserialize(json.dumps(k8s_workload(REPLICAS_2_NODES)), "V1Deployment",
                                    "application/json")
    assert model.spec.replicas == 2


@needs("dstack")
@pytest.mark.parametrize("plan", [REPLICAS_1_NODE, REPLICAS_2_NODES], ids=["one-node", "two-nodes"])
def test_dstack_runs_a_service_replica_per_engine(plan: dict[str, Any]) -> None:
    from dstack._internal.core.models.configurations import parse_run_configuration

    p = parse_plan(plan)
    raw = yaml.safe_load(emit(plan, "dstack"))
    conf = parse_run_configuration(raw)
    assert conf.type == "service" and "nodes" not in raw
    assert (conf.replicas.min, conf.replicas.max) == (p.replicas, p.replicas)
    assert conf.resources.gpu.count.min == conf.resources.gpu.count.max == p.gpus_per_replica
    assert not any("--data-parallel-size" in c for c in raw["commands"])


@pytest.mark.parametrize("plan", [REPLICAS_1_NODE, REPLICAS_2_NODES], ids=["one-node", "two-nodes"])
def test_skypilot_serves_replicas_as_a_skyserve_service(plan: dict[str, Any]) -> None:
    import jsonschema

    p = parse_plan(plan)
    cfg = yaml.safe_load(emit(plan, "skypilot"))
    schema = json.loads((HELP / "skypilot-0.14.1.task-schema.json").read_text())
    jsonschema.validate(cfg, schema["task"])
    jsonschema.validate(cfg["resources"], schema["resources"])
    assert cfg["service"] == {"readiness_probe": "/health", "replicas": p.replicas}
    assert cfg["resources"]["accelerators"] == f"H100:{p.gpus_per_replica}"
    assert "num_nodes" not in cfg and "--data-parallel-size" not in cfg["run"]
    assert "sky serve up" in emit(plan, "skypilot")


def test_a_single_replica_stays_a_plain_skypilot_task() -> None:
    assert "service" not in yaml.safe_load(emit(INFER, "skypilot"))


# ------------------------------------------------------------------ 2. pinned images and stacks

@pytest.mark.parametrize("target", ["k8s", "docker", "dstack", "skypilot"])
@pytest.mark.parametrize("plan", [INFER, ROCM, CANN, TRAIN], ids=["cuda", "rocm", "cann", "train"])
def test_no_export_runs_a_latest_image(plan: dict[str, Any], target: str) -> None:
    if target == "docker" and plan is TRAIN or target == "skypilot" and plan is CANN:
        return  # docker serves only; the Ascend sample has no SkyPilot name
    assert ":latest" not in emit(plan, target)


@pytest.mark.parametrize("software", ["cuda", "rocm", "cann"])
def test_k8s_uses_the_stacks_pinned_images_and_device_resource(software: str) -> None:
    row = stacks()[software]
    serve = make(INFER, card_info__software=software)
    train = make(TRAIN, card_info__software=software)
    assert k8s_container(serve)["image"] == row.vllm_image
    assert k8s_container(train)["image"] == row.train_image
    assert k8s_container(serve)["resources"]["limits"] == {row.device_resource: "2"}


def test_an_image_named_with_image_overrides_the_stacks() -> None:
    plan = make(INFER, image="registry.example/vllm:1.2")
    assert k8s_container(plan)["image"] == "registry.example/vllm:1.2"
    tokens = docker_tokens(parse_plan(plan))
    assert "registry.example/vllm:1.2" in tokens and tokens[tokens.index("--entrypoint") + 1] == "vllm"
    assert yaml.safe_load(emit(plan, "dstack"))["image"] == "registry.example/vllm:1.2"


@pytest.mark.parametrize("plan,build,env", [(ROCM, "ROCm build", "HIP_VISIBLE_DEVICES"),
                                            (CANN, "vllm-ascend", "ASCEND_RT_VISIBLE_DEVICES")],
                         ids=["rocm", "cann"])
@pytest.mark.parametrize("target", ["vllm", "k8s", "docker", "dstack"])
def test_a_non_cuda_plan_says_which_build_it_runs(plan: dict[str, Any], build: str, env: str,
                                                  target: str) -> None:
    notes = comments(emit(plan, target))
    assert build in notes and env in notes


def test_a_rocm_dstack_service_runs_in_the_rocm_image_without_a_pip_vllm() -> None:
    cfg = yaml.safe_load(emit(ROCM, "dstack"))
    assert cfg["image"] == stacks()["rocm"].vllm_image and "python" not in cfg
    assert not any(c.startswith("pip install") for c in cfg["commands"])
    sky = yaml.safe_load(emit(ROCM, "skypilot"))
    assert sky["resources"]["image_id"] == "docker:" + stacks()["rocm"].vllm_image


# ------------------------------------------------------------------ 3. docker

def test_docker_is_a_registered_inference_target() -> None:
    assert "docker" in TARGETS and "docker" in INFERENCE_TARGETS
    with pytest.raises(InputError, match="training plan"):
        emit(TRAIN, "docker")


def test_the_docker_line_hands_over_the_gpus_shm_port_cache_and_token() -> None:
    args = command(emit(INFER, "docker"))
    assert args[:2] == ["docker", "run"]
    assert args[args.index("--gpus") + 1] == '"device=0,1"'
    assert "--ipc=host" in args and args[args.index("-p") + 1] == "8000:8000"
    assert args[args.index("-v") + 1] == "$HOME/.cache/huggingface:/root/.cache/huggingface"
    assert args[args.index("--env") + 1] == "HF_TOKEN"
    image = args.index(stacks()["cuda"].vllm_image)
    # The official image's entrypoint is `vllm serve`: the model follows the image.
    assert args[image + 1:image + 3] == ["meta-llama/Llama-3.1-8B", "--tensor-parallel-size"]
    assert "serve" not in args[image + 1:]


def test_every_vllm_flag_of_the_docker_line_is_in_the_recorded_vllm_serve_help() -> None:
    flags = recorded_flags("vllm-serve-0.33.0.flags.txt")
    args = command(emit(make(INFER, weights="fp8", quantization="fp8"), "docker"))
    serve = args[args.index(stacks()["cuda"].vllm_image) + 2:]
    for flag, value in itertools.pairwise(serve):
        if flag.startswith("--"):
            assert flag in flags and (flags[flag] is None or value in flags[flag]), flag


def test_docker_serves_a_nodes_replicas_from_one_container() -> None:
    args = command(emit(REPLICAS_1_NODE, "docker"))
    assert args[args.index("--data-parallel-size") + 1] == "4"
    assert args[args.index("--gpus") + 1] == '"device=0,1,2,3"'
    assert "load balancer" in comments(emit(REPLICAS_2_NODES, "docker"))


def test_docker_on_rocm_and_ascend_passes_the_stacks_devices() -> None:
    rocm = command(emit(ROCM, "docker"))
    assert {"--device=/dev/kfd", "--device=/dev/dri", "--group-add=video"} <= set(rocm)
    assert "--gpus" not in rocm and "HIP_VISIBLE_DEVICES=0,1" in rocm
    assert rocm[rocm.index(stacks()["rocm"].vllm_image) + 1] == "serve"
    cann = command(emit(CANN, "docker"))
    assert {"--device=/dev/davinci0", "--device=/dev/davinci1", "--device=/dev/davinci_manager"} \
        <= set(cann)
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in cann


@pytest.mark.parametrize("plan", [INFER, ROCM, CANN,
                                  make(INFER, workload__hf_id="/models/it's $(touch pwned) `x`")],
                         ids=["cuda", "rocm", "cann", "hostile-path"])
def test_bash_runs_the_docker_line_with_exactly_the_planned_arguments(
        plan: dict[str, Any], tmp_path: Path) -> None:
    stub = tmp_path / "docker"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > "$ARGV_OUT"\n')
    stub.chmod(0o755)
    out = tmp_path / "argv"
    line = next(ln for ln in emit(plan, "docker").splitlines() if not ln.startswith("#"))
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "ARGV_OUT": str(out),
           "HOME": "/home/u"}
    subprocess.run(["bash", "-c", line], env=env, check=True, cwd=tmp_path)
    planned = [t.replace("$HOME", "/home/u") for t in docker_tokens(parse_plan(plan))]
    assert out.read_text().split("\0")[:-1] == planned[1:]
    assert not (tmp_path / "pwned").exists()


# ------------------------------------------------------------------ 4. the user's code

def test_skypilot_syncs_the_workdir_and_runs_the_planned_script_there() -> None:
    cfg = yaml.safe_load(emit(CODE, "skypilot"))
    assert cfg["workdir"] == "./my project"
    assert cfg["run"].startswith("cd ~/sky_workdir\n")
    assert "src/train.py --deepspeed ds_config.json" in cfg["run"]


@needs("dstack")
def test_dstack_copies_the_workdir_into_the_container_and_works_there() -> None:
    from dstack._internal.core.models.configurations import parse_run_configuration

    raw = yaml.safe_load(emit(CODE, "dstack"))
    conf = parse_run_configuration(raw)
    assert [(f.local_path, f.path) for f in conf.files] == [("./my project", "/workspace/code")]
    assert conf.working_dir == "/workspace/code"
    assert raw["commands"][-1].endswith("src/train.py --deepspeed ds_config.json")


def test_k8s_mounts_the_code_from_a_configmap_and_says_how_to_create_it() -> None:
    text = emit(CODE, "k8s")
    assert "kubectl create configmap qwen2-5-14b-code --from-file='./my project'" in text
    pod = k8s_workload(CODE)["spec"]["template"]["spec"]
    assert {"name": "code", "configMap": {"name": "qwen2-5-14b-code"}} in pod["volumes"]
    script = pod["containers"][0]["command"][2]
    assert "cd /workspace/code\n" in script and "src/train.py" in script


def test_ray_runs_the_script_from_the_workdir() -> None:
    lines = setup_lines(parse_plan(make(CODE, workload__workdir="/data/my code")), install=False)
    assert lines[0] == "cd '/data/my code'"


def test_without_a_script_the_placeholder_says_to_pass_script() -> None:
    assert "--script" in comments(emit(TRAIN, "torchrun"))
    assert "--script" not in comments(emit(CODE, "torchrun"))
    assert command(emit(CODE, "torchrun"))[-3:] == ["src/train.py", "--deepspeed", "ds_config.json"]


def test_a_hostile_workdir_stays_one_quoted_word() -> None:
    plan = make(CODE, workload__workdir="x'; touch pwned; '")
    line = setup_lines(parse_plan(plan), install=False)[0]
    assert shlex.split(line) == ["cd", "x'; touch pwned; '"]


def test_installs_are_pinned_to_the_images_and_skip_torch_inside_one() -> None:
    torch = image_version(stacks()["cuda"].train_image, "pytorch")
    vllm = image_version(stacks()["cuda"].vllm_image, "vllm")
    assert (torch, vllm) == ("2.11.0", "0.33.0")
    sky = yaml.safe_load(emit(TRAIN, "skypilot"))["setup"]
    assert f"torch=={torch}" in sky and "deepspeed==0.19.8" in sky
    k8s_script = k8s_container(TRAIN)["command"][2]
    assert "pip install" in k8s_script and "torch" not in k8s_script.split("\n")[1]
    assert yaml.safe_load(emit(INFER, "dstack"))["commands"][0] == f"pip install vllm=={vllm}"


@pytest.mark.parametrize("image,package,version", [
    ("rocm/pytorch:rocm7.1.1_ubuntu24.04_py3.12_pytorch_release_2.10.0", "pytorch", "2.10.0"),
    ("quay.io/ascend/pytorch:2.10.0-910b-ubuntu22.04-py3.11", "pytorch", "2.10.0"),
    ("rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0", "vllm", "0.23.0"),
    ("me/custom:abc", "pytorch", None),
])
def test_the_version_is_read_from_the_image_tag(image: str, package: str, version: str | None) -> None:
    assert image_version(image, package) == version


# ------------------------------------------------------------------ 5. checkpoints and quantisation

@pytest.mark.parametrize("target", ["k8s", "dstack", "skypilot", "docker"])
def test_every_serving_target_carries_the_online_quantization(target: str) -> None:
    text = emit(make(INFER, weights="fp8", quantization="fp8"), target)
    assert "--quantization" in text and "fp8" in text


@pytest.mark.parametrize("target", ["k8s", "dstack", "skypilot", "docker"])
def test_every_serving_target_refuses_an_int4_plan_on_a_16bit_checkpoint(target: str) -> None:
    with pytest.raises(InputError, match="--deploy-model"):
        emit(make(INFER, weights="int4"), target)


def test_the_deploy_model_is_what_every_serving_target_starts() -> None:
    plan = make(INFER, deploy_model="Qwen/Qwen2.5-7B-Instruct-AWQ", weights="int4")
    assert yaml.safe_load(emit(plan, "dstack"))["model"] == "Qwen/Qwen2.5-7B-Instruct-AWQ"
    assert k8s_container(plan)["args"][0] == "Qwen/Qwen2.5-7B-Instruct-AWQ"
    assert "Qwen/Qwen2.5-7B-Instruct-AWQ" in command(emit(plan, "docker"))
