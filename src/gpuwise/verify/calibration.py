"""Measured numbers from a saved verify run, for the estimates to use instead of datasheets.

`load_calibration(path, card)` reads a raw JSON written by `gpuwise verify --save` and keeps,
per precision and link, the slowest GPU's measurement (a job runs at the pace of its
slowest GPU). Units: bytes/s and FLOP/s; memory bandwidth counts read + write.

A file that could mislead is refused (InputError): one measured on another card (GPU name,
then PCI device id, against the card catalog), and any reading that is not a finite positive
number or lies outside the plausible band of the datasheet (acceptance.toml [calibration]).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gpuwise.errors import DataError, InputError
from gpuwise.i18n import Text
from gpuwise.units import GB, TERA
from gpuwise.verify.nvml import is_na
from gpuwise.verify.raw import Evidence, GpuSnapshot, load_evidence

if TYPE_CHECKING:
    from gpuwise.catalog.cards import Card

__all__ = ["Calibration", "calibration_from_evidence", "check_readings", "load_calibration",
           "match_card"]


@dataclass(frozen=True)
class Calibration:
    card_id: str | None
    n_gpus: int
    mem_bw_bytes_per_s: float | None            # device copy, read + write counted
    matmul_flops_per_s: MappingProxyType[str, float] = field(
        default_factory=lambda: MappingProxyType({}))  # "bf16" / "fp16" / "fp8"
    pcie_h2d_bytes_per_s: float | None = None
    allreduce_busbw_bytes_per_s: float | None = None  # at the largest message measured
    source: str = ""  # the file path
    card_name: str | None = None  # the catalog card's display name
    pci_device_id: str | None = None  # "10de:2330"; None: the file predates device ids
    collected_at: str = ""  # ISO 8601, when verify ran
    device_id_checked: bool = False  # the PCI device id was compared with the catalog's

    @property
    def date(self) -> str:
        """The day of the run (collected_at is ISO 8601), or what the file says."""
        return self.collected_at[:10] if re.match(r"\d{4}-\d\d-\d\d", self.collected_at) \
            else self.collected_at or "date unknown"

    @property
    def note(self) -> Text:
        """What the estimate output says about where its speeds came from."""
        text = Text(f"Speeds calibrated from {self.source} ({self.card_name or self.card_id}, {self.date}).",
                    f"速度按 {self.source} 的实测值校准（{self.card_name or self.card_id}，{self.date}）。")
        if self.device_id_checked:
            return text
        return text + Text(" The PCI device id was not checked (the file or the card catalog lacks it): "
                           "the card was matched on its name only.",
                           "未核对 PCI 设备 ID（文件或显卡目录中缺少）：仅按显卡名称匹配。")

    def to_dict(self) -> dict[str, Any]:
        """The estimate JSON's `calibration` object: where the measurements came from."""
        return {"file": self.source, "card": self.card_id, "pci_device_id": self.pci_device_id,
                "collected_at": self.collected_at, "device_id_checked": self.device_id_checked}


def _min(values: list[Any]) -> float | None:
    good = [float(v) for v in values if not is_na(v)]
    return min(good) if good else None


def _allreduce_point(ev: Evidence) -> Any:
    """The all-reduce point a calibration uses: the largest message (closest to the peak)."""
    if is_na(ev.allreduce) or not ev.allreduce.points:
        return None
    return max(ev.allreduce.points, key=lambda p: p.size_bytes)


def calibration_from_evidence(ev: Evidence, source: str = "") -> Calibration:
    """The slowest GPU's readings, unchecked: `load_calibration` checks them against a card."""
    from gpuwise.verify.judge import find_card

    benches = [] if is_na(ev.bench) else list(ev.bench)
    flops: dict[str, list[float]] = {}
    for b in benches:
        for run in b.matmul:
            flops.setdefault(run.precision, []).append(run.flops_per_s)
    point = _allreduce_point(ev)
    card = find_card(ev.gpus[0].name) if ev.gpus else None
    pci = ev.gpus[0].pci_device_id if ev.gpus else None
    return Calibration(
        card_id=getattr(card, "id", None), n_gpus=len(ev.gpus),
        mem_bw_bytes_per_s=_min([b.mem_bw_bytes_per_s for b in benches]),
        matmul_flops_per_s=MappingProxyType({p: min(v) for p, v in sorted(flops.items())}),
        pcie_h2d_bytes_per_s=_min([b.h2d_bytes_per_s for b in benches]),
        allreduce_busbw_bytes_per_s=None if point is None else point.busbw_bytes_per_s,
        source=source, card_name=getattr(card, "name", None),
        pci_device_id=None if pci is None or is_na(pci) else str(pci).lower(),
        collected_at=str(ev.collected_at))


def _has_measurements(ev: Evidence) -> bool:
    benches = [] if is_na(ev.bench) else list(ev.bench)
    return any(not is_na(b.mem_bw_bytes_per_s) or b.matmul for b in benches)


def load_calibration(path: str | Path, card: Card | None = None) -> Calibration:
    """Calibration from a `gpuwise verify --save` file, for `card` (None: the card the file's
    GPUs name). DataError when it has no measurements; InputError when it was measured on
    another card or a reading is implausible for this one."""
    ev = load_evidence(path)
    if not _has_measurements(ev):
        why = f" ({ev.bench.reason})" if is_na(ev.bench) else ""
        raise DataError(Text(f"{path} holds no benchmark measurements{why} (an inventory-only run?).",
                             f"{path} 不含基准测试数据{why}（可能只做了清单检查）。"),
                        hint=Text("Run `gpuwise verify --quick --save raw.json` on the GPU server.",
                                  "在 GPU 服务器上运行 `gpuwise verify --quick --save raw.json`。"))
    if not ev.gpus:
        raise DataError(Text(f"{path} lists no GPUs, so its measurements cannot be tied to a card.",
                             f"{path} 未列出任何 GPU，无法确定实测值属于哪种显卡。"),
                        hint=Text("Save it again with `gpuwise verify --quick --save raw.json`.",
                                  "请用 `gpuwise verify --quick --save raw.json` 重新保存。"))
    _refuse_crashed(ev, str(path))
    target = card if card is not None else _own_card(ev, str(path))
    checked = match_card(ev, target, str(path))
    check_readings(ev, target, str(path))  # before calibration_from_evidence converts them
    cal = calibration_from_evidence(ev, source=str(path))
    return replace(cal, card_id=target.id, card_name=target.name, device_id_checked=checked)


def _refuse_crashed(ev: Evidence, path: str) -> None:
    """A run in which a GPU crashed a benchmark measured a faulty server, not the card."""
    crashed = [b for b in ([] if is_na(ev.bench) else ev.bench) if b.errors]
    if crashed:
        first = crashed[0].errors[0]
        raise InputError(Text(f"{path}: a benchmark crashed on GPU {crashed[0].index} ({first.kind}: "
                              f"{first.message[:120]}): its numbers describe a faulty server, not the card.",
                              f"{path}：GPU {crashed[0].index} 上的测试崩溃（{first.kind}：{first.message[:120]}）："
                              "这些数字反映的是故障服务器，而不是显卡本身。"),
                         hint=Text("Calibrate from a run that `gpuwise verify` passes.",
                                   "请使用 `gpuwise verify` 判定通过的运行结果来校准。"))


def _own_card(ev: Evidence, path: str) -> Card:
    from gpuwise.verify.judge import find_card

    card: Card | None = find_card(ev.gpus[0].name)
    if card is None:
        raise InputError(Text(f"{path} was measured on '{ev.gpus[0].name}', which is not in the card catalog.",
                              f"{path} 的实测显卡“{ev.gpus[0].name}”不在显卡目录中。"),
                         hint=Text("Run `gpuwise cards` to list the known cards.",
                                   "运行 `gpuwise cards` 查看已知显卡。"))
    return card


# ------------------------------------------------------------------ same card

def _is_card(gpu_name: str, card: Card) -> tuple[bool, Any]:
    """(the GPU name means `card`, the catalog card it names or None)."""
    from gpuwise.catalog.cards import normalize, strip_prefixes
    from gpuwise.verify.judge import find_card

    found = find_card(gpu_name)
    if found is not None:
        return found.id == card.id, found
    key = strip_prefixes(normalize(gpu_name))  # a card only a --cards file knows
    return key in {strip_prefixes(normalize(n)) for n in (card.id, card.name, *card.aliases)}, None


def _card_with_id(pci: str) -> Any:
    from gpuwise.catalog.cards import load_cards

    return next((c for c in load_cards() if pci in c.pci_device_ids), None)


def _named(card: Any) -> str:
    return f"{card.name} ({card.id})"


def _other_card(path: str, card: Card, found_en: str, found_zh: str, other: Any) -> InputError:
    verify = Text(f"run `gpuwise verify --quick --save raw.json` on a server with {card.name} GPUs; "
                  "without --calibration the estimate uses datasheet rates.",
                  f"在 {card.name} 服务器上运行 `gpuwise verify --quick --save raw.json`；"
                  "不加 --calibration 则按规格表估算。")
    hint = Text(f"Estimate for that card (`--card {other.id}`), or ",
                f"请按该显卡估算（`--card {other.id}`），或") + verify if other is not None \
        else Text(verify.en[:1].upper() + verify.en[1:], verify.zh)
    return InputError(
        Text(f"{path} was measured on {found_en}, but this estimate is for {_named(card)}: a "
             "calibration file applies only to the card it measured.",
             f"{path} 实测的是 {found_zh}，而本次估算的是 {_named(card)}：校准文件只能用于它实测的显卡。"),
        hint=hint)


def _check_device_id(g: GpuSnapshot, card: Card, path: str) -> bool:
    """True when GPU `g`'s PCI device id is one the catalog lists for `card`; False when it
    cannot be checked (the file or the catalog lacks ids); InputError when it is another card's."""
    if is_na(g.pci_device_id):
        return False
    pci = str(g.pci_device_id).lower()
    if pci in card.pci_device_ids:
        return True
    owner = _card_with_id(pci)
    if not card.pci_device_ids and (owner is None or owner.id == card.id):
        return False
    ids = ", ".join(card.pci_device_ids) or "none"
    is_en = _named(owner) if owner is not None else "no card in the catalog"
    is_zh = _named(owner) if owner is not None else "目录中无对应显卡"
    raise _other_card(path, card,
                      f"GPU {g.index} '{g.name}' with PCI device id {pci} ({is_en}; {card.id} has {ids})",
                      f"GPU {g.index}“{g.name}”，PCI 设备 ID {pci}（{is_zh}；{card.id} 为 {ids}）", owner)


def match_card(ev: Evidence, card: Card, path: str) -> bool:
    """Every GPU of the file must be `card`: its name, then its PCI device id where both the
    file and the catalog have one. Returns whether the device id was checked on every GPU."""
    checked = bool(ev.gpus)
    for g in ev.gpus:
        same, found = _is_card(g.name, card)
        if not same:
            en = f"'{g.name}' ({_named(found)})" if found is not None else f"'{g.name}' (not in the card catalog)"
            zh = f"“{g.name}”（{_named(found)}）" if found is not None else f"“{g.name}”（不在显卡目录中）"
            raise _other_card(path, card, en, zh, found)
        checked = _check_device_id(g, card, path) and checked
    return checked


# ------------------------------------------------------------------ plausible values

@dataclass(frozen=True)
class _Reading:
    """One measured value, the figure it is compared with, and the band around that figure."""

    what: Text
    value: Any
    reference: float | None  # bytes/s or FLOP/s; None: the catalog lacks it (no band check)
    reference_what: Text  # "the datasheet" / "the link's theoretical maximum"
    low: float  # fraction of the reference; 0: only positive is required
    high: float
    unit_scale: float
    unit: str


_DATASHEET = Text("the datasheet", "规格表")
_LINK_MAX = Text("the link's theoretical maximum", "链路理论上限")


def _band(key: str) -> float:
    from gpuwise.verify.checks import load_thresholds

    return float(load_thresholds().get("calibration", key))


def _dense_flops(card: Card, precision: str) -> float | None:
    """The highest dense datasheet rate a matmul of `precision` may reach; fp16 may accumulate
    in fp16 (torch allows reduced-precision reductions), twice the rate on GeForce."""
    from gpuwise.catalog.cards import PRECISIONS

    typed = next((p for p in PRECISIONS if p == precision), None)  # a precision the catalog rates
    if typed is None:
        return None
    rates = [card.dense_tflops(typed)]
    if precision == "fp16":
        rates.append(card.fp16_fp16acc_dense_tflops)
    known = [r for r in rates if r]
    return max(known) * TERA if known else None


def _pcie_max(card: Card, gpus: tuple[GpuSnapshot, ...]) -> float | None:
    """One direction of the card's host link (its datasheet gen and width, else the file's)."""
    from gpuwise.verify.checks import load_thresholds
    from gpuwise.verify.judge_perf import pcie_theoretical_bytes_per_s

    gen, width = card.pcie_gen, card.pcie_lanes
    if (gen is None or width is None) and gpus and not is_na(gpus[0].pcie_gen_max) \
            and not is_na(gpus[0].pcie_width_max):
        gen, width = int(gpus[0].pcie_gen_max), int(gpus[0].pcie_width_max)
    return pcie_theoretical_bytes_per_s(load_thresholds(), gen, width) if gen and width else None


def _link_max(card: Card, gpus: tuple[GpuSnapshot, ...]) -> float | None:
    """The fastest GPU-GPU path: one direction of NVLink (datasheets give both) or of PCIe."""
    pcie = _pcie_max(card, gpus)
    fast = card.interconnect_bw_gbps / 2 * GB if card.interconnect != "none" else 0.0
    return max(fast, pcie or 0.0) or None


def _readings(ev: Evidence, card: Card) -> list[_Reading]:
    mem_low, top = _band("mem_bw_min_ratio"), _band("max_ratio")
    flops_low = _band("matmul_min_ratio")
    benches = [] if is_na(ev.bench) else list(ev.bench)
    out: list[_Reading] = []
    for b in benches:
        gpu = Text(f"GPU {b.index} ", f"GPU {b.index} ")
        if not is_na(b.mem_bw_bytes_per_s):
            out.append(_Reading(gpu + Text("memory bandwidth (device copy, read + write)", "显存带宽（拷贝，读+写）"),
                                b.mem_bw_bytes_per_s, card.mem_bw_gbps * GB, _DATASHEET, mem_low, top, GB, "GB/s"))
        for run in b.matmul:
            out.append(_Reading(gpu + Text(f"{run.precision} matmul", f"{run.precision} 矩阵乘"), run.flops_per_s,
                                _dense_flops(card, run.precision), _DATASHEET, flops_low, top, TERA, "TFLOPS"))
        if not is_na(b.h2d_bytes_per_s):
            out.append(_Reading(gpu + Text("host-to-device copy", "主机到设备拷贝"), b.h2d_bytes_per_s,
                                _pcie_max(card, ev.gpus), _LINK_MAX, 0.0, top, GB, "GB/s"))
    point = _allreduce_point(ev)
    if point is not None:
        out.append(_Reading(Text("all-reduce bus bandwidth", "all-reduce 总线带宽"), point.busbw_bytes_per_s,
                            _link_max(card, ev.gpus), _LINK_MAX, 0.0, top, GB, "GB/s"))
    return out


def _fmt(value: float, scale: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value / scale:,.0f}" if abs(value / scale) >= 10 else f"{value / scale:.3g}"


def _check(r: _Reading, card: Card, path: str) -> None:
    value = r.value if isinstance(r.value, (int, float)) and not isinstance(r.value, bool) else math.nan
    shown = f"{_fmt(value, r.unit_scale)} {r.unit}" if value is r.value else repr(r.value)
    hint = Text("A reading like this is a broken benchmark, a unit slip or an edited file, not the card's "
                "speed: run `gpuwise verify --quick --save raw.json` on the server again.",
                "这样的读数来自出错的基准测试、单位错误或被改动的文件，而不是显卡的真实速度："
                "请在服务器上重新运行 `gpuwise verify --quick --save raw.json`。")
    if not (math.isfinite(value) and value > 0):
        raise InputError(Text(f"{path}: measured {r.what.en} is {shown}, not a finite positive number.",
                              f"{path}：实测{r.what.zh}为 {shown}，不是有限的正数。"), hint=hint)
    if r.reference is None or r.low * r.reference <= value <= r.high * r.reference:
        return
    ref = f"{_fmt(r.reference, r.unit_scale)} {r.unit}"
    lo, hi = _fmt(r.low * r.reference, r.unit_scale), _fmt(r.high * r.reference, r.unit_scale)
    band = f"{r.low:.0%}-{r.high:.0%}" if r.low else f"at most {r.high:.0%}"
    band_zh = f"{r.low:.0%}-{r.high:.0%}" if r.low else f"不超过 {r.high:.0%}"
    raise InputError(Text(f"{path}: measured {r.what.en} {shown} is outside the plausible band for "
                          f"{_named(card)}: {band} of {r.reference_what.en} {ref} ({lo}-{hi} {r.unit}).",
                          f"{path}：实测{r.what.zh} {shown} 超出 {_named(card)} 的合理范围："
                          f"{r.reference_what.zh} {ref} 的 {band_zh}（{lo}-{hi} {r.unit}）。"), hint=hint)


def check_readings(ev: Evidence, card: Card, path: str) -> None:
    """Every reading a calibration uses (on every GPU, not only the slowest) must be a finite
    positive number inside its band of the datasheet; InputError names the first that is not."""
    for reading in _readings(ev, card):
        _check(reading, card, path)
