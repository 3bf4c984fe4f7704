"""Serving memory as the engines size it: vLLM's start-up profile by version, SGLang's static
fraction, TensorRT-LLM's fraction of free memory (data/engines.toml [[rule]] rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.catalog.engines import (
    ENGINE_IDS,
    engine_rules,
    load_rules,
    prefill_graph_sizes,
    rules,
    version_key,
)
from gpuwise.errors import DataError, InputError
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB


def _est(**kw: object) -> dict:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


def _item(est: dict, name: str) -> float:
    return sum(i["bytes"] for i in est["memory"]["items"] if i["name"] == name)


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r.id)
def test_every_engine_rule_names_its_sources(rule: object) -> None:
    assert rule.sources  # type: ignore[attr-defined]
    assert version_key(rule.from_version) is not None  # type: ignore[attr-defined]


def test_every_engine_has_rules() -> None:
    assert {r.engine for r in rules()} == set(ENGINE_IDS)


def test_engine_version_picks_the_newest_rule_not_above_it() -> None:
    assert engine_rules("vllm", "0.6.4.post1").id == "vllm-v0"
    assert engine_rules("vllm", "0.8.4").id == "vllm-0.8"
    assert engine_rules("vllm", "v0.11.2").id == "vllm-0.9"
    assert engine_rules("vllm", "0.26.1rc1").id == "vllm-0.21"
    assert engine_rules("vllm").id == "vllm-0.21"


def test_an_engine_version_that_is_not_a_number_is_refused_in_both_languages() -> None:
    with pytest.raises(InputError) as err:
        _est(model="llama-3.1-8b", card="h100-sxm", engine_version="latest-ish")
    assert "latest-ish" in err.value.message.en and err.value.message.zh


def test_a_data_file_rule_with_an_unknown_field_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "engines.toml"
    bad.write_text('schema_version = 1\n[[rule]]\nid = "x"\nengine = "vllm"\nfrom_versoin = "0.1"\n')
    with pytest.raises(DataError) as err:
        load_rules(bad)
    assert "engines.toml" in err.value.message.en and "from_versoin" in err.value.message.en


def test_vllm_v1_profiling_peak_follows_max_num_seqs_times_vocabulary_not_model_size() -> None:
    # llm-d's H100 logs: Qwen3-0.6B 5.56 GiB and Qwen3-32B 5.64 GiB of peak activation (same vocab)
    small = _est(model="qwen3-0.6b", card="h100-sxm", context=16000, engine_version="0.11")
    big = _est(model="qwen3-32b", card="h100-sxm", context=16000, engine_version="0.11")
    assert _item(small, "sampler_peak") == pytest.approx(_item(big, "sampler_peak"), rel=0.01)
    assert 5.3 * GiB < _item(big, "sampler_peak") < 5.9 * GiB
    # a smaller card keeps the 256-sequence defaults: a quarter of the rows
    l40s = _est(model="qwen3-32b", card="l40s", gpus=2, context=16000, engine_version="0.11")
    assert _item(l40s, "sampler_peak") == pytest.approx(_item(big, "sampler_peak") / 4, rel=0.01)


def test_vllm_keeps_a100_on_the_small_defaults() -> None:
    a100 = _est(model="llama-3.1-8b", card="a100-80gb-sxm", context=8192, engine_version="0.11")
    h100 = _est(model="llama-3.1-8b", card="h100-sxm", context=8192, engine_version="0.11")
    assert _item(a100, "sampler_peak") * 4 == pytest.approx(_item(h100, "sampler_peak"), rel=0.01)


def test_qwen3_32b_bf16_at_32k_does_not_fit_one_h100_as_vllm_said() -> None:
    for version in ("0.11", ""):
        est = _est(model="qwen3-32b", card="h100-sxm", context=32000, engine_version=version)
        assert est["fit"] == "does_not_fit"
        assert est["capacity"]["max_concurrency"] < 1
    ok = _est(model="qwen3-32b", card="h100-sxm", context=16000, engine_version="0.11")
    assert ok["fits"]  # llm-d: SUCCESS at 16,000 with 4.45 GiB of KV


def test_recent_vllm_charges_cuda_graphs_before_the_pool() -> None:
    old = _est(model="llama-3.1-8b", card="h100-sxm", context=8192, engine_version="0.11")
    new = _est(model="llama-3.1-8b", card="h100-sxm", context=8192, engine_version="0.21")
    graphs = engine_rules("vllm", "0.21").cuda_graph_gib * GiB
    assert old["memory"]["kv_pool"] - new["memory"]["kv_pool"] == pytest.approx(graphs, abs=2**20)


def test_vllm_kv_tokens_are_whole_blocks() -> None:
    est = _est(model="llama-3.1-8b", card="h100-sxm", context=8192)
    assert est["capacity"]["kv_tokens"] % 16 == 0


def test_sglang_pool_is_the_static_fraction_of_start_memory_less_the_weights() -> None:
    est = _est(model="qwen2.5-32b", card="l4", gpus=4, context=32768, engine="sglang", engine_version="0.4.3")
    rule = engine_rules("sglang", "0.4.3")
    start = 22.04 * GiB - rule.init_gib * GiB
    assert est["memory"]["kv_pool"] == pytest.approx(start * rule.fraction_at(4) - est["memory"]["weights"],
                                                      abs=2**20)
    assert rule.fraction_at(1) > rule.fraction_at(2) > rule.fraction_at(4) > rule.fraction_at(8)
    lower = _est(model="qwen2.5-32b", card="l4", gpus=4, context=32768, engine="sglang", engine_version="0.4.3",
                 mem_fraction=0.8)
    assert lower["memory"]["kv_pool"] < est["memory"]["kv_pool"]


def test_sglang_05_derives_mem_fraction_static_from_its_reserve() -> None:
    rule = engine_rules("sglang", "0.5.23")
    # H100 (79.11 GiB), TP 1: 8,192-token chunks, 256 decode graphs, 58 prefill graph sizes; the
    # reserve 512 + 8192 x 1.5 + 128 + 256 x 2 + 58 x 8 = 13,904 MB is above the 10 GB floor
    assert rule.bracket(79.11, 1) == (8192, 256)
    assert len(prefill_graph_sizes(8192)) == 58
    expected = round((79.11 * 1024 - 13904) / (79.11 * 1024), 3)
    assert expected == 0.828  # sgl-project/sglang#29092: "0.828 for H100 with Qwen3 32 B"
    assert rule.reserved_fraction(79.11, 1, 1, mla=False) == expected
    # MLA backends reserve 1.5 GB for prefill graphs instead
    assert rule.reserved_fraction(139.8, 8, 1, mla=True) == round((139.8 * 1024 - 16384) / (139.8 * 1024), 3)
    # a 24 GB card: 4,096-token chunks, no floor
    assert rule.bracket(23.5, 1) == (4096, 48)


def test_trtllm_pool_is_its_fraction_of_the_memory_left_free() -> None:
    est = _est(model="llama-3.1-8b", card="h100-sxm", context=8192, engine="trtllm")
    mem = est["memory"]
    free = 79.11 * GiB - mem["weights"] - mem["activations"] - mem["overhead"]
    assert mem["kv_pool"] == pytest.approx(0.9 * free, abs=2**20)


def test_a_bad_mem_fraction_is_refused() -> None:
    with pytest.raises(InputError):
        _est(model="llama-3.1-8b", card="h100-sxm", engine="sglang", mem_fraction=1.5)


def test_the_estimate_prints_the_engines_own_start_up_lines() -> None:
    v1 = _est(model="llama-3.1-8b", card="h100-sxm", context=16000, engine_version="0.11")
    boot = v1["engine_startup"]
    tokens = v1["capacity"]["kv_tokens"]
    assert boot["rules"] == "vllm-0.9" and boot["max_num_seqs"] == 1024
    assert f"GPU KV cache size: {tokens:,} tokens" in boot["lines"]
    assert f"Maximum concurrency for 16,000 tokens per request: {tokens / 16000:.2f}x" in boot["lines"]
    v0 = _est(model="llama-3.1-8b", card="rtx-3090", context=20000, engine_version="0.6")
    assert v0["engine_startup"]["lines"][0].startswith(f"# GPU blocks: {v0['capacity']['kv_tokens'] // 16}, ")
    sg = _est(model="llama-3.1-8b", card="h100-sxm", context=16000, engine="sglang")
    assert f"max_total_num_tokens={sg['capacity']['kv_tokens']}," in sg["engine_startup"]["lines"][1]
    trt = _est(model="llama-3.1-8b", card="h100-sxm", context=16000, engine="trtllm")
    assert trt["engine_startup"]["lines"][0].endswith(f"({trt['capacity']['kv_tokens']}).")
    assert "engine_startup" not in _est(model="llama-3.1-8b", card="h100-sxm", engine="transformers")


def test_llama_cpp_start_up_lines_count_the_output_layer_and_split_the_kv_buffers() -> None:
    base = {"model": "validation/models/meta-llama--Llama-2-7b-hf", "card": "rtx-4050-laptop",
            "engine": "llamacpp", "weights": "gguf:Q4_K_M", "context": 4096}
    full = _est(**base)["engine_startup"]["lines"]
    assert full == ["load_tensors: offloaded 33/33 layers to GPU",
                    "llama_kv_cache: CUDA0 KV buffer size =  2048.00 MiB"]  # 7B, 4,096 cells, f16
    part = _est(**base, gpu_layers=20)["engine_startup"]["lines"]
    assert part[0] == "load_tensors: offloaded 20/33 layers to GPU"
    assert part[1].endswith(" 1280.00 MiB") and part[2].endswith("  768.00 MiB")


def test_max_num_seqs_sets_the_rows_vllm_profiles_its_sampler_over() -> None:
    full = _est(model="qwen3-32b", card="h100-sxm", context=16000, engine_version="0.11")
    few = _est(model="qwen3-32b", card="h100-sxm", context=16000, engine_version="0.11", max_num_seqs=64)
    assert few["engine_startup"]["max_num_seqs"] == 64
    assert few["memory"]["kv_pool"] > full["memory"]["kv_pool"] + 4 * GiB  # 960 fewer rows of 151,936 x 39 B
    with pytest.raises(InputError):
        _est(model="qwen3-32b", card="h100-sxm", max_num_seqs=0)


def test_vllm_024_at_tp_counts_the_all_reduce_inputs_nccl_keeps_cached() -> None:
    """vLLM 0.2.4-0.2.6 (PR #2031: peak = total - free after profiling) at TP > 1: NCCL's
    record_stream keeps each all-reduce input of the profile forward (vllm#2248), so the pool
    shrinks by 2 x layers x tokens x hidden x 2 bytes; at TP 1, or from 0.2.7 on, it does not."""
    kw = {"model": "validation/models/meta-llama--Llama-2-70b-hf", "card": "a100-80gb-sxm", "context": 4096,
          "max_num_batched_tokens": 4096}
    root = Path(__file__).resolve().parent.parent
    kw["model"] = str(root / str(kw["model"]))

    def pool(version: str, gpus: int) -> float:
        return float(estimate_json(EstimateRequest(**kw, gpus=gpus, engine_version=version))["memory"]["kv_pool"])

    held = 2 * 80 * 4096 * 8192 * 2
    assert pool("0.2.3", 4) - pool("0.2.4", 4) == pytest.approx(held, rel=1e-6)
    assert pool("0.2.7", 4) == pytest.approx(pool("0.2.3", 4))
    small = {**kw, "model": str(root / "validation/models/meta-llama--Llama-2-7b-hf")}
    one = [estimate_json(EstimateRequest(**small, engine_version=v))["memory"]["kv_pool"] for v in ("0.2.3", "0.2.4")]
    assert one[0] == pytest.approx(one[1])  # one GPU: no all-reduce
    blocks = estimate_json(EstimateRequest(**kw, gpus=4, engine_version="0.2.4"))["capacity"]["kv_tokens"] / 16
    # the PR's log: '# GPU blocks: 20865' (31615 before it); the rest is other cached blocks, not modelled
    assert blocks == pytest.approx(20865, rel=0.12)
