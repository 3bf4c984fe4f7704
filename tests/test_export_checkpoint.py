"""An export deploys the precision its plan sized: a plan whose checkpoint is not yet in the plan's
weight format is either quantised by the engine as it loads (vLLM and SGLang `--quantization fp8`)
or refused, in both languages, pointing at --deploy-model. Never the 16-bit checkpoint in silence."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gpuwise.errors import InputError
from gpuwise.export import INFERENCE_TARGETS, emit
from gpuwise.service_plan import PlanRequest, emit_json, run_plan
from tests.export_samples import INFER, make
from tests.test_serving_export import check_flags, command, recorded

FP8_TRTLLM = make(INFER, weights="fp8", quantization="fp8", parallelism__engine="trtllm")
INT4 = make(INFER, weights="int4", quantization="int4")


def test_trtllm_refuses_an_fp8_plan_whose_checkpoint_is_16_bit_in_both_languages() -> None:
    with pytest.raises(InputError) as info:
        emit(FP8_TRTLLM, "trtllm")
    msg = info.value.message
    assert "--deploy-model" in msg.en and "meta-llama/Llama-3.1-8B is not stored as fp8" in msg.en
    assert "--engine vllm" in msg.en and "--quantization fp8" in msg.en
    assert "--deploy-model" in msg.zh and "检查点" in msg.zh


def test_trtllm_serves_the_fp8_checkpoint_deploy_model_names() -> None:
    plan = make(INFER, weights="fp8", parallelism__engine="trtllm", workload__hf_id="org/Llama-3.1-8B-FP8")
    args = command(emit(plan, "trtllm"), "trtllm-serve")
    assert args[1] == "org/Llama-3.1-8B-FP8"
    check_flags(args[2:], recorded("trtllm-serve-00209af.flags.txt"))


@pytest.mark.parametrize("target", INFERENCE_TARGETS)
def test_every_serving_target_refuses_int4_weights_on_a_16_bit_checkpoint(target: str) -> None:
    with pytest.raises(InputError) as info:
        emit(INT4, target)
    assert "int4" in info.value.message.en and "--deploy-model" in info.value.message.en
    assert "AWQ" in info.value.message.en and "--deploy-model" in info.value.message.zh


def test_vllm_and_sglang_quantise_a_16_bit_checkpoint_to_fp8_as_they_load() -> None:
    plan = make(INFER, weights="fp8", quantization="fp8")
    vllm_args = shlex.split(emit(plan, "vllm").splitlines()[-1])
    assert vllm_args[vllm_args.index("--quantization") + 1] == "fp8"
    sgl = command(emit(plan, "sglang"), "python")
    assert sgl[sgl.index("--quantization") + 1] == "fp8"
    check_flags(sgl[3:], recorded("sglang-0.5.23.launch-server.flags.txt"))


def test_a_planned_int4_serving_plan_records_the_format_its_checkpoint_still_needs() -> None:
    best = run_plan(PlanRequest(model="llama-3.1-8b", weights="int4", cards="h100-sxm")).plans[0]
    assert best.weights == "int4" and best.quantization == "int4"
    assert best.deploy_model == "meta-llama/Llama-3.1-8B"
    with pytest.raises(InputError, match="--deploy-model"):
        emit(best, "vllm")


def test_deploy_model_names_the_int4_checkpoint_and_the_export_runs_it() -> None:
    req = PlanRequest(model="llama-3.1-8b", weights="int4", cards="h100-sxm",
                      deploy_model="org/Llama-3.1-8B-AWQ")
    text = emit_json(req, "vllm")["config"]
    assert "vllm serve org/Llama-3.1-8B-AWQ" in text and "--quantization" not in text


def test_the_cli_refuses_an_fp8_trtllm_export_in_chinese_and_writes_nothing(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpuwise.cli.app import run

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as done:
        run(["plan", "llama-3.1-8b", "--weights", "fp8", "--engine", "trtllm", "--cards", "h100-sxm",
             "--emit", "trtllm", "--lang", "zh"])
    out = capsys.readouterr()
    assert done.value.code != 0 and "trtllm-serve" not in out.out
    assert "--deploy-model" in out.err and "不是 fp8 检查点" in out.err


def test_plan_s_emit_help_names_every_export_target() -> None:
    from gpuwise.cli.app import command
    from gpuwise.export import TARGETS

    plan = command().commands["plan"]  # type: ignore[attr-defined]
    text = next(p.help for p in plan.params if "--emit" in p.opts)
    assert all(f"{t} " in text or text.endswith(t) for t in (*TARGETS, "framework")), text


def test_the_web_page_says_why_a_config_is_missing_in_its_language() -> None:
    from gpuwise.service_plan import plan_json
    from gpuwise.web.labels import labels
    from gpuwise.web.view import build_view, emit_configs

    plan = plan_json(PlanRequest(model="llama-3.1-8b", weights="int4", cards="h100-sxm"))
    configs = emit_configs(plan)
    vllm = next(c for c in configs if c["target"] == "vllm")
    assert vllm["text"] == "" and "int4" in vllm["refused"] and "检查点" in vllm["refused_zh"]
    shown = build_view(plan, None, configs, "zh", labels("zh"))["configs"]
    assert "int4" in next(c for c in shown if c["target"] == "vllm")["refused"]


@pytest.mark.parametrize("target", ["framework", "accelerate", "torchrun"])
def test_a_qlora_plan_run_by_the_user_s_script_says_to_load_the_base_in_4_bit(target: str) -> None:
    import yaml

    from tests.export_samples import TRAIN

    qlora = make(TRAIN, gpus=1, parallelism__zero=0, parallelism__offload="none", workload__task="qlora",
                 weights="nf4", workload__framework="hf")
    text = emit(qlora, target)
    assert 'load_in_4bit=True, bnb_4bit_quant_type="nf4"' in text and "Qwen/Qwen2.5-14B" in text
    if target != "torchrun":
        assert isinstance(yaml.safe_load(text), dict)  # the note is a comment of the YAML
    lora = make(qlora, workload__task="lora", weights="bf16")
    assert "BitsAndBytesConfig" not in emit(lora, target)
