"""The KV pool of a serving deployment and what it holds.

Holds: the bytes of a KV element and one TP rank's share of the KV, each engine's rule for the
budget its pool is cut from (data/engines.toml `pool`) and the most that budget can be on a card,
vLLM's hybrid page layout for attention + linear-attention models, and the capacity of a pool
(KV tokens, sequences at --context, context at --concurrency; sliding-window layers capped at the
window). It imports catalog, errors, i18n, units, estimate.breakdown / constants / workload and
estimate/serving_rules.py (the NVLink test); never the assembly of the MemoryResult
(estimate/memory_infer.py), plan, cli or web.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.engines import EngineRules
from gpuwise.errors import InputError
from gpuwise.estimate.breakdown import Capacity
from gpuwise.estimate.constants import KV_BYTES
from gpuwise.estimate.serving_rules import on_nvlink_fabric
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["HybridPages", "KvRates", "PoolBudget", "budget_cap", "engine_fraction", "hybrid_pages", "kv_capacity",
           "kv_element_bytes", "kv_rates", "kv_share", "pool_budget", "sequence_kv_bytes"]


def kv_element_bytes(w: Workload, model: ModelArch) -> float:
    if w.kv_dtype == "auto":
        return 4.0 if model.dtype == "float32" else 2.0
    if w.kv_dtype not in KV_BYTES:
        raise InputError(Text(f"Unknown --kv-dtype '{w.kv_dtype}': use auto, {', '.join(KV_BYTES)}.",
                              f"未知的 --kv-dtype“{w.kv_dtype}”：可用 auto、{', '.join(KV_BYTES)}。"))
    return KV_BYTES[w.kv_dtype]


def kv_share(model: ModelArch, tp: int) -> float:
    """Fraction of the model's KV held by one TP rank: heads split, replicated past kv_heads,
    and the MLA latent replicated on every rank (vLLM's MLA backend)."""
    if model.mla is not None:
        return 1.0
    return max(model.num_kv_heads / tp, 1.0) / model.num_kv_heads


def sequence_kv_bytes(model: ModelArch, tokens: int, elem: float) -> float:
    return model.kv_bytes_for_context(tokens, elem) + model.state_bytes_per_sequence(elem)


@dataclass(frozen=True)
class PoolBudget:
    usable: float  # what weights + KV + activations + runtime may add up to
    pool: float  # the KV pool the engine pre-allocates (0: it grows a cache instead)


def engine_fraction(d: Deployment, rules: EngineRules, tp: int, mla: bool) -> float:
    """The engine's default memory fraction: SGLang >= 0.5 derives it from a reserve for
    activations and CUDA graphs; otherwise the rule's value at this TP."""
    derived = rules.reserved_fraction(d.card.usable_bytes / GiB, tp, d.pp, mla)
    return derived if derived is not None else rules.fraction_at(tp)


def pool_budget(d: Deployment, rules: EngineRules, fixed: float, weights: float, tp: int, mla: bool) -> PoolBudget:
    """Each engine's rule for its KV pool (data/engines.toml `pool`)."""
    card = d.card.usable_bytes
    if rules.pool == "total_fraction":  # vLLM: fraction of the total, less all the rest
        budget = card * d.gpu_memory_utilization
        return PoolBudget(budget, max(0.0, budget - fixed))
    frac = d.mem_fraction or engine_fraction(d, rules, tp, mla)
    if rules.pool == "static_fraction":  # SGLang: fraction of the memory free at start, less weights
        init = rules.init_nvlink_gib if rules.init_nvlink_gib and on_nvlink_fabric(d, tp) else rules.init_gib
        start = card - init * GiB
        pool = max(0.0, start * frac - weights)
        return PoolBudget(min(card, start * frac + fixed - weights), pool)
    if rules.pool == "free_fraction":  # TRT-LLM: fraction of what is still free after the profile
        free = max(0.0, card - fixed)
        return PoolBudget(card - (1 - frac) * free, free * frac)
    return PoolBudget(card, 0.0)


def budget_cap(rules: EngineRules, d: Deployment) -> float | None:
    """The most the engine's budget (`usable`) can be on d's card: the card, times
    --gpu-memory-utilization where the pool is a fraction of the total. None where weights are
    offloaded to fit or the budget follows a profile (TRT-LLM's free fraction)."""
    if d.offload != "none":
        return None
    if rules.pool == "total_fraction":
        return d.card.usable_bytes * d.gpu_memory_utilization
    if rules.pool in ("static_fraction", "grow"):
        return float(d.card.usable_bytes)
    return None


@dataclass(frozen=True)
class HybridPages:
    """vLLM's hybrid allocator for attention + recurrent-state layers: one page size for every
    layer (attention pages of `block` tokens, at least one layer's state; the state padded up),
    layers in groups of `group_size` by the repeating pattern, one block pool for all groups."""

    block: int  # attention tokens per page
    page: float  # bytes per page per layer (per GPU)
    group_size: int  # layers per group: num_blocks = pool // page // group_size
    attention_groups: int
    state_groups: int
    state_blocks: int  # pages each state group holds per request
    log_concurrency: bool = False  # the log's token count: max concurrency x context (newer vLLM)

    @property
    def groups(self) -> int:
        return self.attention_groups + self.state_groups

    def blocks(self, pool: float) -> int:
        return int(pool // self.page // self.group_size)

    def log_tokens(self, pool: float, context: int) -> int:
        """'GPU KV cache size': the blocks shared out evenly over the groups, in tokens; newer vLLM
        prints the max concurrency at max_model_len times that length."""
        if self.log_concurrency:
            return int(self.blocks(pool) / self.blocks_per_request(context) * context)
        return self.blocks(pool) // self.groups * self.block

    def blocks_per_request(self, context: int) -> int:
        return math.ceil(context / self.block) * self.attention_groups + self.state_blocks * self.state_groups


def hybrid_pages(model: ModelArch, elem: float, share: float, rules: EngineRules) -> HybridPages | None:
    """The shared page layout where the engine has one (engines.toml hybrid_page_alignment) and
    the model mixes attention with linear-attention layers; None otherwise. The conv window is
    kept in the model's 16-bit dtype, the recurrent state at mamba_ssm_dtype (arch.LinearAttention)."""
    attn = model.count_kind("full") + model.count_kind("sliding")
    linear = model.count_kind("linear")
    if not rules.hybrid_page_alignment or model.linear is None or not attn or not linear:
        return None
    per_token = model.kv_elements_per_token_per_layer() * elem * share
    state = model.linear.state_bytes(2.0) * share
    align = rules.hybrid_page_alignment
    block = align * max(1, math.ceil(state / (align * per_token)))
    group = min(attn, linear)
    return HybridPages(block=block, page=block * per_token, group_size=group,
                       attention_groups=math.ceil(attn / group), state_groups=math.ceil(linear / group),
                       state_blocks=rules.state_blocks_per_request, log_concurrency=rules.hybrid_log_concurrency)


def _hybrid_capacity(model: ModelArch, w: Workload, pages: HybridPages, pool: float) -> Capacity:
    """Capacity under the hybrid allocator: requests take ceil(context / block) pages in each
    attention group and a fixed number in each state group, from one pool of blocks."""
    blocks = pages.blocks(pool)
    max_conc = blocks / pages.blocks_per_request(w.context)
    per_seq = blocks / w.concurrency - pages.state_blocks * pages.state_groups
    context = int(per_seq // pages.attention_groups) * pages.block if per_seq > 0 else 0
    return Capacity(kv_tokens=pages.log_tokens(pool, w.context), max_concurrency=max_conc,
                    max_context=min(context, model.max_context))


@dataclass(frozen=True)
class KvRates:
    """Bytes of one GPU's KV share (`share` of the model's): per token over every attention layer,
    per sequence of the workload's context, the fixed state per sequence, per token of one layer."""

    per_token: float
    per_seq: float
    state: float
    per_layer: float


def kv_rates(model: ModelArch, w: Workload, elem: float, share: float) -> KvRates:
    return KvRates(per_token=model.kv_bytes_per_token(elem) * share,
                   per_seq=sequence_kv_bytes(model, w.context, elem) * share,
                   state=model.state_bytes_per_sequence(elem) * share,
                   per_layer=model.kv_elements_per_token_per_layer() * elem * share)


def kv_capacity(model: ModelArch, w: Workload, rates: KvRates, pool: float, block: int,
              pages: HybridPages | None = None) -> Capacity:
    """KV tokens the pool holds (whole pages of `block` tokens), sequences of --context it
    serves, context at --concurrency."""
    if pages is not None:
        return _hybrid_capacity(model, w, pages, pool)
    per_token, per_seq = rates.per_token, rates.per_seq
    kv_tokens = int(pool // (per_token * block)) * block if per_token else 0
    max_conc = pool / per_seq if per_seq else float("inf")
    return Capacity(kv_tokens=kv_tokens, max_concurrency=max_conc,
                    max_context=_max_context(model, pool / w.concurrency, rates))


def _max_context(model: ModelArch, bytes_per_seq: float, rates: KvRates) -> int:
    """Longest context whose KV (+ state) fits `bytes_per_seq`, up to the model's maximum."""
    room = bytes_per_seq - rates.state
    per_layer = rates.per_layer
    full, sliding, window = model.count_kind("full"), model.count_kind("sliding"), model.sliding_window
    if room <= 0 or per_layer <= 0:
        return 0 if room <= 0 else model.max_context
    short = room / ((full + sliding) * per_layer)  # every attention layer still growing
    if not sliding or short <= window:
        return int(min(short, model.max_context))
    if not full:
        return model.max_context
    return int(min((room - sliding * window * per_layer) / (full * per_layer), model.max_context))
