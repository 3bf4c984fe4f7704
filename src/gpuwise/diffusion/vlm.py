"""Image tokens of a vision-language model: how many tokens an image of a given size becomes
(Qwen2-VL / Qwen2.5-VL dynamic resolution; fixed-size towers use their tile grid), and what the
vision tower costs to run on it. Constants: data/models/diffusion/constants.toml [vlm]."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuwise.diffusion.job import constants
from gpuwise.errors import InputError
from gpuwise.i18n import Text


@dataclass(frozen=True)
class ImageTokens:
    resized: tuple[int, int]  # (height, width) the processor resizes to
    patches: int  # vision-tower patches (what the ViT attends over)
    tokens: int  # tokens the language model sees, special tokens included

    def to_dict(self) -> dict[str, Any]:
        return {"resized_height": self.resized[0], "resized_width": self.resized[1], "patches": self.patches,
                "tokens": self.tokens}


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers' Qwen2-VL smart_resize, step for step (Python's round() included)."""
    if max(height, width) / min(height, width) > 200:
        raise InputError(Text(f"An image of {width}x{height} has an aspect ratio over 200, which Qwen-VL refuses.",
                              f"{width}x{height} 的图像宽高比超过 200，Qwen-VL 会拒绝。"))
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def image_tokens(vision_config: dict[str, Any], height: int, width: int) -> ImageTokens:
    """Tokens of one image for a tower with dynamic resolution (spatial_merge_size) or a fixed size."""
    k = constants()["vlm"]
    patch = int(vision_config.get("patch_size") or vision_config.get("spatial_patch_size") or 14)
    merge = int(vision_config.get("spatial_merge_size") or 1)
    if merge > 1:  # Qwen2-VL family
        h, w = smart_resize(height, width, patch * merge, int(k["min_pixels"]), int(k["max_pixels"]))
        patches = (h // patch) * (w // patch)
        return ImageTokens((h, w), patches, patches // (merge * merge) + int(k["special_tokens_per_image"]))
    size = int(vision_config.get("image_size") or 336)  # a fixed-size tower: the image is resized to it
    patches = (size // patch) ** 2
    return ImageTokens((size, size), patches, patches)


def vision_flops(vision_config: dict[str, Any], vision_params: int, patches: int) -> float:
    """FLOPs of the vision tower on one image: 2 x params x patches, plus attention (windowed where
    the config says so, full in fullatt_block_indexes)."""
    d = int(vision_config.get("hidden_size") or vision_config.get("embed_dim") or 0)
    depth = int(vision_config.get("depth") or vision_config.get("num_hidden_layers") or 0)
    full = len(vision_config.get("fullatt_block_indexes") or ()) if vision_config.get("window_size") else depth
    patch = int(vision_config.get("patch_size") or 14)
    window = (int(vision_config.get("window_size") or 0) // patch) ** 2 or patches
    attn = full * 4.0 * patches * patches * d + (depth - full) * 4.0 * patches * min(window, patches) * d
    return 2.0 * vision_params * patches + attn
