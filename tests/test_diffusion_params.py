"""Diffusion presets: every component counted from its config.json, against published sizes."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from gpuwise.diffusion.loader import PRESETS_DIR, load_folder, load_preset, preset_ids
from gpuwise.diffusion.resolve import is_diffusion_source, load_diffusion
from gpuwise.diffusion.single_file import load_single_file
from gpuwise.errors import DataError

PRESETS = preset_ids()
# The model's name rounds its size more coarsely than its own digits say (documented in the
# preset's notes): the config counts more than the name's last digit allows.
NAME_ONLY = {("wan2.1-t2v-1.3b", "transformer"), ("cogvideox-5b", "transformer")}


def _half_unit(n: int) -> float:
    """Half a unit of the last non-zero digit: '12B' is 11.5B-12.5B, '2.6B' 2.55B-2.65B."""
    unit = 1
    while n % (unit * 10) == 0:
        unit *= 10
    return unit / 2


def test_every_preset_folder_has_a_source_file_and_a_denoiser() -> None:
    assert len(PRESETS) >= 13
    for pid in PRESETS:
        assert (PRESETS_DIR / pid / "SOURCE.md").read_text(encoding="utf-8").strip()
        m = load_preset(pid)
        assert m.denoiser.params > 0 and m.vae.params > 0 and m.by_role("text_encoder")


@pytest.mark.parametrize("pid", PRESETS)
def test_each_published_size_is_met(pid: str) -> None:
    m = load_preset(pid)
    assert m.published, f"{pid} cites no published size"
    for pub in m.published:
        counted = m.component(pub.component).params
        if pub.exact:
            assert abs(counted - pub.params) <= 0.01 * pub.params, (pid, counted, pub.params)
        elif (pid, pub.component) in NAME_ONLY:
            assert counted > pub.params and any("nominal" in n.en for n in m.notes)
        else:
            assert abs(counted - pub.params) <= max(0.01 * pub.params, _half_unit(pub.params)), (pid, counted)


@pytest.mark.parametrize(("pid", "component", "count"), [
    # Locks on counts that reproduce published checkpoints exactly:
    ("sd3.5-large", "transformer", 16_292_561_536 // 2),  # safetensors index total_size, bf16
    ("sd1.5", "unet", 859_520_964), ("sd1.5", "vae", 83_653_863), ("sd1.5", "text_encoder", 123_060_480),
    ("sdxl", "unet", 2_567_463_684), ("sdxl", "text_encoder_2", 694_659_840),
    ("flux.1-dev", "transformer", 11_901_408_320), ("flux.1-dev", "text_encoder_2", 4_762_310_656),
    ("wan2.1-t2v-14b", "transformer", 14_288_491_584),
])
def test_component_counts_are_exact(pid: str, component: str, count: int) -> None:
    assert load_preset(pid).component(component).params == count


def test_flux_dev_transformer_matches_the_blog_bf16_size() -> None:
    # diffusers quantization blog: "Transformer ... Memory: 23.8 GB (in BF16)"
    assert load_preset("flux.1-dev").denoiser.params * 2 / 1e9 == pytest.approx(23.8, abs=0.05)


def test_schnell_is_dev_without_the_guidance_embedder() -> None:
    dev, schnell = load_preset("flux.1-dev").denoiser.params, load_preset("flux.1-schnell").denoiser.params
    assert dev - schnell == 256 * 3072 + 3072 + 3072 * 3072 + 3072  # guidance_embedder: 256 -> d -> d


def test_wan22_a14b_runs_two_experts_of_the_same_shape() -> None:
    m = load_preset("wan2.2-t2v-a14b")
    assert m.denoisers == ("transformer", "transformer_2")
    assert m.component("transformer").params == m.component("transformer_2").params


@pytest.mark.parametrize("name", ["flux", "FLUX.1-dev", "black-forest-labs/FLUX.1-dev", "sdxl",
                                  "stabilityai/stable-diffusion-xl-base-1.0", "wan2.1-14b", "hunyuanvideo"])
def test_names_and_hub_ids_find_the_presets(name: str) -> None:
    assert is_diffusion_source(name)
    assert load_diffusion(name).denoiser.params > 1e9


def test_llm_names_are_not_diffusion() -> None:
    assert not is_diffusion_source("qwen3-8b") and not is_diffusion_source("7b")


def _fake_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A real safetensors header over a sparse data area: what the header reader sees on disk."""
    width = {"BF16": 2, "F16": 2, "F8_E4M3": 1, "F32": 4}
    header, off = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = width[dtype]
        for s in shape:
            n *= s
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        fh.truncate(8 + len(raw) + off)
    return off


def test_a_diffusers_folder_reads_like_its_preset_and_sums_its_weights(tmp_path: Path) -> None:
    folder = tmp_path / "my-flux"
    shutil.copytree(PRESETS_DIR / "flux.1-dev", folder)
    stored = _fake_safetensors(folder / "transformer" / "diffusion_pytorch_model.safetensors",
                               {"x_embedder.weight": ("BF16", [3072, 64]), "proj_out.weight": ("BF16", [64, 3072])})
    m = load_folder(folder)
    assert m.name == "my-flux" and m.denoiser.params == load_preset("flux.1-dev").denoiser.params
    assert m.denoiser.stored_bytes == stored and m.denoiser.stored_dtype == "BF16"
    assert any("FLUX.1 [dev]" in n.en for n in m.notes)


def test_a_folder_without_a_known_denoiser_is_refused_in_both_languages(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": "X", "unet": ["diffusers", "Foo"]}))
    with pytest.raises(DataError) as err:
        load_folder(tmp_path)
    assert "no denoiser" in err.value.message.en and err.value.message.zh


def test_a_single_file_flux_checkpoint_is_summed_from_its_header(tmp_path: Path) -> None:
    path = tmp_path / "flux1-dev-fp8.safetensors"
    stored = _fake_safetensors(path, {"double_blocks.0.img_attn.qkv.weight": ("F8_E4M3", [9216, 3072]),
                                      "single_blocks.0.linear1.weight": ("F8_E4M3", [21504, 3072]),
                                      "guidance_in.in_layer.weight": ("F8_E4M3", [3072, 256])})
    m = load_single_file(path)
    assert m.denoiser.stored_bytes == stored and m.denoiser.stored_dtype == "F8_E4M3"
    assert m.denoiser.params == stored  # one byte per element
    assert is_diffusion_source(str(path))


def test_a_single_sd_checkpoint_counts_only_the_unet_as_the_denoiser(tmp_path: Path) -> None:
    path = tmp_path / "sd_xl_base_1.0.safetensors"
    _fake_safetensors(path, {"model.diffusion_model.input_blocks.0.0.weight": ("F16", [320, 4, 3, 3]),
                             "conditioner.embedders.1.model.ln_final.weight": ("F16", [1280]),
                             "first_stage_model.decoder.conv_in.weight": ("F16", [512, 4, 3, 3])})
    m = load_single_file(path)
    assert m.id == "sd_xl_base_1.0" and m.denoiser.stored_bytes == 320 * 4 * 9 * 2


def test_an_unknown_single_file_says_which_layouts_it_knows(tmp_path: Path) -> None:
    path = tmp_path / "flux-mystery.safetensors"
    _fake_safetensors(path, {"encoder.weight": ("F16", [4, 4])})
    with pytest.raises(DataError) as err:
        load_single_file(path)
    assert "Flux" in err.value.message.en and err.value.hint is not None


def test_a_gguf_denoiser_is_summed_from_its_tensor_table(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "flux1-dev-Q8_0.gguf"
    writer = gguf.GGUFWriter(str(path), "flux")
    block = np.zeros((64, 256 // 32 * 34), dtype=np.uint8)  # Q8_0: 32 weights in 34 bytes
    writer.add_tensor("double_blocks.0.img_attn.qkv.weight", block, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("single_blocks.0.linear1.weight", block, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("guidance_in.in_layer.bias", np.zeros(256, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    m = load_single_file(path)
    assert m.denoiser.stored_bytes == 2 * block.nbytes + 256 * 4 and m.denoiser.stored_dtype == "Q8_0"
    assert m.denoiser.params == load_preset("flux.1-dev").denoiser.params  # quantized: counted from the config
    from gpuwise.diffusion.job import ImageJob
    from gpuwise.diffusion.memory import precision_of

    assert precision_of(m, m.denoiser, ImageJob(1024, 1024)) == "gguf:Q8_0"


@pytest.mark.parametrize("pid", PRESETS)
def test_every_denoiser_meets_a_checkpoint_size_within_one_percent(pid: str) -> None:
    # The sizes a checkpoint's files give (Hugging Face listings, LFS pointers, the diffusers blog),
    # cited in each preset's gpuwise.json "published" rows; a name's nominal size ("1.3B") does not count.
    m = load_preset(pid)
    if pid == "flux.1-schnell":  # no file size of its own cited: dev's transformer minus the guidance embedder
        return
    for name in m.denoisers:
        exact = [p for p in m.published if p.component == name and p.exact]
        assert exact, f"{pid}/{name}: no checkpoint-size figure"
        for pub in exact:
            assert abs(m.component(name).params - pub.params) <= 0.01 * pub.params, (pid, name, pub.params)


@pytest.mark.parametrize(("pid", "component", "count"), [
    # Module-by-module counts of the causal 3D VAEs (gpuwise.diffusion.count_vae3d) against their files:
    ("wan2.1-t2v-1.3b", "vae", 126_892_531),  # wan_2.1_vae.safetensors 254 MB in bf16
    ("wan2.2-ti2v-5b", "vae", 704_688_668),  # wan2.2_vae.safetensors 1.41 GB in fp16
    ("cogvideox-2b", "vae", 215_583_907),  # CogVideoX-2b vae 862 MB in fp32
])
def test_video_vaes_are_counted_layer_by_layer(pid: str, component: str, count: int) -> None:
    comp = load_preset(pid).component(component)
    assert comp.params == count and not comp.approximate
