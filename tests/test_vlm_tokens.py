"""Vision-language models: image tokens from the image size, into prefill and KV."""

from __future__ import annotations

import pytest

from gpuwise.catalog.presets import find_preset
from gpuwise.diffusion.vlm import image_tokens, smart_resize, vision_flops
from gpuwise.errors import GpuwiseError, InputError
from gpuwise.service import EstimateRequest, estimate_json

QWEN_VL = find_preset("qwen2.5-vl-7b")
assert QWEN_VL is not None
VISION = QWEN_VL.config["vision_config"]


@pytest.mark.parametrize(("h", "w", "resized", "tokens"), [
    (224, 224, (224, 224), 8 * 8 + 2),  # 28 x 28 pixels per token
    (1024, 1024, (1036, 1036), 37 * 37 + 2),  # 1024 / 28 = 36.6 rounds to 37
    (720, 1280, (728, 1288), 26 * 46 + 2),
    (20, 20, (56, 56), 2 * 2 + 2),  # lifted to min_pixels (56 x 56)
])
def test_qwen_vl_image_tokens_follow_smart_resize(h: int, w: int, resized: tuple[int, int], tokens: int) -> None:
    t = image_tokens(VISION, h, w)
    assert t.resized == resized and t.tokens == tokens and t.patches == (resized[0] // 14) * (resized[1] // 14)


def test_a_huge_image_is_capped_at_max_pixels() -> None:
    t = image_tokens(VISION, 8000, 8000)
    assert t.resized[0] * t.resized[1] <= 12_845_056 and t.tokens <= 16_384 + 2


def test_smart_resize_keeps_multiples_of_the_factor() -> None:
    for h, w in ((333, 777), (1080, 1920), (4000, 3000)):
        rh, rw = smart_resize(h, w, 28, 3136, 12_845_056)
        assert rh % 28 == 0 and rw % 28 == 0


def test_an_extreme_aspect_ratio_is_refused_in_both_languages() -> None:
    with pytest.raises(InputError) as err:
        image_tokens(VISION, 10, 4000)
    assert "200" in err.value.message.en and err.value.message.zh


def test_window_attention_costs_less_than_full_attention() -> None:
    patches = image_tokens(VISION, 2048, 2048).patches
    windowed = vision_flops(VISION, 675_000_000, patches)
    full = vision_flops({**VISION, "window_size": 0}, 675_000_000, patches)
    assert windowed < full


def test_image_tokens_join_the_prompt_and_the_kv_cache() -> None:
    base = EstimateRequest(model="qwen2.5-vl-7b", card="rtx-4060-ti-16gb", weights="int4", context=4096)
    text_only = estimate_json(base)
    with_image = estimate_json(EstimateRequest(**{**base.__dict__, "width": 1024, "height": 1024}))
    assert with_image["vision"]["image_tokens"] == 37 * 37 + 2
    assert with_image["vision"]["context_with_images"] == 4096 + 1371
    assert with_image["memory"]["kv_cache"] > text_only["memory"]["kv_cache"]
    assert with_image["speed"]["ttft_s"] > text_only["speed"]["ttft_s"]


def test_qwen25_vl_7b_at_4_bit_fits_a_16gb_card_with_an_image() -> None:
    out = estimate_json(EstimateRequest(model="qwen2.5-vl-7b", card="rtx-4060-ti-16gb", weights="int4",
                                        width=1280, height=720, images=2, context=4096))
    assert out["fits"] and out["vision"]["images"] == 2


def test_a_text_only_model_refuses_an_image_size() -> None:
    with pytest.raises(GpuwiseError) as err:
        estimate_json(EstimateRequest(model="qwen3-8b", card="4090", width=1024, height=1024))
    assert "no vision tower" in err.value.message.en


def test_cli_prints_the_image_tokens_in_both_languages() -> None:
    from typer.testing import CliRunner

    from gpuwise.cli.app import _register, app

    _register()
    args = ["estimate", "qwen2.5-vl-7b", "--card", "rtx-4060-ti-16gb", "--weights", "int4", "--width", "1280",
            "--height", "720"]
    res = CliRunner().invoke(app, [*args, "--lang", "en"], env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "1,198 tokens" in res.output and "FITS" in res.output
    res = CliRunner().invoke(app, [*args, "--lang", "zh"], env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "1,198 个 token" in res.output
