"""PyTorch's CUDA caching allocator over a run of mallocs and frees: what it reserves.

`allocator.held_bytes` lays out tensors that are never freed (weights). A training run frees and
allocates again every step, and when the step's sizes change (batches of varying length) the pool
keeps segments cut for earlier sizes. This replays the rules of c10/cuda/CUDACachingAllocator.cpp
(pytorch@001074d; the same in torch 2.1): every size rounded up to 512 bytes (round_size); requests
of up to 1 MiB from the small pool, larger ones from the large pool (get_pool); the smallest free
cached block of that pool that is large enough, the lower address on a tie (BlockComparatorSize,
get_free_block); else a new segment of get_allocation_size (2 MiB for small requests, 20 MiB for
1-10 MiB, the size rounded up to 2 MiB from 10 MiB); a block is split when the rest is at least 512
bytes (small pool) or above 1 MiB (large pool) (should_split); a freed block merges with free
neighbours of its own segment only (free_block, try_merge_blocks); cached segments go back to the
driver only when a cudaMalloc fails (release_cached_blocks on the OOM path), which the caller
models by capping the reserve at the room left on the card. max_split_size and
expandable_segments are left at their defaults (off).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from gpuwise.estimate.allocator import SMALL_SIZE, _round, _segment


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    small: bool  # the pool of its segment (a small request's 2 MiB segment, or a large one)
    free: bool = False
    prev: _Block | None = None
    next: _Block | None = None

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.size, self.segment, self.offset)  # size, then address (segments in cudaMalloc order)


@dataclass
class CachingPool:
    """One device's pool: `malloc` returns a block that `free` takes back."""

    reserved: int = 0  # torch.cuda.memory_reserved
    allocated: int = 0  # torch.cuda.memory_allocated (block sizes, as the allocator counts them)
    peak_reserved: int = 0  # torch.cuda.max_memory_reserved
    peak_allocated: int = 0  # torch.cuda.max_memory_allocated
    segments: int = 0  # cudaMalloc calls
    _free: dict[bool, list[tuple[int, int, int]]] = field(default_factory=lambda: {True: [], False: []})
    _cached: dict[tuple[int, int], _Block] = field(default_factory=dict)  # free blocks by address

    def malloc(self, nbytes: int) -> _Block:
        size = _round(nbytes)
        small = size <= SMALL_SIZE  # get_pool
        pool = self._free[small]
        at = bisect.bisect_left(pool, (size, -1, -1))  # get_free_block: smallest that fits
        if at < len(pool):
            _, seg, off = pool.pop(at)
            block = self._cached.pop((seg, off))
        else:  # alloc_block: a new segment
            block = _Block(self.segments, 0, _segment(size), small)
            self.segments += 1
            self.reserved += block.size
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        rest = block.size - size
        if rest >= 512 if small else rest > SMALL_SIZE:  # should_split (kMinBlockSize, kSmallSize)
            tail = _Block(block.segment, block.offset + size, rest, small, free=True, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._cache(tail)
        block.free = False
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block

    def free(self, block: _Block) -> None:
        """free_block: back to its pool, merged with free neighbours of its own segment."""
        self.allocated -= block.size
        prev, nxt = block.prev, block.next
        if prev is not None and prev.free:
            self._uncache(prev)
            prev.size += block.size
            prev.next = nxt
            if nxt is not None:
                nxt.prev = prev
            block = prev
        if nxt is not None and nxt.free:
            self._uncache(nxt)
            block.size += nxt.size
            block.next = nxt.next
            if nxt.next is not None:
                nxt.next.prev = block
        block.free = True
        self._cache(block)

    def _cache(self, block: _Block) -> None:
        block.free = True
        bisect.insort(self._free[block.small], block.key)
        self._cached[(block.segment, block.offset)] = block

    def _uncache(self, block: _Block) -> None:
        pool = self._free[block.small]
        pool.pop(bisect.bisect_left(pool, block.key))
        del self._cached[(block.segment, block.offset)]
