"""What a training step's caching allocator keeps reserved beyond the loss's allocated tensors.

Mechanisms of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) met by the
frameworks' loss and gradient sequences: segments of an earlier, shorter batch that stay cached when
batch lengths vary, and blocks that only their own stream may reuse (FSDP's reduce-scatter). Used by
memory_train; each function cites the code and the replay or measurement behind it.
"""

from __future__ import annotations

from gpuwise.catalog.arch import ModelArch
from gpuwise.estimate.workload import Workload


def in_place_loss(model: ModelArch, w: Workload, fp32_logits: bool) -> float:
    """A loss kernel that saves the logits it is handed and writes their gradient into them (Unsloth
    2023.12 Fast_CrossEntropyLoss: unslothai/unsloth unsloth/kernels/cross_entropy_loss.py@28c7550,
    ctx.save_for_backward(logits, logsumexp, labels); the backward kernel's tl.store(logits_ptr, dloss *
    probs) and 'return logits'): the logits (bf16: 2 bytes) and nothing full-vocabulary beside them.
    Handed fp32 logits (LLaMA-Factory 0.4's lm_head forward hook 'return output.to(torch.float32)',
    hiyouga/LLaMA-Factory src/llmtuner/model/patcher.py@ebb32e85f lines 210-216), the head's bf16 output
    lives beside its fp32 copy in forward, and backward casts the fp32 gradient to bf16 for the head's
    matmul: 4 + 2 = 6 bytes. Plus the hidden states' bf16 gradient (2 sbh) the head's backward makes.
    tests/test_train_memory_in_place_loss.py measures the fp32 case under MemTracker at LLaMA-2-7B's head."""
    tokens = w.seq_len * w.micro_batch
    return (6.0 if fp32_logits else 2.0) * tokens * model.vocab_size + 2.0 * tokens * model.hidden_size


def earlier_in_place_segments(model: ModelArch, w: Workload, fp32_logits: bool, tp: int) -> float:
    """The in-place loss's counterpart of earlier_loss_segments: an earlier, slightly shorter batch
    leaves its logits' blocks cached (bf16 2 and, handed fp32, fp32 4 bytes a logit); this batch's bf16
    tensors fit in the earlier fp32 block and its fp32 logits take a new segment, so 2 + 4 - 2 = 4 bytes
    a logit stay cached beside the allocated peak (bf16 only: the earlier 2, too small for this batch's).
    benchmarks/allocator_replay.py's Allocator over that sequence, lengths 1,000 then 1,024: 9.9 bytes
    reserved for 6.0 allocated. A lower bound, as there."""
    return (4.0 if fp32_logits else 2.0) * w.seq_len * w.micro_batch * model.vocab_size / tp


def stream_pool(rs_stream: float, phases: tuple[float, ...], allocated: float, deferred: bool, carried: bool) -> float:
    """Reserved beyond the allocated peak by FSDP's reduce-scatter stream. The caching allocator gives a freed
    block back only to the stream it was allocated on (c10/cuda/CUDACachingAllocator.cpp: 'Allocations are
    associated with a stream. Once freed, blocks can be re-allocated on the same stream, but not on any other
    stream'), and FSDP allocates the reduce-scatter outputs, of which the sharded gradients are views, on that
    stream (FSDP2 foreach_reduce: reduce_output allocated inside `with device_handle.stream(
    reduce_scatter_stream)`, new_sharded_grad = torch.as_strided(reduce_output, ...): torch/distributed/fsdp/
    _fully_shard/_fsdp_collectives.py v2.13 lines 611-612 and 704, and in 2024 the comment 'the GPU sharded
    gradient is allocated in the RS stream'; FSDP1: _post_backward_hook runs _reduce_grad under `with
    state._device_handle.stream(state._post_backward_stream)`, new_sharded_grad = torch.empty_like(chunks[0]),
    _runtime_utils.py lines 755 and 901). Once zero_grad frees them their blocks stay cached for that stream
    while the default stream runs the next forward and the loss, and under pipeline parallelism every
    micro-batch's backward too, the reduce-scatter waiting for the last one. Gradient accumulation without a
    pipeline keeps the sharded gradients alive then: nothing beyond. A lower bound: versions that also made the
    reduce-scatter input on that stream (2024's foreach_reduce) cached a unit's unsharded gradient there too."""
    if not rs_stream or carried and not deferred:
        return 0.0
    default_peak = max(phases[:2]) if deferred else phases[0]
    return max(0.0, default_peak + rs_stream - allocated)


def earlier_loss_segments(model: ModelArch, w: Workload, loss: float, tp: int) -> float:
    """What the pool still caches of an earlier, slightly shorter batch when batch lengths vary
    (no packing, each batch padded to its own longest sample). The caching allocator never merges
    blocks of different cudaMalloc segments, and returns cached ones to the driver only when an
    allocation would fail (c10/cuda/CUDACachingAllocator.cpp: release_cached_blocks on the OOM path;
    PyTorch's CUDA notes advise expandable_segments for allocation sizes that change, e.g. 'a
    changing batch size'). At the longest batch the loss's fp32 tensors (its peak) are each larger
    than every cached block and take new segments, while its bf16 ones fit in the earlier fp32
    blocks. So besides this batch's peak the pool keeps at least the earlier batch's loss peak and
    its two bf16 logits tensors (the model's output and the shifted contiguous copy for the loss):
    a lower bound, reached when one earlier batch was almost as long. benchmarks/allocator_replay.py
    replays the allocator over the loss's tensors: with the shifted copy (a batch of several samples) one
    fixed length reserves 16 B per logit for 12 allocated (the usual slack) and lengths 2,000 then 2,048
    reserve 27.6 (this bound: 12 + 12 + 4). At batch 1 the shift is a view, not a copy ([1, s-1, V] is
    contiguous), and they reserve 14.0 and 25.7: the bound is then 2 B a logit over the two-length case,
    and still far under the ms-swift 1.x benchmark's rows (34-39 B a logit beyond the loss up to 2048),
    which the replay's drawn lengths overshoot about twice (see there: the cause is not found)."""
    return loss + 4.0 * w.seq_len * w.micro_batch * model.vocab_size / tp
