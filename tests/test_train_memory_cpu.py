"""gpuwise's training formulas against PyTorch's own MemTracker, on one real CPU training step.

A tiny Llama (4 layers, hidden 256, GQA 8/2 heads, SwiGLU 688, vocab 4096) written with the same ops as
transformers' LlamaForCausalLM in eager mode (RMSNorm upcast to fp32, RoPE, SDPA with native GQA, the
ForCausalLMLoss upcast + F.cross_entropy), pure bf16 with torch AdamW (states in the parameters' dtype,
as torchtune trains). Each component the tracker reports is compared with gpuwise at the same shapes.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_cpu.py -s
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.params import count_params
from gpuwise.estimate.activations import loss_bytes, saved_activations
from gpuwise.estimate.constants import engine_constants
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.units import GiB

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

H, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 256, 4, 8, 2, 32, 688, 4096
SEQ, BATCH, RANK = 256, 2, 16
TINY = ModelArch(name="tiny-llama", model_type="llama", hidden_size=H, num_layers=LAYERS, num_heads=HEADS,
                 num_kv_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=INTER, vocab_size=VOCAB,
                 max_context=4096)
CARD = resolve_card("H100-SXM").card
TOLERANCE = 0.10


class RMSNorm(nn.Module):  # transformers LlamaRMSNorm, eager
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(H, dtype=torch.bfloat16))

    def forward(self, x: Any) -> Any:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.weight * h.to(x.dtype)


class Linear(nn.Module):
    """nn.Linear without bias, plus an optional LoRA pair (A: d_in x r, B: r x d_out, dropout 0)."""

    def __init__(self, d_in: int, d_out: int, lora: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d_out, d_in, dtype=torch.bfloat16) * 0.02)
        self.lora_a = nn.Parameter(torch.randn(RANK, d_in, dtype=torch.bfloat16) * 0.02) if lora else None
        self.lora_b = nn.Parameter(torch.zeros(d_out, RANK, dtype=torch.bfloat16)) if lora else None

    def forward(self, x: Any) -> Any:
        out = F.linear(x, self.weight)
        if self.lora_a is not None:
            out = out + F.linear(F.linear(x, self.lora_a), self.lora_b) * 2.0
        return out


def rotate_half(x: Any) -> Any:
    a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-b, a), dim=-1)


class Layer(nn.Module):
    def __init__(self, lora: bool) -> None:
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(), RMSNorm()
        self.q, self.k = Linear(H, HEADS * HEAD_DIM, lora), Linear(H, KV_HEADS * HEAD_DIM, lora)
        self.v, self.o = Linear(H, KV_HEADS * HEAD_DIM, lora), Linear(HEADS * HEAD_DIM, H, lora)
        self.gate, self.up, self.down = Linear(H, INTER, lora), Linear(H, INTER, lora), Linear(INTER, H, lora)

    def forward(self, x: Any, cos: Any, sin: Any) -> Any:
        b, s, _ = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyLlama(nn.Module):
    def __init__(self, lora: bool, ckpt_every: int) -> None:
        super().__init__()
        self.embed = nn.Parameter(torch.randn(VOCAB, H, dtype=torch.bfloat16))
        self.layers = nn.ModuleList(Layer(lora) for _ in range(LAYERS))
        self.norm = RMSNorm()
        self.head = Linear(H, VOCAB, lora=False)
        self.ckpt_every = ckpt_every

    def forward(self, ids: Any) -> Any:
        pos = torch.arange(ids.shape[1], dtype=torch.float32)
        freqs = torch.outer(pos, 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2) / HEAD_DIM)))
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)
        # a functional lookup, as transformers' enable_input_require_grads makes the frozen embedding's
        # output require grad under LoRA + checkpointing (MemTracker hooks every module output)
        x = F.embedding(ids, self.embed).requires_grad_(True)
        for i, layer in enumerate(self.layers):
            if self.ckpt_every and (i + 1) % self.ckpt_every == 0:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return self.head(self.norm(x))


def _step(lora: bool, ckpt_every: int) -> dict[str, float]:
    """One forward/backward/AdamW step under MemTracker; the bytes of each component."""
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState

    torch.manual_seed(0)
    model = TinyLlama(lora, ckpt_every)
    if lora:  # frozen tensors become buffers: MemTracker hooks a gradient on every nn.Parameter
        for module in model.modules():
            for name, p in list(module.named_parameters(recurse=False)):
                if "lora" not in name:
                    delattr(module, name)
                    module.register_buffer(name, p.detach())
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, foreach=False)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    # a first, untracked step creates AdamW's states: the tracked step is a steady-state one
    F.cross_entropy(model(ids).float().view(-1, VOCAB), labels.view(-1)).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker as mt:
        logits = model(ids)
        post_fw = mt.memory_tracking[model].snapshots[_ModState.POST_FW][-1][torch.device("cpu")]
        out_bytes = logits.numel() * logits.element_size()
        # transformers ForCausalLMLoss: upcast, then F.cross_entropy; the Trainer keeps no logits after
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), labels.view(-1))
        del logits
        loss.backward()
        grads = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Gradient"]
        opt.step()
        opt.zero_grad(set_to_none=True)
        after = mt.get_tracker_snapshot("current")[torch.device("cpu")]
    peak = mt.get_tracker_snapshot("peak")[torch.device("cpu")]
    return {"parameters": after["Parameter"] + after["Buffer"], "gradients": grads, "optimizer": after["Optstate"],
            "activations": post_fw["Activation"] - out_bytes, "peak": peak["Total"]}


def _gpuwise(lora: bool, ckpt: str) -> dict[str, float]:
    w = Workload(task="lora" if lora else "full", framework="torchtune", loss="full", optimizer="adamw",
                 grad_ckpt=ckpt, seq_len=SEQ, micro_batch=BATCH, lora_rank=RANK, flash_attention=True)
    mem = train_memory(TINY, w, Deployment(card=CARD)).breakdown
    acts = saved_activations(TINY, w, full_ft=not lora, layers=LAYERS)
    cublas = float(engine_constants()["runtime"]["cublas_workspace_gib"]) * GiB  # no cuBLAS on a CPU
    return {"parameters": mem.component("weights"), "gradients": mem.component("gradients"),
            "optimizer": mem.component("optimizer"), "activations": acts.kept,
            "peak": mem.allocated_peak - cublas}


CASES = [(False, "none", 0), (False, "full", 1), (True, "none", 0), (True, "full", 1), (True, "every-2", 2)]


def test_the_tiny_arch_counts_the_parameters_the_torch_model_has() -> None:
    assert count_params(TINY).total == sum(p.numel() for p in TinyLlama(False, 0).parameters())


@pytest.mark.parametrize(("lora", "ckpt", "every"), CASES,
                         ids=[f"{'lora' if c[0] else 'full'}-ckpt-{c[1]}" for c in CASES])
def test_each_component_is_within_ten_percent_of_pytorchs_mem_tracker(lora: bool, ckpt: str, every: int) -> None:
    measured, model = _step(lora, every), _gpuwise(lora, ckpt)
    print(f"\n{'lora' if lora else 'full'} ckpt={ckpt}")
    for key, value in measured.items():
        print(f"  {key:12s} measured {value / 2**20:8.3f} MiB  gpuwise {model[key] / 2**20:8.3f} MiB  "
              f"error {model[key] / value - 1:+.1%}")
    for key, value in measured.items():
        assert model[key] == pytest.approx(value, rel=TOLERANCE), key


def test_the_full_loss_peaks_at_twelve_bytes_per_logit_in_its_backward() -> None:
    w = Workload(task="lora", loss="full", seq_len=SEQ, micro_batch=BATCH)
    assert loss_bytes(TINY, w, 8) == 12.0 * SEQ * BATCH * VOCAB


def _step_extra(foreach: bool) -> float:
    """Bytes an AdamW step allocates beyond the parameters, gradients and states it starts with."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    params = list(TinyLlama(False, 0).parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=foreach)
    for p in params:
        p.grad = torch.randn_like(p)
    opt.step()  # the states exist from here on: the tracked step is a steady-state one
    tracker = MemTracker()
    tracker.track_external(*params, opt)
    with tracker as mt:
        start = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Total"]
        opt.step()
    return float(mt.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] - start)


def test_a_foreach_adamw_step_holds_one_more_copy_of_the_second_moments() -> None:
    w = Workload(task="full", framework="ms-swift-1", loss="full", optimizer="adamw", grad_ckpt="full",
                 seq_len=SEQ, micro_batch=BATCH)
    items = {i.key: i.bytes for i in train_memory(TINY, w, Deployment(card=CARD)).breakdown.items}
    states = 2 * 2 * count_params(TINY).total  # pure bf16 m and v
    measured = _step_extra(foreach=True)
    assert items["optimizer"] - states == pytest.approx(measured, rel=TOLERANCE)
    # the per-parameter loop holds only the temporaries of one parameter (two, the largest: the head)
    assert _step_extra(foreach=False) <= 2 * VOCAB * H * 2 * 1.01 < measured
    plain = Workload(task="full", framework="torchtune", loss="full", optimizer="adamw", seq_len=SEQ,
                     micro_batch=BATCH)
    plain_items = {i.key: i.bytes for i in train_memory(TINY, plain, Deployment(card=CARD)).breakdown.items}
    assert plain_items["optimizer"] == pytest.approx(states)
