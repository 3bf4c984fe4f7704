"""A single-file checkpoint of a known pipeline (the ComfyUI / original-repo layout): which
pipeline it is from its tensor names, and its exact stored size summed from the header.

Recognised layouts (tensor-name prefixes as the original code names them):
- Black Forest Labs flux: double_blocks.*, single_blocks.*; guidance_in.* only in [dev].
- diffusers Flux: transformer_blocks.*, single_transformer_blocks.*.
- Wan (Wan-Video/Wan2.1 wan/modules/model.py): blocks.N.self_attn.*, head.head.*; width from the
  patch embedding's first dimension.
- Stable Diffusion (ldm): model.diffusion_model.input_blocks.*; SDXL adds conditioner.embedders.1.
- SD3 (sd3_impls): joint_blocks.N.*; 38 blocks: 3.5 Large, else 3.5 Medium.
A ComfyUI checkpoint may prefix everything with model.diffusion_model.; the prefix is stripped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpuwise.diffusion.loader import load_preset
from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.errors import DataError
from gpuwise.i18n import Text

_COMFY = "model.diffusion_model."


@dataclass(frozen=True)
class Tensor:
    name: str
    elements: int
    nbytes: int
    dtype: str


def _tensors(path: Path) -> list[Tensor]:
    if path.suffix.lower() == ".gguf":
        return _gguf_tensors(path)
    from gpuwise.catalog.safetensors_header import read_safetensors

    return [Tensor(t.name, t.elements, t.nbytes, t.dtype) for t in read_safetensors(path).tensors]


def _gguf_tensors(path: Path) -> list[Tensor]:
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError as exc:
        raise DataError(Text("Reading GGUF files needs the optional 'gguf' package.",
                             "读取 GGUF 文件需要可选依赖包 gguf。"),
                        hint=Text("pip install 'gpuwise[gguf]'", "pip install 'gpuwise[gguf]'")) from exc
    from gpuwise.catalog.gguf_parse import read_gguf_header

    sizes = {int(t): (int(b), int(s)) for t, (b, s) in GGML_QUANT_SIZES.items()}
    names = {int(t): t.name for t in GGMLQuantizationType}
    header = read_gguf_header(path, sizes)
    return [Tensor(t.name, t.n_elements, t.n_bytes, names.get(t.type_id, str(t.type_id))) for t in header.tensors]


def _family(names: set[str]) -> str:
    def has(prefix: str) -> bool:
        return any(n.startswith(prefix) for n in names)

    if has("double_blocks.") and has("single_blocks."):
        return "flux.1-dev" if has("guidance_in.") else "flux.1-schnell"
    if has("single_transformer_blocks.") and has("transformer_blocks."):
        return "flux.1-dev" if has("time_text_embed.guidance_embedder.") else "flux.1-schnell"
    if has("joint_blocks."):
        depth = len({n.split(".")[1] for n in names if n.startswith("joint_blocks.")})
        return "sd3.5-large" if depth == 38 else "sd3.5-medium"
    if has("blocks.0.self_attn.") and has("head.head."):
        depth = len({n.split(".")[1] for n in names if n.startswith("blocks.")})
        return "wan2.1-t2v-14b" if depth == 40 else "wan2.1-t2v-1.3b"
    if has("input_blocks.") or has(_COMFY + "input_blocks."):
        return "sdxl" if has("conditioner.embedders.1.") else "sd1.5"
    raise DataError(Text("The checkpoint's tensor names match no known diffusion model (Flux, SD 1.5/XL, "
                         "SD 3.5, Wan 2.1).",
                         "检查点的张量名与已知扩散模型（Flux、SD 1.5/XL、SD 3.5、Wan 2.1）都不匹配。"),
                    hint=Text("Pass a diffusers folder (with model_index.json) or a preset name instead.",
                              "请改传 diffusers 文件夹（含 model_index.json）或预设名。"))


def _denoiser_part(tensors: list[Tensor], family: str) -> list[Tensor]:
    """The denoiser's tensors: an SD (ldm) checkpoint also holds its text encoders and VAE."""
    if family in ("sd1.5", "sdxl"):
        return [t for t in tensors if t.name.startswith(_COMFY)]
    return tensors


def load_single_file(path: Path) -> DiffusionModel:
    tensors = _tensors(path)
    names = {t.name.removeprefix(_COMFY) for t in tensors} | {t.name for t in tensors}
    family = _family(names)
    base = load_preset(family)
    part = _denoiser_part(tensors, family)
    stored = sum(t.nbytes for t in part)
    by: dict[str, int] = {}
    for t in part:
        by[t.dtype] = by.get(t.dtype, 0) + t.nbytes
    dtype = max(by, key=lambda k: by[k])
    den = base.denoiser
    new = replace(den, stored_bytes=stored, stored_dtype=dtype,
                  params=sum(t.elements for t in part) if dtype in ("BF16", "F16", "F32", "F8_E4M3", "F8_E5M2")
                  else den.params)
    comps = tuple(new if c.name == den.name else c for c in base.components)
    note = Text(f"{path.name}: the {base.name} denoiser, {stored / 2**30:,.2f} GiB as stored ({dtype}, summed "
                f"from the file's header); the other components are the preset's.",
                f"{path.name}：{base.name} 的去噪模型，按文件头求和存储 {stored / 2**30:,.2f} GiB（{dtype}）；"
                f"其余组件取预设。")
    return replace(base, id=path.stem, name=f"{base.name} ({path.name})", source=str(path), components=comps,
                   notes=base.notes + (note,))
