"""Load the engine/runtime constants (data/engines.toml) once."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from gpuwise.tomlcache import load_toml
from gpuwise.units import GiB

_PATH = Path(__file__).resolve().parent.parent / "data" / "engines.toml"


@functools.cache
def engine_constants() -> dict[str, Any]:
    return load_toml(_PATH)


def runtime_overhead_bytes(gpus_talking: bool) -> float:
    """CUDA context + cuBLAS workspace, plus NCCL buffers when GPUs communicate."""
    rt = engine_constants()["runtime"]
    total = rt["cuda_context_gib"] + rt["cublas_workspace_gib"]
    if gpus_talking:
        total += rt["nccl_buffers_gib"]
    return float(total) * GiB


# Bytes per cached KV element by --kv-dtype. llama.cpp block types: q8_0 is 34 bytes per 32
# values, q4_0 18 bytes per 32 (ggml-common.h block_q8_0 / block_q4_0).
KV_BYTES: dict[str, float] = {
    "bf16": 2.0, "fp16": 2.0, "f16": 2.0, "fp32": 4.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0,
    "int8": 1.0, "q8_0": 34 / 32, "q4_0": 18 / 32,
}
