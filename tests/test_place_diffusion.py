"""`gpuwise place` with diffusion components that name their pipeline: each component's memory and
seconds come from gpuwise's diffusion estimate, not from the pipeline file."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from gpuwise.catalog.cards import resolve_card
from gpuwise.diffusion.job import ImageJob
from gpuwise.diffusion.memory import estimate_memory
from gpuwise.diffusion.resolve import load_diffusion
from gpuwise.diffusion.split import split_pipeline
from gpuwise.errors import GpuwiseError
from gpuwise.fleet.place import place_pipeline
from gpuwise.fleet.place_input import parse_pipeline
from gpuwise.fleet.place_out import placement_dict
from gpuwise.units import GiB
from tests.fixtures.fleet.helpers import cli

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "place" / "flux_estimated_3x4090.toml"
CARD = resolve_card("rtx-4090").card


def doc() -> dict[str, Any]:
    return tomllib.loads(FIXTURE.read_text())


def placed(d: dict[str, Any]) -> dict[str, Any]:
    return placement_dict(place_pipeline(parse_pipeline(d, "test")))


def test_flux_components_are_sized_by_the_diffusion_estimate() -> None:
    out = cli("place", str(FIXTURE), "--json")
    assert out.code == 0, out.stderr
    d = out.json()
    stages = {s["name"]: s for s in d["stages"]}
    assert {s["source"] for s in stages.values()} == {"estimate"}
    parts = split_pipeline(load_diffusion("flux.1-dev"), ImageJob(1024, 1024, steps=20, weights="fp8"), CARD)
    for name, role in (("text_encoder", "text_encoder"), ("unet", "denoiser"), ("vae", "vae")):
        assert stages[name]["memory_gib"] == pytest.approx(parts[role].memory_bytes / GiB, abs=0.01)
    assert d["slowest_stage"]["name"] == "unet"
    assert [n["node"] for n in d["settings"]["comfyui_multigpu"]] == [
        "CLIPLoaderMultiGPU", "UNETLoaderMultiGPU", "VAELoaderMultiGPU"]


def test_the_parts_add_up_to_the_whole_pipeline_weights() -> None:
    model, job = load_diffusion("flux.1-dev"), ImageJob(1024, 1024, steps=20, weights="fp8")
    parts = split_pipeline(model, job, CARD)
    assert sum(p.weights_bytes for p in parts.values()) == estimate_memory(model, job).weights_total
    assert model.denoiser.params < parts["denoiser"].weights_bytes < 2 * model.denoiser.params  # fp8, norms bf16
    assert parts["text_encoder"].components == ("text_encoder", "text_encoder_2")


def test_more_steps_make_the_unet_slower_and_a_larger_image_the_vae_bigger() -> None:
    base = {s["name"]: s for s in placed(doc())["stages"]}
    d = doc()
    for st in d["stage"]:
        st["steps"], st["width"], st["height"] = 40, 1536, 1536
    big = {s["name"]: s for s in placed(d)["stages"]}
    assert big["unet"]["seconds_per_call"] > 2 * base["unet"]["seconds_per_call"]
    assert big["vae"]["memory_gib"] > base["vae"]["memory_gib"]


def test_a_bf16_transformer_and_t5_do_not_share_one_4090() -> None:
    d = doc()
    d["stage"][1]["weights"] = "bf16"  # 22.2 GiB of transformer: over a 4090's 21.3 GiB budget
    with pytest.raises(GpuwiseError) as err:
        placed(d)
    assert "budget" in err.value.message.en and err.value.message.zh


@pytest.mark.parametrize(("change", "words"), [
    ({"model": "qwen2.5-7b"}, "image or video pipeline"),
    ({"memory_gib": 10.0}, "one or the other"),
    ({"weights": "int4"}, "--weights"),
    ({"width": 1000}, "multiples of 16"),
])
def test_bad_diffusion_stages_are_refused_in_both_languages(change: dict[str, Any], words: str) -> None:
    d = doc()
    d["stage"][1].update(change)
    with pytest.raises(GpuwiseError) as err:
        placed(d)
    assert words in err.value.message.en and err.value.message.zh


def test_the_cli_refuses_a_bad_stage_without_a_traceback() -> None:
    out = cli("place", str(Path(__file__).resolve().parent / "fixtures" / "place" / "flux_estimated_3x4090.toml"),
              "--lang", "zh")
    assert out.code == 0 and "GPU" in out.stdout
