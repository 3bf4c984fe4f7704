"""`gpuwise mig`: choose a MIG profile per inference service and pack them onto the fewest GPUs.

Each service gets the smallest profile (fewest memory slices, then fewest compute slices)
on which gpuwise's estimate fits it and meets its SLO. Instances are packed first-fit
decreasing, at the start slices the profile tables allow, within the card's compute
slices and each profile's instance limit. gpuwise prints the commands; it never runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.mig_data import MigGpu, MigProfile, mig_table_for
from gpuwise.fleet.mig_fit import ServiceSpec, SliceFit, fit_on_slice
from gpuwise.i18n import Text

__all__ = ["ALTERNATIVES", "TRAINING_REFUSED", "Instance", "MigPlan", "plan_mig"]

TRAINING_REFUSED = Text(
    "MIG slices are for inference. A training run's memory peaks (optimizer step, activations of the "
    "longest batch, allocator growth) overrun a slice's fixed memory and it dies out of memory; MIG "
    "instances also have no NVLink or P2P between them, so a run cannot spread over slices. Train on "
    "whole GPUs: `gpuwise plan MODEL --task lora` (or --task full) sizes them.",
    "MIG 切片用于推理。训练的显存峰值（优化器更新、最长批次的激活、分配器增长）会超出切片固定的显存而 OOM；"
    "MIG 实例之间也没有 NVLink 或 P2P，训练无法跨切片。请用整卡训练：`gpuwise plan MODEL --task lora`"
    "（或 --task full）给出所需整卡。")

ALTERNATIVES = (
    Text("MPS (CUDA Multi-Process Service): processes share all SMs at once, each optionally capped with "
         "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; no memory or fault "
         "isolation (one client's fault hits all). Good for many small, trusted services.",
         "MPS（CUDA 多进程服务）：多个进程同时共享全部 SM，可用 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE 与 "
         "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT 限额；没有显存与故障隔离（一个客户端出错影响全部）。"
         "适合许多小而可信的服务。"),
    Text("Time-slicing (k8s device plugin `sharing.timeSlicing.replicas`): pods take turns on the whole GPU; "
         "each sees all its memory, nothing stops one from taking it all, and context switches cost "
         "throughput. For bursty, light use where isolation does not matter.",
         "时间片（k8s 设备插件 `sharing.timeSlicing.replicas`）：各 Pod 轮流使用整张 GPU；每个都能看到全部显存，"
         "没有机制阻止某个占满，且上下文切换损失吞吐。适合突发、轻量且不需隔离的场景。"),
)


@dataclass(frozen=True)
class Instance:
    service: str
    profile: MigProfile
    start: int  # first memory slice


@dataclass(frozen=True)
class Chosen:
    service: ServiceSpec
    fit: SliceFit
    tried: tuple[SliceFit, ...]


@dataclass(frozen=True)
class MigPlan:
    card: Any
    table: MigGpu
    chosen: tuple[Chosen, ...]
    gpus: tuple[tuple[Instance, ...], ...]

    def commands(self) -> tuple[str, ...]:
        """nvidia-smi lines, largest instance first; the comment gives each one's planned start slice
        (check with `nvidia-smi mig -lgi`: the driver picks the placement)."""
        out = []
        for i, insts in enumerate(self.gpus):
            names = ",".join(x.profile.name for x in insts)
            out += [f"# GPU {i}: " + ", ".join(f"{x.profile.name} for {x.service} at slice {x.start}"
                                               for x in insts),
                    f"sudo nvidia-smi -i {i} -mig 1", f"sudo nvidia-smi mig -i {i} -cgi {names} -C"]
        return tuple(out)

    def k8s_requests(self) -> dict[str, dict[str, int]]:
        """Per service, the device plugin's resource under the "mixed" MIG strategy."""
        return {c.service.name: {f"nvidia.com/mig-{c.fit.profile.name}": 1} for c in self.chosen}

    def mig_parted(self) -> str:
        """A config for NVIDIA mig-parted / the GPU operator's mig-manager (mig-configs)."""
        lines = ["version: v1", "mig-configs:", "  gpuwise:"]
        for i, insts in enumerate(self.gpus):
            counts: dict[str, int] = {}
            for x in insts:
                counts[x.profile.name] = counts.get(x.profile.name, 0) + 1
            lines += [f"    - devices: [{i}]", "      mig-enabled: true", "      mig-devices:"]
            lines += [f'        "{name}": {n}' for name, n in counts.items()]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1, "kind": "gpuwise.mig", "card": self.card.id, "mig_table": self.table.name,
            "gpus_total": len(self.gpus),
            "services": [{"name": c.service.name, "model": c.service.model, "context": c.service.context,
                          "concurrency": c.service.concurrency, "chosen": c.fit.to_dict(),
                          "tried": [t.to_dict() for t in c.tried]} for c in self.chosen],
            "gpus": [{"index": i, "instances": [{"service": x.service, "profile": x.profile.name,
                                                 "start_slice": x.start} for x in insts]}
                     for i, insts in enumerate(self.gpus)],
            "nvidia_smi": list(self.commands()), "k8s_resources": self.k8s_requests(),
            "mig_parted": self.mig_parted(),
            "alternatives": [a.en for a in ALTERNATIVES], "alternatives_zh": [a.zh for a in ALTERNATIVES],
            "sources": list(self.table.sources),
        }


def _choose(s: ServiceSpec, card: Any, table: MigGpu) -> Chosen:
    if s.task != "infer":
        raise InputError(Text(f"Service '{s.name}' is a {s.task} job. ", f"服务“{s.name}”是 {s.task} 任务。")
                         + TRAINING_REFUSED)
    if s.profile is not None:
        candidates: Sequence[MigProfile] = (table.profile(s.profile),)
    else:
        candidates = sorted((p for p in table.profiles if not p.media), key=lambda p: (p.memory, p.compute))
    tried: list[SliceFit] = []
    for p in candidates:
        fit = fit_on_slice(s, card, table, p)
        tried.append(fit)
        if fit.ok:
            return Chosen(s, fit, tuple(tried))
    last = tried[-1]
    raise InputError(Text(f"Service '{s.name}' ({s.model}) fits no MIG slice of {card.name}: on "
                          f"{last.profile.name} it {last.why.en}.",
                          f"服务“{s.name}”（{s.model}）放不进 {card.name} 的任何 MIG 切片：在 "
                          f"{last.profile.name} 上{last.why.zh}。"),
                     hint=Text("Give it a whole GPU (`gpuwise plan MODEL`), a smaller precision (weights = "
                               "\"int4\"), less context or concurrency, or a looser SLO.",
                               "请给它整卡（`gpuwise plan MODEL`）、更低精度（weights = \"int4\"）、"
                               "更短上下文或更低并发，或放宽 SLO。"))


def _starts(profiles: Sequence[MigProfile], table: MigGpu, used: frozenset[int] = frozenset()
            ) -> tuple[int, ...] | None:
    """Start slices for every profile on one GPU (largest first), by trying each placement."""
    if not profiles:
        return ()
    p, rest = profiles[0], profiles[1:]
    for s in p.placements:
        span = frozenset(range(s, s + p.memory))
        if not span & used:
            tail = _starts(rest, table, used | span)
            if tail is not None:
                return (s, *tail)
    return None


def _layout(profiles: Sequence[MigProfile], table: MigGpu) -> tuple[int, ...] | None:
    if sum(p.compute for p in profiles) > table.compute_slices:
        return None
    if any(sum(1 for q in profiles if q.name == p.name) > p.max_instances for p in profiles):
        return None
    return _starts(profiles, table)


def _pack(chosen: Sequence[Chosen], table: MigGpu) -> tuple[tuple[Instance, ...], ...]:
    """First-fit decreasing; each GPU's placements solved exactly (at most 7 instances)."""
    gpus: list[list[Chosen]] = []
    order = sorted(chosen, key=lambda c: (-c.fit.profile.memory, -c.fit.profile.compute))
    for c in order:
        for gpu in gpus:
            if _layout([x.fit.profile for x in gpu] + [c.fit.profile], table) is not None:
                gpu.append(c)
                break
        else:
            gpus.append([c])
    out = []
    for gpu in gpus:
        starts = _layout([x.fit.profile for x in gpu], table)
        assert starts is not None  # every GPU was accepted with this layout
        out.append(tuple(Instance(x.service.name, x.fit.profile, s) for x, s in zip(gpu, starts, strict=True)))
    return tuple(out)


def plan_mig(services: Sequence[ServiceSpec], card: Any) -> MigPlan:
    table = mig_table_for(card)
    if not services:
        raise InputError(Text("No [[service]] rows: nothing to place.", "没有 [[service]]：无可放置的服务。"))
    chosen = tuple(_choose(s, card, table) for s in services)
    return MigPlan(card, table, chosen, _pack(chosen, table))
