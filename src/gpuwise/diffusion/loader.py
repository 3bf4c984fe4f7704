"""Read a diffusion pipeline: a shipped preset, a diffusers folder (model_index.json plus each
component's config.json, safetensors headers summed exactly when present) or a single-file
checkpoint (.safetensors or .gguf) of a known denoiser."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuwise.catalog._datafile import read_json_object
from gpuwise.diffusion import count_dit, count_text, count_unet, count_vae3d
from gpuwise.diffusion.pipeline import Component, Defaults, DiffusionModel, Latent, Published, Role
from gpuwise.errors import DataError, unknown_name
from gpuwise.i18n import Text
from gpuwise.textsafe import clean_text

PRESETS_DIR = Path(__file__).resolve().parent.parent / "data" / "models" / "diffusion"
_MAX_JSON = 4 * 2**20
Counter = Callable[[dict[str, Any]], int]

# class name -> (role, parameter counter, approximate layout)
CLASSES: dict[str, tuple[Role, Counter, bool]] = {
    "UNet2DConditionModel": ("denoiser", count_unet.unet2d_condition, False),
    "FluxTransformer2DModel": ("denoiser", count_dit.flux, False),
    "SD3Transformer2DModel": ("denoiser", count_dit.sd3, False),
    "WanTransformer3DModel": ("denoiser", count_dit.wan, False),
    "HunyuanVideoTransformer3DModel": ("denoiser", count_dit.hunyuan_video, False),
    "CogVideoXTransformer3DModel": ("denoiser", count_dit.cogvideox, False),
    "AutoencoderKL": ("vae", count_unet.autoencoder_kl, False),
    "AutoencoderKLWan": ("vae", count_vae3d.wan_vae, False),
    "AutoencoderKLHunyuanVideo": ("vae", lambda c: count_unet.autoencoder_kl(c, 27), True),
    "AutoencoderKLCogVideoX": ("vae", count_vae3d.cogvideox_vae, False),
    "CLIPTextModel": ("text_encoder", lambda c: count_text.clip_text(c, False), False),
    "CLIPTextModelWithProjection": ("text_encoder", lambda c: count_text.clip_text(c, True), False),
    "T5EncoderModel": ("text_encoder", lambda c: count_text.t5_encoder(c, False), False),
    "UMT5EncoderModel": ("text_encoder", lambda c: count_text.t5_encoder(c, True), False),
    "LlamaModel": ("text_encoder", count_text.llama_model, False),
}


def _read(path: Path, what: str) -> dict[str, Any]:
    return read_json_object(path, _MAX_JSON, what)


def _component(folder: Path, name: str, class_name: str) -> Component:
    role, counter, approx = CLASSES[class_name]
    config = _read(folder / name / "config.json", f"{name}/config.json")
    params = counter(config)
    stored, dtype = _stored(folder / name)
    return Component(name, class_name, role, params, config, approx, stored, dtype)


def _stored(sub: Path) -> tuple[int, str]:
    """Exact bytes of the component's safetensors (headers only) and its main dtype; (0, "") when none."""
    if not sub.is_dir():
        return 0, ""
    from gpuwise.catalog.safetensors_header import read_checkpoint

    ckpt = read_checkpoint(sub)
    if ckpt is None:
        return 0, ""
    by = ckpt.bytes_by_dtype()
    return ckpt.total_bytes, max(by, key=lambda k: by[k]) if by else ""


def _components(folder: Path) -> tuple[Component, ...]:
    index = _read(folder / "model_index.json", "model_index.json")
    out = []
    for name, value in index.items():
        if name.startswith("_") or not isinstance(value, list) or len(value) != 2 or value[1] not in CLASSES:
            continue  # schedulers, tokenizers, feature extractors, empty slots
        out.append(_component(folder, name, str(value[1])))
    if not any(c.role == "denoiser" for c in out):
        classes = ", ".join(sorted({str(v[1]) for v in index.values() if isinstance(v, list) and len(v) == 2}))
        raise DataError(Text(f"{folder}/model_index.json names no denoiser gpuwise can count ({classes}).",
                             f"{folder}/model_index.json 中没有 gpuwise 能计算的去噪模型（{classes}）。"),
                        hint=Text("Known: " + ", ".join(k for k, v in CLASSES.items() if v[0] == "denoiser"),
                                  "已支持：" + ", ".join(k for k, v in CLASSES.items() if v[0] == "denoiser")))
    return tuple(out)


def _published(rows: list[dict[str, Any]]) -> tuple[Published, ...]:
    return tuple(Published(str(r["component"]), int(r["params"]), bool(r["exact"]), str(r["source"]),
                           str(r["quote"])) for r in rows)


def _patch(raw: Any) -> tuple[int, int, int]:
    """The latent (t, h, w) cells per denoiser token, as gpuwise.json writes it: three integers."""
    if not (isinstance(raw, list) and len(raw) == 3):
        raise DataError(Text(f"latent.patch must be three integers [t, h, w], got {raw!r}.",
                             f"latent.patch 应为三个整数 [t, h, w]，实际为 {raw!r}。"))
    t, h, w = (int(x) for x in raw)
    return t, h, w


def _model(folder: Path, meta: dict[str, Any], source: str) -> DiffusionModel:
    comps = _components(folder)
    names = {c.name for c in comps}
    denoisers = tuple(n for n in meta.get("denoiser", ()) if n in names) or \
        tuple(c.name for c in comps if c.role == "denoiser")[:1]
    d, lat = meta["defaults"], meta["latent"]
    notes = (Text(meta["notes"], meta.get("notes_zh", meta["notes"])),) if meta.get("notes") else ()
    return DiffusionModel(
        id=str(meta["id"]), name=str(meta["name"]), source=source, kind=meta["kind"], components=comps,
        denoisers=denoisers,
        defaults=Defaults(int(d["width"]), int(d["height"]), int(d["frames"]), int(d["steps"]),
                          float(d["guidance"]), int(d.get("fps", 0))),
        latent=Latent(int(lat["spatial"]), int(lat["temporal"]), _patch(lat["patch"])),
        text_tokens={str(k): int(v) for k, v in meta.get("text_tokens", {}).items()},
        cfg=meta.get("cfg", "batched"), published=_published(meta.get("published", [])), notes=notes,
        hf_id=str(meta.get("hf_id", "")))


@functools.cache
def _preset_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for meta_path in sorted(PRESETS_DIR.glob("*/gpuwise.json")):
        meta = _read(meta_path, "gpuwise.json")
        for name in (meta["id"], meta.get("hf_id", ""), *meta.get("aliases", ())):
            if name:
                index.setdefault(_norm(name), meta_path.parent.name)
                index.setdefault(_norm(name.split("/")[-1]), meta_path.parent.name)
    return index


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def preset_ids() -> list[str]:
    return sorted(p.parent.name for p in PRESETS_DIR.glob("*/gpuwise.json"))


def find_diffusion_preset(name: str) -> str | None:
    return _preset_index().get(_norm(name))


@functools.cache
def load_preset(preset_id: str) -> DiffusionModel:
    folder = PRESETS_DIR / preset_id
    return _model(folder, _read(folder / "gpuwise.json", "gpuwise.json"), f"preset:{preset_id} (data/models/diffusion)")


def is_diffusers_folder(path: Path) -> bool:
    """A folder with a model_index.json of any kind: a FIFO, device or folder of that name is then
    refused by the bounded reader in its own words, not mistaken for a language-model folder."""
    return path.is_dir() and os.path.lexists(path / "model_index.json")


def load_folder(folder: Path) -> DiffusionModel:
    """A diffusers folder; the preset of the same pipeline class lends the geometry and defaults."""
    index = _read(folder / "model_index.json", "model_index.json")
    pipeline_class = str(index.get("_class_name", ""))
    comps = _components(folder)
    family = _family_of(pipeline_class, comps)
    base = load_preset(family)
    name = clean_text(folder.resolve().name) or "diffusers folder"
    meta = _read(PRESETS_DIR / family / "gpuwise.json", "gpuwise.json")
    model = _model(folder, {**meta, "id": name, "name": name, "published": [], "hf_id": ""}, str(folder))
    note = Text(f"Geometry and defaults (latent layout, steps, guidance) are those of the {base.name} preset.",
                f"几何与默认值（潜空间布局、步数、引导）取自 {base.name} 预设。")
    return DiffusionModel(**{**model.__dict__, "notes": model.notes + (note,)})


def _family_of(pipeline_class: str, comps: tuple[Component, ...]) -> str:
    """The preset whose geometry a folder shares: the same denoiser class (and width)."""
    den = next(c for c in comps if c.role == "denoiser")
    best: tuple[int, str] | None = None
    for pid in preset_ids():
        m = load_preset(pid)
        if m.denoiser.class_name != den.class_name:
            continue
        score = abs(m.denoiser.params - den.params)
        if best is None or score < best[0]:
            best = (score, pid)
    if best is None:
        raise unknown_name(Text("diffusion pipeline class", "扩散管线类"), pipeline_class,
                           [load_preset(p).denoiser.class_name for p in preset_ids()], "gpuwise model --list")
    return best[1]
