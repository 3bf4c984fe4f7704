"""A diffusion pipeline as gpuwise counts it: its components (text encoders, denoiser(s), VAE),
each with its class, config and parameter count, plus what the pipeline does with them
(latent geometry, default size and steps, how classifier-free guidance runs).

Presets live in data/models/diffusion/<id>/: the diffusers folder layout (model_index.json and
each component's config.json, copied from the official repository, SOURCE.md saying from where)
plus gpuwise.json (schema below). A user's diffusers folder reads the same way; its safetensors
headers, when present, replace the counted sizes with the exact stored bytes.

gpuwise.json: id, name, hf_id, aliases [..], kind image|video, denoiser [component names run per
step], defaults {width, height, frames, steps, guidance, fps}, latent {spatial, temporal, patch
[t, h, w]: latent pixels per token}, text_tokens {component: tokens}, cfg batched|sequential|
distilled|none, published [{component, params, exact, source, quote}], notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpuwise.i18n import Text

Role = Literal["text_encoder", "denoiser", "vae"]
Kind = Literal["image", "video"]
CfgMode = Literal["batched", "sequential", "distilled", "none"]


@dataclass(frozen=True)
class Component:
    name: str  # the model_index.json key: "transformer", "text_encoder_2"
    class_name: str
    role: Role
    params: int
    config: dict[str, Any] = field(compare=False, repr=False)
    approximate: bool = False  # counted with an approximate layout (the causal 3D VAEs)
    stored_bytes: int = 0  # summed from safetensors headers; 0 when none were read
    stored_dtype: str = ""  # the dtype holding most of those bytes

    @property
    def width(self) -> int:
        """Hidden width of a transformer (heads x head dim, or the encoder's d_model)."""
        c = self.config
        if "num_attention_heads" in c and "attention_head_dim" in c and isinstance(c["attention_head_dim"], int):
            return int(c["num_attention_heads"]) * int(c["attention_head_dim"])
        return int(c.get("hidden_size") or c.get("d_model") or 0)


@dataclass(frozen=True)
class Published:
    component: str
    params: int
    exact: bool  # True: an exact count (a checkpoint's size); False: a rounded, nominal figure
    source: str
    quote: str


@dataclass(frozen=True)
class Defaults:
    width: int
    height: int
    frames: int
    steps: int
    guidance: float
    fps: int = 0


@dataclass(frozen=True)
class Latent:
    spatial: int  # pixels per latent pixel along each side (VAE)
    temporal: int  # frames per latent frame (video VAEs: 4)
    patch: tuple[int, int, int]  # latent (t, h, w) cells per denoiser token


@dataclass(frozen=True)
class DiffusionModel:
    id: str
    name: str
    source: str
    kind: Kind
    components: tuple[Component, ...]
    denoisers: tuple[str, ...]  # run in turn across the steps (Wan 2.2 A14B: two experts)
    defaults: Defaults
    latent: Latent
    text_tokens: dict[str, int] = field(compare=False)
    cfg: CfgMode = "batched"
    published: tuple[Published, ...] = ()
    notes: tuple[Text, ...] = ()
    hf_id: str = ""  # the Hugging Face repository of the diffusers layout

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def by_role(self, role: Role) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.role == role)

    @property
    def denoiser(self) -> Component:
        """The first denoiser (the shapes of all of them are the same)."""
        return self.component(self.denoisers[0])

    @property
    def vae(self) -> Component:
        return self.by_role("vae")[0]

    @property
    def params_total(self) -> int:
        return sum(c.params for c in self.components)
