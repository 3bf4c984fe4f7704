"""The optimizer step's transient: torch.optim.AdamW's foreach intermediate, and DeepSpeed ZeRO-3's
sub-group step, measured on CPU under PyTorch's MemTracker and compared with gpuwise.

DeepSpeed ZeRO-3 (deepspeed/runtime/zero/stage3.py@v0.14.5, the same at v0.16.5) keeps each rank's
gradient partitions in one flat buffer of the model dtype and steps one sub-group at a time:
_prepare_fp32_grad_for_sub_group makes flatten(averaged_gradients).to(fp32), _optimizer_step sets the
wrapped optimizer's params to [the sub-group's flat fp32 partition] and steps it, then the bf16
partition is copied back and the fp32 gradients are dropped. The replay below runs those same calls on
CPU tensors (one sub-group, bf16 gradients, torch AdamW as the HF Trainer's adamw_torch makes it).
"""

from __future__ import annotations

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.catalog.frameworks import find_framework
from gpuwise.catalog.params import count_params
from gpuwise.catalog.presets import find_preset
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.workload import Deployment, Workload

torch = pytest.importorskip("torch")

TINY = ModelArch(name="tiny-llama", model_type="llama", hidden_size=256, num_layers=4, num_heads=8,
                 num_kv_heads=2, head_dim=32, intermediate_size=688, vocab_size=4096, max_context=4096)
CARD = resolve_card("A100-80GB-SXM").card
TOLERANCE = 0.05


def _items(model: ModelArch, framework: str, gpus: int, zero: int, loss: str = "fused") -> dict[str, float]:
    w = Workload(task="full", framework=framework, loss=loss, optimizer="adamw", grad_ckpt="full", seq_len=1024,
                 micro_batch=1)
    return {i.key: i.bytes for i in train_memory(model, w, Deployment(card=CARD, gpus=gpus, zero=zero)).breakdown.items}


def _zero3_step_extra(numel: int, foreach: bool) -> float:
    """Bytes DeepSpeed ZeRO-3's step of one sub-group of `numel` elements allocates beyond the states,
    the fp32 master and the bf16 gradient buffer it starts with (a steady-state step: states exist)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    grad_buffer = torch.randn(numel, dtype=torch.bfloat16)  # grad_partitions_flat_buffer (model dtype)
    averaged = list(grad_buffer.split(numel // 8))  # the sub-group's per-parameter views into it
    master = torch.zeros(numel, dtype=torch.float32)  # fp32_partitioned_groups_flat[i]
    bf16_partition = torch.zeros(numel, dtype=torch.bfloat16)
    opt = torch.optim.AdamW([master], lr=1e-4, foreach=foreach)
    master.grad = torch.zeros_like(master)
    opt.step()  # the states exist from here on
    master.grad = None
    tracker = MemTracker()
    tracker.track_external(master, grad_buffer, bf16_partition, opt)
    with tracker as mt:
        start = mt.get_tracker_snapshot("current")[torch.device("cpu")]["Total"]
        master.grad = torch.cat([g.contiguous().view(-1) for g in averaged]).to(master.dtype)  # flatten().to()
        opt.step()  # _optimizer_step: param_groups[...]['params'] = [fp32 partition]
        bf16_partition.data.copy_(master.data)  # _reassign_or_swap_out_partitioned_parameters
        master.grad = None  # _release_sub_group
    return float(mt.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] - start)


def test_a_zero3_sub_group_step_holds_its_fp32_gradients_and_the_foreach_intermediate() -> None:
    numel = 1 << 20
    assert _zero3_step_extra(numel, foreach=True) == pytest.approx(8.0 * numel, rel=TOLERANCE)  # 4 + 4 bytes
    # the single-tensor loop (foreach=False) holds two intermediates of its one tensor at once,
    # exp_avg_sq.sqrt() and its quotient by the bias correction (adamw.py _single_tensor_adamw)
    assert _zero3_step_extra(numel, foreach=False) == pytest.approx(12.0 * numel, rel=TOLERANCE)


def test_gpuwise_charges_the_measured_sub_group_transient_under_zero3() -> None:
    total = count_params(TINY).total
    items = _items(TINY, "ms-swift-3", gpus=2, zero=3)
    share = total / 2  # the rank's partition: smaller than one 1e9-element sub-group
    states = 12.0 * share  # fp32 master + m + v
    measured = _zero3_step_extra(int(share) // 8 * 8, foreach=True)
    assert items["optimizer"] - states == pytest.approx(measured, rel=TOLERANCE)
    assert items["gradients"] == pytest.approx(2.0 * share)  # bf16 gradient partitions


def test_the_zero3_step_transient_is_one_sub_group_not_the_whole_partition() -> None:
    preset = find_preset("qwen2.5-32b")
    assert preset is not None
    model = preset.arch()
    share = count_params(model).total / 8
    items = _items(model, "ms-swift-3", gpus=8, zero=3)
    assert share > 4e9
    assert items["optimizer"] - 12.0 * share == pytest.approx(1e9 * 8.0)  # 1e9 elements x (4 + 4) bytes


def test_ms_swift_3_steps_adamw_on_its_foreach_path_and_ms_swift_4_on_the_fused_kernel() -> None:
    assert find_framework("ms-swift-3").optimizer_foreach and not find_framework("ms-swift").optimizer_foreach
    total = count_params(TINY).total
    pure_bf16 = 2 * 2.0 * total  # m and v in the weights' dtype
    assert _items(TINY, "ms-swift-3", 1, 0)["optimizer"] == pytest.approx(pure_bf16 + 2.0 * total)
    assert _items(TINY, "ms-swift", 1, 0)["optimizer"] == pytest.approx(pure_bf16)


def test_an_ambiguous_zero3_keeps_the_generic_rule() -> None:
    """hf's --zero 3 may be accelerate's FSDP as well as DeepSpeed: no DeepSpeed sub-group rule there."""
    total = count_params(TINY).total
    items = _items(TINY, "hf", gpus=2, zero=3)
    assert not find_framework("hf").zero_deepspeed
    assert items["gradients"] == pytest.approx(4.0 * total / 2)
