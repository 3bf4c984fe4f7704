"""Capacity where the engine keeps no KV pool (llama.cpp, transformers): what the memory left beside
the weights, activations and runtime could hold, so the line and the fixes say something true."""

from __future__ import annotations

from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB


def _est(**kw: object) -> dict:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


LLAMA: dict[str, object] = {"model": "7b", "card": "rtx-4050-laptop", "engine": "llamacpp", "weights": "gguf:Q4_K_M"}


def test_llamacpp_capacity_is_the_kv_the_free_memory_holds() -> None:
    est = _est(**LLAMA, context=4096)
    cap, mem = est["capacity"], est["memory"]
    per_token = mem["kv_cache"] / 4096  # the one sequence's cache, per token
    room = est["usable_bytes"] - (mem["total"] - mem["kv_cache"])  # beside weights, activations, runtime
    assert cap["kv_tokens"] > 4096  # the 4,096-token cache fits with room to spare
    assert 3 <= cap["max_concurrency"] < 4
    assert cap["max_context"] == cap["kv_tokens"]  # one sequence: all of it
    assert abs(cap["kv_tokens"] - room / per_token) <= 1


def test_fewer_gpu_layers_leave_room_for_a_longer_context() -> None:
    full = _est(**LLAMA, context=4096)["capacity"]["max_context"]
    part = _est(**LLAMA, context=4096, gpu_layers=20)["capacity"]["max_context"]
    assert part > full * 1.5  # less weight on the GPU and only 20/28 of each token's KV there


def test_a_context_too_long_for_the_card_offers_the_context_that_fits() -> None:
    est = _est(**LLAMA, context=65536)
    assert est["fit"] == "does_not_fit"
    shorter = [f["settings"]["context"] for f in est["fixes"] if f["action"] == "context"]
    assert shorter and 8192 < shorter[0] < 65536 and shorter[0] == est["capacity"]["max_context"]
    assert est["capacity"]["max_context"] < 65536
    assert est["memory"]["kv_cache"] > 6 * GiB  # 65,536 tokens of f16 KV: more than the card has
