"""vLLM V0's encoder-decoder start-up profile runs one image per sequence through the vision tower
(Llama 3.2 Vision): the tower's transients, counted from its vision_config, set the peak."""

from __future__ import annotations

import json
from pathlib import Path

from gpuwise.catalog.arch import VisionProfile
from gpuwise.catalog.engines import engine_rules
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.estimate.serving_rules import vision_profile_bytes
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB

MODELS = Path(__file__).resolve().parent.parent / "src" / "gpuwise" / "data" / "models"
BASE = Path(__file__).resolve().parent.parent / "validation" / "models" / "meta-llama--Llama-3.2-11B-Vision"


def _config(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text(encoding="utf-8"))["config"]


def _est(**kw: object) -> dict:
    return estimate_json(EstimateRequest(**kw))  # type: ignore[arg-type]


def _item(est: dict, name: str) -> dict:
    return next(i for i in est["memory"]["items"] if i["name"] == name)


def test_the_mllama_tower_is_read_from_its_vision_config() -> None:
    arch = arch_from_config(_config("llama-3.2-11b-vision"), "llama-3.2-11b-vision")
    # 4 tiles x (40 x 40 patches + a class token = 1,601, padded to 1,608); 4 x 3 x 560^2 fp32 pixels
    assert arch.vision_profile == VisionProfile(tokens=6432, hidden=1280, intermediate=5120, saved_states=5,
                                                mask_span=6432, pixels=4 * 3 * 560 * 560, patches=4 * 1600)


def test_other_towers_have_no_encoder_decoder_profile() -> None:
    assert arch_from_config(_config("qwen2.5-vl-7b"), "qwen2.5-vl-7b").vision_profile is None
    assert arch_from_config(_config("llama-3.1-8b"), "llama-3.1-8b").vision_profile is None


def test_the_tower_peak_is_the_mask_the_kept_states_and_the_mlp_counted_by_hand() -> None:
    arch = arch_from_config(_config("llama-3.2-11b-vision"), "llama-3.2-11b-vision")
    mask = 6432 * 6432 * 2
    pixels = 2 * 4 * 3 * 560 * 560 * 4  # two fp32 copies
    patch = 4 * 1600 * 1280 * 2
    states = (1 + 2 * 5 + 1 + 3) * 6432 * 1280 * 2  # at a global layer's GELU (tests/test_kv_mllama_profile.py)
    mlp = 2 * 6432 * 5120 * 2
    assert vision_profile_bytes(arch, 128, 1) == 128 * (mask + pixels + patch + states + mlp)
    assert 60.0 < vision_profile_bytes(arch, 128, 1) / GiB < 61.0
    # fc1/GELU and the patch embedding are column-parallel; the mask and the gathered hidden states
    # are whole on each rank
    assert vision_profile_bytes(arch, 128, 2) == 128 * (mask + pixels + patch / 2 + states + mlp / 2)


def test_vllm_v0_profiles_the_tower_and_the_kv_pool_shrinks_to_near_the_log() -> None:
    # vllm#12126 (V0, H100, max_model_len 65,536, max_num_seqs 128): 'PyTorch activation peak memory
    # takes 36.63GiB; the rest of the memory reserved for KV Cache is 14.65GiB'
    # the run's model is the base meta-llama/Llama-3.2-11B-Vision (448 px tiles)
    est = _est(model=str(BASE), card="h100-sxm", context=65536, max_num_batched_tokens=65536,
               engine_version="0.6.6", max_num_seqs=128)
    assert engine_rules("vllm", "0.6.6").vision_profile_per_seq
    forward = _item(est, "forward_activations")
    assert "vision tower" in forward["why"] and "视觉塔" in forward["why_zh"]
    assert 36.63 * 0.99 <= forward["bytes"] / GiB < 36.63 * 1.01
    assert 14.65 * 0.97 < est["memory"]["kv_pool"] / GiB < 14.65 * 1.03


def test_text_only_models_and_v1_rules_keep_the_text_forward() -> None:
    est = _est(model="llama-3.2-11b-vision", card="h100-sxm", context=65536, max_num_batched_tokens=65536,
               engine_version="0.10", max_num_seqs=128)
    assert not engine_rules("vllm", "0.10").vision_profile_per_seq
    assert "vision tower" not in _item(est, "forward_activations")["why"]
    text = _est(model="llama-3.1-8b", card="h100-sxm", context=65536, max_num_batched_tokens=65536,
                engine_version="0.6.6", max_num_seqs=128)
    assert _item(text, "forward_activations")["bytes"] < 8 * GiB
