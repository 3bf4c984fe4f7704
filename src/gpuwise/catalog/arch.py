"""A model architecture, counted exactly: the one dataclass every estimate reads.

Sources fill it (presets, config.json, GGUF, a bare size); `params.py` counts it.
Derived values are properties; `__post_init__` only validates.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from gpuwise.errors import DataError
from gpuwise.i18n import Text

LayerKind = Literal["full", "sliding", "linear"]
QuantMethod = Literal["gptq", "awq", "fp8", "bitsandbytes", "gguf", "compressed-tensors", "other"]


@dataclass(frozen=True)
class MoE:
    """Mixture-of-experts feed-forward (Mixtral, Qwen-MoE, DeepSeek)."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # per shared expert
    shared_expert_gate: bool = False  # Qwen2-MoE: a hidden->1 sigmoid gate on the shared expert
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias (one per expert)
    dense_layers: tuple[int, ...] = ()  # layer indices with a dense MLP instead of experts


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3): one compressed latent is cached per token."""

    kv_lora_rank: int
    q_lora_rank: int  # 0 = plain q_proj
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet layers (Qwen3-Next, Qwen3.5): a fixed recurrent state per sequence."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    ssm_dtype_bytes: float = 0.0  # config mamba_ssm_dtype (float32: 4) for the recurrent state; 0: the cache's

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        # q and k (key_dim each) and v (value_dim) go through the short causal conv
        return 2 * self.key_dim + self.value_dim

    def state_elements(self) -> int:
        """Elements kept per sequence per layer: conv window + recurrent state (heads x dk x dv)."""
        conv = self.conv_dim * (self.conv_kernel - 1)
        recurrent = self.num_value_heads * self.key_head_dim * self.value_head_dim
        return conv + recurrent

    def state_bytes(self, conv_bytes: float) -> float:
        """Bytes per sequence per layer: the conv window at `conv_bytes` an element, the recurrent
        state at mamba_ssm_dtype where the config sets it."""
        conv = self.conv_dim * (self.conv_kernel - 1)
        recurrent = self.num_value_heads * self.key_head_dim * self.value_head_dim
        return conv * conv_bytes + recurrent * (self.ssm_dtype_bytes or conv_bytes)


@dataclass(frozen=True)
class Quantization:
    """A checkpoint's own quantization (quantization_config), not the user's --weights choice."""

    method: QuantMethod
    bits: float  # bits per quantized weight, before scales
    group_size: int = 0  # 0 = per channel / not grouped; -1 = per tensor
    block: tuple[int, int] = (0, 0)  # FP8 block-wise scales (DeepSeek-V3: 128 x 128)
    skipped_modules: tuple[str, ...] = ()  # kept in 16-bit
    double_quant: bool = False  # bitsandbytes nf4 double quantization


@dataclass(frozen=True)
class VisionProfile:
    """An encoder-decoder VLM's vision tower as vLLM V0's start-up profile runs it (Llama 3.2
    Vision / mllama): one image of `tokens` patch tokens per profiled sequence, every tile at once."""

    tokens: int  # patch tokens of one image: max_num_tiles x ((image_size / patch_size)^2 + 1), padded to 8
    hidden: int  # vision_config hidden_size
    intermediate: int  # vision_config intermediate_size (fc1/fc2 MLP)
    saved_states: int  # hidden states kept for the projector (len(intermediate_layers_indices))
    mask_span: int  # tokens one image's dense bf16 attention mask spans on each side (0: none)
    pixels: int  # fp32 input values of one image: max_num_tiles x 3 x image_size^2
    patches: int  # patch-embedding rows of one image: max_num_tiles x (image_size / patch_size)^2


@dataclass(frozen=True)
class ModelArch:
    """One transformer (text part plus an optional vision tower), as counted by gpuwise."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context: int
    tie_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU/GeGLU: gate, up, down; plain MLP: up, down
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm_bias: bool = False  # LayerNorm (weight + bias) vs RMSNorm (weight)
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma 3)
    attn_output_gate: bool = False  # q_proj also emits a sigmoid gate (Qwen3-Next, Qwen3.5)
    learned_positions: int = 0  # rows of a learned position table (GPT-2)
    layer_kinds: tuple[LayerKind, ...] = ()  # one per layer; empty = all full attention
    sliding_window: int = 0
    moe: MoE | None = None
    mla: MLA | None = None
    linear: LinearAttention | None = None
    vision_params: int = 0  # vision tower + projector, counted from vision_config
    vision_profile: VisionProfile | None = None  # what vLLM V0's profile runs through the tower
    dtype: str = "bfloat16"  # the checkpoint's torch_dtype
    quant: Quantization | None = None
    checkpoint_bytes: int = 0  # exact, from safetensors/GGUF headers, when at hand
    checkpoint_params: int = 0  # element count from the same headers (unpacked)
    approximate: bool = False
    source: str = ""
    notes: tuple[Text, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        positive = ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                    "vocab_size", "max_context")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise DataError(Text(
                    f"Model '{self.name}': {name} must be a positive integer, got {value!r}.",
                    f"模型“{self.name}”：{name} 必须是正整数，实际为 {value!r}。"))
        if self.num_heads % self.num_kv_heads != 0:
            raise DataError(Text(
                f"Model '{self.name}': {self.num_heads} attention heads do not divide into "
                f"{self.num_kv_heads} KV heads.",
                f"模型“{self.name}”：{self.num_heads} 个注意力头无法均分给 {self.num_kv_heads} 个 KV 头。"))
        if self.layer_kinds and len(self.layer_kinds) != self.num_layers:
            raise DataError(Text(
                f"Model '{self.name}': layer_types has {len(self.layer_kinds)} entries for "
                f"{self.num_layers} layers.",
                f"模型“{self.name}”：layer_types 有 {len(self.layer_kinds)} 项，但模型有 {self.num_layers} 层。"))

    def __hash__(self) -> int:
        # Worked out once: every lru_cache keyed on a model hashes it on each lookup, and the
        # generated hash walks all its fields (layer_kinds has one entry a layer). Same value as
        # the generated one would give: the fields that compare, in order.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, object]:
        # a str's hash differs between processes (PYTHONHASHSEED): a pickled model leaves its hash behind
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    # --- derived shapes -------------------------------------------------------------
    @functools.cached_property
    def kinds(self) -> tuple[LayerKind, ...]:
        # cached: a plan asks every estimate's layer counts (a frozen dataclass still has a __dict__)
        full: tuple[LayerKind, ...] = ("full",)
        return self.layer_kinds or full * self.num_layers

    @functools.cached_property
    def _kind_counts(self) -> dict[str, int]:
        return {kind: self.kinds.count(kind) for kind in set(self.kinds)}

    def count_kind(self, kind: LayerKind) -> int:
        return self._kind_counts.get(kind, 0)

    def is_moe_layer(self, index: int) -> bool:
        return self.moe is not None and index not in self.moe.dense_layers

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def kv_elements_per_token_per_layer(self) -> int:
        """Elements cached per token in one attention layer.

        2 because K and V; MLA caches one latent (kv_lora_rank + rope dims) instead, as vLLM's
        MLA backend does (DeepSeek-V2 paper, section 2.1.2).
        """
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """KV bytes per token over all attention layers (sliding layers before their window fills)."""
        attn_layers = self.count_kind("full") + self.count_kind("sliding")
        return attn_layers * self.kv_elements_per_token_per_layer() * bytes_per_element

    def kv_bytes_for_context(self, tokens: int, bytes_per_element: float = 2.0) -> float:
        """KV bytes for one sequence of `tokens`: sliding layers stop growing at the window."""
        per_layer = self.kv_elements_per_token_per_layer() * bytes_per_element
        full = self.count_kind("full") * tokens
        window = min(tokens, self.sliding_window) if self.sliding_window else tokens
        sliding = self.count_kind("sliding") * window
        return (full + sliding) * per_layer

    def state_bytes_per_sequence(self, bytes_per_element: float = 2.0) -> float:
        """Fixed per-sequence state of linear-attention layers (conv window + recurrent state)."""
        if self.linear is None:
            return 0.0
        return self.count_kind("linear") * self.linear.state_bytes(bytes_per_element)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = [n.en for n in self.notes]
        return data
