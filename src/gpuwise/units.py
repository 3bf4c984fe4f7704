"""Byte and rate units. Everything inside gpuwise is bytes, FLOPs and seconds.

GB is 10**9 (vendors' datasheets and bandwidths); GiB is 2**30 (what CUDA, vLLM and
PyTorch report). They differ by 7.4%: name the one you mean.
"""

from __future__ import annotations

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TERA = 10**12


def gib(n_bytes: float) -> float:
    return n_bytes / GiB


def gb(n_bytes: float) -> float:
    return n_bytes / GB
