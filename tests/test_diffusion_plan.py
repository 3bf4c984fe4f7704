"""Planning cards for diffusion jobs, and the exported diffusers / ComfyUI settings."""

from __future__ import annotations

import ast
import json

import pytest
from typer.testing import CliRunner

from gpuwise.catalog.cards import load_cards
from gpuwise.diffusion.estimate import estimate_diffusion
from gpuwise.diffusion.export import comfyui_flags, diffusers_script
from gpuwise.diffusion.job import ImageJob
from gpuwise.diffusion.loader import load_preset
from gpuwise.diffusion.plan import plan_diffusion
from gpuwise.errors import GpuwiseError
from gpuwise.service_plan import PlanRequest, emit_json, plan_json

CARDS = [c for c in load_cards([]) if c.software == "cuda"]


def test_flux_plans_meet_the_seconds_target_and_slow_cards_say_why() -> None:
    out = plan_json(PlanRequest(model="flux.1-dev", steps=28, max_seconds=20, top=50))
    assert out["plans"] and all(p["speed"]["seconds_per_output"] <= 20 for p in out["plans"])
    why = {r["card"]: r["reasons"][0] for r in out["rejected"]}
    assert "over the 20.0 s target" in why["rtx-4090"]
    assert all(p["fits"] for p in out["plans"])


def test_cost_ranking_is_by_cost_per_output() -> None:
    out = plan_json(PlanRequest(model="flux.1-dev", steps=28, top=50))
    costs = [p["per_output_cost"] for p in out["plans"] if p["per_output_cost"] is not None]
    assert costs == sorted(costs)


def test_speed_ranking_puts_the_fastest_first() -> None:
    model = load_preset("flux.1-dev")
    plans, _ = plan_diffusion(model, ImageJob(1024, 1024, steps=28), CARDS, objective="speed", top=10)
    secs = [p.estimate.speed.per_output_s for p in plans]
    assert secs == sorted(secs) and plans[0].estimate.card.id in ("b200", "gb200-gpu", "h200-sxm", "h100-sxm",
                                                                  "h200-nvl", "gh200", "h800-sxm", "h100-nvl")


def test_wan_14b_720p_on_a_4090_needs_offload_and_an_h100_does_not() -> None:
    model = load_preset("wan2.1-t2v-14b")
    job = ImageJob(1280, 720, 81, steps=50, guidance=5.0)
    by = {c.id: c for c in CARDS}
    plans, rejected = plan_diffusion(model, job, [by["rtx-4090"], by["h100-sxm"]], objective="speed")
    assert not rejected
    chosen = {p.estimate.card.id: p.estimate.job for p in plans}
    assert chosen["rtx-4090"].offload != "none" or chosen["rtx-4090"].weights not in ("auto", "bf16")
    assert chosen["h100-sxm"].offload == "none"


def test_the_diffusers_script_is_python_with_the_planned_calls() -> None:
    model = load_preset("flux.1-dev")
    for job, call in ((ImageJob(1024, 1024, offload="model", vae_tiling=True), "enable_model_cpu_offload"),
                      (ImageJob(1024, 1024, offload="sequential"), "enable_sequential_cpu_offload"),
                      (ImageJob(1024, 1024, offload="group"), "enable_group_offload"),
                      (ImageJob(1024, 1024, weights="fp8"), "enable_layerwise_casting"),
                      (ImageJob(1024, 1024, weights="nf4", te_weights="nf4"), "PipelineQuantizationConfig"),
                      (ImageJob(1024, 1024, weights="gguf:Q8_0"), "GGUFQuantizationConfig")):
        script = diffusers_script(model, job, "black-forest-labs/FLUX.1-dev")
        ast.parse(script)
        assert call in script
    assert "enable_tiling" in diffusers_script(model, ImageJob(1024, 1024, vae_tiling=True), "x")


def test_group_offload_covers_every_component_the_estimate_streams() -> None:
    """A component left without hooks stays on the CPU while the pipeline sends its inputs to the
    GPU: FLUX's small CLIP encoder included, every part is group-offloaded or on the CPU by choice."""
    flux = load_preset("flux.1-dev")
    script = diffusers_script(flux, ImageJob(1024, 1024, offload="group"), "black-forest-labs/FLUX.1-dev")
    ast.parse(script)
    for name in (*flux.denoisers, flux.vae.name):
        assert f"pipe.{name}.enable_group_offload(" in script
    for c in flux.by_role("text_encoder"):
        assert f"apply_group_offloading(pipe.{c.name}," in script
    on_cpu = diffusers_script(flux, ImageJob(1024, 1024, offload="group", te_cpu=True), "x")
    assert "apply_group_offloading(" not in on_cpu


@pytest.mark.parametrize(("offload", "flag"), [("none", "--highvram"), ("model", "--normalvram"),
                                               ("lowvram", "--lowvram"), ("sequential", "--novram")])
def test_comfyui_flags_follow_the_offload(offload: str, flag: str) -> None:
    line = comfyui_flags(load_preset("sdxl"), ImageJob(1024, 1024, offload=offload))  # type: ignore[arg-type]
    assert line.startswith("python main.py") and flag in line.split("\n")[0].split()


def test_comfyui_fp8_and_gguf_say_how_to_load() -> None:
    flux = load_preset("flux.1-dev")
    assert "--fp8_e4m3fn-unet" in comfyui_flags(flux, ImageJob(1024, 1024, weights="fp8"))
    assert "Unet Loader (GGUF)" in comfyui_flags(flux, ImageJob(1024, 1024, weights="gguf:Q4_K_S"))


def test_emit_returns_the_top_plans_settings() -> None:
    out = emit_json(PlanRequest(model="sdxl", cards="rtx-4090"), "diffusers")
    assert out["card"] == "rtx-4090" and "stabilityai/stable-diffusion-xl-base-1.0" in out["config"]
    ast.parse(out["config"])
    with pytest.raises(GpuwiseError) as err:
        emit_json(PlanRequest(model="sdxl", cards="rtx-4090"), "comfy")
    assert "comfyui" in err.value.suggestions


def test_a_fix_from_the_estimate_is_a_plan_option() -> None:
    model = load_preset("flux.1-dev")
    card = next(c for c in CARDS if c.id == "rtx-4090")
    fix = estimate_diffusion(model, ImageJob(1024, 1024, steps=28), card).fixes[0]
    plans, _ = plan_diffusion(model, ImageJob(1024, 1024, steps=28), [card], objective="speed")
    assert plans[0].estimate.speed.per_output_s <= fix.seconds * 1.001


def test_cli_plan_prints_the_ranking_and_the_exports() -> None:
    from gpuwise.cli.app import _register, app

    _register()
    res = CliRunner().invoke(app, ["plan", "flux.1-dev", "--steps", "28", "--max-seconds", "20", "--lang", "en"],
                             env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "ranked by cost" in res.output and "pipe = DiffusionPipeline" in res.output
    res = CliRunner().invoke(app, ["plan", "wan2.1-t2v-14b", "--cards", "rtx-4090,h100-sxm", "--json"])
    assert res.exit_code == 0 and len(json.loads(res.output)["plans"]) == 2
