"""Weights as the checkpoint stores them: FP8 checkpoints that keep modules in bf16."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.catalog.params import count_params
from gpuwise.catalog.sources import load_model
from gpuwise.estimate.weights import unconverted_linear_params, weight_bytes

PRESET = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "data" / "models" / "qwen3-32b.json"


def _fp8_model(tmp_path: Path, skipped: list[str] | None):
    config = json.loads(PRESET.read_text())["config"]
    quant: dict[str, object] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    if skipped is not None:
        quant["modules_to_not_convert"] = skipped
    config["quantization_config"] = quant
    folder = tmp_path / ("skip" if skipped else "plain")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return load_model(str(folder))


def test_an_fp8_checkpoint_that_keeps_attention_in_bf16_counts_it_at_two_bytes(tmp_path: Path) -> None:
    plain = _fp8_model(tmp_path, None)
    kept = _fp8_model(tmp_path, ["model.layers.*.self_attn", "lm_head", "model.embed_tokens"])
    attention = count_params(plain).attention
    assert unconverted_linear_params(kept) == attention
    extra = weight_bytes(kept).total - weight_bytes(plain).total
    assert extra == pytest.approx(attention * 1.0)  # 2 bytes instead of 1 per weight


def test_one_layer_named_whole_is_kept_whole(tmp_path: Path) -> None:
    kept = _fp8_model(tmp_path, ["model.layers.0"])
    p = count_params(kept)
    per_layer = (p.attention + p.mlp) / kept.num_layers
    assert unconverted_linear_params(kept) == pytest.approx(per_layer)


def test_regex_patterns_follow_vllm_re_prefix(tmp_path: Path) -> None:
    kept = _fp8_model(tmp_path, ["re:.*mlp$"])
    assert unconverted_linear_params(kept) == count_params(kept).mlp


def test_names_of_modules_already_16bit_change_nothing(tmp_path: Path) -> None:
    kept = _fp8_model(tmp_path, ["lm_head", "model.embed_tokens"])
    assert unconverted_linear_params(kept) == 0
