"""The memory side of a training step's GEMMs: each linear runs three GEMMs (forward Y = XW, input
gradient dX = dY W^T, weight gradient dW = X^T dY; two without weight gradients for a frozen base),
and each one reads its two operands and writes its output, so it takes at least those bytes at the
achievable bandwidth, however fast its FLOPs run. The torchao float8 team's training roofline charges
each of the three GEMMs max(FLOPs / achievable peak, bytes / achievable bandwidth) with bf16 operands
(2 bytes) or FP8 ones (1 byte read, the bf16 output 2 bytes written): pytorch/ao
torchao/testing/training/roofline_utils.py@104f01a8 get_individual_gemm_time_sympy / get_gemm_time_sympy
(M, K, N; M, N, K; K, M, N). With the tokens of a micro-batch as M (tens of thousands) a GEMM is
memory-bound only where both K and N are narrow enough: KN / (K + N) below the card's FLOP-per-byte
ridge, i.e. the K and V projections of a grouped-query model split by tensor parallel (Llama 3 8B at
TP 8: 4096 x 128 per rank, about 124 FLOP a byte against a bf16 ridge of ~270 on a 2.4 TB/s H100).
Used by speed_train.py as a slowdown of the linear FLOP rate (>= 1); the compute-side shape effect
stays in speed_train.gemm_efficiency. Also here: the share of the linear FLOPs whose shapes gain nothing
from Float8 tensorwise GEMMs (fp8_no_gain_share).
"""

from __future__ import annotations

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.links import efficiency_table

__all__ = ["fp8_no_gain_share", "linear_shards", "roofline_slowdown"]


def linear_shards(model: ModelArch, framework: str, tp: int, mlp_width: float) -> list[tuple[float, float, float]]:
    """(K, N, how many) of each linear one GPU multiplies by per step of the model: the attention
    projections and the dense MLP of every layer, split by TP (column-parallel N, row-parallel K), and
    the output projection (vocabulary split by TP), always the last entry. Frameworks in
    [training_gemm_shape] fused_qkv run q, k and v as one GEMM; the others as three. mlp_width: the dense
    MLP's width (0 for MoE layers, whose experts run on their own routed tokens)."""
    h, q, kv = float(model.hidden_size), float(model.q_dim), float(model.kv_dim)
    layers = float(model.num_layers)
    shards: list[tuple[float, float, float]]
    if framework in efficiency_table()["training_gemm_shape"]["fused_qkv"]:
        shards = [(h, (q + 2 * kv) / tp, layers)]
    else:
        shards = [(h, q / tp, layers), (h, kv / tp, 2 * layers)]
    shards.append((q / tp, h, layers))
    if mlp_width:
        shards += [(h, mlp_width / tp, 2 * layers), (mlp_width / tp, h, layers)]
    shards.append((h, model.vocab_size / tp, 1.0))
    return shards


def _gemm_bytes(m: float, k: float, n: float, fp8: bool) -> float:
    """(m x k) @ (k x n): operands read, output written; FP8 operands 1 byte, the bf16 output 2."""
    return (m * k + k * n) * (1.0 if fp8 else 2.0) + m * n * 2.0


def roofline_slowdown(shards: list[tuple[float, float, float]], tokens: float, flop_rate: float,
                      mem_bw: float, fp8: bool, weight_grads: bool = True) -> float:
    """Time of every linear's GEMMs with the memory floor over their time at flop_rate alone (>= 1)."""
    compute = floor = 0.0
    for k, n, count in shards:
        gemms = [(tokens, k, n), (tokens, n, k)] + ([(k, tokens, n)] if weight_grads else [])
        for m, inner, out in gemms:
            flops = 2.0 * m * inner * out / flop_rate
            compute += count * flops
            floor += count * max(flops, _gemm_bytes(m, inner, out, fp8) / mem_bw)
    return floor / compute if compute else 1.0


def fp8_no_gain_share(shards: list[tuple[float, float, float]]) -> float:
    """Share of the linear FLOPs (K x N x how many: the same tokens multiply every one) that run at the bf16
    rate under Float8: GEMMs whose shape is inside [training_gemm_shape] float8_tensorwise_no_gain (torchao's
    H100 measurements put Float8 tensorwise fwd + bwd at no faster than bf16 there), and the output projection
    (linear_shards' last entry), which the Float8 converters leave in bf16: torchtitan's
    'module_filter_fn=lambda mod, fqn: fqn != "output"' (pytorch/torchtitan torchtitan/float8.py@9dec370
    line 99) and, from its converter rework on, filter_fqns = ["output"] in every llama3 train config
    (torchtitan/models/llama3/train_configs/llama3_8b.toml, llama3_70b.toml, llama3_405b.toml @820504e
    [float8]); torchao's own example filters the last linear ('# don't convert the last module',
    torchao/float8/README.md@6243040), as gpuwise's torchtitan export does (export/_fw_files.py)."""
    region = efficiency_table()["training_gemm_shape"]["float8_tensorwise_no_gain"]
    *body, (ko, no, co) = shards
    total = sum(k * n * c for k, n, c in shards)
    small = ko * no * co + sum(k * n * c for k, n, c in body if k <= region["in_max"] and n <= region["out_max"])
    return small / total if total else 0.0
