"""The chosen plan as one frozen value: what the table, the page, `--json`, the plots and every
exporter read.

A `Plan` is built once from the winning candidate (`plan.build.plan_from_candidate`) or read back
from its own JSON (`plan.load.plan_from_dict`). Counts never change meaning: `gpus_total` is every
GPU of the deployment, `gpus_per_node` one machine's share, and for serving each of `replicas`
independent engines holds `tp x pp` GPUs. `deploy_model` is the checkpoint the exports start, and
`quantization` the format the checkpoint still needs to be in `weights` (None when it already is, or
when `--deploy-model` names it): each exporter runs it as its engine's on-load quantisation (vLLM
`--quantization fp8`) or refuses, never deploying another precision than the plan sized. Exporters
never reach back into the catalog: what they need of the card is here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwise.estimate.breakdown import MemoryBreakdown
from gpuwise.estimate.cost import Cost
from gpuwise.estimate.speed import InferSpeed, TrainSpeed
from gpuwise.i18n import Text

__all__ = ["PLAN_SCHEMA_VERSION", "TRAIN_TASKS", "CardFacts", "Plan", "slug"]

# 2: `parallelism.dp` of a serving plan is its replica count (it was always 1); `replicas`,
# `gpus_total`, `deploy_model`, `quantization`, `quality`, `notes` and `objective` were added.
PLAN_SCHEMA_VERSION = 2
TRAIN_TASKS = ("full", "lora", "qlora", "pretrain")


def slug(text: str, limit: int = 40) -> str:
    """A DNS-1123 label (Kubernetes names, SkyPilot and dstack run names)."""
    import re

    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return s or "gpuwise"


@dataclass(frozen=True)
class CardFacts:
    """What the exporters need of the card, copied from the catalog when the plan is made."""

    id: str
    name: str
    vendor: str = "nvidia"
    software: str = "cuda"  # cuda | rocm | cann
    memory_gb: float = 0.0
    bf16: bool = True
    compute_capability: str | None = None
    skypilot_name: str | None = None
    ray_accelerator_type: str | None = None
    k8s_product: str | None = None
    mig_profiles: tuple[str, ...] = ()
    interconnect: str = "none"
    linked: bool = False  # every GPU of a node on NVLink/NVSwitch (a bridge joins a pair only)

    def to_dict(self) -> dict[str, Any]:
        return {"skypilot_name": self.skypilot_name, "ray_accelerator_type": self.ray_accelerator_type,
                "k8s_product": self.k8s_product, "memory_gb": self.memory_gb,
                "mig_profiles": list(self.mig_profiles), "vendor": self.vendor,
                "software": self.software, "bf16": self.bf16,
                "compute_capability": self.compute_capability, "interconnect": self.interconnect,
                "linked": self.linked}


@dataclass(frozen=True)
class Plan:
    """One deployable configuration with its estimate, its reasons and its objective."""

    card_facts: CardFacts
    gpus_total: int
    gpus_per_node: int
    nodes: int
    task: str
    model: str  # the model's display name (cleaned at its source)
    deploy_model: str  # the checkpoint to start: a hub id or a path
    weights: str  # what the plan was sized for: bf16 | fp8 | int4 | nf4 | gguf:<TYPE> ...
    replicas: int = 1
    tp: int = 1
    pp: int = 1
    dp: int = 1  # training: data-parallel ranks; serving: engine replicas (vLLM's data parallel)
    zero: int = 0
    fsdp: bool = False
    offload: str = "none"
    cpu_offload_gb: float = 0.0  # GiB of weights per GPU kept in CPU RAM (vLLM --cpu-offload-gb)
    engine: str | None = None
    quantization: str | None = None  # the format the checkpoint still needs (module docstring)
    source: str = ""  # what the user named: a preset, an id, a file
    context: int | None = None
    concurrency: int | None = None  # users of the whole deployment
    kv_dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int | None = None
    seq_len: int | None = None
    micro_batch: int = 1
    grad_accum: int = 1
    grad_ckpt: str = "none"
    optimizer: str = "adamw"
    framework: str = "hf"  # training: whose launch form and config the exports write
    loss: str = "full"
    activation_offload: bool = False
    optimizer_in_backward: bool = False
    packing: bool = False
    compile: bool = False
    float8: bool = False
    lora_rank: int | None = None
    dora: bool = False  # LoRA as DoRA (PEFT use_dora)
    modules_to_save: tuple[str, ...] = ()  # embed_tokens / lm_head trained in full beside LoRA
    padding_free: bool = False  # a micro-batch's samples in one unpadded row (flash-attention varlen)
    mig_profile: str | None = None
    spot: bool = False
    image: str | None = None
    script: str | None = None  # training entry point, relative to `workdir`
    workdir: str | None = None  # the folder that travels to the machine
    objective: str = "cost"
    breakdown: MemoryBreakdown | None = None
    usable_bytes: float = 0.0
    required_high: float | None = None  # the top of the 80 % band of breakdown.required
    ranges: tuple[tuple[str, float, float, str], ...] = ()  # (JSON path, low, high, band) as estimate's
    speed: InferSpeed | TrainSpeed | None = None
    cost: Cost | None = None
    reasons: tuple[Text, ...] = ()
    notes: tuple[Text, ...] = ()
    quality: Text | None = None
    quality_sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.gpus_per_node * self.nodes != self.gpus_total:
            raise ValueError(f"gpus_per_node {self.gpus_per_node} x nodes {self.nodes} "
                             f"!= gpus_total {self.gpus_total}")

    # -- names the exporters read -------------------------------------------------------
    @property
    def card(self) -> str:
        return self.card_facts.id

    @property
    def card_name(self) -> str:
        return self.card_facts.name

    @property
    def training(self) -> bool:
        return self.task in TRAIN_TASKS

    @property
    def name(self) -> str:
        return slug(self.model)

    @property
    def hf_id(self) -> str:
        return self.deploy_model

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp if not self.training else self.gpus_total

    @property
    def replicas_per_node(self) -> int:
        return max(1, self.gpus_per_node // self.gpus_per_replica) if not self.training else 1

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp

    def info_str(self, key: str) -> str | None:
        value = getattr(self.card_facts, key, None)
        return value if isinstance(value, str) and value else None

    @property
    def memory_share(self) -> float:
        """Required memory as a share of usable memory, per GPU."""
        if self.breakdown is None or self.usable_bytes <= 0:
            return 0.0
        return self.breakdown.required / self.usable_bytes

    @property
    def tight(self) -> bool:
        """Fits at the estimate, not at the top of its 80 % band (`gpuwise estimate`'s "tight")."""
        return self.required_high is not None and self.required_high > self.usable_bytes

    def to_dict(self) -> dict[str, Any]:
        """The plan object of `gpuwise plan --json` (docs/json.md)."""
        from gpuwise.plan.load import plan_to_dict

        return plan_to_dict(self)
