"""Turn evidence into verdicts: `judge(evidence, claim) -> Verdict`. Pure: no I/O.

The claim is what the user says they rented (`--card`, `--gpus`, a contract). Without a
claim the card is recognised from the GPU name and its datasheet is the yardstick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.verify.checks import (
    EXIT_CODES,
    STATUS_ORDER,
    CheckResult,
    Status,
    Thresholds,
    load_thresholds,
    worst,
)
from gpuwise.verify.contract import Contract
from gpuwise.verify.raw import Evidence

__all__ = ["Claim", "Context", "Verdict", "claimed_card", "find_card", "judge", "version_tuple"]

VERDICT_SCHEMA_VERSION = 1
# How the numbers are counted, stated in every verdict (bench.py, nccl.py).
CONVENTIONS = {
    "units": "GB/s = 1e9 bytes/s; TFLOPS = 1e12 FLOP/s; GiB = 2**30 bytes",
    "mem_bw": "device copy, read + write counted (2 x bytes copied), >= 1 GiB buffers (L2 is <= 60 MB)",
    "h2d_d2h": "pinned host memory, bytes counted once per direction",
    "matmul": "dense n x n x n, 2 n^3 FLOPs, median of per-iteration CUDA-event times after warm-up",
    "allreduce": "busbw = algbw x 2(n-1)/n (nccl-tests PERFORMANCE.md), the slowest rank's time",
    "sustained": "bf16 GEMM rate with every GPU loaded together: burst = first 10 % of the window, "
                 "sustained = its second half",
}


def find_card(name: str) -> Any | None:
    """The catalog card for a name or nvidia-smi product name; None when unknown."""
    try:
        from gpuwise.catalog.cards import resolve_card
    except ImportError:
        return None
    try:
        return resolve_card(name).card
    except GpuwiseError:
        return None


def claimed_card(name: str) -> Any:
    """The card a user named with --card or in a contract; unknown names raise the usual error."""
    from gpuwise.catalog.cards import resolve_card

    return resolve_card(name).card


@dataclass(frozen=True)
class Claim:
    card: str | None = None
    count: int | None = None
    contract: Contract | None = None

    @property
    def card_name(self) -> str | None:
        if self.card:
            return self.card
        return self.contract.card if self.contract else None

    @property
    def gpu_count(self) -> int | None:
        if self.count is not None:
            return self.count
        return self.contract.count if self.contract else None


@dataclass(frozen=True)
class Context:
    """Everything a check function may read."""

    ev: Evidence
    card: Any | None          # catalog Card or None
    card_claimed: bool        # True: the user named it; False: recognised from the GPU name
    count: int | None
    contract: Contract | None
    th: Thresholds

    @property
    def n(self) -> int:
        return len(self.ev.gpus)

    def term(self, key: str) -> Any:
        return getattr(self.contract, key) if self.contract is not None else None

    @property
    def benchmarked(self) -> bool:
        """The run was asked to load the GPUs (quick/full): a missing measurement is then
        'incomplete', never 'skipped'. An --inventory run asked for none."""
        return self.ev.mode in ("quick", "full")


@dataclass(frozen=True)
class Verdict:
    status: Status
    checks: tuple[CheckResult, ...]
    card_id: str | None
    card_claimed: bool
    evidence: Evidence

    @property
    def ok(self) -> bool:
        """Passed, perhaps with warnings: everything needed was seen and nothing failed."""
        return self.status in ("pass", "warn")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUS_ORDER}
        for c in self.checks:
            out[c.status] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        ev = self.evidence
        return {
            "schema_version": VERDICT_SCHEMA_VERSION, "kind": "gpuwise.verify",
            "status": self.status, "exit_code": self.exit_code, "counts": self.counts(),
            "card": self.card_id, "card_claimed": self.card_claimed,
            "host": ev.host, "collected_at": ev.collected_at, "source": ev.source, "mode": ev.mode,
            "gpus": [{"index": g.index, "name": g.name} for g in ev.gpus],
            "driver_version": _plain(ev.driver_version),
            "cuda_driver_version": _plain(ev.cuda_driver_version),
            "checks": [c.to_dict() for c in self.checks],
            "conventions": CONVENTIONS,
        }


def _plain(value: Any) -> Any:
    return None if hasattr(value, "reason") else value


def version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in str(text).split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _context(ev: Evidence, claim: Claim) -> Context:
    name = claim.card_name
    if name:
        card, claimed = claimed_card(name), True
    else:
        card = find_card(ev.gpus[0].name) if ev.gpus else None
        claimed = False
    return Context(ev=ev, card=card, card_claimed=claimed, count=claim.gpu_count,
                   contract=claim.contract, th=load_thresholds())


def judge(ev: Evidence, claim: Claim | None = None) -> Verdict:
    """Run every check on the evidence. The verdict fails when any check fails, else is
    incomplete when any check could not see what it needed, else warns or passes."""
    from gpuwise.verify import judge_errors, judge_hw, judge_identity, judge_load, judge_perf

    cx = _context(ev, claim or Claim())
    checks: list[CheckResult] = []
    for fn in (*judge_hw.CHECKS, *judge_identity.CHECKS, *judge_errors.CHECKS, *judge_load.CHECKS,
               *judge_perf.CHECKS):
        checks.append(fn(cx))
    return Verdict(status=worst([c.status for c in checks]), checks=tuple(checks),
                   card_id=getattr(cx.card, "id", None), card_claimed=cx.card_claimed,
                   evidence=ev)


def gpu_list(indices: list[int]) -> str:
    return ", ".join(f"GPU{i}" for i in indices)

