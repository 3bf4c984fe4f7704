"""Resolve a model SRC: a preset, a local config.json / model folder / GGUF file, a bare size,
or a hub id (Hugging Face or ModelScope). The heavy readers are imported only when needed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from gpuwise.catalog._datafile import read_json_object
from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.generic import generic_arch
from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.catalog.presets import find_preset, preset_names
from gpuwise.errors import unknown_name
from gpuwise.i18n import Text
from gpuwise.textsafe import clean_text

Hub = Literal["auto", "hf", "modelscope"]
HUBS: tuple[Hub, ...] = ("auto", "hf", "modelscope")
_BARE_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bBmMtT])\s*$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
MAX_CONFIG_BYTES = 4 * 2**20  # a real config.json is a few KiB


def read_config_file(path: Path) -> dict[str, object]:
    """Parse a local config.json with a size cap; malformed JSON becomes a DataError."""
    return read_json_object(path, MAX_CONFIG_BYTES, "config.json")


def _from_path(path: Path) -> ModelArch:
    if path.is_dir():
        from gpuwise.catalog.local import arch_from_folder

        return arch_from_folder(path)
    if path.suffix.lower() == ".gguf" or path.name.startswith("sha256-"):
        from gpuwise.catalog.gguf_reader import arch_from_gguf

        return arch_from_gguf(path)
    name = clean_text(path.parent.name) or clean_text(path.stem)  # folder names are outside text
    return arch_from_config(read_config_file(path), name, source=str(path))


def _exists(path: Path) -> bool:
    """Whether a local path exists; a name too long for the file system is simply not a path."""
    try:
        return path.exists()
    except (OSError, ValueError):  # ENAMETOOLONG, or a NUL byte
        return False


def load_model(src: str, *, hub: Hub = "auto", revision: str | None = None) -> ModelArch:
    """The architecture named by `src`. Presets and local files never touch the network."""
    preset = find_preset(src)
    if preset is not None and hub == "auto":
        return preset.arch()
    path = Path(src).expanduser()
    if _exists(path):
        return _from_path(path)
    size = _BARE_SIZE.match(src)
    if size:
        return generic_arch(float(size.group(1)), size.group(2).lower())
    if _HUB_ID.match(src):
        if hub == "modelscope":
            from gpuwise.catalog.hub import arch_from_modelscope

            return arch_from_modelscope(src, revision=revision)
        from gpuwise.catalog.hub import arch_from_hf

        return arch_from_hf(src, revision=revision)
    from gpuwise.diffusion.loader import preset_ids  # image and video pipelines too

    raise unknown_name(Text("model", "模型"), src, preset_names() + preset_ids(), "gpuwise model --list")
