"""Expert parallelism in training: routed experts split over ep ranks, their all-to-all charged."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.params import count_params
from gpuwise.catalog.presets import find_preset
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, estimate_json

MOE: dict[str, Any] = {"model": "qwen3-30b-a3b", "card": "h100-sxm", "gpus": 8, "task": "pretrain",
                       "framework": "torchtitan", "seq_len": 4096, "micro_batch": 1, "grad_ckpt": "full"}


def run(**kw: Any) -> dict[str, Any]:
    return dict(estimate_json(EstimateRequest(**{**MOE, **kw})))


def test_ep_splits_the_routed_experts_when_zero_does_not() -> None:
    preset = find_preset("qwen3-30b-a3b")
    assert preset is not None
    p = count_params(preset.arch())
    one, eight = run(zero=1, ep=1)["memory"], run(zero=1, ep=8)["memory"]
    gib = 2**30
    # torchtitan keeps fp32 params: 4 bytes each; with EP 8 the experts' 7/8 leave the GPU
    saved = p.experts * 7 / 8 * 4
    w1 = next(i["bytes"] for i in one["items"] if i["name"] == "weights")
    w8 = next(i["bytes"] for i in eight["items"] if i["name"] == "weights")
    assert (w1 - w8) / gib == pytest.approx(saved / gib, rel=0.01)


def test_under_zero3_ep_leaves_the_sharded_states_alone_and_shrinks_the_gather() -> None:
    one, eight = run(zero=3, ep=1)["memory"], run(zero=3, ep=8)["memory"]
    by = {k: {i["name"]: i["bytes"] for i in m["items"]} for k, m in (("1", one), ("8", eight))}
    assert by["8"]["optimizer"] == pytest.approx(by["1"]["optimizer"], rel=1e-6)
    assert by["8"]["zero3_gather"] < by["1"]["zero3_gather"] / 3


def test_the_all_to_all_is_charged_and_grows_across_nodes() -> None:
    inside = run(zero=3, ep=8)["speed"]["step_breakdown_s"]
    assert run(zero=3, ep=1)["speed"]["step_breakdown_s"]["ep_comm"] == 0
    assert inside["ep_comm"] > 0
    across = run(zero=3, ep=16, nodes=2)["speed"]["step_breakdown_s"]
    assert across["ep_comm"] > inside["ep_comm"]


@pytest.mark.parametrize(("kw", "words"), [
    ({"model": "llama-3.1-8b", "ep": 2}, "no routed experts"),
    ({"ep": 3}, "must divide"),
    ({"ep": 16}, "must divide"),
])
def test_an_impossible_ep_is_refused_with_the_reason(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError, match=words):
        run(**kw)
