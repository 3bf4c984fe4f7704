"""torchtitan's repeat_kv before SDPA, against PyTorch's own MemTracker on a real CPU step.

torchtitan 9dec370 (torchtitan/models/llama/model.py lines 201-202) repeats K and V to every query head
(unsqueeze, expand, reshape: the reshape of an expanded tensor is a copy) before
F.scaled_dot_product_attention, so the attention saves K and V at the query width; the un-repeated K/V
are saved by nothing (the expand and the copy keep only sizes, RoPE's complex multiply keeps only
freqs_cis, which needs no gradient). A tiny Llama-shaped block in torchtitan's own ops (RMSNorm on
x.float(), complex RoPE, repeat_kv, SDPA, SwiGLU w2(silu(w1(x)) * w3(x))), in bf16 as FSDP2's
MixedPrecisionPolicy(param_dtype=bfloat16) computes, one forward/backward under MemTracker.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_repeat_kv.py -s
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.activations import layer_saved, saved_activations
from gpuwise.estimate.workload import Workload

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

H, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER = 256, 4, 8, 2, 32, 688
SEQ, BATCH = 256, 2
TINY = ModelArch(name="tiny-titan", model_type="llama", hidden_size=H, num_layers=LAYERS, num_heads=HEADS,
                 num_kv_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=INTER, vocab_size=512,
                 max_context=4096)
TOLERANCE = 0.05
BF16 = torch.bfloat16


class RMSNorm(nn.Module):  # torchtitan/models/norms.py@9dec370 RMSNorm
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(H, dtype=BF16))

    def forward(self, x: Any) -> Any:
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).type_as(x) * self.weight


def repeat_kv(x: Any, n_rep: int) -> Any:  # torchtitan/models/llama/model.py@9dec370
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(
        bs, slen, n_kv_heads * n_rep, head_dim)


def rope(xq: Any, xk: Any, freqs_cis: Any) -> tuple[Any, Any]:  # apply_rotary_emb@9dec370
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs_cis.view(1, xq.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)


def linear(d_in: int, d_out: int) -> Any:
    return nn.Linear(d_in, d_out, bias=False, dtype=BF16)


class Block(nn.Module):  # TransformerBlock@9dec370: Attention + FeedForward
    def __init__(self, repeat: bool) -> None:
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()
        self.wq, self.wk = linear(H, HEADS * HEAD_DIM), linear(H, KV_HEADS * HEAD_DIM)
        self.wv, self.wo = linear(H, KV_HEADS * HEAD_DIM), linear(HEADS * HEAD_DIM, H)
        self.w1, self.w2, self.w3 = linear(H, INTER), linear(INTER, H), linear(H, INTER)
        self.repeat = repeat

    def attention(self, x: Any, freqs_cis: Any) -> Any:
        bs, s, _ = x.shape
        xq = self.wq(x).view(bs, s, -1, HEAD_DIM)
        xk = self.wk(x).view(bs, s, -1, HEAD_DIM)
        xv = self.wv(x).view(bs, s, -1, HEAD_DIM)
        xq, xk = rope(xq, xk, freqs_cis)
        if self.repeat:  # torchtitan 9dec370
            keys, values = repeat_kv(xk, HEADS // KV_HEADS), repeat_kv(xv, HEADS // KV_HEADS)
            out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2),
                                                 is_causal=True)
        else:  # the same block with SDPA's own GQA (torchtitan after ff0829c1, transformers)
            out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2),
                                                 is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, s, -1))

    def forward(self, x: Any, freqs_cis: Any) -> Any:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        normed = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(normed)) * self.w3(normed))


def _op_sac_context() -> Any:
    """torchtitan 9dec370's op-level SAC (torchtitan/parallelisms/parallelize_llama.py lines 214-270):
    MUST_SAVE the outputs of _save_list's ops, except every second mm of a checkpointed forward."""
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    aten = torch.ops.aten
    save_list = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
                 aten._scaled_dot_product_flash_attention.default,
                 aten._scaled_dot_product_flash_attention_for_cpu.default,  # the CPU kernel of the same op
                 torch.ops._c10d_functional.reduce_scatter_tensor.default, aten.abs.default, aten.max.default}
    meta: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == aten.mm.default:
            meta[key] += 1
        to_save = func in save_list and not (func == aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Stack(nn.Module):
    def __init__(self, repeat: bool, ckpt: str) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(repeat) for _ in range(LAYERS))
        self.ckpt = ckpt

    def forward(self, x: Any, freqs_cis: Any) -> Any:
        for layer in self.layers:
            if self.ckpt == "full":  # torchtitan's full AC: ptd_checkpoint_wrapper, non-reentrant
                x = torch.utils.checkpoint.checkpoint(layer, x, freqs_cis, use_reentrant=False)
            elif self.ckpt == "op-sac":
                x = torch.utils.checkpoint.checkpoint(layer, x, freqs_cis, use_reentrant=False,
                                                      context_fn=_op_sac_context)
            else:
                x = layer(x, freqs_cis)
        return x


def _freqs() -> Any:
    freqs = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    return torch.polar(torch.ones(SEQ, HEAD_DIM // 2), torch.outer(torch.arange(SEQ).float(), freqs))


def _step(repeat: bool, ckpt: str = "none") -> dict[str, float]:
    """Saved activations after the forward (the output excluded) and the backward's peak over them."""
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState

    torch.manual_seed(0)
    model, freqs_cis = Stack(repeat, ckpt), _freqs()
    x = torch.randn(BATCH, SEQ, H, dtype=BF16, requires_grad=True)
    model(x, freqs_cis).sum().backward()  # warm-up: gradients exist from here on
    cpu = torch.device("cpu")
    tracker = MemTracker()
    tracker.track_external(model, x, freqs_cis)
    with tracker as mt:
        out = model(x, freqs_cis)
        post_fw = mt.memory_tracking[model].snapshots[_ModState.POST_FW][-1][cpu]
        saved = post_fw["Activation"] - out.numel() * out.element_size()
        start = mt.get_tracker_snapshot("current")[cpu]["Total"]
        out.backward(torch.ones_like(out))
        peak = mt.get_tracker_snapshot("peak")[cpu]["Total"]
    return {"saved": float(saved), "backward_over_forward": float(peak - start)}


def _workload(framework: str, ckpt: str = "none") -> Workload:
    return Workload(task="pretrain", framework=framework, grad_ckpt=ckpt, seq_len=SEQ, micro_batch=BATCH,
                    flash_attention=True)


@pytest.mark.parametrize(("repeat", "framework"), [(True, "torchtitan-2024-12"), (False, "torchtitan")])
def test_every_layer_saves_what_torch_saves_with_and_without_repeat_kv(repeat: bool, framework: str) -> None:
    measured = _step(repeat)["saved"]
    modelled = sum(layer_saved(TINY, _workload(framework), i, full_ft=True).total for i in range(LAYERS))
    print(f"\nrepeat_kv={repeat}: measured {measured / 2**20:.3f} MiB, gpuwise {modelled / 2**20:.3f} MiB")
    assert modelled == pytest.approx(measured, rel=TOLERANCE)


def test_repeat_kv_widens_each_layers_saved_keys_and_values_to_the_query_width() -> None:
    """Per layer, K and V at n_heads instead of n_kv_heads, bf16: 2 x 2 x tokens x (q_dim - kv_dim), exactly."""
    extra = _step(True)["saved"] - _step(False)["saved"]
    assert extra == 2 * 2 * SEQ * BATCH * (TINY.q_dim - TINY.kv_dim) * LAYERS
    titan = saved_activations(TINY, _workload("torchtitan-2024-12"), full_ft=True, layers=LAYERS).kept
    plain = saved_activations(TINY, _workload("torchtitan"), full_ft=True, layers=LAYERS).kept
    assert titan - plain == extra


@pytest.mark.parametrize("ckpt", ["full", "op-sac"])
def test_under_checkpointing_only_the_recomputed_layer_holds_the_repeated_keys_and_values(ckpt: str) -> None:
    """Full AC keeps each layer's input, op-SAC SDPA's outputs and the odd mm outputs (wv's un-repeated V
    among them), so neither keeps the repeated K/V; the one layer recomputed in backward makes them again."""
    titan, plain = _step(True, ckpt), _step(False, ckpt)
    assert titan["saved"] == plain["saved"]
    one_layer = 2 * 2 * SEQ * BATCH * (TINY.q_dim - TINY.kv_dim)
    assert titan["backward_over_forward"] - plain["backward_over_forward"] == one_layer
    a = saved_activations(TINY, _workload("torchtitan-2024-12", ckpt), full_ft=True, layers=LAYERS)
    b = saved_activations(TINY, _workload("torchtitan", ckpt), full_ft=True, layers=LAYERS)
    assert (a.kept, a.recompute - b.recompute) == (b.kept, one_layer)


def _saved_storages(repeat: bool, compiled: bool) -> int:
    """Bytes of the distinct storages autograd saves in one block's forward (inputs and weights left out)."""
    torch.manual_seed(0)
    block, freqs_cis = Block(repeat), _freqs()
    run = torch.compile(block) if compiled else block
    x = torch.randn(BATCH, SEQ, H, dtype=BF16, requires_grad=True)
    run(x, freqs_cis).sum().backward()  # compiles forward and backward first
    storages: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run(x, freqs_cis)
    outside = {x.untyped_storage().data_ptr(), freqs_cis.untyped_storage().data_ptr()}
    outside |= {p.untyped_storage().data_ptr() for p in block.parameters()}
    return sum(n for ptr, n in storages.items() if ptr not in outside)


def test_under_torch_compile_the_partitioner_saves_the_repeated_keys_and_values_too() -> None:
    """torchtitan compiles each TransformerBlock; SDPA stays an op inductor calls, so AOTAutograd's partitioner
    saves its inputs as they are, repeated, rather than the un-repeated K/V (one block, CPU inductor)."""
    one_layer = 2 * 2 * SEQ * BATCH * (TINY.q_dim - TINY.kv_dim)
    assert _saved_storages(True, False) - _saved_storages(False, False) == one_layer
    assert _saved_storages(True, True) - _saved_storages(False, True) == one_layer
