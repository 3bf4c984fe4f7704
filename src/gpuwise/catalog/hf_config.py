"""Turn a Hugging Face config.json (a dict) into a ModelArch, without running any code.

Every value is type- and range-checked: a hostile or malformed config gives a DataError
that names the key, never a traceback or a runaway allocation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gpuwise.catalog.arch import MLA, LayerKind, LinearAttention, ModelArch, MoE, VisionProfile
from gpuwise.catalog.quant import quant_from_config
from gpuwise.catalog.vision import vision_params
from gpuwise.errors import DataError
from gpuwise.i18n import Text
from gpuwise.textsafe import clean_text
from gpuwise.tomlcache import load_toml

_DATA = Path(__file__).resolve().parent.parent / "data"
# Sanity bounds: far above any real model, low enough that nothing absurd is computed.
_MAX_DIM = 1 << 20
_MAX_LAYERS = 4096
_MAX_CONTEXT = 1 << 27
_MAX_EXPERTS = 1 << 14
SOURCE_LIMIT = 1000  # a source is a path or hub id@revision; paths can be long
_WORD_LIMIT = 64  # model_type, torch_dtype: one short word in every real config
_KIND_NAMES: dict[str, LayerKind] = {
    "full_attention": "full", "attention": "full", "global": "full",
    "sliding_attention": "sliding", "sliding_window": "sliding", "local": "sliding",
    "linear_attention": "linear", "mamba": "linear", "gated_delta_net": "linear",
}


@functools.cache
def _family_table() -> dict[str, Any]:
    return load_toml(_DATA / "model_types.toml")


def family_defaults(model_type: str) -> dict[str, Any]:
    """The defaults of one model_type, following `inherit`; unknown types get the Llama defaults."""
    table = _family_table()
    entry = dict(table.get(model_type, table["default"]))
    parent = entry.pop("inherit", None)
    if parent:
        merged = family_defaults(parent)
        merged.update(entry)
        return merged
    return entry


class _Reader:
    """Checked access to one config dict; errors name the model and the key."""

    def __init__(self, cfg: dict[str, Any], name: str) -> None:
        self.cfg = cfg
        self.name = name

    def bad(self, key: str, value: Any, want: Text) -> DataError:
        return DataError(Text(
            f"config.json of '{self.name}': '{key}' should be {want.en}, got {value!r:.60}.",
            f"“{self.name}”的 config.json：“{key}”应为{want.zh}，实际为 {value!r:.60}。"))

    def int(self, *keys: str, default: int | None = None, low: int = 1, high: int = _MAX_DIM) -> int:
        for key in keys:
            value = self.cfg.get(key)
            if value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise self.bad(key, value, Text(f"an integer in [{low}, {high}]",
                                                f" {low} 到 {high} 之间的整数"))
            return value
        if default is None:
            raise DataError(Text(
                f"config.json of '{self.name}' has none of {', '.join(keys)}.",
                f"“{self.name}”的 config.json 缺少 {', '.join(keys)}。"))
        return default

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.bad(key, value, Text("true or false", " true 或 false"))
        return value

    def str(self, key: str, default: str = "") -> str:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.bad(key, value, Text("a string", "字符串"))
        return value


def _text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    """VLMs and some hybrids nest the language model under text_config (or llm_config)."""
    for key in ("text_config", "llm_config", "language_config"):
        nested = cfg.get(key)
        if isinstance(nested, dict) and nested:
            merged = {k: v for k, v in cfg.items() if k not in (key, "vision_config")}
            merged.update(nested)
            merged.setdefault("model_type", cfg.get("model_type", ""))
            return merged
    return cfg


def _layer_kinds(r: _Reader, layers: int) -> tuple[tuple[LayerKind, ...], int]:
    """Per-layer attention kinds and the sliding window, from whichever keys the family uses."""
    cfg = r.cfg
    window = r.int("sliding_window", default=0, low=0, high=_MAX_CONTEXT) if cfg.get("sliding_window") else 0
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise r.bad("layer_types", types, Text("a list of strings", "字符串列表"))
        if len(types) != layers:
            raise r.bad("layer_types", f"{len(types)} entries",
                        Text(f"{layers} entries (num_hidden_layers)", f" {layers} 项（num_hidden_layers）"))
        kinds = tuple(_KIND_NAMES.get(t, "full") for t in types)
        return kinds, window if "sliding" in kinds else 0
    interval = r.int("full_attention_interval", default=0, low=0, high=_MAX_LAYERS)
    if interval:  # Qwen3-Next: every interval-th layer is full attention, the rest linear
        return _pattern(layers, interval, "linear"), 0
    if not window or cfg.get("use_sliding_window") is False:
        return (), 0
    pattern = r.int("sliding_window_pattern", "sliding_window_pattern_size", default=0, low=0,
                    high=_MAX_LAYERS)
    model_type = r.str("model_type")
    if pattern:  # Gemma 3: every pattern-th layer is global
        return _pattern(layers, pattern, "sliding"), window
    if model_type == "gemma2":  # Gemma2DecoderLayer: even layers slide, odd layers are global
        return _pattern(layers, 2, "sliding"), window
    return _pattern(layers, layers + 1, "sliding"), window  # Mistral v0.1: every layer slides


def _pattern(layers: int, every: int, other: LayerKind) -> tuple[LayerKind, ...]:
    """Every `every`-th layer (1-based) is full attention, the others are `other`."""
    return tuple("full" if (i + 1) % every == 0 else other for i in range(layers))


def _moe(r: _Reader, layers: int, hidden_inter: int, router_bias: bool) -> MoE | None:
    experts = r.int("num_local_experts", "n_routed_experts", "num_experts", default=0, low=0,
                    high=_MAX_EXPERTS)
    if experts <= 1:
        return None
    top_k = r.int("num_experts_per_tok", "moe_topk", "top_k", default=2, high=experts)
    expert_inter = r.int("moe_intermediate_size", default=hidden_inter)
    shared_inter = r.int("shared_expert_intermediate_size", default=0, low=0)
    n_shared = r.int("n_shared_experts", "num_shared_experts", default=1 if shared_inter else 0, low=0,
                     high=_MAX_EXPERTS)
    first_dense = r.int("first_k_dense_replace", default=0, low=0, high=layers)
    step = r.int("decoder_sparse_step", "moe_layer_freq", default=1, high=layers)
    only_dense = r.cfg.get("mlp_only_layers") or []
    if not isinstance(only_dense, list) or not all(isinstance(i, int) for i in only_dense):
        raise r.bad("mlp_only_layers", only_dense, Text("a list of layer indices", "层序号列表"))
    dense = tuple(i for i in range(layers)
                  if i < first_dense or i in only_dense or (i + 1) % step != 0 and step > 1)
    return MoE(
        num_experts=experts, experts_per_token=top_k, expert_intermediate_size=expert_inter,
        num_shared_experts=n_shared,
        shared_intermediate_size=shared_inter or (expert_inter if n_shared else 0),
        shared_expert_gate=bool(shared_inter),  # Qwen2-MoE/Qwen3-Next gate their shared expert
        router_bias=router_bias or r.str("topk_method") == "noaux_tc",  # e_score_correction_bias
        dense_layers=dense)


def _mla(r: _Reader) -> MLA | None:
    rank = r.int("kv_lora_rank", default=0, low=0)
    if not rank:
        return None
    return MLA(kv_lora_rank=rank, q_lora_rank=r.int("q_lora_rank", default=0, low=0),
               qk_nope_head_dim=r.int("qk_nope_head_dim"), qk_rope_head_dim=r.int("qk_rope_head_dim"),
               v_head_dim=r.int("v_head_dim"))


def _linear(r: _Reader, kinds: tuple[LayerKind, ...]) -> LinearAttention | None:
    if "linear" not in kinds:
        return None
    return LinearAttention(
        num_key_heads=r.int("linear_num_key_heads"), num_value_heads=r.int("linear_num_value_heads"),
        key_head_dim=r.int("linear_key_head_dim"), value_head_dim=r.int("linear_value_head_dim"),
        conv_kernel=r.int("linear_conv_kernel_dim", default=4),
        ssm_dtype_bytes=_SSM_DTYPE_BYTES.get(r.str("mamba_ssm_dtype").lower(), 0.0))


def _vision_profile(vision: Any, name: str) -> VisionProfile | None:
    """The mllama vision tower as vLLM V0's encoder-decoder profile runs it (vllm/model_executor/
    models/mllama.py, 0.6.x: the dummy image is tiled to max_num_tiles, each tile's
    (image_size / patch_size)^2 patches plus a class token padded to a multiple of 8, all tiles of an
    image attending together under a dense aspect-ratio mask); None for other towers."""
    if not isinstance(vision, dict) or vision.get("model_type") != "mllama_vision_model":
        return None
    r = _Reader(vision, name)
    size, tiles = r.int("image_size"), r.int("max_num_tiles", default=4)
    side = size // r.int("patch_size")
    patches = side * side + 1
    tokens = tiles * (patches + (8 - patches % 8) % 8)
    saved = vision.get("intermediate_layers_indices") or []
    if not isinstance(saved, list):
        raise r.bad("intermediate_layers_indices", saved, Text("a list", "列表"))
    return VisionProfile(tokens=tokens, hidden=r.int("hidden_size"), intermediate=r.int("intermediate_size"),
                         saved_states=len(saved), mask_span=tokens, pixels=tiles * 3 * size * size,
                         patches=tiles * side * side)


# mamba_ssm_dtype (Qwen3.5/3.6 config.json: "float32"): the recurrent state's element size
_SSM_DTYPE_BYTES = {"float32": 4.0, "float": 4.0, "bfloat16": 2.0, "float16": 2.0}


def arch_from_config(config: Any, name: str, source: str = "") -> ModelArch:
    """Build a ModelArch from a parsed config.json. Never executes code from the config.

    `name` and `source` come from files, folders and hubs, so they are cleaned to one printable
    line here, the one seam every source passes through (textsafe.clean_text)."""
    name = clean_text(name) or "unnamed-model"
    source = clean_text(source, SOURCE_LIMIT)
    if not isinstance(config, dict):
        raise DataError(Text(f"config.json of '{name}' is not a JSON object.",
                             f"“{name}”的 config.json 不是 JSON 对象。"))
    cfg = _text_part(config)
    model_type = clean_text(_Reader(cfg, name).str("model_type"), _WORD_LIMIT) or "unknown"
    fam = family_defaults(model_type)
    cfg = {**fam.get("config_defaults", {}), **cfg}
    r = _Reader(cfg, name)
    hidden = r.int("hidden_size", "n_embd", "d_model", "dim")
    layers = r.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", high=_MAX_LAYERS)
    heads = r.int("num_attention_heads", "n_head", "n_heads")
    kv_default = 1 if cfg.get("multi_query") else heads
    kv_heads = r.int("num_key_value_heads", "n_kv_heads", "num_kv_heads", default=kv_default)
    inter = r.int("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size",
                  default=4 * hidden) // int(fam.get("intermediate_divisor", 1))
    kinds, window = _layer_kinds(r, layers)
    learned = r.int("n_positions", default=0, low=0, high=_MAX_CONTEXT) if fam.get("norm_bias") else 0
    notes: list[Text] = []
    if model_type not in _family_table():
        notes.append(Text(f"Unknown model_type '{model_type}': counted as a Llama-style decoder.",
                          f"未知的 model_type“{model_type}”：按 Llama 式解码器计数。"))
    if r.int("num_nextn_predict_layers", default=0, low=0, high=_MAX_LAYERS):
        notes.append(Text("The multi-token-prediction layers in the checkpoint are not counted "
                          "(serving engines skip them unless speculative decoding is on).",
                          "检查点中的多 token 预测（MTP）层未计入（除非开启投机解码，推理引擎不加载它们）。"))
    return ModelArch(
        name=name, model_type=model_type, hidden_size=hidden, num_layers=layers,
        num_heads=heads, num_kv_heads=kv_heads,
        head_dim=r.int("head_dim", default=max(1, hidden // heads)),
        intermediate_size=inter, vocab_size=r.int("vocab_size", "padded_vocab_size", high=1 << 24),
        max_context=r.int("max_position_embeddings", "n_positions", "max_sequence_length",
                          "seq_length", "n_ctx", default=2048, high=_MAX_CONTEXT),
        tie_embeddings=r.bool("tie_word_embeddings", fam["tie_embeddings"]),
        gated_mlp=fam["gated_mlp"],
        qkv_bias=r.bool("attention_bias", fam["qkv_bias"]) or fam["qkv_bias"],
        o_bias=fam["o_bias"], mlp_bias=r.bool("mlp_bias", fam["mlp_bias"]),
        norm_bias=fam["norm_bias"], norms_per_layer=fam["norms_per_layer"],
        qk_norm=r.bool("use_qk_norm", fam["qk_norm"]),
        attn_output_gate=r.bool("attn_output_gate", fam["attn_output_gate"]),
        learned_positions=learned, layer_kinds=kinds, sliding_window=window,
        moe=_moe(r, layers, inter, fam["moe_router_bias"]), mla=_mla(r), linear=_linear(r, kinds),
        vision_params=vision_params(config.get("vision_config"), hidden, name),
        vision_profile=_vision_profile(config.get("vision_config"), name),
        dtype=clean_text(r.str("torch_dtype") or r.str("dtype"), _WORD_LIMIT) or "bfloat16",
        quant=quant_from_config(config.get("quantization_config") or cfg.get("quantization_config"), name),
        source=source, notes=tuple(notes))
