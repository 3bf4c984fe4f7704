"""--dora, --modules-to-save and --padding-free travel from `gpuwise plan` into the saved plan and every
training export, each in its framework's own words, read back by the framework's own kind of parser;
a framework that cannot do a knob refuses the export (in both languages) instead of dropping it."""

from __future__ import annotations

import ast
import shlex
from typing import Any

import pytest
import yaml

from gpuwise.errors import InputError
from gpuwise.export import emit, framework
from gpuwise.export._plan import parse_plan
from gpuwise.plan.load import plan_from_dict, plan_to_dict
from gpuwise.service_plan import PlanRequest, run_plan
from tests.export_samples import TRAIN, make

LORA = make(TRAIN, parallelism__zero=0, parallelism__offload="none", gpus=1, workload__task="lora",
            workload__hf_id="meta-llama/Llama-3.1-8B", workload__model="llama-3.1-8b")
KNOBS = make(LORA, workload__dora=True, workload__modules_to_save=["embed_tokens", "lm_head"],
             workload__padding_free=True)
DORA_ONLY = make(LORA, workload__dora=True, workload__modules_to_save=["embed_tokens", "lm_head"])


def fw(plan: dict[str, Any], name: str) -> dict[str, Any]:
    return make(plan, workload__framework=name)


def command(text: str) -> list[str]:
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return shlex.split("\n".join(lines[start:]))


def test_plan_request_carries_the_knobs_into_the_plan_and_its_json() -> None:
    out = run_plan(PlanRequest(model="qwen2.5-7b", task="lora", framework="ms-swift", dora=True,
                               modules_to_save="embed_tokens,lm_head", padding_free=True, top=1,
                               cards="a100-80gb-sxm"))
    plan = out.plans[0]
    assert (plan.dora, plan.modules_to_save, plan.padding_free) == (True, ("embed_tokens", "lm_head"), True)
    back = plan_from_dict(plan_to_dict(plan))
    assert (back.dora, back.modules_to_save, back.padding_free) == (True, ("embed_tokens", "lm_head"), True)


def test_ms_swift_spells_them_use_dora_modules_to_save_padding_free() -> None:
    tokens = command(framework.emit(parse_plan(fw(KNOBS, "ms-swift"))))
    text = " ".join(tokens)
    assert "--use_dora true" in text
    i = tokens.index("--modules_to_save")
    assert tokens[i + 1:i + 3] == ["embed_tokens", "lm_head"] and tokens[i + 3].startswith("--")
    assert "--padding_free true" in text and tokens.count("--attn_impl") == 1
    assert tokens[tokens.index("--attn_impl") + 1] == "flash_attn"


def test_llama_factory_yaml_has_use_dora_and_additional_target() -> None:
    cfg = yaml.safe_load(framework.emit(parse_plan(fw(DORA_ONLY, "llama-factory"))))
    assert cfg["use_dora"] is True and cfg["additional_target"] == "embed_tokens,lm_head"


def test_torchtune_sets_use_dora_on_the_lora_builder() -> None:
    plan = make(fw(LORA, "torchtune"), workload__dora=True)
    assert "model.use_dora=True" in command(framework.emit(parse_plan(plan)))


def test_unsloth_script_passes_them_to_get_peft_model_and_sftconfig() -> None:
    tree = ast.parse(framework.emit(parse_plan(fw(KNOBS, "unsloth"))))
    calls = {ast.unparse(n.func): {k.arg: ast.literal_eval(k.value) for k in n.keywords
                                   if isinstance(k.value, ast.Constant | ast.List)}
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    peft = calls["FastLanguageModel.get_peft_model"]
    assert peft["use_dora"] is True and peft["modules_to_save"] == ["embed_tokens", "lm_head"]
    assert calls["SFTConfig"]["padding_free"] is True


@pytest.mark.parametrize("target", ["accelerate", "torchrun"])
def test_the_users_own_script_is_told_the_peft_and_trl_words(target: str) -> None:
    text = emit(parse_plan(fw(KNOBS, "hf")), target)
    assert "LoraConfig(use_dora=True, modules_to_save=['embed_tokens', 'lm_head'])" in text
    assert "SFTConfig(padding_free=True)" in text


@pytest.mark.parametrize(("name", "plan", "word"), [
    ("torchtune", DORA_ONLY, "modules_to_save"),
    ("torchtune", make(LORA, workload__padding_free=True), "padding-free"),
    ("llama-factory", make(LORA, workload__padding_free=True), "padding-free"),
    ("torchtitan", make(LORA, workload__task="pretrain", workload__padding_free=True), "padding-free"),
    ("megatron", make(LORA, workload__task="pretrain", workload__padding_free=True), "padding-free"),
])
def test_a_framework_without_the_knob_refuses_in_both_languages(name: str, plan: dict[str, Any],
                                                                word: str) -> None:
    with pytest.raises(InputError) as err:
        framework.emit(parse_plan(fw(plan, name)))
    assert word in err.value.message.en and "请" in err.value.message.zh


@pytest.mark.parametrize("hostile", [
    {"workload__modules_to_save": ["embed_tokens", "rm -rf /"]},
    {"workload__modules_to_save": "embed_tokens lm_head"},
    {"workload__modules_to_save": ["lm_head", "lm_head"]},
    {"workload__dora": "yes"},
    {"workload__padding_free": 1},
    {"workload__task": "full", "workload__dora": True},
])
def test_a_plan_file_with_a_hostile_value_is_refused(hostile: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        plan_from_dict(make(LORA, **hostile))
