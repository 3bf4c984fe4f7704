"""`gpuwise place`: put a pipeline's models onto N GPUs.

Every placement (stage -> GPU) is tried (at most 8 stages on 8 GPUs). A placement is
feasible when each GPU's stages fit its memory budget together. Each GPU serves its stages
one after another, so per pipeline request it is busy for the sum over its stages of
calls_per_request x seconds_per_call (split evenly over a stage's replicas); the pipeline
runs at 1 / the busiest resource (a GPU, or the GPU-to-GPU link carrying the outputs that
cross GPUs). Best: highest throughput, then fewest bytes crossing GPUs, then fewest GPUs.
Then, while it helps, the bottleneck stage gets another replica on a GPU with room
(another vLLM instance behind the same router). ComfyUI components are the exception:
ComfyUI-MultiGPU "does not add parallelism. The workflow steps are still executed
sequentially" (pollockjj/ComfyUI-MultiGPU README), so one workflow's components count as one
resource busy for their sum, and they get no replicas (that takes a second ComfyUI).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.place_input import Pipeline
from gpuwise.fleet.place_stage import StageCost, budget_fraction, stage_cost
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["Placement", "Transfer", "place_pipeline"]


@dataclass(frozen=True)
class Transfer:
    src: str
    dst: str
    src_gpus: tuple[int, ...]
    dst_gpus: tuple[int, ...]
    bytes_per_request: float  # that cross between GPUs
    seconds_per_request: float  # 0 on the same GPU


@dataclass(frozen=True)
class Placement:
    card: Any
    gpus: int
    costs: tuple[StageCost, ...]
    gpu_of: dict[str, tuple[int, ...]]  # the GPUs holding a replica of each stage
    link_bytes_per_s: float
    budget_bytes: float

    def on(self, gpu: int) -> tuple[StageCost, ...]:
        return tuple(c for c in self.costs if gpu in self.gpu_of[c.spec.name])

    def work(self, c: StageCost) -> float:
        """GPU-seconds per pipeline request of one replica of a stage."""
        return c.spec.calls_per_request * c.seconds_per_call / len(self.gpu_of[c.spec.name])

    def busy_seconds(self, gpu: int) -> float:
        return sum(self.work(c) for c in self.on(gpu))

    def memory(self, gpu: int) -> float:
        return sum(c.memory_bytes for c in self.on(gpu))

    @property
    def transfers(self) -> tuple[Transfer, ...]:
        out = []
        for c in self.costs:
            for src in c.spec.inputs:
                up = next(x for x in self.costs if x.spec.name == src)
                a, b = self.gpu_of[src], self.gpu_of[c.spec.name]
                n = up.output_bytes * up.spec.calls_per_request
                # requests spread evenly over replicas: the share of (from, to) pairs on two GPUs
                crossing = sum(x != y for x in a for y in b) / (len(a) * len(b))
                out.append(Transfer(src, c.spec.name, a, b, n * crossing,
                                    n * crossing / self.link_bytes_per_s))
        return tuple(out)

    @property
    def link_seconds(self) -> float:
        return sum(t.seconds_per_request for t in self.transfers)

    @property
    def workflow_seconds(self) -> float:
        """ComfyUI runs one workflow's components one after another, whichever GPUs hold them."""
        return sum(self.work(c) for c in self.costs if c.kind.comfyui_node)

    @property
    def bottleneck(self) -> tuple[str, float]:
        """('gpu N', 'link' or 'comfyui workflow', seconds per pipeline request)."""
        loads = [(f"gpu {g}", self.busy_seconds(g)) for g in range(self.gpus)]
        loads += [("link", self.link_seconds), ("comfyui workflow", self.workflow_seconds)]
        return max(loads, key=lambda x: x[1])

    @property
    def requests_per_s(self) -> float:
        return 1.0 / self.bottleneck[1]

    @property
    def slowest_stage(self) -> StageCost:
        """The stage that costs the most GPU time per pipeline request, per replica."""
        return max(self.costs, key=self.work)

    def score(self) -> tuple[float, float, int]:
        crossing = sum(t.bytes_per_request for t in self.transfers)
        return (self.bottleneck[1], crossing, len({g for gs in self.gpu_of.values() for g in gs}))


def _feasible(p: Placement) -> bool:
    return all(p.memory(g) <= p.budget_bytes for g in range(p.gpus))


def _no_room(costs: Sequence[StageCost], card: Any, gpus: int, budget: float) -> InputError:
    need = sum(c.memory_bytes for c in costs) / GiB
    return InputError(Text(f"The stages need {need:.1f} GiB together and no split over {gpus} x {card.name} "
                           f"keeps every GPU under its {budget / GiB:.1f} GiB budget.",
                           f"各阶段共需 {need:.1f} GiB，在 {gpus} 张 {card.name} 上怎么分都有 GPU 超出 "
                           f"{budget / GiB:.1f} GiB 的预算。"),
                      hint=Text("Add GPUs, lower a stage's precision or batch, or pick a larger card.",
                                "请增加 GPU、降低某阶段的精度或 batch，或换更大显存的卡。"))


def place_pipeline(pipe: Pipeline) -> Placement:
    from gpuwise.catalog.cards import resolve_card
    from gpuwise.estimate.links import card_rates

    card = resolve_card(pipe.card).card
    costs = tuple(stage_cost(s, card) for s in pipe.stages)
    budget = budget_fraction() * card.usable_bytes
    link = card_rates(card, gpus=max(pipe.gpus, 2)).link_busbw
    best: Placement | None = None
    for combo in itertools.product(range(pipe.gpus), repeat=len(costs)):
        if combo and combo[0] != 0:
            break  # GPUs are alike: the first stage on GPU 0 covers every placement
        p = Placement(card, pipe.gpus, costs, {c.spec.name: (g,) for c, g in zip(costs, combo, strict=True)},
                      link, budget)
        if _feasible(p) and (best is None or p.score() < best.score()):
            best = p
    if best is None:
        raise _no_room(costs, card, pipe.gpus, budget)
    return _replicate(best)


def _replicate(p: Placement) -> Placement:
    """Give the slowest stage another replica while one fits and the pipeline gets faster."""
    from dataclasses import replace

    while True:
        slow = p.slowest_stage
        if slow.kind.comfyui_node:
            return p
        have = p.gpu_of[slow.spec.name]
        tries = [replace(p, gpu_of={**p.gpu_of, slow.spec.name: (*have, g)})
                 for g in range(p.gpus) if g not in have]
        better = [q for q in tries if _feasible(q) and q.score() < p.score()]
        if not better:
            return p
        p = min(better, key=Placement.score)
