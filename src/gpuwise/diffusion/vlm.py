"""Image tokens of a vision-language model: how many tokens an image of a given size becomes
(Qwen2-VL / Qwen2.5-VL dynamic resolution; InternVL dynamic tiling; fixed-size towers use their
tile grid), and what the vision tower costs to run on it. Constants:
data/models/diffusion/constants.toml [vlm]."""

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
    patches: int  # vision-tower patches (what the ViT attends over), all tiles together
    tokens: int  # tokens the language model sees, special tokens included
    tiles: int = 1  # separate ViT passes (InternVL: the grid's tiles + the thumbnail)
    grid: tuple[int, int] = (1, 1)  # (columns, rows) of InternVL's tile grid

    def to_dict(self) -> dict[str, Any]:
        return {"resized_height": self.resized[0], "resized_width": self.resized[1], "patches": self.patches,
                "tokens": self.tokens, "tiles": self.tiles, "grid": list(self.grid)}


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


def closest_grid(width: int, height: int, tile: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """InternVL's dynamic_preprocess / find_closest_aspect_ratio, step for step: the (columns, rows)
    grid of at most max_tiles tiles whose aspect ratio is nearest the image's; on a tie the larger
    grid wins when the image has more than half its pixels (OpenGVLab InternVL README, load_image)."""
    aspect = width / height
    ratios = sorted({(i, j) for n in range(min_tiles, max_tiles + 1) for i in range(1, n + 1)
                     for j in range(1, n + 1) if min_tiles <= i * j <= max_tiles}, key=lambda r: r[0] * r[1])
    best, best_diff, area = (1, 1), float("inf"), width * height
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    return best


def internvl_tokens(top: dict[str, Any], vision: dict[str, Any], height: int, width: int) -> ImageTokens:
    """InternVL: the image is resized to a grid of 448-px tiles (1 to max_dynamic_patch), a 448-px
    thumbnail is added when the grid has more than one tile (use_thumbnail), and each tile gives
    (448/14)^2 x downsample_ratio^2 = 256 tokens after the pixel shuffle, between <img> and </img>."""
    tile = int(top.get("force_image_size") or vision.get("image_size") or 448)
    patch = int(vision.get("patch_size") or 14)
    ratio = float(top.get("downsample_ratio") or 0.5)
    lo, hi = int(top.get("min_dynamic_patch") or 1), int(top.get("max_dynamic_patch") or 12)
    cols, rows = closest_grid(width, height, tile, lo, hi) if top.get("dynamic_image_size", True) else (1, 1)
    tiles = cols * rows + (1 if top.get("use_thumbnail") and cols * rows > 1 else 0)
    per_tile = int((tile // patch) ** 2 * ratio * ratio)
    special = int(constants()["vlm"]["internvl_special_tokens_per_image"])
    return ImageTokens((rows * tile, cols * tile), tiles * ((tile // patch) ** 2 + 1), tiles * per_tile + special,
                       tiles, (cols, rows))


def image_tokens(vision_config: dict[str, Any], height: int, width: int,
                 top: dict[str, Any] | None = None) -> ImageTokens:
    """Tokens of one image for a tower with dynamic resolution (spatial_merge_size), InternVL's tiling
    (top: the model's whole config, where InternVL keeps its tiling keys) or a fixed size."""
    if height < 1 or width < 1:
        raise InputError(Text(f"An image must be at least 1x1 pixels; got {width}x{height}.",
                              f"图像至少为 1x1 像素，实际为 {width}x{height}。"))
    if vision_config.get("model_type") in ("intern_vit_6b", "intern_vit"):
        return internvl_tokens(top or {}, vision_config, height, width)
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


def vision_flops(vision_config: dict[str, Any], vision_params: int, patches: int, tiles: int = 1) -> float:
    """FLOPs of the vision tower on one image: 2 x params x patches, plus attention (windowed where
    the config says so, full in fullatt_block_indexes; within each tile where the image is tiled)."""
    if tiles > 1:  # each tile is its own ViT pass: attention never crosses tiles
        return tiles * vision_flops(vision_config, vision_params, patches // tiles)
    d = int(vision_config.get("embed_dim") or vision_config.get("hidden_size") or 0)
    depth = int(vision_config.get("depth") or vision_config.get("num_hidden_layers") or 0)
    full = len(vision_config.get("fullatt_block_indexes") or ()) if vision_config.get("window_size") else depth
    patch = int(vision_config.get("patch_size") or 14)
    window = (int(vision_config.get("window_size") or 0) // patch) ** 2 or patches
    attn = full * 4.0 * patches * patches * d + (depth - full) * 4.0 * patches * min(window, patches) * d
    return 2.0 * vision_params * patches + attn
