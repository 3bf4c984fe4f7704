"""Count a model's parameters exactly, per component, total and active.

Shapes follow the Hugging Face transformers modelling files of each family (LlamaAttention,
Qwen2 q/k/v biases, Gemma2 four norms, DeepseekV3 MLA and MoE, Qwen3-Next GatedDeltaNet).
Llama-3.1-8B comes to 8,030,261,248, the figure its safetensors index reports.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from gpuwise.catalog.arch import MLA, LinearAttention, ModelArch


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameter counts by component. `experts` is every routed expert; `active` uses top-k."""

    embedding: int
    positions: int
    lm_head: int
    attention: int
    mlp: int
    experts: int
    shared_experts: int
    router: int
    norms: int
    vision: int
    active: int

    @property
    def total(self) -> int:
        return (self.embedding + self.positions + self.lm_head + self.attention + self.mlp
                + self.experts + self.shared_experts + self.router + self.norms + self.vision)

    @property
    def linear(self) -> int:
        """Weights of the linear layers that weight-only quantization (GPTQ/AWQ/FP8) converts."""
        return self.attention + self.mlp + self.experts + self.shared_experts

    @property
    def kept_16bit(self) -> int:
        """Embeddings, head, norms, routers and vision tower: usually left in 16-bit."""
        return self.total - self.linear

    def to_dict(self) -> dict[str, int]:
        data = asdict(self)
        data["total"] = self.total
        return data


def _standard_attention(m: ModelArch) -> int:
    """q, k, v, o projections with GQA; biases where the family has them; per-head q/k norms."""
    q_out = m.q_dim * (2 if m.attn_output_gate else 1)  # gated attention: q_proj also emits a gate
    weights = m.hidden_size * (q_out + 2 * m.kv_dim) + m.q_dim * m.hidden_size
    biases = (m.q_dim + 2 * m.kv_dim) * m.qkv_bias + m.hidden_size * m.o_bias
    qk_norm = 2 * m.head_dim * m.qk_norm
    return weights + biases + qk_norm


def _mla_attention(m: ModelArch, mla: MLA) -> int:
    """DeepseekV3Attention: low-rank q (q_a, norm, q_b), joint KV latent (kv_a + norm, kv_b), o."""
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        q = m.hidden_size * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * m.num_heads * qk_head
    else:
        q = m.hidden_size * m.num_heads * qk_head
    kv_a = m.hidden_size * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    kv_b = mla.kv_lora_rank * m.num_heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    o = m.num_heads * mla.v_head_dim * m.hidden_size
    return q + kv_a + kv_b + o


def _linear_attention(m: ModelArch, lin: LinearAttention) -> int:
    """Qwen3NextGatedDeltaNet: in_proj_qkvz, in_proj_ba, depthwise conv, dt_bias, A_log, norm, out."""
    in_qkvz = m.hidden_size * (2 * lin.key_dim + 2 * lin.value_dim)
    in_ba = m.hidden_size * 2 * lin.num_value_heads
    conv = lin.conv_dim * lin.conv_kernel  # depthwise Conv1d, no bias
    dt_and_a = 2 * lin.num_value_heads
    norm = lin.value_head_dim  # gated RMSNorm over each value head
    out = lin.value_dim * m.hidden_size
    return in_qkvz + in_ba + conv + dt_and_a + norm + out


def _mlp(hidden: int, inner: int, gated: bool, bias: bool) -> int:
    """Gated: gate, up, down (3 matrices); plain: up, down (2)."""
    mats = 3 if gated else 2
    return mats * hidden * inner + bias * ((mats - 1) * inner + hidden)


def _attention_of_layer(m: ModelArch, kind: str) -> int:
    if kind == "linear" and m.linear is not None:
        return _linear_attention(m, m.linear)
    if m.mla is not None:
        return _mla_attention(m, m.mla)
    return _standard_attention(m)


@functools.lru_cache(maxsize=512)  # a plan asks for the same model's counts once per candidate
def count_params(m: ModelArch) -> ParamBreakdown:
    """Exact parameter count of `m` by component, and the count active per token."""
    h = m.hidden_size
    embedding = m.vocab_size * h
    lm_head = 0 if m.tie_embeddings else m.vocab_size * h
    positions = m.learned_positions * h
    norm_size = h * (2 if m.norm_bias else 1)
    norms = m.num_layers * m.norms_per_layer * norm_size + norm_size  # + the final norm
    attention = sum(_attention_of_layer(m, kind) for kind in m.kinds)
    mlp = experts = shared = router = active_experts = 0
    for index in range(m.num_layers):
        if not m.is_moe_layer(index) or m.moe is None:
            mlp += _mlp(h, m.intermediate_size, m.gated_mlp, m.mlp_bias)
            continue
        moe = m.moe
        one_expert = _mlp(h, moe.expert_intermediate_size, m.gated_mlp, False)
        experts += moe.num_experts * one_expert
        active_experts += moe.experts_per_token * one_expert
        shared += moe.num_shared_experts * _mlp(h, moe.shared_intermediate_size, m.gated_mlp, False)
        shared += h * moe.shared_expert_gate
        router += h * moe.num_experts + moe.num_experts * moe.router_bias
    total_text = embedding + positions + lm_head + attention + mlp + experts + shared + router + norms
    active = total_text - experts + active_experts
    return ParamBreakdown(embedding=embedding, positions=positions, lm_head=lm_head,
                          attention=attention, mlp=mlp, experts=experts, shared_experts=shared,
                          router=router, norms=norms, vision=m.vision_params, active=active)
