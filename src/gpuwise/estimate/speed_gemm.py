"""The rate of a decode step's and a prompt's linear layers: which precision the matmuls run at
(FP8 / INT8 only where the card and the engine have them), the card's dense peak for it, the
weight-only Marlin kernels (their 16-row tile, their plateau, and the old prefill path that stopped
scaling at large batch), and the tiled GEMMs' slowdown for their shape: rows padded to whole tiles,
MoE experts on their own few tokens, widths cut down by tensor parallel (efficiency.toml
[overheads] gemm_* / marlin_* / decode_gemm_*). Used by speed_decode.py (the decode step) and
speed.py (the prefill); imports neither.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Precision
from gpuwise.catalog.engines import version_key
from gpuwise.catalog.params import count_params
from gpuwise.estimate.links import Rates, efficiency_table
from gpuwise.estimate.weights import checkpoint_format
from gpuwise.estimate.workload import Deployment, Workload

# Engines that pre-allocate a KV pool, batch continuously and run FP8/INT8 GEMMs natively.
POOL_ENGINES = ("vllm", "sglang", "trtllm")

__all__ = ["POOL_ENGINES", "compute_precision", "weight_only"]


def compute_precision(model: ModelArch, w: Workload, d: Deployment) -> Precision:
    """The tensor rate the matmuls run at: FP8 only where the card has it; weight-only int4/nf4
    and GGUF dequantise to 16-bit (Marlin/AWQ kernels, llama.cpp's CUDA path)."""
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    if fmt == "fp8" and d.card.dense_tflops("fp8") is not None and d.engine in POOL_ENGINES:
        return "fp8"
    if fmt == "int8" and d.card.dense_tflops("int8") is not None and d.engine in POOL_ENGINES:
        return "int8"
    if d.card.dense_tflops("bf16") is None:
        return "fp16"
    return "bf16"


def _peak_flops(d: Deployment, precision: Precision) -> float:
    return (d.card.dense_tflops(precision) or d.card.dense_tflops("fp16") or d.card.fp32_tflops or 1.0) * 1e12

def weight_only(model: ModelArch, w: Workload, d: Deployment) -> bool:
    """Do vLLM's / SGLang's decode GEMMs run a weight-only Marlin kernel (16-bit activations
    against packed weights)? GPTQ/AWQ int4 checkpoints do on the cards Marlin supports, and FP8
    checkpoints on cards without FP8 tensor cores (fp8_marlin, W8A16)."""
    if d.engine not in ("vllm", "sglang"):
        return False
    fmt = w.weights if w.weights != "auto" else checkpoint_format(model)
    return fmt == "int4" or (fmt == "fp8" and d.card.dense_tflops("fp8") is None)


def _decode_gemm_share(model: ModelArch, w: Workload, d: Deployment, r: Rates, precision: Precision) -> float:
    """The share of the precision's dense peak a decode step's GEMMs reach once compute-bound:
    the large-GEMM figure, or for weight-only Marlin its own plateau of the 16-bit peak
    (efficiency.toml [overheads] marlin_peak_share), whichever is lower."""
    share = r.gemm_at(precision)
    if weight_only(model, w, d):
        share = min(share, float(efficiency_table()["overheads"]["marlin_peak_share"]))
    return share


def _marlin_prefill(model: ModelArch, w: Workload, d: Deployment) -> bool:
    """Does the prefill run its linear layers through a weight-only Marlin kernel that plateaus at
    large batch? vLLM's Marlin methods call Marlin at every batch size (Fp8LinearMethod.apply and
    CompressedTensorsW8A16Fp8.apply_weights: 'if self.use_marlin: return apply_fp8_marlin_linear(...)',
    gptq_marlin / awq_marlin likewise), and before the 2025 rework that kernel ran 'the batch 64
    kernel repeatedly' (efficiency.toml [overheads] marlin_prefill_before: the versions it holds for).
    An unversioned request is the newest engine: no plateau."""
    before = efficiency_table()["overheads"]["marlin_prefill_before"].get(d.engine)
    if before is None or not d.engine_version or not weight_only(model, w, d):
        return False
    key, limit = version_key(d.engine_version), version_key(str(before))
    return key is not None and limit is not None and key < limit


@dataclass(frozen=True)
class _GemmShape:
    """How much slower than the large-GEMM rate a decode step's tiled GEMMs run for their shape
    (efficiency.toml [overheads] decode_gemm_*): the width part read once per (model, TP)."""

    dense: float  # FLOP-weighted slowdown of the attention and dense-MLP GEMMs (>= 1) for their width
    rows_half: float  # rows at which a GEMM reaches half its large-GEMM rate
    rows_ref: float  # the rows of the shapes behind the families' GEMM shares (no slowdown there)
    rows_min: float  # the fewest rows measured: fewer take its slowdown (their GEMMs read, not compute)

    def rows(self, m: float) -> float:
        """Slowdown of a GEMM of m (tile-padded) rows against the reference shape (>= 1)."""
        m = max(self.rows_min, m)
        slow = (m + self.rows_half) / m * self.rows_ref / (self.rows_ref + self.rows_half)
        return max(1.0, slow)


@functools.lru_cache(maxsize=512)
def _gemm_shape(model: ModelArch, tp: int) -> _GemmShape:
    """Each dense GEMM of a layer on one GPU under TP (QKV and gate/up split their outputs, O and down
    their inputs), slowed by its narrower side w as (w + W) / w x w_ref / (w_ref + W) when below the
    reference width (w no narrower than the narrowest measured, 512), averaged over the GEMMs weighted
    by their FLOPs. The routed experts' shards (DeepSeek-V3's 2,048 / TP 8 = 256 wide) lie below the
    measured widths and take the rows slowdown only."""
    t = efficiency_table()["overheads"]
    half, ref = float(t["decode_gemm_width_half"]), float(t["decode_gemm_width_ref"])

    def slow(n: float, k: float) -> float:
        w = max(min(n, k), 512.0)
        return max(1.0, (w + half) / w * ref / (ref + half))

    def mean(gemms: list[tuple[float, float]]) -> float:
        size = sum(n * k for n, k in gemms)
        return sum(n * k * slow(n, k) for n, k in gemms) / size if size else 1.0

    h = model.hidden_size
    attn = [((model.q_dim + 2 * model.kv_dim) / tp, h), (h, model.q_dim / tp)]
    up = 2 if model.gated_mlp else 1
    mlp = [(up * model.intermediate_size / tp, h), (h, model.intermediate_size / tp)]
    dense = attn + (mlp if model.moe is None or model.moe.dense_layers else [])
    if model.moe is not None and model.moe.num_shared_experts:
        ish = model.moe.shared_intermediate_size * model.moe.num_shared_experts
        dense = dense + [(up * ish / tp, h), (h, ish / tp)]
    return _GemmShape(dense=mean(dense), rows_half=float(t["decode_gemm_rows_half"]),
                      rows_ref=float(t["decode_gemm_rows_ref"]), rows_min=float(t["decode_gemm_rows_min"]))


def _gemm_compute_seconds(model: ModelArch, w: Workload, d: Deployment, batch: int, tp: int,
                          rate: float) -> float:
    """FLOP time of a decode step's linear layers at `rate` (large-GEMM FLOP/s). The pool engines
    run them as tiled GEMMs whose rows come in whole tiles (tile quantization: efficiency.toml
    [overheads] gemm_tile_rows), so m tokens cost ceil(m / tile) tiles; MoE experts each see
    batch x top-k / (experts touched) tokens, and a few tokens an expert still fill a tile (weight-only
    Marlin: its 16-row tile, efficiency.toml marlin_tile_rows). A tiled GEMM of few rows, or one whose
    narrower side TP has cut down, runs below the large-GEMM rate (_gemm_shape); Marlin's plateau
    (marlin_peak_share) is its own, flat from 64 rows up, and takes no shape slowdown.
    llama.cpp and transformers' batch-1 steps are mat-vec kernels: no tile."""
    p = count_params(model)
    table = efficiency_table()["overheads"]
    tiled = d.engine in POOL_ENGINES
    marlin = weight_only(model, w, d)
    tile = float(table["gemm_tile_rows"]) if tiled else 1.0
    if marlin:
        tile = float(table["marlin_tile_rows"])  # Marlin's own row tile
    shape = _gemm_shape(model, tp) if tiled and not marlin else None

    def padded(tokens: float) -> float:
        return math.ceil(tokens / tile - 1e-9) * tile / tokens

    dense_factor = padded(batch)
    expert = 0.0
    factor = 1.0
    if model.moe is not None:
        e, k = model.moe.num_experts, model.moe.experts_per_token
        expert = p.experts * k / e  # expert parameters one token runs
        touched = e * (1 - (1 - k / e) ** batch)
        rows = batch * k / touched  # tokens each touched expert sees
        factor = padded(rows)
        if shape is not None:
            factor *= shape.rows(rows * factor)
    if shape is not None:
        dense_factor *= shape.dense * shape.rows(batch * dense_factor)
    dense = max(p.active - expert, 0.0)
    flops = 2 * batch * (dense * dense_factor + expert * factor)
    return flops / (tp * d.pp) / rate
