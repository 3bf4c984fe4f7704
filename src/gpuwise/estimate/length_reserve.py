"""What the caching allocator reserves over a run whose batches vary in length.

Without packing each batch is padded to its own longest sample, so the step's length-proportional
tensors change size from one step to the next. The pool keeps every segment it cut (nothing goes
back to the driver until a cudaMalloc fails), and a longer batch's tensors do not fit in the blocks
a shorter one left: the reserve grows beyond the longest step's own peak by how the lengths came.
`step_reserve` replays one pass over the batches (gpuwise.estimate.dataset_lengths.batch_lengths)
through gpuwise.estimate.caching_pool with each step's tensors as gpuwise's memory model lists them:
- forward, the layers' saved activations (SavedActivations.kept less the head; one block standing
  for the layers' tensors, which are a few per cent of the loss's and the same from step to step
  in their proportions), then the head's input;
- the full loss of the HF Trainer (transformers 4.36, the one ms-swift 1.x ran) for a model whose
  forward returns bf16 logits (Qwen-1's remote code): the logits (2 B a logit), the shifted
  contiguous copy for CrossEntropyLoss (2), its fp32 upcast (4) and log-softmax (4); the upcast and
  shifted copy freed, accelerate's convert_outputs_to_fp32 copy of the logits (4) held until
  compute_loss returns; backward: nll's and log-softmax's fp32 gradients (4 + 4), the bf16 gradient
  of the cast (2), the full-length bf16 gradient of the shift (2) into the head;
- backward, the recomputed layer (SavedActivations.recompute) beside the saved tensors, then both
  freed.
Sizes scale with the batch's tokens (flash attention: every term is linear in the length).
The longest step alone gives the peak of allocated; what the pool holds beyond it is the slack.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpuwise.estimate.caching_pool import CachingPool


@dataclass(frozen=True)
class StepShape:
    """Bytes a token of a micro-batch puts in each of the step's length-proportional tensors."""

    layers: int
    layer_kept: float  # one layer's saved activations, a token
    head: float  # the head's input (final norm output), a token
    recompute: float  # the recomputed layer in backward, a token
    vocab: int  # logits a token (this rank's vocabulary)
    micro_batch: int


@dataclass(frozen=True)
class RunReserve:
    peak_reserved: int  # torch.cuda.max_memory_reserved over the run, of these tensors
    peak_allocated: int  # torch.cuda.max_memory_allocated, the same
    batches: int
    longest: int  # the longest batch's length

    @property
    def slack(self) -> int:
        return self.peak_reserved - self.peak_allocated


def _step(pool: CachingPool, s: int, shape: StepShape) -> None:
    b, v = shape.micro_batch, shape.vocab
    tokens, shifted_tokens = s * b, (s - 1) * b
    saved = pool.malloc(int(shape.layer_kept * shape.layers * tokens))  # the layers' saved tensors, as one
    head = pool.malloc(int(shape.head * tokens))
    logits = pool.malloc(2 * tokens * v)
    shifted = pool.malloc(2 * shifted_tokens * v)  # logits[..., :-1, :].contiguous()
    upcast = pool.malloc(4 * shifted_tokens * v)  # CrossEntropyLoss under autocast: fp32
    logprobs = pool.malloc(4 * shifted_tokens * v)  # log_softmax, saved for backward
    pool.free(upcast)
    pool.free(shifted)
    outputs = pool.malloc(4 * tokens * v)  # accelerate convert_outputs_to_fp32
    pool.free(logits)
    pool.free(outputs)  # compute_loss returns; backward starts
    nll_grad = pool.malloc(4 * shifted_tokens * v)
    lsm_grad = pool.malloc(4 * shifted_tokens * v)
    pool.free(nll_grad)
    pool.free(logprobs)
    cast_grad = pool.malloc(2 * shifted_tokens * v)
    pool.free(lsm_grad)
    head_grad = pool.malloc(2 * tokens * v)  # the shift's backward: zeros of the full length
    pool.free(cast_grad)
    pool.free(head_grad)
    pool.free(head)
    again = pool.malloc(int(shape.recompute * tokens))  # the recomputed layer, as the backward of each runs
    pool.free(again)
    pool.free(saved)


@functools.lru_cache(maxsize=256)
def step_reserve(lengths: tuple[int, ...], shape: StepShape) -> RunReserve:
    """Replay the batches in order; the peaks of these tensors alone (the run's persistent tensors,
    weights and optimizer states, sit in segments of their own and do not change them)."""
    pool = CachingPool()
    for s in lengths:
        _step(pool, s, shape)
    return RunReserve(peak_reserved=pool.peak_reserved, peak_allocated=pool.peak_allocated,
                      batches=len(lengths), longest=max(lengths, default=0))


def shape_of(*, layers: int, kept: float, head: float, recompute: float, tokens: int, vocab: int,
             micro_batch: int) -> StepShape:
    """A StepShape from gpuwise's activation totals at `tokens` tokens a micro-batch."""
    per = 1.0 / tokens
    return StepShape(layers=max(1, layers), layer_kept=(kept - head) * per / max(1, layers), head=head * per,
                     recompute=recompute * per, vocab=vocab, micro_batch=micro_batch)
