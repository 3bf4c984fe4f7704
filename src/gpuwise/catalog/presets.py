"""Model presets: verbatim copies of official config.json files, shipped as data.

Each `data/models/<id>.json` holds {"gpuwise": {id, hf_id, aliases, config_source,
published_params, ...}, "config": {...the config.json...}}. A preset is found by its short
id, its Hugging Face id or an alias, case-insensitively, with no network.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.errors import DataError
from gpuwise.i18n import Text

MODELS_DIR = Path(__file__).resolve().parent.parent / "data" / "models"


@dataclass(frozen=True)
class Preset:
    """One shipped model preset: its names, its published size and its verbatim config.json."""

    id: str
    hf_id: str
    aliases: tuple[str, ...]
    config_source: str
    published_params: int
    published_active_params: int | None
    config: dict[str, Any]

    def arch(self) -> ModelArch:
        return _arch(self.id)


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


@functools.cache
def _presets() -> dict[str, Preset]:
    presets: dict[str, Preset] = {}
    for path in sorted(MODELS_DIR.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            meta = raw["gpuwise"]
            presets[meta["id"]] = Preset(
                id=meta["id"], hf_id=meta.get("hf_id", ""), aliases=tuple(meta.get("aliases", ())),
                config_source=meta.get("config_source", ""),
                published_params=int(meta.get("published_params") or 0),
                published_active_params=meta.get("published_active_params"), config=raw["config"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(Text(f"Preset file {path.name} is malformed: {exc}.",
                                 f"预设文件 {path.name} 格式错误：{exc}。")) from exc
    return presets


@functools.cache
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for preset in _presets().values():
        for name in (preset.id, preset.hf_id, *preset.aliases):
            if name:
                index[_norm(name)] = preset.id
                index.setdefault(_norm(name.split("/")[-1]), preset.id)
    return index


def all_presets() -> list[Preset]:
    return list(_presets().values())


def preset_names() -> list[str]:
    """Every name a preset answers to (for suggestions)."""
    names: list[str] = []
    for preset in _presets().values():
        names += [preset.id, preset.hf_id]
    return [n for n in names if n]


def find_preset(name: str) -> Preset | None:
    preset_id = _index().get(_norm(name))
    return _presets()[preset_id] if preset_id else None


@functools.cache
def _arch(preset_id: str) -> ModelArch:
    preset = _presets()[preset_id]
    return arch_from_config(preset.config, preset.id, source=f"preset:{preset.id} ({preset.config_source})")
