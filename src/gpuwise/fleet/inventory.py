"""`gpuwise inventory`: the GPU memory a node should advertise to Ray (and what HAMi counts).

Ray's custom resources are fixed when a node starts (`ray start --resources '{...}'`), so
gpuwise prints the line for the node's own GPUs. Memory is what CUDA can see (NVML's total,
or the catalog's CUDA-visible GiB), rounded down to whole GiB so a job's request never
counts memory the card does not have.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.ray_conn import GPU_MEMORY
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["NodeInventory", "node_inventory"]


@dataclass(frozen=True)
class NodeInventory:
    gpu_names: tuple[str, ...]
    per_gpu_gib: tuple[float, ...]
    source: str

    @property
    def total_gib(self) -> int:
        return math.floor(sum(self.per_gpu_gib))

    def to_dict(self) -> dict[str, Any]:
        resources = {GPU_MEMORY: self.total_gib}
        return {"schema_version": 1, "kind": "gpuwise.inventory", "source": self.source,
                "gpus": len(self.per_gpu_gib), "gpu_names": list(self.gpu_names),
                "per_gpu_gib": [round(x, 2) for x in self.per_gpu_gib], "resources": resources,
                "ray_start": f"ray start --address=HEAD_IP:6379 --resources={shlex.quote(json.dumps(resources))}",
                "ray_start_head": f"ray start --head --port=6379 --resources={shlex.quote(json.dumps(resources))}",
                "hami_gpumem_mib_per_gpu": [int(x * 1024) for x in self.per_gpu_gib]}


def _from_card(card: str, gpus: int) -> NodeInventory:
    from gpuwise.catalog.cards import resolve_card

    c = resolve_card(card).card
    return NodeInventory((c.name,) * gpus, (c.memory_cuda_gib,) * gpus, f"catalog: {gpus} x {c.id}")


def _from_evidence(ev: Any, origin: str) -> NodeInventory:
    from gpuwise.verify.judge import find_card

    sizes = []
    for g in ev.gpus:
        total = g.memory_total_bytes
        if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
            sizes.append(total / GiB)
        else:
            card = find_card(g.name)
            if card is None:
                raise InputError(Text(f"{origin}: GPU{g.index} ({g.name}) has no memory reading and is not in the "
                                      "catalog: use --card and --gpus.",
                                      f"{origin}：GPU{g.index}（{g.name}）没有显存读数且不在目录中："
                                      "请用 --card 与 --gpus。"))
            sizes.append(card.memory_cuda_gib)
    return NodeInventory(tuple(g.name for g in ev.gpus), tuple(sizes), origin)


def node_inventory(from_file: Path | None = None, card: str | None = None, gpus: int | None = None) -> NodeInventory:
    if card is not None:
        if gpus is None or not 1 <= gpus <= 64:
            raise InputError(Text("With --card give --gpus (1 to 64).", "使用 --card 时请给出 --gpus（1 到 64）。"))
        return _from_card(card, gpus)
    if from_file is not None:
        from gpuwise.verify.raw import load_evidence

        return _from_evidence(load_evidence(from_file), str(from_file))
    from gpuwise.verify.collect import collect

    return _from_evidence(collect("inventory"), "this machine (NVML)")
