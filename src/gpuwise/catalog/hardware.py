"""What a multi-GPU node of a card needs: GPUs per node, power, PCIe lanes, NVLink reach.

The limits are data: src/gpuwise/data/form_factors.toml has one row per `form_factor` used in
cards.toml (schema: docs/data-schema.md). `node_notes` turns a card and a GPU count into
bilingual notes. Pure: no I/O beyond reading that file once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwise.catalog._datafile import FieldSpec, data_error, id_rows
from gpuwise.errors import InputError
from gpuwise.i18n import Text

if TYPE_CHECKING:
    from gpuwise.catalog.cards import Card

SHIPPED_FORM_FACTORS = Path(__file__).resolve().parent.parent / "data" / "form_factors.toml"

FORM_FACTOR_FIELDS: dict[str, FieldSpec] = {
    "id": FieldSpec("str", required=True),
    "name": FieldSpec("str", required=True),
    "max_gpus_per_node": FieldSpec("int", required=True, positive=True),
    "switch_needed_above": FieldSpec("int", positive=True),
    "host_gpu_lanes": FieldSpec("int", positive=True),
    "psu_sizing": FieldSpec("bool"),
    "fabric_gbps": FieldSpec("float", positive=True),
    "fabric_note": FieldSpec("str"),
    "fabric_note_zh": FieldSpec("str"),
    "sources": FieldSpec("strlist", required=True),
    "unverified": FieldSpec("strlist"),
    "notes": FieldSpec("str"),
}

# Power supply for a box someone builds: GPU draw x 1.2 + 300 W. The 300 W is the rest of the
# system (CPU 150-200 W, board, RAM, drives and fans 50-100 W: clankerbuilder.com/blog/
# power-and-cooling-for-multi-gpu-ai); the 20 % covers GPU transients (an RTX 4090 spikes past
# 600 W for milliseconds, same source) and keeps the supply below full load. Check: one 450 W
# RTX 4090 gives 840 W, NVIDIA's recommended system supply is 850 W
# (pcgamesn.com/nvidia/rtx-4090-power-supply). For 4 cards that is GPU draw + ~40 %.
_GPU_HEADROOM = 1.2
_REST_OF_SYSTEM_W = 300.0
# One household circuit: 120 V x 15 A = 1.8 kW (ozeki-ai-server.com, DIY AI power), 230 V x 10 A
# = 2.3 kW. Past 2 kW a single ATX supply and a shared socket are no longer enough.
_ONE_SOCKET_W = 2000.0


@dataclass(frozen=True)
class FormFactor:
    """One row of form_factors.toml: what a node of this kind holds and needs."""

    id: str
    name: str
    max_gpus_per_node: int
    sources: tuple[str, ...]
    switch_needed_above: int | None = None
    host_gpu_lanes: int | None = None
    psu_sizing: bool = False
    fabric_gbps: float | None = None  # per node, the platform reference design's compute fabric
    fabric_note: str = ""
    fabric_note_zh: str = ""
    unverified: tuple[str, ...] = ()
    notes: str = ""


def load_form_factors(path: Path) -> dict[str, FormFactor]:
    """Every row of one form-factor file by id; a bad row is a DataError naming file and row."""
    out: dict[str, FormFactor] = {}
    for where, values in id_rows(path, "form_factor", FORM_FACTOR_FIELDS, Text("form factor", "规格")):
        ff = FormFactor(**values)
        _check_form_factor(ff, path, where)
        out[ff.id] = ff
    return out


def _check_form_factor(ff: FormFactor, path: Path, where: Text) -> None:
    if ff.switch_needed_above is not None and ff.switch_needed_above > ff.max_gpus_per_node:
        raise data_error(path, where, f"switch_needed_above ({ff.switch_needed_above}) is more than "
                         f"max_gpus_per_node ({ff.max_gpus_per_node}).",
                         f"switch_needed_above（{ff.switch_needed_above}）大于 max_gpus_per_node"
                         f"（{ff.max_gpus_per_node}）。")
    for name in ff.unverified:
        if name not in FORM_FACTOR_FIELDS or name in ("id", "name", "sources", "unverified", "notes"):
            raise data_error(path, where, f"'unverified' names '{name}', which is not a value field.",
                             f"“unverified”中的“{name}”不是数值字段。")


@functools.cache
def form_factors() -> dict[str, FormFactor]:
    """The shipped form factors by id, read once."""
    return load_form_factors(SHIPPED_FORM_FACTORS)


# ------------------------------------------------------------------ notes

# Between nodes with no --inter-node-gbps and no reference fabric for the form factor: one 100 Gb/s
# NIC per node, the common data-centre Ethernet port of PCIe GPU servers (the DGX H100's own
# non-compute NIC is 100 Gb/s Ethernet: docs.nvidia.com/dgx-basepod/reference-architecture-
# infrastructure-foundation-enterprise-ai/latest/core-components.html).
DEFAULT_FABRIC_GBPS = 100.0


def node_fabric(card: Card) -> tuple[float, Text]:
    """Gb/s per node between nodes when the user gave none, and where the figure comes from."""
    ff = form_factors().get(card.form_factor)
    if ff is not None and ff.fabric_gbps:
        return ff.fabric_gbps, Text(ff.fabric_note, ff.fabric_note_zh or ff.fabric_note)
    return DEFAULT_FABRIC_GBPS, Text("one 100 Gb/s NIC per node (gpuwise's default without a reference fabric)",
                                     "每节点一块 100 Gb/s 网卡（无参考网络时 gpuwise 的默认值）")


def node_notes(card: Card, gpus_per_node: int) -> tuple[Text, ...]:
    """What a node of `gpus_per_node` x `card` needs: fit, power, PCIe lanes, NVLink reach."""
    if gpus_per_node < 1:
        raise InputError(Text(f"GPUs per node must be 1 or more, got {gpus_per_node}.",
                              f"每节点 GPU 数至少为 1，实际为 {gpus_per_node}。"))
    too_many = _too_many(card, gpus_per_node)
    if too_many is not None:  # the other notes would describe a box that cannot exist
        return (too_many,)
    ff = form_factors().get(card.form_factor)
    notes = [_power(card, ff, gpus_per_node),
             _lanes(card, ff, gpus_per_node), _switch(card, ff, gpus_per_node),
             _link_reach(card, gpus_per_node)]
    return tuple(n for n in notes if n is not None)


def _too_many(card: Card, gpus: int) -> Text | None:
    if gpus <= card.max_gpus_per_node:
        return None
    most = card.max_gpus_per_node
    return Text(f"One node holds at most {most} x {card.name} ({card.form_factor}); "
                f"{gpus} need more nodes or another card.",
                f"一个节点最多容纳 {most} 张 {card.name}（{card.form_factor}）；"
                f"{gpus} 张需要多个节点或换卡。")


def _kw(watts: float) -> str:
    return f"{watts:.0f} W" if watts < 1000 else f"{watts / 1000:.1f} kW"


def _power(card: Card, ff: FormFactor | None, gpus: int) -> Text | None:
    if card.tdp_w is None:
        return None
    draw = gpus * card.tdp_w
    what = f"{gpus} x {card.name}" if gpus > 1 else card.name
    sum_en = f"{what} draw{'s' if gpus == 1 else ''} about {_kw(draw)} ({gpus} x {card.tdp_w:.0f} W)"
    sum_zh = f"{what} 满载功耗约 {_kw(draw)}（{gpus} x {card.tdp_w:.0f} W）"
    if ff is None or not ff.psu_sizing:
        return Text(f"{sum_en} at full load, before CPUs, fans and networking.",
                    f"{sum_zh}，未计 CPU、风扇和网络。")
    supply = -(-(draw * _GPU_HEADROOM + _REST_OF_SYSTEM_W) // 100) * 100  # round up to 100 W
    text = Text(f"{sum_en}; with the CPU, board and transient headroom (GPU draw x 1.2 + 300 W) "
                f"the box needs a {_kw(supply)}+ power supply.",
                f"{sum_zh}；加上 CPU、主板和瞬时峰值余量（GPU 功耗 x 1.2 + 300 W），"
                f"整机需要 {_kw(supply)} 以上的电源。")
    if supply > _ONE_SOCKET_W:
        text = text + Text(
            " That is more than 2 kW: two PSUs or a server chassis, on a circuit of its own "
            "(a 120 V/15 A socket gives 1.8 kW, a 230 V/10 A one 2.3 kW).",
            "超过 2 kW：需要双电源或服务器机箱，并单独走一路电（120 V/15 A 插座约 1.8 kW，"
            "230 V/10 A 约 2.3 kW）。")
    return text


def _lanes(card: Card, ff: FormFactor | None, gpus: int) -> Text | None:
    if ff is None or ff.host_gpu_lanes is None or gpus < 2:
        return None
    if ff.switch_needed_above is not None and gpus > ff.switch_needed_above:
        return None  # the switch note below covers it
    width = 1
    while width * 2 <= ff.host_gpu_lanes // gpus:  # PCIe links are x1/x2/x4/x8/x16
        width *= 2
    if width >= (card.pcie_lanes or 16):
        return None
    return Text(f"A consumer desktop CPU gives its graphics slots {ff.host_gpu_lanes} PCIe lanes: "
                f"{gpus} cards run at x{width} each; x16 each needs a workstation board "
                "(Threadripper, Xeon W) or a server.",
                f"消费级台式机 CPU 只给显卡插槽 {ff.host_gpu_lanes} 条 PCIe 通道：{gpus} 张卡各跑 "
                f"x{width}；每卡 x16 需要工作站主板（Threadripper、Xeon W）或服务器。")


def _switch(card: Card, ff: FormFactor | None, gpus: int) -> Text | None:
    if ff is None or ff.switch_needed_above is None or gpus <= ff.switch_needed_above:
        return None
    most = ff.switch_needed_above
    return Text(f"More than {most} x {card.name} do not fit a desktop or workstation board: "
                f"{gpus} cards need a server chassis with PCIe switches (or a server board with "
                f"{gpus * 16} lanes for x16 each).",
                f"超过 {most} 张 {card.name} 装不进台式机或工作站主板：{gpus} 张卡需要带 PCIe 交换芯片的"
                f"服务器机箱（或提供 {gpus * 16} 条通道、每卡 x16 的服务器主板）。")


def _link_reach(card: Card, gpus: int) -> Text | None:
    if card.interconnect == "none" or card.linked(gpus):
        return None
    group = card.nvlink_group
    if card.interconnect == "nvlink-bridge":
        return Text(f"An NVLink bridge joins {group} GPUs: with {gpus} GPUs the bridged groups "
                    "talk to each other over PCIe.",
                    f"NVLink 桥只连接 {group} 张 GPU：{gpus} 张时各桥接组之间走 PCIe。")
    return Text(f"The {card.interconnect} domain spans {group} GPUs: beyond it GPUs talk over "
                "PCIe or the network.",
                f"{card.interconnect} 互联域只覆盖 {group} 张 GPU：超出部分走 PCIe 或网络。")


__all__ = [
    "DEFAULT_FABRIC_GBPS",
    "FORM_FACTOR_FIELDS",
    "SHIPPED_FORM_FACTORS",
    "FormFactor",
    "form_factors",
    "load_form_factors",
    "node_fabric",
    "node_notes",
]
