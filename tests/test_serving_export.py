"""Exports for SGLang and TensorRT-LLM, checked against the tools' own argument lists recorded
from their source (tests/fixtures/engines/README.md)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwise.errors import InputError
from gpuwise.export import emit
from tests.export_samples import INFER, PLANS, TRAIN, make

ENGINES = Path(__file__).parent / "fixtures" / "engines"
SERVE_PLANS = [n for n, p in PLANS.items() if p["workload"]["task"] == "infer"]


def recorded(name: str) -> dict[str, set[str] | None]:
    flags: dict[str, set[str] | None] = {}
    for line in (ENGINES / name).read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"(\S+)(?: \{([^}]*)\})?$", line.strip())
        assert m, line
        flags[m.group(1)] = set(m.group(2).split(",")) if m.group(2) else None
    return flags


def command(text: str, program: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if ln.startswith(program))
    return shlex.split(line)


def check_flags(args: list[str], flags: dict[str, set[str] | None]) -> None:
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            assert arg in flags, f"{arg} is not a recorded flag"
            choices = flags[arg]
            if choices is not None and i + 1 < len(args) and not args[i + 1].startswith("--"):
                assert args[i + 1] in choices, f"{arg} {args[i + 1]} is not one of {sorted(choices)}"


@pytest.mark.parametrize("name", SERVE_PLANS)
def test_every_sglang_flag_is_in_the_recorded_sglang_0523_flag_list(name: str) -> None:
    args = command(emit(PLANS[name], "sglang"), "python")
    assert args[:3] == ["python", "-m", "sglang.launch_server"]
    check_flags(args[3:], recorded("sglang-0.5.23.launch-server.flags.txt"))


def test_sglang_carries_the_plan_sizes_into_its_flags() -> None:
    plan = make(INFER, gpus=4, parallelism__pp=2, parallelism__cpu_offload_gb=6.25, workload__kv_dtype="fp8",
                workload__max_num_batched_tokens=4096)
    args = command(emit(plan, "sglang"), "python")
    pairs = dict(zip(args[3::2], args[4::2], strict=False))
    assert pairs["--tp-size"] == "2" and pairs["--pp-size"] == "2"
    assert pairs["--kv-cache-dtype"] == "fp8_e4m3" and pairs["--cpu-offload-gb"] == "7"
    assert pairs["--context-length"] == "16000" and pairs["--chunked-prefill-size"] == "4096"
    assert "--mem-fraction-static" not in args  # SGLang's own default, the one gpuwise sized with


def test_sglang_serves_a_nodes_replicas_as_data_parallel() -> None:
    plan = make(INFER, gpus=2, parallelism__tp=1, replicas=2, parallelism__dp=2)
    args = command(emit(plan, "sglang"), "python")
    assert "--dp-size" in args and args[args.index("--dp-size") + 1] == "2"


def _trtllm_ready(plan: dict[str, Any]) -> dict[str, Any]:
    """A sample plan TensorRT-LLM can run: no weight offload, and its checkpoint already in the plan's
    format (as --deploy-model names it; TensorRT-LLM quantises nothing as it loads)."""
    if plan.get("weights") in ("fp8", "int8", "int4"):  # as the user names a pre-quantised checkpoint
        deployed = plan.get("deploy_model") or plan["workload"].get("hf_id") or plan["workload"]["model"]
        plan = make(plan, deploy_model=f"{deployed}-{plan['weights'].upper()}")
    return make(plan, parallelism__cpu_offload_gb=0.0, quantization=None)


@pytest.mark.parametrize("name", SERVE_PLANS)
def test_every_trtllm_serve_flag_is_in_the_recorded_flag_list(name: str) -> None:
    plan = _trtllm_ready(PLANS[name])
    args = command(emit(plan, "trtllm"), "trtllm-serve")
    check_flags(args[2:], recorded("trtllm-serve-00209af.flags.txt"))
    assert args[args.index("--config") + 1] == "extra-llm-api-config.yml"


def _yaml_of(text: str) -> dict[str, Any]:
    body = text.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    doc = yaml.safe_load(body)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("name", SERVE_PLANS)
def test_every_trtllm_yaml_key_is_an_llm_api_field(name: str) -> None:
    keys = set(recorded("trtllm-llm-api-options.keys.txt"))
    doc = _yaml_of(emit(_trtllm_ready(PLANS[name]), "trtllm"))
    for key, value in doc.items():
        assert key in keys
        for sub in value if isinstance(value, dict) else {}:
            assert f"{key}.{sub}" in keys
    assert doc["kv_cache_config"]["free_gpu_memory_fraction"] == 0.9


def test_trtllm_writes_an_fp8_kv_cache_and_graphs_for_the_planned_batch() -> None:
    doc = _yaml_of(emit(make(INFER, workload__kv_dtype="fp8", workload__concurrency=64), "trtllm"))
    assert doc["kv_cache_config"]["dtype"] == "fp8"
    assert doc["cuda_graph_config"] == {"enable_padding": True, "max_batch_size": 64}


def test_trtllm_refuses_weight_offload_in_both_languages() -> None:
    with pytest.raises(InputError) as info:
        emit(make(INFER, parallelism__cpu_offload_gb=4.0), "trtllm")
    assert "offload" in info.value.message.en and "卸载" in info.value.message.zh


@pytest.mark.parametrize("target", ["sglang", "trtllm"])
def test_serving_engines_refuse_training_and_llama_cpp_plans(target: str) -> None:
    with pytest.raises(InputError):
        emit(TRAIN, target)
    with pytest.raises(InputError) as info:
        emit(make(INFER, parallelism__engine="llamacpp"), target)
    assert "llamacpp" in info.value.message.en


def test_a_plan_sized_for_the_engine_itself_carries_no_sizing_note() -> None:
    assert not emit(make(INFER, parallelism__engine="sglang"), "sglang").startswith("# The plan was sized")
    assert emit(INFER, "sglang").startswith("# The plan was sized with vLLM")
