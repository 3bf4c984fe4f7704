"""Form factors, NVLink reach, node notes and software stacks: the data is complete and sourced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuwise.catalog.cards import load_cards
from gpuwise.catalog.hardware import (
    SHIPPED_FORM_FACTORS,
    form_factors,
    load_form_factors,
    node_notes,
)
from gpuwise.catalog.stacks import STACK_IDS, load_stacks, software_stack, stacks
from gpuwise.errors import DataError, InputError

CATALOG = load_cards()
CARDS = list(CATALOG)
ids = [c.id for c in CARDS]
FORM_FACTORS = form_factors()
STACKS = stacks()


pytestmark = pytest.mark.usefixtures("config_dir")  # tests/conftest.py: an empty config dir


# ------------------------------------------------------------------ form factors

@pytest.mark.parametrize("card", CARDS, ids=ids)
def test_every_cards_form_factor_has_a_row_and_sets_its_gpus_per_node(card) -> None:
    ff = FORM_FACTORS[card.form_factor]
    assert card.max_gpus_per_node == ff.max_gpus_per_node
    assert card.max_gpus_per_node >= 1


@pytest.mark.parametrize("ff", list(FORM_FACTORS.values()), ids=list(FORM_FACTORS))
def test_every_form_factor_has_sources_and_sane_limits(ff) -> None:
    assert ff.sources and all(s.strip() for s in ff.sources)
    assert ff.switch_needed_above is None or ff.switch_needed_above <= ff.max_gpus_per_node


def test_every_form_factor_row_is_used_by_some_card() -> None:
    assert set(FORM_FACTORS) == {c.form_factor for c in CARDS}


def test_a_laptop_holds_one_gpu_and_a_gb200_tray_four() -> None:
    assert CATALOG.get("rtx-4050-laptop").max_gpus_per_node == 1
    assert CATALOG.get("gb200-gpu").max_gpus_per_node == 4
    assert CATALOG.get("h100-sxm").max_gpus_per_node == 8


def test_a_card_row_overrides_its_form_factors_gpus_per_node(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('schema_version = 1\n[[card]]\nid = "ascend-910b"\nmax_gpus_per_node = 16\n'
                    '[[card]]\nid = "rtx-4090"\nform_factor = "laptop"\n', encoding="utf-8")
    catalog = load_cards([path])
    assert catalog.get("ascend-910b").max_gpus_per_node == 16
    assert catalog.get("ascend-910b").provenance("max_gpus_per_node") == "user"
    assert catalog.get("rtx-4090").max_gpus_per_node == 1  # a new form factor brings its own count


# ------------------------------------------------------------------ NVLink reach

def test_a_geforce_card_without_nvlink_links_only_itself() -> None:
    rtx = CATALOG.get("rtx-4090")
    assert rtx.nvlink_group == 1
    assert rtx.linked(1) and not rtx.linked(2)


@pytest.mark.parametrize("card_id", ["a100-80gb-pcie", "h100-nvl", "rtx-a6000", "rtx-3090"])
def test_an_nvlink_bridge_joins_a_pair_and_no_more(card_id: str) -> None:
    card = CATALOG.get(card_id)
    assert card.interconnect == "nvlink-bridge"
    assert card.linked(2) and not card.linked(4)


def test_the_h200_nvl_bridge_joins_four() -> None:
    card = CATALOG.get("h200-nvl")
    assert card.linked(4) and not card.linked(8)


@pytest.mark.parametrize("card", [c for c in CARDS if c.form_factor.startswith("sxm")],
                         ids=[c.id for c in CARDS if c.form_factor.startswith("sxm")])
def test_sxm_cards_link_all_eight_gpus_of_their_board(card) -> None:
    assert card.linked(8)


# ------------------------------------------------------------------ node notes

def _both(notes) -> tuple[str, str]:
    return " ".join(n.en for n in notes), " ".join(n.zh for n in notes)


def test_four_rtx_4090_draw_1_8_kw_and_need_a_supply_over_2_kw_in_both_languages() -> None:
    en, zh = _both(node_notes(CATALOG.get("rtx-4090"), 4))
    for text in (en, zh):
        assert "1.8 kW" in text
        supply = re.search(r"(\d+(?:\.\d+)?) kW( 以上|\+)", text)
        assert supply is not None and float(supply.group(1)) >= 2.0
        assert "2 kW" in text


def test_one_rtx_4090_gets_about_nvidias_850_w_supply() -> None:
    en, _ = _both(node_notes(CATALOG.get("rtx-4090"), 1))
    supply = re.search(r"(\d+) W\+", en)
    assert supply is not None and 800 <= int(supply.group(1)) <= 900


def test_two_desktop_cards_run_at_x8_each() -> None:
    en, zh = _both(node_notes(CATALOG.get("rtx-4090"), 2))
    assert "x8 each" in en and "x8" in zh


def test_eight_consumer_cards_need_a_pcie_switch() -> None:
    en, zh = _both(node_notes(CATALOG.get("rtx-4090"), 8))
    assert "PCIe switch" in en and "PCIe 交换" in zh


def test_a_bridge_card_beyond_its_pair_says_the_rest_talk_over_pcie() -> None:
    en, zh = _both(node_notes(CATALOG.get("a100-80gb-pcie"), 4))
    assert "NVLink bridge joins 2 GPUs" in en and "PCIe" in en
    assert "NVLink 桥" in zh
    assert not any("bridge" in n.en for n in node_notes(CATALOG.get("a100-80gb-pcie"), 2))


def test_server_boards_state_gpu_draw_but_size_no_desktop_supply() -> None:
    en, _ = _both(node_notes(CATALOG.get("h100-sxm"), 8))
    assert "5.6 kW" in en and "power supply" not in en and "PCIe switch" not in en


def test_two_laptop_gpus_do_not_fit_one_node() -> None:
    notes = node_notes(CATALOG.get("rtx-4050-laptop"), 2)
    assert len(notes) == 1 and "at most 1" in notes[0].en and notes[0].zh


def test_a_card_without_a_power_figure_gets_no_power_note() -> None:
    assert not any("W" in n.en for n in node_notes(CATALOG.get("a10g"), 1))


def test_zero_gpus_per_node_is_an_input_error() -> None:
    with pytest.raises(InputError):
        node_notes(CATALOG.get("rtx-4090"), 0)


# ------------------------------------------------------------------ software stacks

def test_there_is_one_stack_per_software_value() -> None:
    assert set(STACKS) == set(STACK_IDS)
    for card in CARDS:
        assert software_stack(card).id == card.software


@pytest.mark.parametrize("stack", list(STACKS.values()), ids=list(STACKS))
def test_every_stack_has_sources_and_pinned_image_tags(stack) -> None:
    assert stack.sources and all(s.strip() for s in stack.sources)
    for image in (stack.vllm_image, stack.train_image):
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest", image
    assert stack.serving_engines and stack.device_resource and stack.visible_devices_env


def test_cuda_is_included_by_default_and_pins_the_vllm_the_ecosystem_notes_name() -> None:
    cuda = STACKS["cuda"]
    assert cuda.default_included and cuda.why_not is None
    assert cuda.vllm_image == "vllm/vllm-openai:v0.33.0"
    assert cuda.device_resource == "nvidia.com/gpu"
    assert {"vllm", "sglang", "tensorrt-llm", "llamacpp", "transformers"} <= set(cuda.serving_engines)


def test_ascend_910b_runs_cann_and_is_left_out_by_default_with_a_reason() -> None:
    stack = software_stack(CATALOG.get("ascend-910b"))
    assert stack.id == "cann" and not stack.default_included
    assert stack.device_resource == "huawei.com/Ascend910"
    assert stack.visible_devices_env == "ASCEND_RT_VISIBLE_DEVICES"
    assert stack.why_not is not None
    assert "CANN" in stack.why_not.en and "vllm-ascend" in stack.why_not.en and stack.why_not.zh


def test_mi300x_runs_rocm_left_out_by_default() -> None:
    stack = software_stack(CATALOG.get("mi300x"))
    assert stack.id == "rocm" and not stack.default_included
    assert stack.device_resource == "amd.com/gpu" and "tensorrt-llm" not in stack.serving_engines
    assert stack.why_not is not None and "ROCm" in stack.why_not.en


# ------------------------------------------------------------------ broken files

@pytest.mark.parametrize("body,words", [
    ('[[form_factor]]\nid = "tray"\nname = "T"\nsources = ["x"]', ["tray", "max_gpus_per_node"]),
    (('[[form_factor]]\nid = "tray"\nname = "T"\nmax_gpus_per_node = 4\nswitch_needed_above = 8\n'
      'sources = ["x"]'), ["tray", "switch_needed_above"]),
    ('[[form_factor]]\nid = "tray"\nname = "T"\nmax_gpus_per_node = "four"\nsources = ["x"]',
     ["tray", "max_gpus_per_node", "a whole number"]),
    ('[[formfactor]]\nid = "tray"', ["formfactor"]),
], ids=["missing-count", "switch-above-max", "wrong-type", "unknown-table"])
def test_a_broken_form_factor_row_names_the_file_and_the_row(tmp_path: Path, body: str,
                                                             words: list[str]) -> None:
    path = tmp_path / "form_factors.toml"
    path.write_text("schema_version = 1\n" + body, encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_form_factors(path)
    for word in [str(path), *words]:
        assert word in err.value.message.en
    assert err.value.message.zh


_STACK = """
[[stack]]
id = "cuda"
name = "CUDA"
serving_engines = ["vllm"]
vllm_image = "{image}"
train_image = "pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime"
device_resource = "nvidia.com/gpu"
visible_devices_env = "CUDA_VISIBLE_DEVICES"
default_included = {included}
sources = ["x"]
"""


@pytest.mark.parametrize("image,included,words", [
    ("vllm/vllm-openai:latest", "true", ["stack 'cuda'", "vllm_image", "latest"]),
    ("vllm/vllm-openai", "true", ["stack 'cuda'", "vllm_image", "pinned"]),
    ("vllm/vllm-openai:v0.33.0", "false", ["stack 'cuda'", "why_not_en"]),
    ("vllm/vllm-openai:v0.33.0", "true", ["rocm, cann"]),
], ids=["latest-tag", "no-tag", "excluded-without-reason", "missing-stacks"])
def test_a_broken_stack_row_names_the_file_and_the_row(tmp_path: Path, image: str, included: str,
                                                       words: list[str]) -> None:
    path = tmp_path / "software_stacks.toml"
    path.write_text("schema_version = 1\n" + _STACK.format(image=image, included=included),
                    encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_stacks(path)
    for word in [str(path), *words]:
        assert word in err.value.message.en
    assert err.value.message.zh


def test_the_shipped_files_load_from_their_paths() -> None:
    assert load_form_factors(SHIPPED_FORM_FACTORS) == FORM_FACTORS
