"""torchtitan's op-level SAC policy run by PyTorch on CPU over a Float8-like linear: a tensor subclass
whose aten.mm becomes another op (torchao's Float8Tensor turns aten.mm into torch._scaled_mm). The
checkpoint's dispatch mode sees the aten.mm before the subclass does, so the policy counts and saves it
as it would a bf16 matmul: gpuwise keeps the op-SAC mm outputs under --float8 (estimate/activations.py)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

torch = pytest.importorskip("torch")
checkpoint_mod = pytest.importorskip("torch.utils.checkpoint")

_RUNS: list[str] = []  # every matmul the subclass carries out, forward and recompute


class _Scaled(torch.Tensor):
    """Stands in for Float8Tensor: mm on it runs as addmm on the plain tensors (as _scaled_mm there)."""

    elem: Any

    @staticmethod
    def __new__(cls, elem: Any) -> Any:
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)

    def __init__(self, elem: Any) -> None:
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is not torch.ops.aten.mm.default:
            raise NotImplementedError(str(func))
        a, b = args
        _RUNS.append("mm")
        return torch.ops.aten.addmm.default(torch.zeros(a.shape[0], b.shape[1]), a.elem, b.elem)


class _ScaledMatmul(torch.autograd.Function):
    """torchao's matmul_with_hp_or_float8_args in miniature: torch.mm on subclass operands forward."""

    @staticmethod
    def forward(ctx: Any, x: Any, w: Any) -> Any:
        ctx.save_for_backward(x, w)
        return torch.mm(_Scaled(x), _Scaled(w))

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


def _titan_policy(meta: dict[str, int]) -> Any:
    """torchtitan's _apply_op_sac policy: save every listed op, every second aten.mm excepted."""
    policy = checkpoint_mod.CheckpointPolicy

    def custom(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        saved = func == torch.ops.aten.mm.default and meta[key] % 2 == 1
        return policy.MUST_SAVE if saved else policy.PREFER_RECOMPUTE
    return custom


def _step(layers: int) -> list[str]:
    _RUNS.clear()
    torch.manual_seed(0)
    x = torch.randn(8, 16, requires_grad=True)
    ws = [torch.randn(16, 16, requires_grad=True) for _ in range(2 * layers)]

    def block(h: Any, w1: Any, w2: Any) -> Any:
        return _ScaledMatmul.apply(torch.relu(_ScaledMatmul.apply(h, w1)), w2)

    h = x
    for i in range(layers):
        meta: dict[str, int] = defaultdict(int)
        h = checkpoint_mod.checkpoint(
            block, h, ws[2 * i], ws[2 * i + 1], use_reentrant=False,
            context_fn=lambda meta=meta: checkpoint_mod.create_selective_checkpoint_contexts(_titan_policy(meta)))
    forward = list(_RUNS)
    h.sum().backward()
    assert x.grad is not None and all(w.grad is not None for w in ws)
    return forward + ["|"] + _RUNS[len(forward):]


def test_op_sac_saves_the_odd_matmuls_of_a_subclass_linear_as_it_does_bf16_ones() -> None:
    runs = _step(layers=3)
    cut = runs.index("|")
    assert len(runs[:cut]) == 6  # two matmuls a layer forward
    # recompute: the first (saved) matmul of each layer comes from the cache; only the second runs again
    assert len(runs[cut + 1:]) == 3
