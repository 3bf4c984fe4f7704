"""torchtitan's op-level SAC under torch.compile saves fewer tensors than in eager: eager SAC caches the
output of every MUST_SAVE op (torch/utils/checkpoint.py _CachingTorchDispatchMode), while the compiled
region is one AOTAutograd graph whose partitioner saves only what the backward reads. The down
projection's output (mm 3 here, mm 7 of a torchtitan Llama layer) feeds only the residual add, so under
compile it is not kept: gpuwise drops it from op_sac when compile is on (estimate/activations.py).
Runs on CPU with the aot_eager_decomp_partition backend (AOTAutograd's min-cut partitioner, no C compiler)."""

from __future__ import annotations

import gc
from collections import defaultdict
from typing import Any

import pytest

torch = pytest.importorskip("torch")
checkpoint_mod = pytest.importorskip("torch.utils.checkpoint")

TOKENS, HIDDEN, INTER = 48, 24, 160


def _context() -> Any:
    meta: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:  # torchtitan _apply_op_sac
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            meta[mode] += 1
        save = func == torch.ops.aten.mm.default and meta[mode] % 2 == 1
        policies = checkpoint_mod.CheckpointPolicy
        return policies.MUST_SAVE if save else policies.PREFER_RECOMPUTE
    return checkpoint_mod.create_selective_checkpoint_contexts(policy)


def _mlp(h: Any, w1: Any, w3: Any, w2: Any) -> Any:
    x = h * 2.0
    return h + torch.mm(torch.nn.functional.silu(torch.mm(x, w1)) * torch.mm(x, w3), w2)


def _block(h: Any, w1: Any, w3: Any, w2: Any) -> Any:
    return checkpoint_mod.checkpoint(_mlp, h, w1, w3, w2, use_reentrant=False, context_fn=_context)


def _held(shape: tuple[int, int], keep: list[Any]) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is torch.Tensor and not o.is_meta  # no FakeTensors
               and tuple(o.shape) == shape and not any(o is k for k in keep))


def _kept_after_forward(compiled: bool) -> tuple[int, int]:
    """(block-output-sized, intermediate-sized) tensors the forward left alive for backward."""
    torch.manual_seed(0)
    h = torch.randn(TOKENS, HIDDEN, requires_grad=True)
    ws = [torch.randn(HIDDEN, INTER, requires_grad=True), torch.randn(HIDDEN, INTER, requires_grad=True),
          torch.randn(INTER, HIDDEN, requires_grad=True)]
    fn = torch.compile(_block, backend="aot_eager_decomp_partition", fullgraph=True) if compiled else _block
    fn(torch.randn(TOKENS, HIDDEN, requires_grad=True), *ws).sum().backward()  # compile before counting
    for w in ws:
        w.grad = None
    before = (_held((TOKENS, HIDDEN), [h]), _held((TOKENS, INTER), []))
    out = fn(h, *ws)
    after = (_held((TOKENS, HIDDEN), [h, out]), _held((TOKENS, INTER), []))
    out.sum().backward()
    assert h.grad is not None and all(w.grad is not None for w in ws)
    return after[0] - before[0], after[1] - before[1]


def test_compiled_op_sac_does_not_keep_the_down_projection_output() -> None:
    eager = _kept_after_forward(compiled=False)
    compiled = _kept_after_forward(compiled=True)
    assert eager == (1, 1)  # eager SAC caches mm 1 (gate) and mm 3 (down), both MUST_SAVE
    assert compiled == (0, 1)  # compiled: the gate output the SiLU backward reads; not down's


def test_gpuwise_drops_the_down_output_from_op_sac_under_compile() -> None:
    from gpuwise.catalog.presets import find_preset
    from gpuwise.estimate.activations import layer_saved
    from gpuwise.estimate.workload import Workload

    preset = find_preset("llama-3.1-8b")
    assert preset is not None
    model = preset.arch()

    def op_sac(compile_: bool) -> float:
        w = Workload(task="pretrain", framework="torchtitan", grad_ckpt="op-sac", seq_len=8192, micro_batch=2,
                     compile=compile_, flash_attention=True)
        return layer_saved(model, w, 0, full_ft=True).op_sac
    assert op_sac(False) - op_sac(True) == pytest.approx(2.0 * 8192 * 2 * model.hidden_size)
