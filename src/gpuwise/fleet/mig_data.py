"""data/mig_profiles.toml: each MIG-capable card's GPU-instance profiles and their placements."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from gpuwise.errors import DataError, InputError, unknown_name
from gpuwise.i18n import Text

__all__ = ["MigGpu", "MigProfile", "load_mig_tables", "mig_table_for"]


@dataclass(frozen=True)
class MigProfile:
    name: str  # "3g.40gb", as nvidia-smi and the k8s device plugin spell it
    compute: int  # compute slices (GPCs)
    memory: int  # memory slices
    max_instances: int
    placements: tuple[int, ...]  # first memory slice it may start at
    media: bool = False  # +me: owns the media engines


@dataclass(frozen=True)
class MigGpu:
    name: str
    cards: tuple[str, ...]
    memory_slices: int
    compute_slices: int
    reserve_gib: float
    profiles: tuple[MigProfile, ...]
    sources: tuple[str, ...]

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise unknown_name(Text("MIG profile", "MIG 配置"), name, [p.name for p in self.profiles],
                           "gpuwise mig --list --card CARD")

    def memory_fraction(self, p: MigProfile) -> float:
        return p.memory / self.memory_slices

    def compute_fraction(self, p: MigProfile) -> float:
        return p.compute / self.compute_slices


def _bad(where: str, what: str) -> DataError:
    return DataError(Text(f"data/mig_profiles.toml: {where}: {what}", f"data/mig_profiles.toml：{where}：{what}"))


def _profile(gpu: str, row: Any, memory_slices: int) -> MigProfile:
    try:
        p = MigProfile(str(row["name"]), int(row["compute"]), int(row["memory"]), int(row["max"]),
                       tuple(int(x) for x in row["placements"]), bool(row.get("media", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(gpu, f"profile {row!r}: {exc}") from exc
    if any(s < 0 or s + p.memory > memory_slices for s in p.placements) or not p.placements:
        raise _bad(gpu, f"profile {p.name} has a placement outside the {memory_slices} memory slices")
    return p


def _gpu(row: dict[str, Any]) -> MigGpu:
    name = str(row.get("name", "?"))
    try:
        slices = int(row["memory_slices"])
        profiles = tuple(_profile(name, p, slices) for p in row["profile"])
        return MigGpu(name, tuple(row["cards"]), slices, int(row["compute_slices"]),
                      float(row["reserve_gib"]), profiles, tuple(row["sources"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(name, f"missing or wrong field: {exc}") from exc


@lru_cache(maxsize=1)
def load_mig_tables() -> tuple[MigGpu, ...]:
    text = resources.files("gpuwise.data").joinpath("mig_profiles.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    if raw.get("schema_version") != 1:
        raise _bad("top", "unknown schema_version")
    return tuple(_gpu(r) for r in raw.get("gpu", []))


def mig_table_for(card: Any) -> MigGpu:
    """The MIG table of a catalog card; a card without MIG is a user error naming those with it."""
    tables = load_mig_tables()
    for t in tables:
        if card.id in t.cards:
            return t
    with_mig = sorted(c for t in tables for c in t.cards)
    raise InputError(Text(f"{card.name} ({card.id}) has no MIG: NVIDIA supports Multi-Instance GPU only "
                          f"on data-centre cards from Ampere on. Cards with MIG: {', '.join(with_mig)}.",
                          f"{card.name}（{card.id}）不支持 MIG：NVIDIA 只在 Ampere 起的数据中心卡上支持多实例 GPU。"
                          f"支持 MIG 的卡：{', '.join(with_mig)}。"),
                     hint=Text("To share this card, see MPS and time-slicing in `gpuwise mig --help`.",
                               "如需共享这张卡，请参见 `gpuwise mig --help` 中的 MPS 与时间片。"))
