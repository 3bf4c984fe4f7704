"""Parameter counts and KV sizes against published figures."""

from __future__ import annotations

import pytest

from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.params import count_params
from gpuwise.catalog.presets import all_presets
from gpuwise.catalog.sources import load_model
from gpuwise.errors import DataError

LLAMA_31_8B = {  # https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
    "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def test_llama_31_8b_counts_exactly_its_safetensors_total() -> None:
    # 8,030,261,248: the parameter total of meta-llama/Llama-3.1-8B's safetensors shards.
    model = arch_from_config(LLAMA_31_8B, "llama")
    assert count_params(model).total == 8_030_261_248
    assert model.kv_bytes_per_token() == 131_072  # 2 x 32 layers x 8 heads x 128 x 2 bytes


def test_gpt2_counts_its_learned_positions_and_biases() -> None:
    # 124,439,808: GPT-2 small as reported by transformers' num_parameters().
    cfg = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
           "n_positions": 1024}
    assert count_params(arch_from_config(cfg, "gpt2")).total == 124_439_808


def tolerance(published: int) -> float:
    """1 %, or half the last digit of a rounded published size ("27B" means 26.5-27.5B)."""
    unit = 1
    while published % (unit * 10) == 0:
        unit *= 10
    return max(0.01 * published, unit / 2 if unit >= 10**7 else 0)


@pytest.mark.parametrize("preset", all_presets(), ids=lambda p: p.id)
def test_every_preset_is_within_one_percent_of_its_published_size(preset) -> None:  # type: ignore[no-untyped-def]
    # published figures and their sources: the "gpuwise" block of each data/models/<id>.json
    params = count_params(preset.arch())
    assert abs(params.total - preset.published_params) <= tolerance(preset.published_params), (
        f"{preset.id}: counted {params.total:,} vs published {preset.published_params:,}")
    active = preset.published_active_params
    if active:  # vendors differ on whether "activated" counts the embeddings: 2 % or rounding
        without_embeddings = params.active - params.embedding - params.lm_head
        allowed = max(tolerance(active), 0.02 * active)
        assert min(abs(params.active - active), abs(without_embeddings - active)) <= allowed


def test_moe_reports_active_below_total() -> None:
    cfg = {**LLAMA_31_8B, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}
    params = count_params(arch_from_config(cfg, "moe"))
    assert params.active < params.total
    assert params.experts == 8 * 3 * 4096 * 14336 * 32


def test_hostile_config_values_are_rejected_with_the_key_named() -> None:
    with pytest.raises(DataError, match="num_hidden_layers"):
        arch_from_config({**LLAMA_31_8B, "num_hidden_layers": 10**12}, "bad")
    with pytest.raises(DataError, match="hidden_size"):
        arch_from_config({**LLAMA_31_8B, "hidden_size": "4096"}, "bad")
    with pytest.raises(DataError):
        arch_from_config([1, 2, 3], "bad")


def test_heads_that_do_not_divide_into_kv_heads_are_rejected() -> None:
    with pytest.raises(DataError, match="KV heads"):
        arch_from_config({**LLAMA_31_8B, "num_key_value_heads": 5}, "bad")


def test_a_bare_size_gives_an_approximate_generic_model_near_that_size() -> None:
    model = load_model("70b")
    assert model.approximate
    assert abs(count_params(model).total - 70e9) / 70e9 < 0.02


def test_sliding_window_layers_stop_growing_at_the_window() -> None:
    cfg = {**LLAMA_31_8B, "model_type": "mistral", "sliding_window": 4096}
    model = arch_from_config(cfg, "mistral")
    assert model.kv_bytes_for_context(32_768) == model.kv_bytes_for_context(4096)
