"""Lock the shipped model presets: each file is a copied config.json plus cited metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gpuwise

MODELS_DIR = Path(gpuwise.__file__).parent / "data" / "models"
PRESET_FILES = sorted(MODELS_DIR.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name} is not a JSON object"
    return data


def _names(meta: dict[str, Any]) -> list[str]:
    """Every name a user may type for this preset: id, Hugging Face id and aliases."""
    return [meta["id"], meta["hf_id"], *meta["aliases"]]


def test_the_models_folder_ships_presets() -> None:
    assert len(PRESET_FILES) >= 30


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_every_preset_file_has_a_gpuwise_block_and_a_config(path: Path) -> None:
    data = _load(path)
    assert set(data) == {"gpuwise", "config"}
    assert isinstance(data["gpuwise"], dict)
    assert isinstance(data["config"], dict)


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_preset_id_equals_the_file_name_and_is_lower_case(path: Path) -> None:
    meta = _load(path)["gpuwise"]
    assert meta["id"] == path.stem
    assert meta["id"] == meta["id"].lower()


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_preset_names_its_hugging_face_repo_and_aliases(path: Path) -> None:
    meta = _load(path)["gpuwise"]
    org, _, name = meta["hf_id"].partition("/")
    assert org and name
    assert isinstance(meta["aliases"], list)
    assert all(isinstance(alias, str) and alias for alias in meta["aliases"])


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_config_source_cites_the_copy_read_and_the_official_url(path: Path) -> None:
    meta = _load(path)["gpuwise"]
    source = meta["config_source"]
    assert source.startswith("https://")
    assert f"https://huggingface.co/{meta['hf_id']}/blob/main/config.json" in source


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_published_parameter_counts_are_positive_and_cited(path: Path) -> None:
    meta = _load(path)["gpuwise"]
    total = meta["published_params"]
    active = meta["published_active_params"]
    assert isinstance(total, int) and total > 0
    assert meta["published_params_source"].strip()
    assert active is None or (isinstance(active, int) and 0 < active < total)


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda p: p.stem)
def test_config_declares_a_model_type(path: Path) -> None:
    config = _load(path)["config"]
    assert isinstance(config.get("model_type"), str) and config["model_type"]


def test_no_name_is_shared_by_two_presets() -> None:
    owner: dict[str, str] = {}
    clashes: list[str] = []
    for path in PRESET_FILES:
        meta = _load(path)["gpuwise"]
        for name in {n.lower() for n in _names(meta)}:
            if name in owner and owner[name] != meta["id"]:
                clashes.append(f"{name!r}: {owner[name]} and {meta['id']}")
            owner.setdefault(name, meta["id"])
    assert not clashes, clashes
