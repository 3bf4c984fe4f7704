"""Which sources name a diffusion pipeline: a preset id or alias, a diffusers folder, or a
single-file checkpoint of a known denoiser. Everything else is left to the LLM loaders."""

from __future__ import annotations

from pathlib import Path

from gpuwise.diffusion.loader import (
    find_diffusion_preset,
    is_diffusers_folder,
    load_folder,
    load_preset,
)
from gpuwise.diffusion.pipeline import DiffusionModel

_SINGLE_FILE_HINTS = ("flux", "sd_xl", "sdxl", "sd3", "wan2", "wan_2", "v1-5", "sd15", "stable-diffusion",
                      "hunyuan", "cogvideo")


def _single_file(path: Path) -> bool:
    """A .safetensors / .gguf file whose name says it is a diffusion model (LLM files go elsewhere)."""
    name = path.name.lower()
    return path.is_file() and path.suffix.lower() in (".safetensors", ".gguf") and \
        any(h in name for h in _SINGLE_FILE_HINTS)


def is_diffusion_source(src: str) -> bool:
    if find_diffusion_preset(src) is not None:
        return True
    path = Path(src).expanduser()
    return is_diffusers_folder(path) or _single_file(path)


def load_diffusion(src: str) -> DiffusionModel:
    preset = find_diffusion_preset(src)
    if preset is not None:
        return load_preset(preset)
    path = Path(src).expanduser()
    if is_diffusers_folder(path):
        return load_folder(path)
    from gpuwise.diffusion.single_file import load_single_file

    return load_single_file(path)
