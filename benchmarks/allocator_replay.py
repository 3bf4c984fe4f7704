"""Replay of the CUDA caching allocator over a run whose batches vary in length (issue 10, ms-swift 1.x).

A model of c10/cuda/CUDACachingAllocator.cpp (torch 2.1, default settings), enough to show the effect
gpuwise's `variable_length_batches` rule charges: requests rounded up to 512 bytes (round_size,
kMinBlockSize), best fit among the free cached blocks of their pool (get_free_block: small pool up to
1 MiB, large pool above), a block split when the rest is at least 512 bytes (small) or above 1 MiB
(large) (should_split), neighbours of one segment merged when both are free (try_merge_blocks), a new
segment (cudaMalloc) when no cached block is large enough, sized 2 MiB (small), 20 MiB (up to 10 MiB)
or the request rounded up to 2 MiB (get_allocation_size), and nothing ever returned to the driver
(the real allocator releases cached blocks only when a cudaMalloc fails; neither ms-swift 1.x nor
transformers 4.36's Trainer calls torch.cuda.empty_cache while training).

Each step allocates and frees the loss's full-vocabulary tensors in the order the HF Trainer of
transformers 4.36 runs them under accelerate's bf16 autocast and convert_outputs_to_fp32, at batch 1, where
the shift `[..., :-1, :].contiguous()` is a view, not a copy (`step`'s docstring):
- Qwen-1 (remote code modeling_qwen.py, bf16 lm_logits, its own shift): the bf16 logits, autocast's fp32
  upcast for log_softmax and its fp32 output, accelerate's fp32 copy of the outputs' logits, then nll's and
  log_softmax's fp32 gradients, the bf16 cast and the bf16 slice_backward zeros back to the head (`step`);
- Llama (transformers 4.36 LlamaForCausalLM, `logits = logits.float()` before its shift; accelerate
  leaves fp32 outputs as they are): the bf16 logits, the fp32 logits and the log-probs, then the two fp32
  gradients, slice_backward's fp32 zeros and the bf16 cast (`llama_step`).
Lengths are drawn from a log-normal with the benchmark dataset's mean and spread (3,234 +- 2,547 qwen
tokens, min 91, max 19,548, docs/source_en/LLM/Benchmark.md), samples over max_length dropped
(truncation_strategy 'delete', swift/llm/utils/template.py@97e4d198b _encode), batch 1.

Two runs of the same benchmark check it (`python -m benchmarks.allocator_replay`, per logit at max_length
beyond gpuwise's bf16 weights line, so activations included):
- Dec 2023 (docs/source/LLM/Benchmark.md@cfcb6726, run_single.py@cfcb6726: train_dataset_sample=1000,
  truncation_strategy='truncation_left', so samples over max_length are cut to it, input_ids[-max_length:]):
  the LoRA Max Length table, in MiB (`TRUNCATED_MIB`). Up to 2048, where most samples are cut to the cap,
  Qwen 1.8B, 7B and 14B reserve 13.9-15.0, 15.6-16.2 and 17.4-19.5 B a logit: the replay's loss alone, 14.0
  at one length (12.0 allocated; 16.0 before the batch-1 shift was made a view), plus their checkpointed
  activations. At 4096 and 8192 (22 % and 5 % of samples cut to the cap) they reserve 23-25 and 28-29, at
  the replay's 42nd and 20th percentile (medians 27 and 35).
- Jan 2024 (Benchmark.md@97e4d198 onwards, the rows in validation/points: run_single.py@97e4d198 drops the
  truncation, so 'delete', and trains on all 4,959 rows up to 2048). The three Qwen models, which meet the
  same lengths in the same order, reserve about the same bytes a logit (within 3 to 5), as the replay says,
  and at 512 and 1,024 as much as its medians (55th and 42nd percentile). But at 2048, 4096 and 8192 the
  measured 46, 36 and 29 sit at the 5th, 10th and 0th percentile of 40 draws (medians 82, 66 and 59), and
  no closer with gamma or triangular length distributions of that mean and spread, nor with log-normals of
  a smaller mean (800 or 1,500 tokens: medians 55 to 75 at 1,024 and 2,048 over 1,500 samples).

Why the replay cannot come down on these rows: every step keeps three fp32 full-vocabulary tensors alive at
once (the log-probs log_softmax saves, nll_loss's gradient and log_softmax's), so a batch longer than every
earlier one finds no cached block that large and takes three new segments, and the caching allocator never
gives the older ones back (c10/cuda/CUDACachingAllocator.cpp, pytorch@001074d as stored, the same rule in
torch 2.1: segments are freed only by release_cached_blocks, on the out-of-memory path or by empty_cache).
The pool then grows by about 12 B a logit of each record (a batch longer than all before it): `record_sum`,
the records' lengths summed over the longest, is about ln(n) for n lengths in random order, medians 4.6 to
7.3 for the 40 to 1,850 samples the Jan 2024 runs keep, 1.0 to 2.8 for the Dec 2023 runs, whose cut samples
put the longest length early. The Jan 2024 rows at 2048 to 8192 would need about 1.3 to 2.7. Nothing in
ms-swift 1.x (swift/ at 97e4d198: no empty_cache, no PYTORCH_CUDA_ALLOC_CONF, no reset_peak_memory_stats),
transformers 4.36.2's Trainer (free_memory once, before the loop; RandomSampler, group_by_length off) or
accelerate 0.25 frees cached segments while training, and no eval or generate runs (dataset_test_ratio 0
gives evaluation_strategy NO, swift/llm/sft.py@97e4d198b). The kept lengths look shorter than the log-normal
says (Qwen-14B's 4.36 and 2.60 samples/s at 1,024 and 2,048 would be 3,300-3,500 tokens/s, over 90 % of the
A100's bf16 peak at 6 x 14.2e9 FLOPs a token), but shorter lengths do not lower the record sum. So the
cause is not found. gpuwise charges the two-length lower bound, not the draws, and takes no dataset length
statistics: fed a log-normal of them, this model would be about twice the Jan 2024 rows at 2048 and up.

Full fine-tuning (`--full`, `full_ft_peaks`: the weights, each parameter's gradient, AdamW's states and
foreach sqrt around the same loss): Qwen-1.8B's Jan 2024 rows, 18.16, 18.62, 35.11 and 31.62 GiB at
max_length 512 to 4096, replay at medians of 17.5, 19.7, 31.3 and 52.6 over 6 draws: the loss hides in the
optimizer's freed blocks at 512 and 1,024, the jump at 2048 (gpuwise charges 22.05) comes out of the loss's
own fragmentation, and at 4096 the replay overshoots as on the LoRA rows.

Run: python -m benchmarks.allocator_replay [--full]   (peaks in bytes per logit; --full: GiB)
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MIB = 2**20
VOCAB = 151_936  # Qwen-1
MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 * MIB  # kSmallSize
SMALL_BUFFER = 2 * MIB  # kSmallBuffer
LARGE_BUFFER = 20 * MIB  # kLargeBuffer
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge
DATASET_ROWS = 4_959  # cls-fudan-news-zh rows the benchmark trains on up to max_length 2048
SUBSET_ROWS = 1_000  # run_single.py's train_dataset_sample at 4096 and 8192


@dataclass(eq=False)
class Block:
    offset: int
    size: int
    small: bool
    free: bool = True
    prev: Block | None = None
    next: Block | None = None


@dataclass
class Allocator:
    free_blocks: dict[bool, list[tuple[int, int, int]]] = field(default_factory=lambda: {True: [], False: []})
    blocks: dict[int, Block] = field(default_factory=dict)  # by id, for the free lists
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0

    def _insert(self, b: Block) -> None:
        self.blocks[id(b)] = b
        bisect.insort(self.free_blocks[b.small], (b.size, b.offset, id(b)))

    def _remove(self, b: Block) -> None:
        pool = self.free_blocks[b.small]
        del pool[bisect.bisect_left(pool, (b.size, b.offset, id(b)))]

    def malloc(self, size: int) -> Block:
        size = max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)  # round_size
        small = size <= SMALL_SIZE
        pool = self.free_blocks[small]
        at = bisect.bisect_left(pool, (size, -1, -1))  # smallest free block that fits (get_free_block)
        if at < len(pool):
            block = self.blocks.pop(pool[at][2])
            del pool[at]
        else:  # alloc_block: a new segment of get_allocation_size
            seg = -(-size // ROUND_LARGE) * ROUND_LARGE
            if size < MIN_LARGE_ALLOC:
                seg = SMALL_BUFFER if small else LARGE_BUFFER
            block = Block(offset=self.reserved, size=seg, small=small)  # distinct offsets per segment
            self.reserved += seg
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        rest = block.size - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:  # should_split
            tail = Block(offset=block.offset + size, size=rest, small=small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._insert(tail)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, block: Block) -> None:
        block.free = True
        self.allocated -= block.size
        for other in (block.prev, block.next):  # try_merge_blocks, within the segment only
            if other is not None and other.free:
                self._remove(other)
                self.blocks.pop(id(other))
                if other is block.prev:
                    other.size += block.size
                    other.next = block.next
                    if block.next is not None:
                        block.next.prev = other
                    block = other
                else:
                    block.size += other.size
                    block.next = other.next
                    if other.next is not None:
                        other.next.prev = block
        self._insert(block)


Step = Callable[[Allocator, int, int], None]


def step(a: Allocator, s: int, v: int = VOCAB, shift_copy: bool = False) -> None:
    """One Qwen-1 micro-batch of length s: the loss's full-vocabulary tensors, in the order they live. At batch 1
    the shift `lm_logits[..., :-1, :].contiguous()` copies nothing: dropping the last row of a [1, s, V] tensor
    leaves it contiguous (c10/core/Contiguity.h _compute_contiguous skips size-1 dimensions) and contiguous()
    returns self when it already is (aten/src/ATen/native/TensorProperties.cpp); torch 2.13 on CPU keeps the
    data_ptr. The slice's backward still makes full-size zeros. `shift_copy`: the bf16 copy a batch of more
    than one sample makes (its [b, s-1, V] slice is not contiguous)."""
    logits = a.malloc(2 * s * v)
    shifted = a.malloc(2 * (s - 1) * v) if shift_copy else None
    upcast = a.malloc(4 * (s - 1) * v)  # autocast's fp32 copy of the shifted tensor for cross_entropy
    logprobs = a.malloc(4 * (s - 1) * v)
    a.free(upcast)
    if shifted is not None:
        a.free(shifted)
    outputs = a.malloc(4 * s * v)  # accelerate convert_outputs_to_fp32
    a.free(logits)
    a.free(outputs)  # compute_loss returns; backward starts
    nll_grad = a.malloc(4 * (s - 1) * v)
    lsm_grad = a.malloc(4 * (s - 1) * v)
    a.free(nll_grad)
    a.free(logprobs)
    cast_grad = a.malloc(2 * (s - 1) * v)
    a.free(lsm_grad)
    head_grad = a.malloc(2 * s * v)  # slice_backward's zeros
    a.free(cast_grad)
    a.free(head_grad)


def llama_step(a: Allocator, s: int, v: int) -> None:
    """One transformers 4.36 LlamaForCausalLM micro-batch of length s (logits.float() before the shift, which at
    batch 1 is a view, as in `step`)."""
    logits = a.malloc(2 * s * v)
    upcast = a.malloc(4 * s * v)
    a.free(logits)
    logprobs = a.malloc(4 * (s - 1) * v)
    a.free(upcast)  # the fp32 outputs, dropped when compute_loss returns
    nll_grad = a.malloc(4 * (s - 1) * v)
    lsm_grad = a.malloc(4 * (s - 1) * v)
    a.free(nll_grad)
    a.free(logprobs)
    zeros = a.malloc(4 * s * v)  # slice_backward
    a.free(lsm_grad)
    cast_grad = a.malloc(2 * s * v)
    a.free(zeros)
    a.free(cast_grad)


def with_layers(loss_step: Step, hidden: int, inter: int, layers: int) -> Step:
    """`loss_step` inside a whole micro-batch under full (reentrant) checkpointing: each layer's bf16
    input kept through the forward, the layer's own temporaries, the loss, then per layer backward
    its recompute (the tensors autograd saves), the gradients through it, and its input freed."""

    def one(a: Allocator, s: int, v: int) -> None:
        x = 2 * s * hidden
        kept = [a.malloc(x)]  # the embedding output
        for _ in range(layers):
            temps = [a.malloc(x), a.malloc(3 * x), a.malloc(x), a.malloc(s * inter * 2), a.malloc(s * inter * 2)]
            kept.append(a.malloc(x))
            for t in temps:
                a.free(t)
        loss_step(a, s, v)
        grad = a.malloc(x)
        for layer in reversed(range(layers)):
            saved = [a.malloc(x) for _ in range(5)] + [a.malloc(3 * x)] + [a.malloc(s * inter * 2) for _ in range(3)]
            a.free(kept.pop())  # the layer's output, replaced by its gradient
            g_mlp = a.malloc(s * inter * 2)
            g_in = a.malloc(x)
            a.free(g_mlp)
            for t in saved:
                a.free(t)
            a.free(grad)
            grad = g_in
        a.free(grad)
        a.free(kept.pop())

    return one


def full_ft_peaks(lengths: Sequence[int], params: Sequence[int], accum: int = 16,
                  one_step: Step = step, v: int = VOCAB) -> tuple[int, int]:
    """(peak reserved, peak allocated) in bytes of full fine-tuning in pure bf16 under the HF Trainer
    with gradient accumulation: the weights first, then per micro-batch the loss and each parameter's
    gradient in backward order (the first micro-batch after a step keeps it as .grad; later ones
    allocate it and AccumulateGrad adds it in), and every `accum` micro-batches AdamW's two states
    (created at the first step), foreach AdamW's sqrt of the second moments (one tensor a parameter,
    torch/optim/adamw.py v2.1.1 _multi_tensor_adamw) and zero_grad(set_to_none=True)."""
    a = Allocator()
    for p in params:
        a.malloc(2 * p)
    grads: list[Block] = []
    states = False
    for i, s in enumerate(lengths):
        one_step(a, s, v)
        for p in reversed(params):
            g = a.malloc(2 * p)
            if i % accum:
                a.free(g)
            else:
                grads.append(g)
        if (i + 1) % accum == 0:
            if not states:
                for p in (*params, *params):
                    a.malloc(2 * p)
                states = True
            for t in [a.malloc(2 * p) for p in params]:
                a.free(t)
            while grads:
                a.free(grads.pop())
    return a.peak_reserved, a.peak_allocated


def qwen_params(hidden: int, inter: int, layers: int, vocab: int = VOCAB) -> list[int]:
    """Qwen-1's parameters in creation order (wte; per block c_attn weight and bias, c_proj, w1, w2,
    mlp c_proj, two norms; ln_f; lm_head), in elements."""
    block = [3 * hidden * hidden, 3 * hidden, hidden * hidden, hidden * inter, hidden * inter, inter * hidden,
             hidden, hidden]
    return [vocab * hidden, *block * layers, hidden, vocab * hidden]


def _draw(rnd: random.Random, mean: float = 3234.4, sd: float = 2547.5, low: int = 91, high: int = 19_548) -> int:
    sigma = math.sqrt(math.log(1 + sd**2 / mean**2))
    mu = math.log(mean) - sigma**2 / 2
    while True:
        n = int(rnd.lognormvariate(mu, sigma))
        if low <= n <= high:
            return n


def replay(max_length: int, samples: int, seed: int) -> tuple[float, float]:
    """(peak reserved, peak allocated) in bytes per logit of the longest batch, `samples` kept ones."""
    rnd = random.Random(seed)
    lengths: list[int] = []
    while len(lengths) < samples:
        n = _draw(rnd)
        if n <= max_length:
            lengths.append(n)
    return peaks(lengths)


def benchmark_lengths(max_length: int, seed: int) -> list[int]:
    """The lengths one Benchmark.md run trains on: run_single.py@97e4d198b keeps every row up to
    max_length 2048 (train_dataset_sample = -1) and takes 1,000 rows above, the over-long ones dropped.
    Those 1,000 are the dataset's first rows, shuffled (swift/llm/sft.py@97e4d198b: 'train_idxs =
    random_state.permutation(train_dataset_sample)', a permutation of 0..999), drawn here from the whole
    dataset's statistics, which they need not follow."""
    rnd = random.Random(seed)
    rows = DATASET_ROWS if max_length <= 2048 else SUBSET_ROWS
    return [n for n in (_draw(rnd) for _ in range(rows)) if n <= max_length]


def peaks(lengths: Sequence[int], one_step: Step = step, v: int = VOCAB) -> tuple[float, float]:
    """(peak reserved, peak allocated) in bytes per logit of the longest batch, the batches run in order."""
    a = Allocator()
    for s in lengths:
        one_step(a, s, v)
    top = max(lengths) * v
    return a.peak_reserved / top, a.peak_allocated / top


def truncated_lengths(max_length: int, seed: int) -> list[int]:
    """The lengths one Dec 2023 run trained on (run_single.py@cfcb6726: train_dataset_sample=1000,
    truncation_strategy='truncation_left'): the first 1,000 rows shuffled, each cut to max_length."""
    rnd = random.Random(seed)
    return [min(_draw(rnd), max_length) for _ in range(SUBSET_ROWS)]


def record_sum(lengths: Sequence[int]) -> float:
    """The lengths of the batches longer than every earlier one, summed, over the longest: each such batch
    takes new segments for the loss's three fp32 tensors, about 12 B a logit of its own length."""
    top = total = 0
    for s in lengths:
        if s > top:
            total, top = total + s, s
    return total / top


# Benchmark.md@46922151 LoRA table, GPU Memory (GiB) by max_length: Qwen 1.8B, 7B, 14B chat.
MEASURED_GIB = {512: (6.99, 18.01, 30.14), 1024: (10.71, 21.73, 34.43), 2048: (16.35, 27.74, 40.14),
                4096: (23.80, 35.31, 47.95), 8192: (37.03, 48.41, 60.74)}
QWEN_MODELS = ("Qwen--Qwen-1_8B-Chat", "Qwen--Qwen-7B-Chat", "Qwen--Qwen-14B-Chat")
# Benchmark.md@cfcb6726 (Dec 2023, truncation_left) LoRA table, GPU Memory (MiB): Qwen 1.8B, 7B, 14B chat.
TRUNCATED_MIB = {512: (4610, 15926, 28466), 1024: (5576, 17096, 29708), 2048: (7624, 19362, 32186),
                 4096: (17324, 29264, 42098), 8192: (36620, 48560, 61412)}


def _weights() -> list[float]:
    """gpuwise's bf16 weights line of the three Qwen models, bytes."""
    from benchmarks.validation.table import ROOT
    from gpuwise.service import EstimateRequest, estimate_json

    out = []
    for name in QWEN_MODELS:
        est = estimate_json(EstimateRequest(model=str(ROOT / "validation/models" / name), card="a100-80gb-sxm",
                                            task="lora", framework="ms-swift-1", seq_len=512, micro_batch=1))
        out.append(next(i["bytes"] for i in est["memory"]["items"] if i["name"] == "weights"))
    return out


def measured_per_logit(table: dict[int, tuple[float, ...]] | None = None, unit: float = 2**30
                       ) -> dict[int, tuple[float, ...]]:
    """Reserved beyond the bf16 weights (gpuwise's weights line), bytes per logit at max_length; `table`
    in `unit` bytes (default the Jan 2024 rows in GiB)."""
    weights = _weights()
    rows = MEASURED_GIB if table is None else table
    return {cap: tuple((g * unit - w) / (cap * VOCAB) for g, w in zip(row, weights, strict=True))
            for cap, row in rows.items()}


def main() -> None:
    print("| max_length | samples | seed | reserved B/logit | allocated B/logit |\n|---|---|---|---|---|")
    for max_length, samples in ((512, 300), (1024, 300), (2048, 300), (4096, 1000), (8192, 1000)):
        for seed in range(3):
            reserved, allocated = replay(max_length, samples, seed)
            print(f"| {max_length} | {samples} | {seed} | {reserved:.1f} | {allocated:.1f} |")
    for title, table, unit, lengths in (("Dec 2023, truncation_left", TRUNCATED_MIB, 2**20, truncated_lengths),
                                        ("Jan 2024, delete", MEASURED_GIB, 2**30, benchmark_lengths)):
        print(f"\n{title}\n| max_length | measured B/logit (1.8B, 7B, 14B) | replay p10 / p50 / p90 | draws at or "
              "below | record sum p50 |\n|---|---|---|---|---|")
        for cap, measured in measured_per_logit(table, unit).items():
            runs = [lengths(cap, seed) for seed in range(40)]
            draws = sorted(peaks(run)[0] * max(run) / cap for run in runs)  # per logit at max_length, as measured
            low = sum(d <= statistics.mean(measured) for d in draws) / len(draws)
            shown = ", ".join(f"{m:.1f}" for m in measured)
            spread = f"{draws[4]:.0f} / {statistics.median(draws):.0f} / {draws[35]:.0f}"
            records = statistics.median(record_sum(run) for run in runs)
            print(f"| {cap} | {shown} | {spread} | {low:.0%} | {records:.1f} |")


def main_full(seeds: int = 6) -> None:
    """Qwen-1.8B full fine-tuning (Benchmark.md Full table: 18.16, 18.62, 35.11, 31.62 GiB at 512-4096)."""
    measured = {512: 18.16, 1024: 18.62, 2048: 35.11, 4096: 31.62}
    params = qwen_params(2048, 5504, 24)
    print("| max_length | measured GiB | replay p10 / p50 / p90 GiB |\n|---|---|---|")
    for cap, gib in measured.items():
        draws = sorted(full_ft_peaks(benchmark_lengths(cap, seed), params)[0] / 2**30 for seed in range(seeds))
        print(f"| {cap} | {gib} | {draws[len(draws) // 10]:.1f} / {statistics.median(draws):.1f} / "
              f"{draws[9 * len(draws) // 10]:.1f} |")


if __name__ == "__main__":
    import sys

    if "--full" in sys.argv:
        main_full()
    else:
        main()
