"""Achievable fractions and link speeds: data/efficiency.toml, or a verify calibration."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog.cards import Card
from gpuwise.errors import InputError
from gpuwise.i18n import Text
from gpuwise.tomlcache import load_toml
from gpuwise.units import GB

_PATH = Path(__file__).resolve().parent.parent / "data" / "efficiency.toml"


@functools.cache
def efficiency_table() -> dict[str, Any]:
    return load_toml(_PATH)


@dataclass(frozen=True)
class Rates:
    """What one GPU of a card really delivers: bytes/s, FLOP/s by precision, link bus bandwidth."""

    mem_bw: float  # achievable device-memory bytes/s
    gemm: float  # fraction of dense peak for large GEMMs
    prefill: float  # fraction of dense peak for a serving prefill
    mfu: float  # training model-FLOPs utilisation (the old one-constant model; kept for reference)
    link_busbw: float  # NCCL ring bus bandwidth between GPUs of a node (all-gather, reduce-scatter), bytes/s
    link_latency: float  # seconds per small collective
    pcie_h2d: float  # host <-> device bytes/s
    train_gemm: float = 0.0  # fraction of dense peak a training step's large matmuls sustain (0: use gemm)
    allreduce_busbw: float = 0.0  # NCCL all-reduce bus bandwidth (NVLS where the node has it; 0: ring)
    gemm_fp8: float = 0.0  # fraction of the dense FP8 peak a serving FP8 GEMM sustains (0: gemm x fp8_gemm_ratio)
    prefill_llamacpp: float = 0.0  # fraction of dense peak llama.cpp's prefill reaches (0: prefill)
    decode_llamacpp: float = 1.0  # share of the GGUF-type decode bandwidth llama.cpp's mat-vec reaches here
    calibrated: bool = False

    def gemm_at(self, precision: str) -> float:
        """GEMM efficiency at a precision: FP8 has its own (efficiency.toml gemm_fp8)."""
        if precision != "fp8":
            return self.gemm
        return self.gemm_fp8 or self.gemm * float(efficiency_table()["default"]["fp8_gemm_ratio"])

    @property
    def allreduce(self) -> float:
        """All-reduce bus bandwidth: NVLink SHARP where the node has it, the ring figure otherwise."""
        return self.allreduce_busbw or self.link_busbw


def _pcie_rate(card: Card) -> float:
    links = efficiency_table()["links"]
    one_way = links["pcie_x16_gbps"].get(str(card.pcie_gen or 4), 31.5) * (card.pcie_lanes or 16) / 16
    return float(one_way * links["pcie_busbw_fraction"] * GB)


def _link(card: Card, gpus: int) -> tuple[float, float]:
    """Bus bandwidth and latency of the GPU-GPU path inside a node of `gpus` cards. A ring is as
    fast as its slowest hop: an NVLink bridge joins one pair (interconnect_max_gpus = 2), so on
    4 bridged cards the pairs talk over PCIe."""
    links = efficiency_table()["links"]
    if card.interconnect in ("nvlink", "nvlink-bridge", "infinity-fabric", "hccs") and card.interconnect_bw_gbps \
            and gpus <= card.interconnect_max_gpus:
        # datasheets quote total bidirectional bandwidth per GPU: one direction is half
        return card.interconnect_bw_gbps / 2 * links["nvlink_busbw_fraction"] * GB, links["nvlink_latency_s"]
    pcie = _pcie_rate(card)
    if card.pcie_p2p is False:
        return _host_bounce(card, gpus)
    return pcie, links["pcie_latency_s"]


def _host_bounce(card: Card, gpus: int) -> tuple[float, float]:
    """Bus bandwidth and latency of NCCL's SHM transport (no peer-to-peer): the smaller of the
    link with both directions busy and the host memory every byte is written into and read out of
    by each of the `gpus` ranks (efficiency.toml [links] no_p2p_*)."""
    links = efficiency_table()["links"]
    one_way = links["pcie_x16_gbps"].get(str(card.pcie_gen or 4), 31.5) * (card.pcie_lanes or 16) / 16
    link = one_way * float(links["no_p2p_busbw_fraction"]) * GB
    host = efficiency_table()["host_memory"]
    memory = host_memory_bandwidth(card) if gpus <= int(links["no_p2p_desktop_max_gpus"]) else \
        float(host["presets_gbps"][links["no_p2p_multi_gpu_host"]]) * float(host["achievable_fraction"]) * GB
    n = max(2, gpus)
    latency = float(links["no_p2p_latency_s"]) + float(links["no_p2p_latency_per_gpu_s"]) * n
    return min(link, memory / (float(links["no_p2p_host_crossings"]) * n)), latency


def link_path(card: Card, gpus: int) -> str:
    """How the GPUs of a node of `gpus` reach each other, in the words of _link/_nvls_busbw:
    none (one GPU) | nvls (NVSwitch, NVLink SHARP all-reduce) | nvlink | nvlink-bridge-pairs-over-pcie |
    pcie-p2p | pcie-host-bounce (no peer-to-peer: NCCL stages through host memory)."""
    if gpus <= 1:
        return "none"
    if card.interconnect in ("nvlink", "nvlink-bridge", "infinity-fabric", "hccs") and card.interconnect_bw_gbps:
        if gpus <= card.interconnect_max_gpus:
            ring = _link(card, gpus)[0]
            return "nvls" if _nvls_busbw(card, gpus, ring) > ring else card.interconnect
        if card.interconnect == "nvlink-bridge":
            return "nvlink-bridge-pairs-over-pcie"  # a bridge joins 2 (or 4) cards; the ring's slowest hop is PCIe
    return "pcie-host-bounce" if card.pcie_p2p is False else "pcie-p2p"


def _nvls_busbw(card: Card, gpus: int, ring: float) -> float:
    """NVLink SHARP (NVLS) all-reduce on an NVSwitch node of 3+ GPUs of a family that has it
    (Hopper NVSwitch gen 3): the switch reduces, so the busbw passes the ring figure. 0 when absent.
    NCCL sets NVLS up only past 2 GPUs (src/transport/nvls.cc ncclNvlsInit returns early for
    gpuCount <= 2; vllm#9699, youkaichao 2024-10-25: 'it seems NVLS is only enabled for n > 2 GPUs,
    in H100 and above platforms'), so 2 GPUs run the ring."""
    nvls = efficiency_table()["links"]["nvls"]
    if card.family not in nvls["families"] or card.interconnect != "nvlink" or not card.interconnect_bw_gbps \
            or not 3 <= gpus <= card.interconnect_max_gpus or card.interconnect_max_gpus < 4:
        return 0.0
    return max(ring, card.interconnect_bw_gbps / 2 * float(nvls["allreduce_busbw_fraction"]) * GB)


def card_rates(card: Card, calibration: Any = None, gpus: int = 1) -> Rates:
    """Achievable rates for `card` in a node of `gpus`; a verify calibration replaces the
    assumed fractions."""
    table = efficiency_table()
    fam = table.get(card.family, table["default"])
    busbw, latency = _link(card, gpus)
    rates = Rates(mem_bw=card.mem_bw_gbps * GB * fam["bw"], gemm=fam["gemm"], prefill=fam["prefill"],
                  mfu=fam["mfu"], link_busbw=busbw, link_latency=latency, pcie_h2d=_pcie_rate(card),
                  train_gemm=float(fam.get("train_gemm", fam["gemm"])),
                  allreduce_busbw=_nvls_busbw(card, gpus, busbw), gemm_fp8=float(fam.get("gemm_fp8", 0.0)),
                  prefill_llamacpp=float(fam.get("llamacpp_prefill", 0.0)),
                  decode_llamacpp=float(fam.get("llamacpp_decode", 1.0)))
    return rates if calibration is None else apply_calibration(rates, card, calibration)


def _rate(name: str, value: Any) -> float | None:
    """A calibration rate, or None when it has none; a value that is not a finite positive
    number is refused (load_calibration also checks it against the datasheet)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise InputError(Text(f"Calibration {name} is {value!r}: a measured rate must be a finite positive number.",
                              f"校准值 {name} 为 {value!r}：实测速率必须是有限的正数。"))
    return float(value)


def apply_calibration(rates: Rates, card: Card, cal: Any) -> Rates:
    """Measured bandwidth, matmul rate and link speed from `gpuwise verify --save` win."""
    def measured(name: str) -> float | None:
        return _rate(name, getattr(cal, name, None))

    peak = (card.dense_tflops("bf16") or 0) * 1e12
    bf16 = _rate("matmul_flops_per_s[bf16]", (getattr(cal, "matmul_flops_per_s", None) or {}).get("bf16"))
    scale = bf16 / peak / rates.gemm if bf16 and peak else 1.0
    # verify measures an all-reduce: it replaces the all-reduce figure, and the ring figure moves with it
    allreduce = measured("allreduce_busbw_bytes_per_s")
    link_scale = allreduce / rates.allreduce if allreduce else 1.0
    return Rates(
        mem_bw=measured("mem_bw_bytes_per_s") or rates.mem_bw,
        gemm=rates.gemm * scale, prefill=rates.prefill * scale, mfu=rates.mfu * scale,
        link_busbw=rates.link_busbw * link_scale,
        link_latency=rates.link_latency,
        pcie_h2d=measured("pcie_h2d_bytes_per_s") or rates.pcie_h2d,
        train_gemm=rates.train_gemm * scale,
        allreduce_busbw=rates.allreduce_busbw * link_scale if rates.allreduce_busbw else 0.0,
        gemm_fp8=rates.gemm_fp8 * scale, prefill_llamacpp=rates.prefill_llamacpp * scale, calibrated=True)


def host_memory_bandwidth(card: Card) -> float:
    """Achievable CPU memory bytes/s of the host a card usually sits in (efficiency.toml [host_memory])."""
    host = efficiency_table()["host_memory"]
    preset = host["by_form_factor"].get(card.form_factor, host["default_preset"])
    return float(host["presets_gbps"][preset]) * float(host["achievable_fraction"]) * GB


def allreduce_seconds(n_bytes: float, n: int, busbw: float, latency: float) -> float:
    """Ring all-reduce: each GPU moves 2(n-1)/n x bytes at bus bandwidth (nccl-tests PERFORMANCE.md)."""
    if n <= 1:
        return 0.0
    return latency + 2 * (n - 1) / n * n_bytes / busbw


def sized_allreduce_seconds(n_bytes: float, n: int, busbw: float, latency: float,
                            half_rate_bytes: float | None = None) -> float:
    """All-reduce of a message of `n_bytes` a GPU, with the bus bandwidth NCCL reaches at that size:
    below efficiency.toml [links] allreduce_half_rate_bytes its LL/LL128 protocols move data at
    about half the large-message rate, so the rate is busbw x (S + ref) / (S + 2 ref). Serving's
    per-layer all-reduces (batch x hidden x 2 bytes: 16 KB to 64 MB) sit on that slope; training's
    gradient buckets sit on the plateau (speed_train.py keeps `allreduce_seconds`). NVLink SHARP has
    a slope of its own (`half_rate_bytes`: nvls_allreduce_shape)."""
    if n <= 1:
        return 0.0
    ref = float(efficiency_table()["links"]["allreduce_half_rate_bytes"]) if half_rate_bytes is None \
        else half_rate_bytes
    return latency + 2 * (n - 1) / n * n_bytes / busbw * (1 + ref / (n_bytes + ref))


def nvls_allreduce_shape() -> tuple[float, float]:
    """(latency in seconds, half-rate message bytes) of NCCL's NVLink SHARP all-reduce inside an
    NVSwitch node (efficiency.toml [links.nvls]): it reaches its large-message bus bandwidth only at
    hundreds of MB, later than the ring protocols do."""
    nvls = efficiency_table()["links"]["nvls"]
    return float(nvls["latency_s"]), float(nvls["allreduce_half_rate_bytes"])


def allgather_seconds(n_bytes: float, n: int, busbw: float, latency: float) -> float:
    """All-gather (or reduce-scatter) of `n_bytes` in all: (n-1)/n x bytes at bus bandwidth
    (nccl-tests PERFORMANCE.md); half an all-reduce, and never NVLS-accelerated."""
    if n <= 1:
        return 0.0
    return latency + (n - 1) / n * n_bytes / busbw
