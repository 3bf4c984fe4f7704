"""The typed result of a memory estimate: bytes per GPU by component, each with its why."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.i18n import Text

COMPONENTS = ("weights", "kv_cache", "activations", "gradients", "optimizer", "overhead")


POOL_AT_CARD_BYTES = 1024.0  # a saved plan rounds its byte counts: a pool within this of the card is at it

@dataclass(frozen=True)
class Item:
    """One line of the breakdown: which component it adds to, bytes per GPU, and the formula."""

    key: str
    component: str
    bytes: float
    why: Text


@dataclass(frozen=True)
class MemoryBreakdown:
    items: tuple[Item, ...]
    kv_pool: float = 0.0  # vLLM: the pool it pre-allocates (>= kv_cache when it fits)
    # Training: the step's peak is the largest phase, not the sum of the items (tensors that never
    # coexist). allocated_peak = torch.cuda.max_memory_allocated (tensors only); reserved_peak adds the
    # caching allocator's slack (max_memory_reserved); device_total adds the CUDA context and NCCL
    # (what nvidia-smi shows). 0 = not modelled (inference): required is the sum of the items.
    allocated_peak: float = 0.0
    reserved_peak: float = 0.0
    device_total: float = 0.0
    framework_reports: str = ""  # which of those peaks the framework logs: allocated | reserved | nvidia-smi | none

    def component(self, name: str) -> float:
        return sum(i.bytes for i in self.items if i.component == name)

    @property
    def required(self) -> float:
        """The least the job needs per GPU: the device total where the phases are modelled.
        Worked out once (kept in the instance's __dict__, not a field: equality, `replace` and
        `asdict` see only the fields); a plan reads it many times per estimate."""
        found: float | None = self.__dict__.get("_required")
        if found is None:
            found = self.__dict__["_required"] = self.device_total or sum(i.bytes for i in self.items)
        return found

    @property
    def total(self) -> float:
        """What the process holds per GPU (a vLLM pool larger than needed included)."""
        return self.required + max(0.0, self.kv_pool - self.component("kv_cache"))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {name: round(self.component(name)) for name in COMPONENTS}
        out["total"] = round(self.total)
        out["required"] = round(self.required)
        if self.kv_pool:
            out["kv_pool"] = round(self.kv_pool)
        if self.device_total:
            out["allocated_peak"] = round(self.allocated_peak)
            out["reserved_peak"] = round(self.reserved_peak)
            out["device_total"] = round(self.device_total)
            out["framework_reports"] = self.framework_reports
        out["items"] = [{"name": i.key, "component": i.component, "bytes": round(i.bytes),
                         "why": i.why.en, "why_zh": i.why.zh} for i in self.items]
        return out


@dataclass(frozen=True)
class Capacity:
    """Inference headroom: how many KV tokens fit, and what that allows."""

    kv_tokens: int
    max_concurrency: float
    max_context: int

    def to_dict(self) -> dict[str, object]:
        return {"kv_tokens": self.kv_tokens, "max_concurrency": round(self.max_concurrency, 2),
                "max_context": self.max_context}


@dataclass(frozen=True)
class HostMemory:
    """What leaves the GPU: CPU RAM and NVMe needed by offloading (whole node)."""

    cpu_ram: float = 0.0
    nvme: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return {"cpu_ram": round(self.cpu_ram), "nvme": round(self.nvme)}


@dataclass(frozen=True)
class MemoryResult:
    breakdown: MemoryBreakdown
    usable: float  # bytes per GPU the job may use (engine budget applied)
    capacity: Capacity | None = None
    host: HostMemory = field(default_factory=HostMemory)
    warnings: tuple[Text, ...] = ()

    @property
    def fits(self) -> bool:
        return self.breakdown.required <= self.usable

    @property
    def tensors_beside_full_pool(self) -> float | None:
        """A training pool counted at the card's size (memory_train: PyTorch frees cached blocks before an
        allocation fails): what nvidia-smi shows cannot pass the card, and whether the job fits is the
        tensors' question. The allocated peak plus the memory outside the pool, or None. Read from the
        byte counts, so a saved plan (which rounds them) reads the same."""
        b = self.breakdown
        if b.reserved_peak > b.allocated_peak and b.device_total >= self.usable - POOL_AT_CARD_BYTES:
            return b.allocated_peak + b.device_total - b.reserved_peak
        return None
