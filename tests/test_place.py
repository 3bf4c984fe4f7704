"""`gpuwise place`: a pipeline's models onto GPUs, with memory, transfers, throughput and settings."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path
from typing import Any

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.fleet.place import place_pipeline
from gpuwise.fleet.place_input import Pipeline, StageSpec, parse_pipeline
from gpuwise.fleet.place_out import placement_dict
from gpuwise.units import GiB
from tests.fixtures.fleet.helpers import cli

ROOT = Path(__file__).resolve().parent
RAG = ROOT / "fixtures" / "place" / "rag_3x4090.toml"
FLUX = ROOT / "fixtures" / "place" / "flux_comfyui_3x4090.toml"
VLLM_FLAGS = {line.strip()
              for line in (ROOT / "fixtures" / "help" / "vllm-serve-0.33.0.flags.txt").read_text().splitlines()
              if line.startswith("--")}


def rag(gpus: int = 3) -> dict[str, Any]:
    out = cli("place", str(RAG), "--json")
    assert out.code == 0, out.stderr
    data: dict[str, Any] = out.json()
    if gpus == 3:
        return data
    import tomllib

    doc = tomllib.loads(RAG.read_text())
    doc["gpus"]["count"] = gpus
    return placement_dict(place_pipeline(parse_pipeline(doc, "rag")))


def test_three_models_on_three_4090s_fit_each_gpu_and_the_llm_sets_the_pace() -> None:
    d = rag()
    assert d["card"] == "rtx-4090" and d["gpus"] == 3
    for g in d["per_gpu"]:
        assert g["memory_gib"] <= d["budget_gib_per_gpu"]
    stages = {s["name"]: s for s in d["stages"]}
    assert stages["embed"]["gpus"] == stages["rerank"]["gpus"] == [0]  # small encoders share a GPU
    assert sorted(stages["llm"]["gpus"]) == [1, 2]  # the slow stage gets the other two
    assert d["slowest_stage"]["name"] == "llm" and d["slowest_stage"]["replicas"] == 2
    busiest = max(g["busy_seconds_per_request"] for g in d["per_gpu"])
    assert d["throughput_requests_per_s"] == pytest.approx(1 / busiest, rel=1e-3)
    cross = next(t for t in d["transfers"] if t["to"] == "llm")
    assert cross["bytes_per_request"] == 80  # 20 fp32 scores


def test_the_vllm_lines_use_real_flags_and_share_each_gpu_within_its_budget() -> None:
    d = rag()
    per_gpu: dict[str, float] = {}
    for line in d["settings"]["vllm"]:
        words = shlex.split(line)
        env, args = words[0], words[1:]
        assert env.startswith("CUDA_VISIBLE_DEVICES=") and args[:2] == ["vllm", "serve"]
        assert {a for a in args if a.startswith("--")} <= VLLM_FLAGS
        share = float(args[args.index("--gpu-memory-utilization") + 1])
        per_gpu[env] = per_gpu.get(env, 0.0) + share
    assert all(0 < v <= 0.9 for v in per_gpu.values())
    assert len(d["settings"]["vllm"]) == 4  # embed, rerank, two llm replicas
    assert "--convert embed" in d["settings"]["vllm"][0]


def test_the_python_settings_are_valid_python_pinning_each_model() -> None:
    lines = rag()["settings"]["python"]
    ast.parse("\n".join(lines))
    assert any('device_map={"": 1}' in x for x in lines) and any('.to("cuda:0")' in x for x in lines)


def test_more_gpus_never_make_the_pipeline_slower() -> None:
    rates = [rag(n)["throughput_requests_per_s"] for n in (2, 3, 4)]  # one 4090 cannot hold all three
    assert rates == sorted(rates) and rates[2] > rates[0]


def test_comfyui_components_go_to_multigpu_loaders_and_run_one_after_another() -> None:
    out = cli("place", str(FLUX), "--json")
    d = out.json()
    assert out.code == 0
    nodes = {n["stage"]: n["node"] for n in d["settings"]["comfyui_multigpu"]}
    assert nodes == {"text_encoder": "CLIPLoaderMultiGPU", "unet": "UNETLoaderMultiGPU", "vae": "VAELoaderMultiGPU"}
    assert d["bottleneck"] == "comfyui workflow"
    assert d["throughput_requests_per_s"] == pytest.approx(1 / (0.15 + 14.0 + 0.4), abs=1e-3)
    assert all(len(s["gpus"]) == 1 for s in d["stages"])  # no replicas inside one ComfyUI
    assert any("one after another" in n for n in d["notes"])


def _pipe(*stages: StageSpec, gpus: int = 2) -> Pipeline:
    return Pipeline("rtx-4090", gpus, stages)


def _doc(stages: list[dict[str, Any]], count: int = 2) -> dict[str, Any]:
    return {"gpus": {"card": "rtx-4090", "count": count}, "stage": stages}


@pytest.mark.parametrize(("stages", "words"), [
    ([{"name": "a", "kind": "embed", "model": "qwen3-0.6b", "inputs": ["b"]},
      {"name": "b", "kind": "embed", "model": "qwen3-0.6b", "inputs": ["a"]}], "cycle"),
    ([{"name": "a", "kind": "embed", "model": "qwen3-0.6b"},
      {"name": "b", "kind": "embed", "model": "qwen3-0.6b"}], "not connected"),
    ([{"name": "a", "kind": "embed", "model": "qwen3-0.6b"},
      {"name": "b", "kind": "embed", "model": "qwen3-0.6b", "inputs": ["aa"]}], "unknown stage 'aa'"),
    ([{"name": "a", "kind": "embed", "model": "qwen3-0.6b", "batchh": 2}], "Did you mean 'batch'"),
    ([{"name": "a", "kind": "embed"}, {"name": "a", "kind": "embed", "inputs": ["a"]}], "used twice"),
    ([{"name": "a", "kind": "embed", "model": "qwen3-0.6b", "tokens": 0}], "tokens must be"),
])
def test_bad_pipelines_are_refused_with_the_reason(stages: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(GpuwiseError, match=words):
        parse_pipeline(_doc(stages), "pipe.toml")


def test_an_unknown_kind_a_stage_too_big_and_too_little_memory_say_so() -> None:
    with pytest.raises(GpuwiseError, match="Did you mean 'embed'"):
        place_pipeline(_pipe(StageSpec("a", "embedd", "qwen3-0.6b")))
    with pytest.raises(GpuwiseError, match="does not fit one"):
        place_pipeline(_pipe(StageSpec("a", "generate", "llama-3.1-70b")))
    with pytest.raises(GpuwiseError, match="no split over 1"):
        place_pipeline(Pipeline("rtx-4090", 1, (StageSpec("a", "unet", memory_gib=15, seconds_per_call=1),
                                               StageSpec("b", "vae", memory_gib=15, seconds_per_call=1,
                                                         inputs=("a",)))))
    with pytest.raises(GpuwiseError, match="memory_gib and seconds_per_call"):
        place_pipeline(_pipe(StageSpec("a", "vae")))
    with pytest.raises(GpuwiseError, match="count must be 1 to 8"):
        parse_pipeline(_doc([{"name": "a", "kind": "vae"}], count=9), "pipe.toml")


def test_the_cli_in_both_languages_and_a_bad_file() -> None:
    en = cli("place", str(RAG), "--lang", "en")
    assert en.code == 0 and "Throughput" in en.stdout and "vllm serve" in en.stdout
    zh = cli("place", str(RAG), "--lang", "zh")
    assert "吞吐" in zh.stdout
    missing = cli("place", "/no/such/pipeline.toml")
    assert missing.code == 2 and "No such file" in missing.stderr


def test_a_stage_memory_matches_gpuwise_estimate_alone() -> None:
    d = rag()
    est = cli("estimate", "qwen2.5-7b", "--card", "rtx-4090", "--context", "8192", "--concurrency", "8",
              "--output-tokens", "512", "--json").json()
    llm = next(s for s in d["stages"] if s["name"] == "llm")
    assert llm["memory_gib"] == pytest.approx(est["memory"]["required"] / GiB, abs=0.01)
