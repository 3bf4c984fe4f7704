"""A plan read back from a file cannot make an export deploy another precision than it sized.

`quantization` is the format the plan's checkpoint still needs (plan/value.py). A plan saved before
that field existed, or edited to null, used to export the 16-bit checkpoint of an int4-sized plan
(`vllm serve meta-llama/Llama-3.1-8B`); for a catalog preset deployed as its own checkpoint the
loader now recomputes it from the preset, so the exporter refuses as it does for a fresh plan.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuwise.errors import InputError
from gpuwise.export import emit
from gpuwise.plan.load import plan_from_dict, plan_to_dict
from gpuwise.service_plan import PlanRequest, run_plan


def _saved(weights: str, model: str = "llama-3.1-8b") -> dict[str, Any]:
    return plan_to_dict(run_plan(PlanRequest(model=model, weights=weights, cards="h100-sxm", top=1)).plans[0])


def test_a_fresh_int4_plan_of_a_bf16_preset_needs_int4_and_vllm_refuses_it() -> None:
    d = _saved("int4")
    assert d["quantization"] == "int4" and d["deploy_model"] == "meta-llama/Llama-3.1-8B"
    with pytest.raises(InputError, match="int4"):
        emit(plan_from_dict(d), "vllm")


@pytest.mark.parametrize("edit", ["null", "missing"])
def test_an_old_or_edited_plan_saying_nothing_is_refused_as_the_fresh_one(edit: str) -> None:
    d = _saved("int4")
    if edit == "null":
        d["quantization"] = None
    else:
        del d["quantization"]
    p = plan_from_dict(d)
    assert p.quantization == "int4"
    for target in ("vllm", "sglang", "trtllm"):
        with pytest.raises(InputError, match="not stored as int4"):
            emit(p, target)


def test_fp8_said_null_is_quantised_online_again() -> None:
    d = _saved("fp8")
    d["quantization"] = None
    assert "--quantization fp8" in emit(plan_from_dict(d), "vllm")


def test_a_quantization_other_than_the_plans_weights_is_refused_by_name() -> None:
    d = _saved("int4")
    d["quantization"] = "fp8"  # would make vLLM quantise to FP8 a plan sized for int4
    with pytest.raises(InputError, match="quantization"):
        plan_from_dict(d)
    bf16 = _saved("bf16")
    bf16["quantization"] = "int4"
    with pytest.raises(InputError, match="quantization"):
        plan_from_dict(bf16)


def test_a_deploy_model_keeps_the_files_word() -> None:
    d = copy.deepcopy(_saved("int4"))
    d["deploy_model"], d["quantization"] = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", None
    p = plan_from_dict(d)
    assert p.quantization is None
    assert "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4" in emit(p, "vllm")


def test_a_16bit_plan_needs_nothing() -> None:
    d = _saved("bf16")
    del d["quantization"]
    assert plan_from_dict(d).quantization is None
