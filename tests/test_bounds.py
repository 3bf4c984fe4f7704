"""One definition of every input's bounds, used by the CLI, the web API and the service."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from gpuwise.bounds import BOUNDS, check_parallelism, check_request, check_value
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.service_plan import PlanRequest, plan_json
from gpuwise.web.params import BOUNDS as WEB_BOUNDS


def test_the_web_api_reads_the_same_table() -> None:
    assert {name: (b.low, b.high) for name, b in BOUNDS.items()} == WEB_BOUNDS


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, 10**400, True, "3", 2.5])
def test_a_value_outside_its_bound_names_the_flag_and_the_range(value: object) -> None:
    with pytest.raises(InputError) as info:
        check_value("gpus", value)
    msg = info.value.message
    assert "--gpus" in msg.en and "1 to 4,096" in msg.en
    assert "--gpus" in msg.zh and "1 到 4,096" in msg.zh


def test_a_huge_integer_is_refused_without_overflow_and_shown_short() -> None:
    with pytest.raises(InputError, match="400-digit number"):
        check_value("context", 10**399)


@pytest.mark.parametrize("field", sorted(BOUNDS))
def test_every_bound_takes_its_ends_and_refuses_what_lies_beyond(field: str) -> None:
    b = BOUNDS[field]
    assert check_value(field, b.high) == b.high
    if not b.low_open:
        assert check_value(field, b.low) == b.low
    for bad in (b.low if b.low_open else b.low - 1, b.high * 2 + 1, math.nan):
        with pytest.raises(InputError, match=b.flag_name):
            check_value(field, bad)


def test_budget_must_be_finite_and_not_negative() -> None:
    for bad in (math.nan, -1.0, math.inf):
        with pytest.raises(InputError, match="--budget"):
            check_request(PlanRequest(model="7b", budget=bad))
    check_request(PlanRequest(model="7b", budget=0.0))


def test_tokens_and_inter_node_bandwidth_must_be_positive() -> None:
    with pytest.raises(InputError, match="--tokens"):
        check_request(PlanRequest(model="7b", train_tokens=math.nan))
    with pytest.raises(InputError, match="--inter-node-gbps"):
        check_request(EstimateRequest(model="7b", card="h100-sxm", inter_node_gbps=0.0))


def test_tensor_times_pipeline_parallel_must_fit_in_the_gpus() -> None:
    with pytest.raises(InputError, match="needs 4 GPUs"):
        check_parallelism(gpus=2, nodes=1, tp=2, pp=2)
    with pytest.raises(InputError, match="needs 100 GPUs"):
        check_parallelism(gpus=2, nodes=1, tp=0, pp=100)
    check_parallelism(gpus=8, nodes=6, tp=8, pp=6)  # Megatron's TP8 x PP6 over six nodes


def test_the_service_refuses_inconsistent_or_absurd_requests() -> None:
    cases: list[dict[str, object]] = [
        {"gpus": 2, "tp": 2, "pp": 2}, {"gpus": 2, "pp": 100}, {"task": "full", "nodes": 0},
        {"task": "full", "nodes": -1}, {"task": "lora", "train_tokens": math.nan},
        {"output_tokens": 5000, "context": 4096}, {"gpus": 64, "pp": 40}]
    for kw in cases:
        with pytest.raises(InputError):
            estimate_json(EstimateRequest(model="llama-3.1-8b", card="h100-sxm", **kw))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="--budget"):
        plan_json(PlanRequest(model="llama-3.1-8b", budget=math.nan))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], check=False, capture_output=True, text=True,
                          env={"HF_HUB_OFFLINE": "1", "GPUWISE_LANG": "en", "PATH": "/usr/bin:/bin"}, timeout=120)


def test_the_cli_names_the_flag_and_exits_non_zero() -> None:
    r = _cli("estimate", "llama-3.1-8b", "--card", "H100-SXM", "--tokens", "nan", "--task", "lora", "--json")
    assert r.returncode == 2 and "--tokens" in r.stdout and "NaN" not in r.stdout


def test_plan_exits_non_zero_when_nothing_meets_the_constraints() -> None:
    r = _cli("plan", "llama-3.1-8b", "--budget", "0.0001", "--json")
    assert r.returncode == 1, r.stderr
    assert '"plans": []' in r.stdout
