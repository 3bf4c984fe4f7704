"""`--replay FILE`: a recorded vLLM benchmark's own prompts, replayed (gpuwise.replay and
estimate/speed.py benchmark_run's `recorded`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpuwise.cli.app import command
from gpuwise.errors import DataError, InputError
from gpuwise.replay import MAX_REQUESTS, load_recorded_run
from gpuwise.service import EstimateRequest, estimate_json

RUNS = Path(__file__).resolve().parent.parent / "validation" / "runs"
BASE: dict[str, Any] = {"model": "mistral-7b-v0.3", "card": "h100-sxm", "context": 407, "output_tokens": 249,
                        "concurrency": 10}


def _write(tmp_path: Path, doc: object, name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def _run(tmp_path: Path, prompts: list[int], outputs: list[int], **kw: object) -> dict[str, Any]:
    path = _write(tmp_path, {"request_rate": "inf", "input_lens": prompts, "output_lens": outputs},
                  f"run{len(list(tmp_path.iterdir()))}.json")
    speed: dict[str, Any] = estimate_json(EstimateRequest(**{**BASE, **kw}, replay=str(path)))["speed"]
    return speed


def test_recorded_file_reads_its_own_lengths() -> None:
    run = load_recorded_run(RUNS / "lambdalabs-mistral-7b-h100-10prompts.json")
    assert run.prompts == (14, 30, 28, 12, 375, 29, 487, 369, 5, 236)
    assert run.outputs == (129, 890, 273, 169, 0, 928, 10, 26, 8, 57)
    assert sum(run.outputs) == 2490 and run.mean_prompt == 158.5


def test_replay_throughput_is_the_counted_tokens_over_the_run(tmp_path: Path) -> None:
    sp = _run(tmp_path, [100] * 10, [200] * 10)
    assert sp["run_requests"] == 10
    assert sp["throughput_tokens_per_s"] == pytest.approx(2000 / sp["run_seconds"], rel=1e-6)


def test_one_long_output_drains_the_run(tmp_path: Path) -> None:
    even = _run(tmp_path, [100] * 10, [200] * 10)
    tail = _run(tmp_path, [100] * 10, [200] * 9 + [2000])  # the batch drains to one sequence behind it
    assert tail["run_seconds"] > even["run_seconds"] * 4
    assert tail["throughput_tokens_per_s"] < even["throughput_tokens_per_s"] / 2


def test_zero_output_requests_take_time_but_add_no_tokens(tmp_path: Path) -> None:
    plain = _run(tmp_path, [100] * 4, [200] * 4)
    empty = _run(tmp_path, [100] * 5, [200] * 4 + [0])
    assert empty["run_requests"] == 5
    assert empty["run_seconds"] > plain["run_seconds"]  # its prefill and its one step
    assert empty["throughput_tokens_per_s"] == pytest.approx(800 / empty["run_seconds"], rel=1e-6)


def test_longer_prompts_cost_more_prefill(tmp_path: Path) -> None:
    short = _run(tmp_path, [50] * 10, [100] * 10)
    long = _run(tmp_path, [1500] * 10, [100] * 10)
    assert long["run_seconds"] > short["run_seconds"]


@pytest.mark.parametrize("doc, words", [
    ({"input_lens": [1, 2]}, "'output_lens'"),
    ({"output_lens": [1, 2]}, "'input_lens'"),
    ({"input_lens": [], "output_lens": []}, "'input_lens'"),
    ({"input_lens": "12", "output_lens": [1]}, "'input_lens'"),
    ({"input_lens": [1, 2], "output_lens": [3]}, "pair up"),
    ({"input_lens": [1, True], "output_lens": [3, 4]}, "'input_lens'[1]"),
    ({"input_lens": [1, 2.5], "output_lens": [3, 4]}, "'input_lens'[1]"),
    ({"input_lens": [0, 2], "output_lens": [3, 4]}, "'input_lens'[0]"),
    ({"input_lens": [1, 2], "output_lens": [3, -4]}, "'output_lens'[1]"),
    ({"input_lens": [1, 2], "output_lens": [3, 1 << 30]}, "'output_lens'[1]"),
    ({"input_lens": [1, 2], "output_lens": [0, 0]}, "0 output tokens"),
    ({"request_rate": 4.0, "input_lens": [1], "output_lens": [3]}, "request_rate 4.0"),
    ({"request_rate": "fast", "input_lens": [1], "output_lens": [3]}, "request_rate 'fast'"),
    ([1, 2, 3], "JSON object"),
])
def test_hostile_files_are_refused_with_the_reason(tmp_path: Path, doc: object, words: str) -> None:
    with pytest.raises(DataError) as err:
        load_recorded_run(_write(tmp_path, doc))
    assert words in err.value.message.en, err.value.message.en
    assert err.value.message.zh and err.value.message.zh != err.value.message.en


def test_not_json_nan_and_too_many_requests_are_refused(tmp_path: Path) -> None:
    for text in ("{not json", '{"input_lens": [NaN], "output_lens": [1]}'):
        with pytest.raises(DataError):
            load_recorded_run(_write(tmp_path, text))
    n = MAX_REQUESTS + 1
    with pytest.raises(DataError, match="at most"):
        load_recorded_run(_write(tmp_path, {"input_lens": [1] * n, "output_lens": [1] * n}))
    with pytest.raises(DataError):
        load_recorded_run(tmp_path)  # a folder, not a file


def test_requests_must_agree_with_the_replay_and_serving_only(tmp_path: Path) -> None:
    path = _write(tmp_path, {"input_lens": [10, 20], "output_lens": [5, 6]})
    with pytest.raises(InputError, match="disagree"):
        estimate_json(EstimateRequest(**BASE, requests=3, replay=str(path)))
    estimate_json(EstimateRequest(**BASE, requests=2, replay=str(path)))  # agreeing is fine
    with pytest.raises(InputError, match="--task infer"):
        estimate_json(EstimateRequest(**{**BASE, "task": "lora"}, replay=str(path)))


def test_cli_replays_and_refuses_without_a_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    good = str(RUNS / "lambdalabs-mistral-7b-h100-10prompts.json")
    ok = runner.invoke(command(), ["estimate", "mistral-7b-v0.3", "--card", "h100-sxm", "--context", "407",
                             "--output-tokens", "249", "--concurrency", "10", "--replay", good, "--lang", "en"],
                       env={"COLUMNS": "80"})
    assert ok.exit_code == 0, ok.output
    assert "benchmark run: 10 prompts sent at once" in ok.output
    bad = _write(tmp_path, {"input_lens": [1, 2], "output_lens": [3]})
    for lang, words in (("en", "pair up"), ("zh", "一一对应")):
        res = runner.invoke(command(), ["estimate", "mistral-7b-v0.3", "--card", "h100-sxm", "--replay", str(bad),
                                  "--lang", lang])
        assert res.exit_code != 0 and words in res.output and "Traceback" not in res.output, res.output
