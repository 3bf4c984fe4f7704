"""InternVL: dynamic tiling into 448-px tiles, 256 tokens a tile, into prefill and KV; and the vision
towers of every VLM preset counted against published sizes."""

from __future__ import annotations

import pytest

from gpuwise.catalog.params import count_params
from gpuwise.catalog.presets import find_preset
from gpuwise.catalog.vision import family, vision_is_exact, vision_params
from gpuwise.diffusion.vlm import closest_grid, image_tokens, vision_flops
from gpuwise.errors import InputError
from gpuwise.service import EstimateRequest, estimate_json

INTERNVL = find_preset("internvl3-1b")
QWEN_VL = find_preset("qwen2.5-vl-7b")
assert INTERNVL is not None and QWEN_VL is not None
TOP = INTERNVL.config
VISION = TOP["vision_config"]


@pytest.mark.parametrize(("w", "h", "grid"), [
    (448, 448, (1, 1)),  # one tile: no thumbnail
    (1920, 1080, (4, 2)),  # 16:9 ties 2:1 with (2, 1) and (4, 2); the large image takes the larger grid
    (600, 600, (1, 1)),  # 1:1 ties (1,1), (2,2), (3,3): 600^2 is not over half of 2 x 2 tiles (401,408)
    (1024, 1024, (3, 3)),  # 1024^2 = 1,048,576 > half of 3 x 3 tiles (903,168)
    (800, 600, (4, 3)),  # 4:3 exactly: 12 tiles, the most allowed
    (4000, 1000, (4, 1)),
])
def test_internvl_picks_the_grid_its_preprocessor_picks(w: int, h: int, grid: tuple[int, int]) -> None:
    assert closest_grid(w, h, 448, 1, 12) == grid


def test_fewer_allowed_tiles_give_a_smaller_grid() -> None:
    assert closest_grid(800, 600, 448, 1, 6) == (3, 2)  # (4, 3) is out of reach; 3:2 is nearest 4:3
    assert closest_grid(1920, 1080, 448, 1, 6) == (2, 1)  # 2:1 in at most 6 tiles: (2, 1) only


@pytest.mark.parametrize(("w", "h", "tiles", "tokens"), [
    (448, 448, 1, 256 + 2),  # a single tile, <img> and </img>
    (1920, 1080, 4 * 2 + 1, 9 * 256 + 2),  # 8 tiles + the thumbnail
    (4000, 3000, 4 * 3 + 1, 13 * 256 + 2),  # max_dynamic_patch 12 + the thumbnail
])
def test_internvl_tokens_are_256_a_tile_plus_the_thumbnail(w: int, h: int, tiles: int, tokens: int) -> None:
    t = image_tokens(VISION, h, w, TOP)
    assert (t.tiles, t.tokens) == (tiles, tokens)
    assert t.patches == tiles * (32 * 32 + 1)  # 448 / 14 = 32 patches a side, plus the class token


def test_without_dynamic_tiling_an_image_is_one_tile() -> None:
    t = image_tokens(VISION, 1080, 1920, {**TOP, "dynamic_image_size": False})
    assert (t.tiles, t.tokens) == (1, 258)


def test_an_empty_image_is_refused_in_both_languages() -> None:
    with pytest.raises(InputError) as err:
        image_tokens(VISION, 0, 100, TOP)
    assert "1x1" in err.value.message.en and err.value.message.zh


def test_tiled_attention_costs_less_than_one_pass_over_every_patch() -> None:
    t = image_tokens(VISION, 3000, 4000, TOP)
    tiled = vision_flops(VISION, 300_000_000, t.patches, t.tiles)
    untiled = vision_flops(VISION, 300_000_000, t.patches, 1)
    assert tiled < untiled
    assert tiled == pytest.approx(t.tiles * vision_flops(VISION, 300_000_000, t.patches // t.tiles))


def test_internvl_image_tokens_join_the_prompt_and_the_kv_cache() -> None:
    base = EstimateRequest(model="internvl3-1b", card="rtx-4060-ti-16gb", context=4096)
    plain = estimate_json(base)
    shown = estimate_json(EstimateRequest(model="internvl3-1b", card="rtx-4060-ti-16gb", context=4096,
                                          width=1920, height=1080))
    assert shown["vision"]["image_tokens"] == 9 * 256 + 2
    assert shown["vision"]["context_with_images"] == 4096 + 2306
    assert shown["memory"]["kv_cache"] > plain["memory"]["kv_cache"]
    assert shown["speed"]["ttft_s"] > plain["speed"]["ttft_s"]


# Published sizes, per component where the model card gives one.
# - Qwen2.5-VL-7B-Instruct: model.safetensors.index.json total_size 16,584,333,312 bytes in BF16 =
#   8,292,166,656 parameters (the LLM, the ViT and the merger; HF shows "8.29B params").
# - InternVL3-1B: model.safetensors 1.88 GB in BF16 (huggingface.co/OpenGVLab/InternVL3-1B/tree/main);
#   its ViT, InternViT-300M-448px: "Model Stats: Params (M): 304" (its model card).
def test_qwen25_vl_7b_counts_its_safetensors_total_exactly() -> None:
    assert count_params(QWEN_VL.arch()).total == 16_584_333_312 // 2


def test_qwen25_vl_vision_tower_and_merger_follow_the_modeling_code() -> None:
    v = QWEN_VL.config["vision_config"]
    blocks = 32 * (2 * 1280 + (1280 * 3840 + 3840) + (1280 * 1280 + 1280)
                   + 2 * (1280 * 3420 + 3420) + (3420 * 1280 + 1280))
    merger = 1280 + (5120 * 5120 + 5120) + (5120 * 3584 + 3584)
    assert vision_params(v, 3584, "qwen2.5-vl-7b") == blocks + 3 * 2 * 14 * 14 * 1280 + merger


def test_internvl3_1b_vision_tower_is_the_published_304m() -> None:
    counted = vision_params(VISION, 896, "internvl3-1b")
    mlp1 = 2 * 4096 + (4096 * 896 + 896) + (896 * 896 + 896)
    assert abs((counted - mlp1) - 304_000_000) <= 0.01 * 304_000_000


def test_internvl3_1b_total_matches_its_bf16_file() -> None:
    total = count_params(INTERNVL.arch()).total
    assert abs(total * 2 - 1.88e9) <= 0.01 * 1.88e9
    assert INTERNVL.arch().vision_params == vision_params(VISION, 896, "internvl3-1b")


@pytest.mark.parametrize(("vision", "kind"), [
    (QWEN_VL.config["vision_config"], "qwen2.5-vl"),
    ({"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "hidden_size": 3584, "spatial_merge_size": 2}, "qwen2-vl"),
    (VISION, "internvit"),
    ({"hidden_size": 1152, "num_hidden_layers": 27, "patch_size": 14}, "vit"),
])
def test_each_tower_family_is_recognised(vision: dict[str, object], kind: str) -> None:
    assert family(vision) == kind
    assert vision_is_exact(vision) == (kind != "vit")


def test_qwen3_style_towers_use_layernorm_gelu_blocks_and_learned_positions() -> None:
    # Qwen3.5-27B's vision_config (data/models/qwen3.5-27b.json), counted from modeling_qwen3_vl.py.
    v = find_preset("qwen3.5-27b").config["vision_config"]  # type: ignore[union-attr]
    h, inter, merged = 1152, 4304, 1152 * 4
    block = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h)
    merger = 2 * h + (merged * merged + merged) + (merged * 5120 + 5120)
    assert family(v) == "qwen3-vl"
    assert vision_params(v, 5120, "qwen3.5-27b") == 27 * block + 3 * 2 * 16 * 16 * h + h + 2304 * h + merger


def test_qwen2_vl_merger_projects_into_the_language_width() -> None:
    # Qwen2-VL-7B vision_config (embed_dim 1280, mlp_ratio 4, hidden_size 3584 = the LLM width):
    # 675M in Qwen2-VL's report; counted module by module from modeling_qwen2_vl.py.
    v = {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3, "hidden_size": 3584,
         "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    assert abs(vision_params(v, 3584, "qwen2-vl-7b") - 675_000_000) <= 0.01 * 675_000_000


def test_qwen25_vl_7b_at_4_bit_fits_a_16_gb_card_with_a_720p_image() -> None:
    # The guides' case: Qwen2.5-VL-7B in 4 bit on a 16 GB card. The vision tower stays 16-bit
    # (AWQ exports leave it), the image's 1,198 tokens join the 4,096-token prompt.
    out = estimate_json(EstimateRequest(model="qwen2.5-vl-7b", card="rtx-4060-ti-16gb", weights="int4",
                                        context=4096, width=1280, height=720))
    assert out["fits"] and out["vision"]["image_tokens"] == 26 * 46 + 2
    assert out["vision"]["context_with_images"] == 4096 + 1198
    vision_bf16 = QWEN_VL.arch().vision_params * 2
    assert vision_bf16 < out["memory"]["weights"] < 8 * 2**30
