"""A misspelt word choice (--task lorra, --engine vlm, --optimizer adamww ...) is refused with close
matches in the user's language, by the service (so the CLI and the web API alike), for estimate and
plan requests; every value the library accepts, patterns included, still passes."""

from __future__ import annotations

import pytest

from gpuwise.bounds import CHOICE_FLAGS, check_choices
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.service_plan import PlanRequest, plan_json

TYPOS = {"task": ("lorra", "lora"), "engine": ("vlm", "vllm"), "offload": ("cpuu", "cpu"),
         "cp_kind": ("rin", "ring"), "optimizer": ("adamww", "adamw"), "loss": ("fusd", "fused"),
         "grad_ckpt": ("fulll", "full"), "hub": ("modelscop", "modelscope"), "weights": ("in4", "int4"),
         "kv_dtype": ("fp9", "fp8"), "lora_targets": ("q,kk", "k")}


def test_every_closed_choice_field_has_a_typo_case() -> None:
    assert set(CHOICE_FLAGS) | {"lora_targets"} == set(TYPOS)


@pytest.mark.parametrize("field", sorted(TYPOS))
def test_an_estimate_typo_suggests_the_close_choice_in_both_languages(field: str) -> None:
    typo, meant = TYPOS[field]
    with pytest.raises(InputError) as info:
        estimate_json(EstimateRequest(model="qwen2.5-7b", card="h100-sxm", **{field: typo}))
    err = info.value
    assert meant in err.suggestions
    assert f"Did you mean '{meant}'" in err.message.en or f"'{meant}'" in err.message.en
    assert "您是否想输入" in err.message.zh and "gpuwise estimate --help" in err.hint.en  # type: ignore[union-attr]


@pytest.mark.parametrize("field", ["task", "optimizer", "loss", "grad_ckpt", "cp_kind", "weights", "kv_dtype"])
def test_a_plan_typo_suggests_the_close_choice(field: str) -> None:
    if not hasattr(PlanRequest(model="x"), field):
        pytest.skip(f"plan has no {field}")
    typo, meant = TYPOS[field]
    with pytest.raises(InputError) as info:
        plan_json(PlanRequest(model="qwen2.5-7b", **{field: typo}))
    assert meant in info.value.suggestions and "gpuwise plan --help" in info.value.hint.en  # type: ignore[union-attr]


@pytest.mark.parametrize("req", [
    EstimateRequest(model="m", card="c", grad_ckpt="every-4"),
    EstimateRequest(model="m", card="c", weights="gguf:Q4_K_M"),
    EstimateRequest(model="m", card="c", lora_targets="all-linear"),
    EstimateRequest(model="m", card="c", lora_targets="q, v ,o"),
    PlanRequest(model="m", grad_ckpt="auto", weights="any"),
    PlanRequest(model="m", grad_ckpt="op-sac", weights="auto", kv_dtype="fp8"),
], ids=["every-N", "gguf-type", "all-linear", "spaced-list", "plan-auto-any", "plan-op-sac"])
def test_values_the_library_accepts_still_pass(req: object) -> None:
    check_choices(req)


def test_the_cli_words_the_suggestion_in_chinese(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.cli.app import run

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as done:
        run(["estimate", "qwen2.5-7b", "--card", "h100-sxm", "--task", "lorra", "--lang", "zh"])
    err = capsys.readouterr().err
    assert done.value.code != 0
    assert "未知的 --task 取值“lorra”" in err and "您是否想输入 'lora'" in err
