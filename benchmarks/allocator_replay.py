"""Replay of the CUDA caching allocator over a run whose batches vary in length (issue 10, ms-swift 1.x).

A model of c10/cuda/CUDACachingAllocator.cpp's large pool, enough to show the effect gpuwise's
`variable_length_batches` rule charges: best fit among the free cached blocks, a block split when
more than 1 MiB is left over, neighbours of one segment merged when both are free, a new segment
(cudaMalloc) when no cached block is large enough, and nothing ever returned to the driver (the
real allocator releases cached blocks only when a cudaMalloc fails). Sizes round up to 2 MiB.

Each step allocates and frees the loss's tensors in the order the HF Trainer of transformers 4.36
runs a Qwen-1 (remote code, bf16 logits) forward and backward under accelerate's autocast: the bf16
logits, the shifted contiguous copy, the fp32 upcast and log-softmax, accelerate's fp32 copy of the
outputs, then nll's and log-softmax's fp32 gradients and the bf16 gradients back to the head.
Lengths are drawn from a log-normal with the benchmark dataset's mean and spread (3,234 +- 2,547
tokens), samples over max_length dropped (truncation_strategy 'delete').

Run: python -m benchmarks.allocator_replay   (prints reserved and allocated peaks in bytes per logit)
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

MIB = 2**20
VOCAB = 151_936  # Qwen-1


@dataclass
class Segment:
    blocks: list[list[int]] = field(default_factory=list)  # [offset, size, free]


@dataclass
class Allocator:
    segments: list[Segment] = field(default_factory=list)
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0

    def malloc(self, size: int) -> tuple[int, int]:
        size = -(-size // (2 * MIB)) * 2 * MIB
        best: tuple[int, int] | None = None
        for s, seg in enumerate(self.segments):
            for b, (_, bsize, free) in enumerate(seg.blocks):
                if free and bsize >= size and (best is None or bsize < self.segments[best[0]].blocks[best[1]][1]):
                    best = (s, b)
        if best is None:
            self.segments.append(Segment([[0, size, 0]]))
            self.reserved += size
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            best = (len(self.segments) - 1, 0)
        else:
            blocks = self.segments[best[0]].blocks
            offset, bsize, _ = blocks[best[1]]
            if bsize - size > MIB:
                blocks[best[1]:best[1] + 1] = [[offset, size, 0], [offset + size, bsize - size, 1]]
            else:
                blocks[best[1]][2], size = 0, bsize
        self.allocated += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return best[0], self.segments[best[0]].blocks[best[1]][0]

    def free(self, handle: tuple[int, int]) -> None:
        blocks = self.segments[handle[0]].blocks
        block = next(b for b in blocks if b[0] == handle[1])
        block[2] = 1
        self.allocated -= block[1]
        i = 0
        while i < len(blocks) - 1:
            if blocks[i][2] and blocks[i + 1][2]:
                blocks[i:i + 2] = [[blocks[i][0], blocks[i][1] + blocks[i + 1][1], 1]]
            else:
                i += 1


def step(a: Allocator, s: int, v: int = VOCAB) -> None:
    """One micro-batch of length s: the loss's full-vocabulary tensors, in the order they live."""
    logits = a.malloc(2 * s * v)
    shifted = a.malloc(2 * (s - 1) * v)
    upcast = a.malloc(4 * (s - 1) * v)
    logprobs = a.malloc(4 * (s - 1) * v)
    a.free(upcast)
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
    head_grad = a.malloc(2 * s * v)
    a.free(cast_grad)
    a.free(head_grad)


def replay(max_length: int, samples: int, seed: int) -> tuple[float, float]:
    """(peak reserved, peak allocated) in bytes per logit of the longest batch."""
    rnd = random.Random(seed)
    mean, sd = 3234.0, 2547.0
    sigma = math.sqrt(math.log(1 + sd**2 / mean**2))
    mu = math.log(mean) - sigma**2 / 2
    lengths: list[int] = []
    while len(lengths) < samples:
        n = int(rnd.lognormvariate(mu, sigma))
        if 91 <= n <= max_length:
            lengths.append(n)
    return peaks(lengths)


def peaks(lengths: Sequence[int]) -> tuple[float, float]:
    """(peak reserved, peak allocated) in bytes per logit of the longest batch, the batches run in order."""
    a = Allocator()
    for s in lengths:
        step(a, s)
    top = max(lengths) * VOCAB
    return a.peak_reserved / top, a.peak_allocated / top


def main() -> None:
    print("| max_length | samples | seed | reserved B/logit | allocated B/logit |\n|---|---|---|---|---|")
    for max_length, samples in ((512, 300), (1024, 300), (2048, 300), (4096, 1000), (8192, 1000)):
        for seed in range(3):
            reserved, allocated = replay(max_length, samples, seed)
            print(f"| {max_length} | {samples} | {seed} | {reserved:.1f} | {allocated:.1f} |")


if __name__ == "__main__":
    main()
