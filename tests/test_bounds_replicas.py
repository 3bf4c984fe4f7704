"""--replicas has one bound, gpuwise.bounds', read alike by the command line, the service and the web
form: every value inside it is estimated, the first value past it is refused with the table's words."""

from __future__ import annotations

import pytest

from gpuwise.bounds import BOUNDS, out_of_range
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, run_estimate
from gpuwise.web.calls import estimate_spec, plan_spec
from gpuwise.web.params import coerce

TOP = int(BOUNDS["replicas"].high)
REQ = {"model": "qwen2.5-7b", "card": "h100-sxm", "concurrency": 4096}


def test_the_top_of_the_replicas_bound_is_estimated_by_the_service() -> None:
    result, _ = run_estimate(EstimateRequest(**REQ, replicas=TOP))
    assert result.replicas == TOP


def test_one_past_the_bound_is_refused_by_the_service_with_the_table_s_message() -> None:
    with pytest.raises(InputError) as info:
        run_estimate(EstimateRequest(**REQ, replicas=TOP + 1))
    want = out_of_range(BOUNDS["replicas"], TOP + 1).message
    assert info.value.message == want
    assert "--replicas must be a whole number from 1 to 4,096" in want.en


def test_the_command_line_refuses_it_in_the_same_words(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.cli.app import run

    monkeypatch.setenv("COLUMNS", "300")
    for lang, text in (("en", "en"), ("zh", "zh")):
        with pytest.raises(SystemExit) as done:
            run(["estimate", "qwen2.5-7b", "--card", "h100-sxm", "--replicas", str(TOP + 1), "--lang", lang])
        assert done.value.code != 0
        err = capsys.readouterr().err
        assert getattr(out_of_range(BOUNDS["replicas"], TOP + 1).message, text) in err


@pytest.mark.parametrize("spec", [estimate_spec, plan_spec], ids=["estimate", "plan"])
def test_the_web_form_takes_the_same_range(spec: object) -> None:
    param = spec().get("replicas")  # type: ignore[operator]
    assert param is not None and param.bounds == (1, TOP)
    assert coerce(param, TOP) == TOP
    with pytest.raises(InputError) as info:
        coerce(param, TOP + 1)
    assert "a whole number from 1 to 4,096; got 4097" in info.value.message.en
