"""Serving engines' memory rules by version: the [[rule]] rows of data/engines.toml.

Each row is one rule set of one engine (vLLM V0, V1, V1 with CUDA-graph profiling; SGLang;
TensorRT-LLM; llama.cpp; transformers) with its defaults and sources. `engine_rules(engine,
version)` picks the row with the highest `from_version` not above the version asked, or the
newest row when no version is given.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpuwise.catalog._datafile import FieldSpec, check_row, data_error, read_toml, table_rows
from gpuwise.errors import InputError, unknown_name
from gpuwise.i18n import Text

PoolRule = Literal["total_fraction", "static_fraction", "free_fraction", "grow"]
LogStyle = Literal["vllm-v0", "vllm-v1", "sglang", "trtllm", "llamacpp", "none"]
WeightsCounted = Literal["none", "allocated", "reserved"]
ENGINE_IDS = ("vllm", "sglang", "trtllm", "llamacpp", "transformers")
SHIPPED_ENGINES = Path(__file__).resolve().parent.parent / "data" / "engines.toml"
_TOP = {"schema_version", "runtime", "vllm", "transformers", "llamacpp", "rule", "step_cpu"}

_F = FieldSpec
RULE_FIELDS: dict[str, FieldSpec] = {
    "id": _F("str", required=True),
    "engine": _F("str", required=True, choices=ENGINE_IDS),
    "from_version": _F("str", required=True),
    "pool": _F("str", required=True, choices=("total_fraction", "static_fraction", "free_fraction", "grow")),
    "memory_fraction": _F("float", required=True, positive=True),
    "memory_fraction_tp2": _F("float", positive=True),
    "memory_fraction_tp4": _F("float", positive=True),
    "memory_fraction_tp8": _F("float", positive=True),
    "memory_fraction_tp16": _F("float", positive=True),
    "max_num_seqs_large": _F("int", required=True, positive=True),
    "max_num_seqs_small": _F("int", required=True, positive=True),
    "batched_tokens_large": _F("int", required=True),
    "batched_tokens_small": _F("int", required=True),
    "large_gpu_gib": _F("float", required=True, positive=True),
    "large_excludes": _F("strlist"),
    "chunked_prefill_above": _F("int", required=True),
    "sampler_bytes_per_vocab": _F("float", required=True),
    "non_torch_gib": _F("float", required=True),
    "non_torch_tp_gib": _F("float", required=True),
    "init_gib": _F("float"),
    "non_torch_nvlink_gib": _F("float"),
    "init_nvlink_gib": _F("float"),
    "weights_counted": _F("str", choices=("none", "allocated", "reserved")),
    "rotary_cache_bytes": _F("float"),
    "cuda_graph_gib": _F("float", required=True),
    "cuda_graph_in_pool": _F("bool", required=True),
    "block_size": _F("int", required=True, positive=True),
    "log_style": _F("str", required=True, choices=("vllm-v0", "vllm-v1", "sglang", "trtllm", "llamacpp", "none")),
    "reserve_base_mib": _F("float"),
    "reserve_mib_per_chunk_token": _F("float"),
    "reserve_mib_per_8_ranks": _F("float"),
    "reserve_floor_mib": _F("float"),
    "reserve_floor_above_gib": _F("float"),
    "graph_mib_per_decode_bs": _F("float"),
    "graph_mib_per_prefill_size": _F("float"),
    "graph_mib_mla": _F("float"),
    "memory_brackets": _F("strlist"),
    "hybrid_page_alignment": _F("int"),
    "state_blocks_per_request": _F("int"),
    "hybrid_log_concurrency": _F("bool"),
    "tp_allreduce_inputs_held": _F("bool"),
    "vision_profile_per_seq": _F("bool"),
    "nccl_nvls": _F("bool"),
    "sources": _F("strlist", required=True),
    "notes": _F("str"),
}
_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def version_key(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of '0.11.2', 'v0.6.4.post1', '0.26.1rc1'; None when it has no number."""
    m = _VERSION.match(text.strip())
    if m is None:
        return None
    major, minor, patch = (int(g) if g else 0 for g in m.groups())
    return major, minor, patch


@dataclass(frozen=True)
class EngineRules:
    """One engine's memory rules at one range of versions (a [[rule]] row)."""

    id: str
    engine: str
    from_version: str
    pool: PoolRule
    memory_fraction: float  # gpu_memory_utilization / mem_fraction_static / free_gpu_memory_fraction at TP 1
    max_num_seqs_large: int
    max_num_seqs_small: int
    batched_tokens_large: int
    batched_tokens_small: int
    large_gpu_gib: float
    chunked_prefill_above: int
    sampler_bytes_per_vocab: float
    non_torch_gib: float
    non_torch_tp_gib: float
    cuda_graph_gib: float
    cuda_graph_in_pool: bool
    block_size: int
    log_style: LogStyle
    sources: tuple[str, ...]
    memory_fraction_tp2: float | None = None
    memory_fraction_tp4: float | None = None
    memory_fraction_tp8: float | None = None
    memory_fraction_tp16: float | None = None
    large_excludes: tuple[str, ...] = ()
    init_gib: float = 0.0
    # a TP group of more than 2 GPUs on an NVLink/NVSwitch node (cards.toml interconnect 'nvlink'):
    # NCCL's buffers on that fabric; in place of non_torch_tp_gib / init_gib there (0: the same)
    non_torch_nvlink_gib: float = 0.0
    init_nvlink_gib: float = 0.0
    # how the engine counts the weights it loaded: none (no torch tensors, or a layout not known),
    # the allocator's allocated blocks, or the reserved segments; the rotary cache's bytes an element
    # (0: the model's dtype)
    weights_counted: WeightsCounted = "none"
    rotary_cache_bytes: float = 0.0
    # SGLang >= 0.5: mem_fraction_static = (memory - reserve) / memory, the reserve built from these
    reserve_base_mib: float = 0.0  # 0: the memory_fraction fields are the default
    reserve_mib_per_chunk_token: float = 0.0
    reserve_mib_per_8_ranks: float = 0.0
    reserve_floor_mib: float = 0.0
    reserve_floor_above_gib: float = 0.0
    graph_mib_per_decode_bs: float = 0.0
    graph_mib_per_prefill_size: float = 0.0
    graph_mib_mla: float = 0.0
    memory_brackets: tuple[str, ...] = ()  # "below_gib:chunked_prefill:decode_bs_tp_lt4:decode_bs_tp_ge4"
    # vLLM's hybrid allocator (attention + Mamba/Gated-DeltaNet layers): attention pages grow in
    # steps of this many tokens until one holds a layer's recurrent state (0: no shared page size)
    hybrid_page_alignment: int = 0
    state_blocks_per_request: int = 1  # pages each state group holds per request
    hybrid_log_concurrency: bool = False  # 'GPU KV cache size' = max concurrency x context (else blocks // groups)
    # the profile counts reserved memory while NCCL's record_stream keeps every all-reduce input of
    # the profiling forward cached (TP > 1): 2 per layer x tokens x hidden x 2 bytes on top of the peak
    tp_allreduce_inputs_held: bool = False
    # the encoder-decoder profile gives each of max_num_seqs sequences one image through the vision
    # tower (vLLM V0's EncoderDecoderModelRunner.profile_run): its transients set the peak
    vision_profile_per_seq: bool = False
    # NCCL may run all-reduce with NVLink SHARP (NVLS) where the node has it; False where the engine
    # turns it off (SGLang sets NCCL_NVLS_ENABLE from --enable-nccl-nvls, default off)
    nccl_nvls: bool = True
    notes: str = ""

    def bracket(self, memory_gib: float, tp: int) -> tuple[int, int] | None:
        """(chunked prefill tokens, decode CUDA-graph max batch) of the card's memory bracket."""
        for row in self.memory_brackets:
            below, chunk, small, large = row.split(":")
            if below == "inf" or memory_gib < float(below):
                return int(chunk), int(large if tp >= 4 else small)
        return None

    def reserved_fraction(self, memory_gib: float, tp: int, pp: int, mla: bool) -> float | None:
        """SGLang's default mem_fraction_static from its reserve (server_args memory hook), or
        None where the rule set has no reserve."""
        found = self.bracket(memory_gib, tp)
        if not self.reserve_base_mib or found is None:
            return None
        chunk, decode_bs = found
        mib = memory_gib * 1024
        graphs = decode_bs * self.graph_mib_per_decode_bs
        graphs += self.graph_mib_mla if mla else len(prefill_graph_sizes(chunk)) * self.graph_mib_per_prefill_size
        reserve = (self.reserve_base_mib + max(chunk, 2048) * self.reserve_mib_per_chunk_token
                   + tp * pp / 8 * self.reserve_mib_per_8_ranks + graphs)
        if memory_gib > self.reserve_floor_above_gib:
            reserve = max(reserve, self.reserve_floor_mib)
        return round((mib - reserve) / mib, 3)

    def fraction_at(self, tp: int) -> float:
        """The default memory fraction at `tp` GPUs (SGLang lowers it as TP grows)."""
        value = self.memory_fraction
        for step, frac in ((2, self.memory_fraction_tp2), (4, self.memory_fraction_tp4),
                           (8, self.memory_fraction_tp8), (16, self.memory_fraction_tp16)):
            if tp >= step and frac is not None:
                value = frac
        return value

    def is_large(self, card_name: str, memory_gib: float) -> bool:
        """Whether the engine gives this card its large-GPU defaults."""
        name = card_name.lower()
        return memory_gib >= self.large_gpu_gib and not any(w.lower() in name for w in self.large_excludes)


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures prefill CUDA graphs for (cuda_graph_hook.py,
    generate_prefill_cuda_graph_batch_sizes, 0.5.23)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return [s for s in sizes if s <= max_tokens]


def load_rules(path: Path) -> tuple[EngineRules, ...]:
    """Every [[rule]] row of one engines file, checked; a bad row names the file and the row."""
    doc = read_toml(path)
    out: list[EngineRules] = []
    for i, row in enumerate(table_rows(doc, "rule", path, _TOP)):
        where = Text(f"rule #{i + 1}", f"第 {i + 1} 条规则")
        values = check_row(row, RULE_FIELDS, path=path, where=where, require=True)
        if version_key(values["from_version"]) is None:
            raise data_error(path, where, f"from_version '{values['from_version']}' is not a version.",
                             f"from_version“{values['from_version']}”不是版本号。")
        out.append(EngineRules(**values))
    missing = [e for e in ENGINE_IDS if not any(r.engine == e for r in out)]
    if missing:
        raise data_error(path, Text("rules", "规则"), f"no rule for {', '.join(missing)}.",
                         f"缺少 {', '.join(missing)} 的规则。")
    return tuple(out)


@functools.cache
def rules() -> tuple[EngineRules, ...]:
    """The shipped rule sets, read once."""
    return load_rules(SHIPPED_ENGINES)


@functools.lru_cache(maxsize=128)  # the rules are read once; a plan asks for them per candidate
def engine_rules(engine: str, version: str = "") -> EngineRules:
    """The rule set `engine` follows at `version` ('' = the newest one gpuwise knows)."""
    rows = sorted((r for r in rules() if r.engine == engine), key=lambda r: version_key(r.from_version) or (0, 0, 0))
    if not rows:
        raise unknown_name(Text("engine", "推理引擎"), engine, ENGINE_IDS, "gpuwise estimate --help")
    if not version:
        return rows[-1]
    key = version_key(version)
    if key is None:
        raise InputError(Text(f"--engine-version '{version}' is not a version number (e.g. 0.11 or 0.6.4).",
                              f"--engine-version“{version}”不是版本号（例如 0.11 或 0.6.4）。"))
    fitting = [r for r in rows if (version_key(r.from_version) or (0, 0, 0)) <= key]
    if not fitting:
        raise InputError(Text(f"gpuwise has no {engine} rules for version {version}: the oldest it knows is "
                              f"{rows[0].from_version}.",
                              f"gpuwise 没有 {engine} {version} 版的规则：已知最早为 {rows[0].from_version}。"))
    return fitting[-1]


STEP_CPU_FIELDS: dict[str, FieldSpec] = {
    "engine": _F("str", required=True, choices=ENGINE_IDS),
    "from_version": _F("str", required=True),
    "per_seq_s": _F("float", required=True),
    "per_step_s": _F("float"),
    "source": _F("str", required=True),
}


@dataclass(frozen=True)
class StepCpu:
    """CPU time per decode step that the GPU waits for (a [[step_cpu]] row): per running sequence,
    and a fixed part beyond efficiency.toml decode_step_s (V0's Python loop around each step)."""

    engine: str
    from_version: str
    per_seq_s: float
    source: str
    per_step_s: float = 0.0


def load_step_cpu(path: Path) -> tuple[StepCpu, ...]:
    """Every [[step_cpu]] row of one engines file, checked (check_row refuses a negative cost)."""
    doc = read_toml(path)
    out: list[StepCpu] = []
    for i, row in enumerate(table_rows(doc, "step_cpu", path, _TOP)):
        where = Text(f"step_cpu #{i + 1}", f"第 {i + 1} 条 step_cpu")
        values = check_row(row, STEP_CPU_FIELDS, path=path, where=where, require=True)
        if version_key(values["from_version"]) is None:
            raise data_error(path, where, f"from_version '{values['from_version']}' is not a version.",
                             f"from_version“{values['from_version']}”不是版本号。")
        out.append(StepCpu(**values))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def step_cpu_row(engine: str, version: str = "") -> StepCpu | None:
    """The [[step_cpu]] row for `engine` at `version` ('' = the newest row; a version older than
    every row takes the oldest); None where the file has no row for the engine."""
    rows = sorted((r for r in load_step_cpu(SHIPPED_ENGINES) if r.engine == engine),
                  key=lambda r: version_key(r.from_version) or (0, 0, 0))
    if not rows:
        return None
    key = version_key(version) if version else None
    if key is None:
        return rows[-1]
    fitting = [r for r in rows if (version_key(r.from_version) or (0, 0, 0)) <= key]
    return (fitting or rows[:1])[-1]


def step_cpu_per_seq(engine: str, version: str = "") -> float:
    """Seconds of un-overlapped CPU work per running sequence per decode step for `engine` at
    `version` ('' = the newest row); 0 where the file has no row for the engine."""
    row = step_cpu_row(engine, version)
    return row.per_seq_s if row else 0.0


def step_cpu_fixed(engine: str, version: str = "") -> float:
    """Seconds of un-overlapped CPU work per decode step, whatever the batch, beyond the
    engine's efficiency.toml decode_step_s; 0 where the row has none."""
    row = step_cpu_row(engine, version)
    return row.per_step_s if row else 0.0


__all__ = ["ENGINE_IDS", "EngineRules", "LogStyle", "PoolRule", "StepCpu", "engine_rules", "load_rules",
           "load_step_cpu", "prefill_graph_sizes", "rules", "step_cpu_fixed", "step_cpu_per_seq",
           "step_cpu_row", "version_key"]
