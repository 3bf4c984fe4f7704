"""How a service runs on one MIG slice: gpuwise's own estimate on a card cut to the slice.

A slice gets `memory / memory_slices` of the card's memory (less what MIG keeps per
instance), of its memory bandwidth and L2 (a memory slice is 1/8 of the memory controllers
and L2, MIG user guide "Concepts"), and `compute / compute_slices` of its SMs, hence of its
dense FLOPs ("Fraction of SMs" column of the guide's profile tables). No NVLink: MIG
instances do not talk to each other over it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuwise.fleet.mig_data import MigGpu, MigProfile
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["ServiceSpec", "SliceFit", "fit_on_slice", "slice_card"]

_COMPUTE_FIELDS = ("fp32_tflops", "tf32_dense_tflops", "bf16_dense_tflops", "fp16_dense_tflops",
                   "fp16_fp16acc_dense_tflops", "fp8_dense_tflops", "int8_dense_tops", "fp4_dense_tflops",
                   "bf16_sparse_tflops", "fp8_sparse_tflops", "int8_sparse_tops")


@dataclass(frozen=True)
class ServiceSpec:
    """One inference service to place on a slice (a [[service]] row of the services file)."""

    name: str
    model: str
    context: int = 4096
    concurrency: int = 1
    weights: str = "auto"
    kv_dtype: str = "auto"
    engine: str = "vllm"
    task: str = "infer"
    min_tokens_per_s: float | None = None  # SLO: decode tokens/s each user sees
    max_ttft_s: float | None = None  # SLO: time to first token
    profile: str | None = None  # pin a profile instead of choosing one


@dataclass(frozen=True)
class SliceFit:
    profile: MigProfile
    usable_gib: float  # the slice's memory as CUDA sees it
    required_gib: float  # what the estimate needs on it
    fits: bool
    decode_tokens_per_s: float | None
    ttft_s: float | None
    meets_slo: bool
    why: Text

    @property
    def ok(self) -> bool:
        return self.fits and self.meets_slo

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile.name, "usable_gib": round(self.usable_gib, 2),
                "required_gib": round(self.required_gib, 2), "fits": self.fits, "meets_slo": self.meets_slo,
                "decode_tokens_per_s": _r(self.decode_tokens_per_s), "ttft_s": _r(self.ttft_s),
                "why": self.why.en, "why_zh": self.why.zh}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def slice_card(card: Any, table: MigGpu, p: MigProfile) -> Any:
    """The catalog card cut down to one MIG slice."""
    mf, cf = table.memory_fraction(p), table.compute_fraction(p)
    scaled = {f: getattr(card, f) * cf for f in _COMPUTE_FIELDS if getattr(card, f) is not None}
    usable = max(card.memory_cuda_gib * mf - table.reserve_gib, 0.0)
    return replace(card, id=f"{card.id}/mig-{p.name}", name=f"{card.name} MIG {p.name}",
                   memory_gb=card.memory_gb * mf, memory_cuda_gib=usable, mem_bw_gbps=card.mem_bw_gbps * mf,
                   interconnect="none", nvlink_gen=None, interconnect_bw_gbps=0.0, interconnect_max_gpus=1,
                   max_gpus_per_node=1, mig_profiles=(), **scaled)


def _slo(s: ServiceSpec, decode: float, ttft: float) -> tuple[bool, Text]:
    if s.min_tokens_per_s is not None and decode < s.min_tokens_per_s:
        return False, Text(f"{decode:.1f} tokens/s per user, under the {s.min_tokens_per_s:g} asked",
                           f"每用户 {decode:.1f} tokens/s，低于要求的 {s.min_tokens_per_s:g}")
    if s.max_ttft_s is not None and ttft > s.max_ttft_s:
        return False, Text(f"first token in {ttft:.2f} s, over the {s.max_ttft_s:g} s asked",
                           f"首 token {ttft:.2f} 秒，超过要求的 {s.max_ttft_s:g} 秒")
    return True, Text(f"{decode:.1f} tokens/s per user, first token in {ttft:.2f} s",
                      f"每用户 {decode:.1f} tokens/s，首 token {ttft:.2f} 秒")


def fit_on_slice(s: ServiceSpec, card: Any, table: MigGpu, p: MigProfile) -> SliceFit:
    """gpuwise's estimate of the service on the slice: memory first, then speed against the SLO."""
    from gpuwise.estimate.api import estimate
    from gpuwise.service import EstimateRequest, build

    req = EstimateRequest(model=s.model, card=card.id, context=s.context, concurrency=s.concurrency,
                          weights=s.weights, kv_dtype=s.kv_dtype, engine=s.engine)
    model, w, d, _ = build(req)
    sliced = slice_card(card, table, p)
    result = estimate(model, w, replace(d, card=sliced))
    required = result.memory.breakdown.required / GiB
    usable = sliced.memory_cuda_gib
    if not result.memory.fits:
        return SliceFit(p, usable, required, False, None, None, False,
                        Text(f"needs {required:.1f} GiB, the slice has {usable:.1f} GiB",
                             f"需要 {required:.1f} GiB，切片只有 {usable:.1f} GiB"))
    speed = result.speed
    decode = float(getattr(speed, "decode_tokens_per_s", 0.0))
    ttft = float(getattr(speed, "ttft_s", 0.0))
    meets, why = _slo(s, decode, ttft)
    return SliceFit(p, usable, required, True, decode, ttft, meets, why)
