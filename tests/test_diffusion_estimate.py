"""Diffusion memory, speed, fit and fixes, through the library and the CLI."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.diffusion.estimate import estimate_diffusion
from gpuwise.diffusion.job import ImageJob, cfg_passes, geometry
from gpuwise.diffusion.loader import load_preset
from gpuwise.diffusion.memory import denoiser_activations, estimate_memory, vae_decode_bytes
from gpuwise.errors import GpuwiseError, InputError
from gpuwise.service import EstimateRequest, estimate_json, model_json

GIB = 2**30
FLUX = load_preset("flux.1-dev")
CARDS = load_cards([])


def _card(name: str):  # type: ignore[no-untyped-def]
    return resolve_card(name, CARDS).card


def test_flux_bf16_weights_equal_the_blog_load_figure() -> None:
    # huggingface/blog diffusers-quantization.md: "Loading the full FLUX.1-dev model in BF16 precision
    # requires approximately 31.447 GB" (torch.cuda.max_memory_reserved / 1024**3)
    mem = estimate_memory(FLUX, ImageJob(1024, 1024))
    assert mem.weights_total / GIB == pytest.approx(31.447, rel=0.01)


def test_t5_keeps_its_wo_layers_in_fp32_under_nf4() -> None:
    # same blog: transformer + T5 in NF4 load at 12.584 GB
    mem = estimate_memory(FLUX, ImageJob(1024, 1024, weights="nf4", te_weights="nf4"))
    assert mem.weights_total / GIB == pytest.approx(12.584, rel=0.02)


@pytest.mark.parametrize("pid", ["sd1.5", "sdxl", "flux.1-dev", "sd3.5-large", "wan2.1-t2v-14b", "hunyuanvideo"])
def test_more_pixels_never_need_less_memory(pid: str) -> None:
    m = load_preset(pid)
    d = m.defaults
    small = ImageJob(d.width, d.height, d.frames, guidance=d.guidance)
    big = replace(small, width=d.width * 2, height=d.height * 2)
    assert estimate_memory(m, big).required > estimate_memory(m, small).required


def test_offload_modes_need_less_and_less_gpu_memory() -> None:
    job = ImageJob(1024, 1024)
    need = [estimate_memory(FLUX, replace(job, offload=o)).required for o in ("none", "model", "group", "sequential")]
    assert need == sorted(need, reverse=True) and need[-1] < need[0] / 4


def test_quantization_orders_the_weights() -> None:
    # FP8 layerwise casting keeps FLUX's norm*.linear modulation layers in bf16, so it loads above
    # GGUF Q8_0: 23.682 GB vs 21.502 GB (huggingface/blog diffusers-quantization.md, "Memory after loading").
    sizes = [estimate_memory(FLUX, ImageJob(1024, 1024, weights=w)).weights_total
             for w in ("bf16", "fp8", "gguf:Q8_0", "gguf:Q4_K_S", "nf4")]
    assert sizes[0] > sizes[1] > sizes[2] > sizes[4] >= sizes[3] * 0.99


def test_fp8_layerwise_keeps_the_modulation_layers_in_bf16() -> None:
    bf16 = estimate_memory(FLUX, ImageJob(1024, 1024, weights="bf16")).weights_total
    fp8 = estimate_memory(FLUX, ImageJob(1024, 1024, weights="fp8")).weights_total
    saved = (bf16 - fp8) / 2**30  # the blog's "GB" are GiB (max_memory_reserved / 1024**3)
    assert saved == pytest.approx(31.447 - 23.682, rel=0.05)  # its two "Memory after loading" rows
    assert bf16 - fp8 < 0.75 * FLUX.denoiser.params  # without the kept layers it would save 1 byte a parameter


def test_the_pipeline_dtype_carries_to_the_vae_and_its_decode() -> None:
    from gpuwise.diffusion.loader import load_preset

    sdxl = load_preset("sdxl")
    job32, job16 = ImageJob(1024, 1024, weights="fp32"), ImageJob(1024, 1024, weights="fp16")
    m32, m16 = estimate_memory(sdxl, job32), estimate_memory(sdxl, job16)
    assert m32.weights_total == pytest.approx(2 * m16.weights_total, rel=0.001)  # torch_dtype applies to all
    assert m32.line("vae_decode") == m16.line("vae_decode")  # fp16 SDXL decodes in fp32 (force_upcast)


def test_reserved_exceeds_allocated_by_the_decode_cache_and_required_is_allocated_plus_context() -> None:
    m = estimate_memory(FLUX, ImageJob(1024, 1024, weights="nf4", te_weights="nf4"))
    assert m.peak_phase == "decode"
    assert m.reserved_peak - m.allocated_peak == pytest.approx(m.line("vae_decode"), rel=0.01)
    assert m.required - m.allocated_peak == m.line("runtime")


def test_classifier_free_guidance_batches_or_repeats_by_pipeline() -> None:
    sdxl, wan = load_preset("sdxl"), load_preset("wan2.1-t2v-14b")
    assert cfg_passes(sdxl, ImageJob(1024, 1024, guidance=5.0)) == (2, 1)  # prompt + negative in one batch
    assert cfg_passes(wan, ImageJob(1280, 720, 81, guidance=5.0)) == (1, 2)  # two calls per step
    assert cfg_passes(FLUX, ImageJob(1024, 1024, guidance=3.5)) == (1, 1)  # guidance-distilled
    job = ImageJob(1024, 1024, guidance=5.0)
    geo = geometry(sdxl, job)
    assert denoiser_activations(sdxl, job, geo) == 2 * denoiser_activations(sdxl, replace(job, guidance=1.0), geo)


def test_vae_tiling_and_slicing_shrink_the_decode() -> None:
    sd15 = load_preset("sd1.5")
    job = ImageJob(1536, 1536, batch=4, guidance=7.5)
    full = vae_decode_bytes(sd15, job)
    assert vae_decode_bytes(sd15, replace(job, vae_tiling=True)) < full / 4
    assert vae_decode_bytes(sd15, replace(job, vae_slicing=True)) < full * 0.7  # a fixed part stays


def test_video_tokens_follow_the_vae_and_patch() -> None:
    geo = geometry(load_preset("wan2.1-t2v-14b"), ImageJob(1280, 720, 81))
    assert (geo.latent_frames, geo.latent_h, geo.latent_w) == (21, 90, 160)
    assert geo.image_tokens == 21 * 45 * 80


@pytest.mark.parametrize(("pid", "job", "words"), [
    ("wan2.1-t2v-14b", ImageJob(1280, 720, 80), "4k + 1"),
    ("flux.1-dev", ImageJob(1000, 1000), "multiples of 16"),
    ("sdxl", ImageJob(1024, 1024, frames=5), "--frames must be 1"),
])
def test_bad_sizes_are_refused_in_both_languages(pid: str, job: ImageJob, words: str) -> None:
    with pytest.raises(InputError) as err:
        estimate_memory(load_preset(pid), job)
    assert words in err.value.message.en and err.value.message.zh


def test_unknown_offload_suggests_the_close_match() -> None:
    with pytest.raises(GpuwiseError) as err:
        ImageJob(1024, 1024, offload="sequentail")  # type: ignore[arg-type]
    assert "sequential" in err.value.suggestions


def test_what_happens_when_it_does_not_fit_depends_on_the_os() -> None:
    job = ImageJob(1024, 1024, steps=28)
    linux = estimate_diffusion(FLUX, job, _card("4090"), "linux")
    windows = estimate_diffusion(FLUX, job, _card("4090"), "windows")
    assert not linux.fits and "OutOfMemoryError" in (linux.failure() or linux).en  # type: ignore[union-attr]
    text = windows.failure()
    assert text is not None and "GPU crash dump triggered" in text.en and "TDR" in text.zh
    assert windows.usable < linux.usable


def test_every_fix_fits_and_they_come_fastest_first() -> None:
    result = estimate_diffusion(FLUX, ImageJob(1024, 1024, steps=28), _card("4090"))
    assert result.fixes
    assert all(f.required <= result.usable for f in result.fixes)
    secs = [f.seconds for f in result.fixes]
    assert secs == sorted(secs)


def test_a_fitting_job_has_no_failure_and_no_fixes() -> None:
    result = estimate_diffusion(FLUX, ImageJob(1024, 1024, steps=28), _card("h100-sxm"))
    assert result.fits and result.failure() is None and not result.fixes


def test_speed_follows_steps_and_guidance() -> None:
    card = _card("4090")
    sdxl = load_preset("sdxl")
    a = estimate_diffusion(sdxl, ImageJob(1024, 1024, steps=20, guidance=5.0), card).speed
    b = estimate_diffusion(sdxl, ImageJob(1024, 1024, steps=40, guidance=5.0), card).speed
    c = estimate_diffusion(sdxl, ImageJob(1024, 1024, steps=40, guidance=1.0), card).speed
    assert b.denoise_s == pytest.approx(2 * a.denoise_s) and c.denoise_s < b.denoise_s


def test_sequential_offload_pays_pcie_every_call() -> None:
    card = _card("4090")
    job = ImageJob(1024, 1024, steps=28)
    seq = estimate_diffusion(FLUX, replace(job, offload="sequential"), card).speed
    model = estimate_diffusion(FLUX, replace(job, offload="model"), card).speed
    assert seq.total_s > model.total_s


def test_estimate_json_is_finite_and_shaped_for_the_validation_table() -> None:
    out = estimate_json(EstimateRequest(model="flux.1-dev", card="4090", steps=28, offload="model"))
    text = json.dumps(out)
    assert "NaN" not in text and "Infinity" not in text
    assert out["kind"] == "diffusion" and out["engine"] == "diffusers" and out["task"] == "image"
    assert out["memory"]["required"] > 0 and out["speed"]["seconds_per_output"] > 0
    assert all(math.isfinite(v) for v in out["speed"].values())


def test_model_json_lists_the_components() -> None:
    out = model_json("sdxl")
    assert [c["role"] for c in out["components"]].count("text_encoder") == 2
    assert out["params_total"] == sum(c["params"] for c in out["components"])


def _cli(*args: str) -> tuple[int, str]:
    from gpuwise.cli.app import _register, app

    _register()
    res = CliRunner().invoke(app, list(args), env={"COLUMNS": "400"})
    return res.exit_code, res.output


def test_cli_estimate_prints_the_verdict_and_fixes() -> None:
    code, out = _cli("estimate", "flux.1-dev", "--card", "4090", "--width", "1024", "--height", "1024",
                     "--steps", "28", "--lang", "en")
    assert code == 0 and "DOES NOT FIT" in out and "--offload" in out


def test_cli_estimate_json_and_chinese() -> None:
    code, out = _cli("estimate", "sdxl", "--card", "4090", "--json")
    assert code == 0 and json.loads(out)["fits"] is True
    code, out = _cli("estimate", "wan2.1-t2v-14b", "--card", "4090", "--os", "windows", "--lang", "zh")
    assert code == 0 and "放不下" in out and "GPU crash dump triggered" in out


def test_cli_bad_flag_value_is_an_error_not_a_traceback() -> None:
    code, out = _cli("estimate", "flux.1-dev", "--card", "4090", "--offload", "sequentail", "--lang", "en")
    assert code == 2 and "Traceback" not in out


def test_cli_model_shows_a_pipeline_and_the_list_names_them() -> None:
    code, out = _cli("model", "wan2.2-t2v-a14b", "--lang", "en")
    assert code == 0 and "transformer_2" in out and "UMT5EncoderModel" in out
    code, out = _cli("model", "--list", "--json")
    ids = {p["id"] for p in json.loads(out)["presets"]}
    assert {"sdxl", "flux.1-dev", "hunyuanvideo", "qwen3-8b"} <= ids


def test_a_typo_suggests_the_diffusion_preset() -> None:
    code, out = _cli("estimate", "flux-dvv", "--card", "4090", "--lang", "en")
    assert code == 2 and "flux.1-dev" in out


@pytest.mark.parametrize(("flag", "value", "words"), [("frames", 0, "--frames must be between"),
                                                      ("images", 0, "--images must be between"),
                                                      ("width", 0, "--width must be between")])
def test_zero_is_refused_not_taken_as_the_default(flag: str, value: int, words: str) -> None:
    with pytest.raises(InputError) as err:
        estimate_json(EstimateRequest(model="wan2.1-t2v-1.3b", card="4090", **{flag: value}))
    assert words in err.value.message.en and err.value.message.zh


@settings(max_examples=25, deadline=None)
@given(w=st.integers(4, 96), h=st.integers(4, 96), steps=st.integers(1, 60),
       offload=st.sampled_from(["none", "model", "group", "sequential"]))
def test_a_bigger_image_or_more_steps_never_needs_less(w: int, h: int, steps: int, offload: str) -> None:
    job = ImageJob(w * 16, h * 16, steps=steps, offload=offload)  # type: ignore[arg-type]
    bigger = replace(job, width=job.width + 16)
    assert estimate_memory(FLUX, bigger).required >= estimate_memory(FLUX, job).required
    card = _card("h100-sxm")
    more = estimate_diffusion(FLUX, replace(job, steps=steps + 1), card).speed.total_s
    assert more > estimate_diffusion(FLUX, job, card).speed.total_s
