"""vLLM V0's encoder-decoder start-up profile of Llama 3.2 Vision (mllama), op by op.

The profile (vllm/worker/enc_dec_model_runner.py profile_run, v0.6.6.post1 and v0.7.0) gives each of
max_num_seqs sequences one dummy image and runs every image through the vision tower at once
(vllm/model_executor/models/mllama.py MllamaVisionModel.forward, the same in both versions). The
model below follows that code path in plain torch: which tensors each Python frame still holds, the
fp32 pixel batch as MultiModalKwargs.as_kwargs moves it and its float32 copy `out_images`, the
mask built by _prepare_aspect_ratio_attention_mask, the local encoder's kept states, their
torch.stack copy, the gated global encoder, CLIPMLP with an out-of-place GELU, tensor parallel as
column-/row-parallel widths. The memory-efficient SDPA kernel CUDA picks for a masked bf16 call
writes only its output, so attention is modelled as that output. Run under FakeTensorMode at the
true shapes (no memory is used) with PyTorch's MemTracker, its peak is what
serving_rules.vision_profile_bytes must give, and for vllm#12126's run (meta-llama/Llama-3.2-11B-Vision,
128 sequences, H100) near the logged 'PyTorch activation peak memory takes 36.63GiB'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuwise.catalog.hf_config import arch_from_config
from gpuwise.estimate.serving_rules import vision_profile_bytes
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.units import GiB

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "validation" / "models" / "meta-llama--Llama-3.2-11B-Vision"
LOGGED_PEAK_GIB = 36.63  # vllm#12126: 'PyTorch activation peak memory takes 36.63GiB'
BF16 = torch.bfloat16


class _Attention(nn.Module):
    def __init__(self, c: dict[str, Any], tp: int) -> None:
        super().__init__()
        self.heads, self.dim = c["attention_heads"] // tp, c["hidden_size"] // c["attention_heads"]
        width = self.heads * self.dim
        self.qkv = nn.Linear(c["hidden_size"], 3 * width, bias=False, dtype=BF16)  # QKVParallelLinear
        self.o = nn.Linear(width, c["hidden_size"], bias=False, dtype=BF16)  # RowParallelLinear

    def forward(self, x: Any, mask: Any) -> Any:
        qkv = self.qkv(x)
        q = qkv.split(self.heads * self.dim, dim=-1)[0].view(x.shape[0], x.shape[1], self.heads, self.dim)
        # memory-efficient SDPA: q/k/v read in place (strided), one output (B, L, heads, dim); no scores
        out = torch.empty_like(q).transpose(1, 2)
        out = out.transpose(1, 2).contiguous().reshape(x.shape[0], x.shape[1], -1)  # already contiguous
        return self.o(out)  # the row-parallel all-reduce works in place


class _Mlp(nn.Module):  # vllm/model_executor/models/clip.py CLIPMLP with get_act_fn("gelu") = nn.GELU()
    def __init__(self, c: dict[str, Any], tp: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(c["hidden_size"], c["intermediate_size"] // tp, dtype=BF16)
        self.fc2 = nn.Linear(c["intermediate_size"] // tp, c["hidden_size"], dtype=BF16)
        self.act = nn.GELU()

    def forward(self, x: Any) -> Any:
        x = self.fc1(x)
        x = self.act(x)
        return self.fc2(x)


class _Layer(nn.Module):  # MllamaVisionEncoderLayer
    def __init__(self, c: dict[str, Any], tp: int, gated: bool) -> None:
        super().__init__()
        self.attn, self.mlp, self.gated = _Attention(c, tp), _Mlp(c, tp), gated
        self.ln1, self.ln2 = nn.LayerNorm(c["hidden_size"], dtype=BF16), nn.LayerNorm(c["hidden_size"], dtype=BF16)
        self.gate_attn = nn.Parameter(torch.ones(1, dtype=BF16))
        self.gate_ffn = nn.Parameter(torch.ones(1, dtype=BF16))

    def forward(self, hidden: Any, mask: Any) -> Any:
        residual = hidden
        hidden = self.ln1(hidden)
        hidden = self.attn(hidden, mask)
        hidden = residual + (self.gate_attn.tanh() if self.gated else 1) * hidden
        residual = hidden
        hidden = self.ln2(hidden)
        hidden = self.mlp(hidden)
        return residual + (self.gate_ffn.tanh() if self.gated else 1) * hidden


class _Encoder(nn.Module):  # MllamaVisionEncoder: the states before the kept layers, in a tuple
    def __init__(self, c: dict[str, Any], tp: int, layers: int, gated: bool, kept: list[int]) -> None:
        super().__init__()
        self.layers, self.kept = nn.ModuleList(_Layer(c, tp, gated) for _ in range(layers)), kept

    def forward(self, hidden: Any, mask: Any) -> tuple[Any, tuple[Any, ...]]:
        states: tuple[Any, ...] = ()
        for i, layer in enumerate(self.layers):
            if i in self.kept:
                states = states + (hidden,)
            hidden = layer(hidden, mask)
        if len(self.layers) - 1 in self.kept:
            states = states + (hidden,)
        return hidden, states


class _Tower(nn.Module):  # MllamaVisionModel
    def __init__(self, c: dict[str, Any], tp: int) -> None:
        super().__init__()
        self.c, self.tp, h, tiles = c, tp, c["hidden_size"], c["max_num_tiles"]
        self.patches = (c["image_size"] // c["patch_size"]) ** 2 + 1
        self.unfold = nn.Unfold(kernel_size=c["patch_size"], stride=c["patch_size"])
        self.patch = nn.Linear(3 * c["patch_size"] ** 2, h // tp, bias=False, dtype=BF16)  # column-parallel
        self.cls = nn.Parameter(torch.zeros(h, dtype=BF16))
        self.pos = nn.Parameter(torch.zeros(self.patches, h, dtype=BF16))
        self.tile_pos = nn.Embedding(9, tiles * self.patches * h, dtype=BF16)
        self.pre_tile, self.post_tile = nn.Embedding(9, tiles * h, dtype=BF16), nn.Embedding(9, tiles * h, dtype=BF16)
        self.ln_pre, self.ln_post = nn.LayerNorm(h, dtype=BF16), nn.LayerNorm(h, dtype=BF16)
        self.local = _Encoder(c, tp, c["num_hidden_layers"], False, c["intermediate_layers_indices"])
        self.glob = _Encoder(c, tp, c["num_global_layers"], True, [])

    def _patch_embedding(self, x: Any) -> Any:  # ColumnParallelConv2dPatch: its locals die on return
        x = self.unfold(x)
        x = x.permute(0, 2, 1)
        return self.patch(x)

    def forward(self, pixels: Any, ar_ids: Any, ar_mask: Any) -> Any:
        b, m, t, ch, height, width = pixels.shape
        h = self.c["hidden_size"]
        pixels = pixels.reshape(b * m * t, ch, height, width)
        ar_ids = ar_ids.reshape(b * m, -1)
        patch_embeds = self._patch_embedding(pixels.to(BF16))
        hidden = torch.cat([patch_embeds] * self.tp, dim=-1) if self.tp > 1 else patch_embeds  # all_gather
        _, n, dim = hidden.shape
        hidden = hidden.reshape(b * m, t, -1, dim) + self.pre_tile(ar_ids).reshape(-1, t, 1, h)
        hidden = torch.cat([self.cls.expand(b * m * t, 1, h), hidden.reshape(b * m * t, n, dim)], dim=1)
        n += 1
        hidden = hidden.reshape(b * m, t, n, dim) + self.pos.view(1, 1, n, h)
        hidden = hidden + self.tile_pos(ar_ids).reshape(b * m, t, n, h)
        hidden = self.ln_pre(hidden)
        pad = (8 - hidden.shape[-2] % 8) % 8
        hidden = F.pad(hidden, (0, 0, 0, pad))
        span = hidden.shape[2]
        mask = ar_mask.reshape(b * m, -1).view(b * m, t, 1, 1).to(BF16).repeat(1, 1, span, 1)
        mask[:, :, -pad:] = 0
        mask = (1 - mask).reshape(b * m, t * span, 1)
        mask = (mask @ mask.transpose(-1, -2) * torch.finfo(BF16).min).unsqueeze(1)
        hidden = hidden.view(b * m, -1, dim)
        output = self.local(hidden, mask)  # `output` stays referenced to the end
        hidden, kept = output[0], output[1]
        kept = torch.stack(kept, dim=-1)
        hidden = self.ln_post(hidden).reshape(b * m, t, n + pad, dim)
        hidden = hidden + self.post_tile(ar_ids).reshape(-1, t, 1, h)
        hidden = hidden.reshape(b * m, t * (n + pad), dim)
        hidden = self.glob(hidden, mask)[0]
        hidden = hidden.reshape(b * m, t, n + pad, dim)[:, :, :-pad].reshape(b, m, t, n, dim)
        kept = kept.reshape(b * m, t, n + pad, -1)[:, :, :-pad].reshape(b, m, t, n, -1)
        return torch.cat([hidden, kept], dim=-1)


def _traced_peak(c: dict[str, Any], rows: int, tp: int = 1) -> float:
    """Peak bytes above the weights of the profile's vision pass of `rows` images (FakeTensorMode:
    true shapes, no memory)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    tiles, size, cpu = c["max_num_tiles"], c["image_size"], torch.device("cpu")
    with FakeTensorMode():
        tower = _Tower(c, tp)
        tracker = MemTracker()
        tracker.track_external(tower)
        with torch.inference_mode(), tracker as mt:
            start = mt.get_tracker_snapshot("current")[cpu]["Total"]
            # MultiModalKwargs.as_kwargs: the batch of fp32 pixel values moved to the device as is
            batch = torch.zeros(rows, 1, 1, tiles, 3, size, size, dtype=torch.float32)
            # MllamaForConditionalGeneration._parse_and_validate_image_input: a float32 copy
            out_images = torch.zeros(rows, 1, tiles, 3, size, size, dtype=torch.float32)
            for i in range(rows):
                out_images[i, 0, :tiles] = batch[i][0][0]
            tower(out_images, torch.ones(rows, 1, dtype=torch.int64), torch.ones(rows, 1, tiles, dtype=torch.int64))
            peak = mt.get_tracker_snapshot("peak")[cpu]["Total"]
    return float(peak - start)


def _vision_config(path: Path) -> dict[str, Any]:
    return json.loads((path / "config.json").read_text(encoding="utf-8"))


SMALL = {  # a smaller tower of the same code: other tile count, image size, kept layers and widths
    "model_type": "mllama_vision_model", "hidden_size": 256, "intermediate_size": 1024, "attention_heads": 4,
    "image_size": 224, "patch_size": 14, "max_num_tiles": 2, "intermediate_layers_indices": [1, 4],
    "num_hidden_layers": 6, "num_global_layers": 3,
}


def _small_arch() -> Any:
    config = _vision_config(BASE)
    config["vision_config"] = dict(config["vision_config"], **SMALL)
    return arch_from_config(config, "small-mllama")


def test_the_base_models_tower_peak_is_what_vllms_code_path_holds_and_near_the_log() -> None:
    c = _vision_config(BASE)["vision_config"]
    traced = _traced_peak(c, 128)
    counted = vision_profile_bytes(arch_from_config(_vision_config(BASE), "base"), 128, 1)
    print(f"\ntraced {traced / GiB:.3f} GiB, counted {counted / GiB:.3f} GiB, logged {LOGGED_PEAK_GIB} GiB")
    assert counted == pytest.approx(traced, rel=1e-3)
    assert counted / GiB == pytest.approx(LOGGED_PEAK_GIB, rel=5e-3)


def test_another_tower_of_the_same_code_agrees_too_and_fc1_and_the_patches_split_over_tp() -> None:
    arch = _small_arch()
    for tp in (1, 2):
        assert vision_profile_bytes(arch, 16, tp) == pytest.approx(_traced_peak(SMALL, 16, tp), rel=2e-3)


def test_the_instruct_models_560_px_tiles_would_not_fit_the_same_run() -> None:
    # 1,601 tokens a tile instead of 1,025: 60.6 GiB of profile beside 19.9 GiB of weights on an
    # H100 at gpu_memory_utilization 0.90 (71.29 GiB)
    preset = json.loads((ROOT / "src" / "gpuwise" / "data" / "models" / "llama-3.2-11b-vision.json").read_text(
        encoding="utf-8"))["config"]
    assert 60.0 < vision_profile_bytes(arch_from_config(preset, "instruct"), 128, 1) / GiB < 61.0


def test_vllm_v0s_kv_pool_for_the_logged_run_is_within_three_percent() -> None:
    est = estimate_json(EstimateRequest(model=str(BASE), card="h100-sxm", context=65536,
                                        max_num_batched_tokens=65536, engine_version="0.6.6", max_num_seqs=128))
    forward = next(i for i in est["memory"]["items"] if i["name"] == "forward_activations")
    assert "global layer" in forward["why"]
    assert est["memory"]["kv_pool"] / GiB == pytest.approx(14.65, rel=0.03)  # 'reserved for KV Cache is 14.65GiB'
