"""What the user wants to run, and on what: validated, frozen inputs to every estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NoReturn, TypeVar

from gpuwise.catalog.cards import Card
from gpuwise.catalog.frameworks import LOSSES, OPTIMIZERS, is_grad_ckpt
from gpuwise.errors import InputError
from gpuwise.i18n import Text

Task = Literal["infer", "full", "lora", "qlora", "pretrain"]
Engine = Literal["vllm", "transformers", "llamacpp", "sglang", "trtllm"]
Optimizer = Literal["adamw", "adamw8bit", "paged-adamw8bit", "sgd", "adafactor"]
GradCkpt = str  # none | full | selective | op-sac | every-N (catalog.frameworks.is_grad_ckpt)
Loss = Literal["full", "chunked", "fused"]
Offload = Literal["none", "cpu", "nvme"]
# How context parallelism (--cp) moves the sequence's keys and values between the ranks that split it:
# allgather: torch context_parallel's default rotate method (all K/V of a layer gathered at once; torchtitan);
# ring: K/V chunks passed rank to rank (Megatron-Core / Transformer Engine p2p, ring-flash-attention);
# ulysses: DeepSpeed-Ulysses all-to-alls from sequence-sharded to head-sharded attention (ms-swift).
CpKind = Literal["allgather", "ring", "ulysses"]
CP_KINDS: tuple[CpKind, ...] = ("allgather", "ring", "ulysses")
TASKS: tuple[Task, ...] = ("infer", "full", "lora", "qlora", "pretrain")
ENGINES: tuple[Engine, ...] = ("vllm", "transformers", "llamacpp", "sglang", "trtllm")
OFFLOADS: tuple[Offload, ...] = ("none", "cpu", "nvme")
LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
# Modules trained in full beside the adapters (PEFT LoraConfig modules_to_save, ms-swift --modules_to_save):
# the input embedding and the output projection, the two that new special tokens need trained
MODULES_TO_SAVE = ("embed_tokens", "lm_head")
MAX_TOKENS = 1 << 27
C = TypeVar("C", bound=str)


def _fail(en: str, zh: str) -> NoReturn:
    raise InputError(Text(en, zh))


def choose(value: str, choices: tuple[C, ...], flag: str) -> C:
    """`value` as one of the closed `choices` (typed as them), or an error that lists them."""
    if value not in choices:
        _fail(f"{flag} must be one of {', '.join(choices)}; got '{value}'.",
              f"{flag} 只能是 {'、'.join(choices)} 之一，实际为“{value}”。")
    return choices[choices.index(value)]  # the element itself, so typed as the choices



@dataclass(frozen=True)
class Workload:
    """The job: serving (task=infer) or training, with its sizes and precisions."""

    task: Task = "infer"
    weights: str = "auto"  # bf16 | fp16 | fp8 | int8 | int4 | nf4 | gguf:<TYPE> | auto
    kv_dtype: str = "auto"  # auto (16-bit) | bf16 | fp16 | fp8 | int8 | q8_0 | q4_0
    context: int = 4096  # prompt + output tokens per sequence (inference)
    concurrency: int = 1  # sequences served at once
    output_tokens: int | None = None  # of --context; None: a chat-like quarter, at most 1,024
    max_num_batched_tokens: int | None = None  # None: the engine's default
    max_num_seqs: int | None = None  # sequences the engine schedules at once (None: its default, data/engines.toml)
    seq_len: int = 2048  # training sequence length
    micro_batch: int = 1  # sequences per GPU per forward/backward
    grad_accum: int = 1  # micro-batches accumulated per optimizer step
    optimizer: Optimizer = "adamw"
    grad_ckpt: GradCkpt = "none"
    flash_attention: bool = True
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = LORA_TARGETS
    dora: bool = False  # DoRA (PEFT use_dora): a trained magnitude per output row, the merged weight's norm each step
    modules_to_save: tuple[str, ...] = ()  # MODULES_TO_SAVE trained in full beside the adapters
    # How the training framework keeps its tensors (data/frameworks.toml gives the defaults;
    # `framework_defaults` names the knobs taken from it rather than from a flag).
    framework: str = "hf"
    loss: Loss = "full"
    activation_offload: bool = False
    optimizer_in_backward: bool = False
    packing: bool = False
    # a micro-batch's samples concatenated into one unpadded row (flash-attention varlen): ms-swift --padding_free,
    # TRL padding_free; the same collate as --packing (ms-swift sets padding_free under packing), without binning
    padding_free: bool = False
    compile: bool = False
    float8: bool = False
    tp_overlap: bool = False  # TP collectives hidden under compute: Megatron --tp-comm-overlap, torchtitan AsyncTP
    framework_defaults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        choose(self.task, TASKS, "--task")
        choose(self.optimizer, OPTIMIZERS, "--optimizer")
        if not is_grad_ckpt(self.grad_ckpt):
            _fail(f"--grad-ckpt must be none, full, selective, op-sac or every-N; got '{self.grad_ckpt}'.",
                  f"--grad-ckpt 只能是 none、full、selective、op-sac 或 every-N，实际为“{self.grad_ckpt}”。")
        choose(self.loss, LOSSES, "--loss")
        for flag, value in (("--context", self.context), ("--concurrency", self.concurrency),
                            ("--seq-len", self.seq_len), ("--micro-batch", self.micro_batch),
                            ("--grad-accum", self.grad_accum),
                            ("--lora-rank", self.lora_rank)):
            if not (0 < value <= MAX_TOKENS):
                _fail(f"{flag} must be between 1 and {MAX_TOKENS:,}; got {value}.",
                      f"{flag} 必须在 1 到 {MAX_TOKENS:,} 之间，实际为 {value}。")
        if self.output_tokens is not None and not 0 < self.output_tokens < self.context:
            _fail(f"--output-tokens must be between 1 and --context - 1; got {self.output_tokens}.",
                  f"--output-tokens 必须在 1 与 --context - 1 之间，实际为 {self.output_tokens}。")
        if self.max_num_seqs is not None and not 0 < self.max_num_seqs <= MAX_TOKENS:
            _fail(f"--max-num-seqs must be positive; got {self.max_num_seqs}.",
                  f"--max-num-seqs 必须为正数，实际为 {self.max_num_seqs}。")
        if self.max_num_batched_tokens is not None and not 0 < self.max_num_batched_tokens <= MAX_TOKENS:
            _fail(f"--max-num-batched-tokens must be positive; got {self.max_num_batched_tokens}.",
                  f"--max-num-batched-tokens 必须为正数，实际为 {self.max_num_batched_tokens}。")
        bad = [t for t in self.lora_targets if t not in LORA_TARGETS]
        if bad:
            _fail(f"Unknown --lora-targets {', '.join(bad)}: use {', '.join(LORA_TARGETS)}.",
                  f"未知的 --lora-targets {', '.join(bad)}：可用 {', '.join(LORA_TARGETS)}。")
        self._check_peft_knobs()
        # worked out once (in the instance's __dict__, not a field: equality, `replace` and `asdict`
        # see only the fields): an estimate reads them tens of times, a plan thousands
        out = self.output_tokens or max(1, min(self.context // 4, 1024))
        self.__dict__["_lens"] = (out, self.context - out)

    def _check_peft_knobs(self) -> None:
        """--dora and --modules-to-save change a LoRA run; --padding-free needs flash attention's varlen kernels."""
        from gpuwise.errors import unknown_name

        for module in self.modules_to_save:
            if module not in MODULES_TO_SAVE:
                raise unknown_name(Text("--modules-to-save module", "--modules-to-save 模块"), module,
                                   MODULES_TO_SAVE, "gpuwise estimate --help")
        if len(set(self.modules_to_save)) != len(self.modules_to_save):
            _fail(f"--modules-to-save names a module twice: {', '.join(self.modules_to_save)}.",
                  f"--modules-to-save 重复列出了模块：{', '.join(self.modules_to_save)}。")
        peft = self.task in ("lora", "qlora")
        for flag, on in (("--dora", self.dora), ("--modules-to-save", bool(self.modules_to_save))):
            if on and not peft:
                why = ("serves the model, training nothing", "只做推理，不训练") if self.task == "infer" else \
                    ("trains every weight", "训练全部权重")
                _fail(f"{flag} belongs to LoRA: use --task lora or qlora (--task {self.task} {why[0]}).",
                      f"{flag} 属于 LoRA：请用 --task lora 或 qlora（--task {self.task} {why[1]}）。")
        if self.padding_free and not self.flash_attention:
            _fail("--padding-free needs flash attention (its varlen kernels keep the samples of one row apart): "
                  "drop --no-flash-attention.",
                  "--padding-free 需要 flash attention（其 varlen 内核在同一行内区分各样本）："
                  "请去掉 --no-flash-attention。")

    @property
    def is_training(self) -> bool:
        return self.task != "infer"

    @property
    def output_len(self) -> int:
        """Generated tokens per request: --output-tokens, else a chat-like quarter of the
        context, at most 1,024."""
        lens: tuple[int, int] = self.__dict__["_lens"]
        return lens[0]

    @property
    def prompt_len(self) -> int:
        lens: tuple[int, int] = self.__dict__["_lens"]
        return lens[1]


@dataclass(frozen=True)
class Deployment:
    """Where it runs: card, GPU count, parallelism, engine and memory policy."""

    card: Card
    gpus: int = 1
    tp: int = 0  # 0: inference uses all GPUs for TP; training uses 1
    pp: int = 1
    engine: Engine = "vllm"
    gpu_memory_utilization: float = 0.9
    zero: int = 0  # ZeRO stage; 3 = FSDP full sharding
    offload: Offload = "none"
    cpu_offload_gib: float = 0.0  # vLLM --cpu-offload-gb: weights per GPU kept in CPU RAM
    gpu_layers: int | None = None  # llama.cpp -ngl; None = all layers on the GPU
    nodes: int = 1
    margin: bool = False  # the guides' x2 rule for online serving, shown apart
    engine_version: str = ""  # the engine's version ('' = the newest rules in data/engines.toml)
    mem_fraction: float | None = None  # SGLang mem_fraction_static / TRT-LLM free_gpu_memory_fraction
    cpu_mem_bw_gbps: float | None = None  # host memory GB/s for llama.cpp CPU layers (None: by form factor)
    ep: int = 1  # training: expert-parallel degree (routed experts split over ep data-parallel ranks)
    virtual_stages: int = 1  # training: model chunks per pipeline stage (interleaved 1F1B)
    cp: int = 1  # training: context-parallel degree (each sequence split over cp ranks)
    cp_kind: CpKind = "ring"

    def __post_init__(self) -> None:
        choose(self.engine, ENGINES, "--engine")
        choose(self.cp_kind, CP_KINDS, "--cp-kind")
        choose(self.offload, OFFLOADS, "--offload")
        if not (1 <= self.gpus <= 4096):
            _fail(f"--gpus must be between 1 and 4096; got {self.gpus}.",
                  f"--gpus 必须在 1 到 4096 之间，实际为 {self.gpus}。")
        if not (0 <= self.tp <= self.gpus and self.pp >= 1):
            _fail(f"--tp {self.tp} and --pp {self.pp} must fit in --gpus {self.gpus}.",
                  f"--tp {self.tp} 与 --pp {self.pp} 必须不超过 --gpus {self.gpus}。")
        if not (0.05 <= self.gpu_memory_utilization <= 1.0):
            _fail(f"--gpu-memory-utilization must be in (0.05, 1]; got {self.gpu_memory_utilization}.",
                  f"--gpu-memory-utilization 必须在 (0.05, 1] 之内，实际为 {self.gpu_memory_utilization}。")
        if not (1 <= self.ep <= 4096):
            _fail(f"--ep must be between 1 and 4096; got {self.ep}.",
                  f"--ep 必须在 1 到 4096 之间，实际为 {self.ep}。")
        if not (1 <= self.virtual_stages <= 128 and (self.virtual_stages == 1 or self.pp > 1)):
            _fail(f"--virtual-stages must be 1-128 and needs --pp above 1; "
                  f"got {self.virtual_stages} with --pp {self.pp}.",
                  f"--virtual-stages 必须在 1–128 之间且需要 --pp 大于 1；"
                  f"实际为 {self.virtual_stages}，--pp {self.pp}。")
        split = (self.tp or 1) * self.pp * self.cp
        if self.cp != 1 and not (1 < self.cp <= 4096 and (self.gpus * self.nodes) % split == 0):
            _fail(f"--cp must be 1-4096 and --tp x --pp x --cp must divide --gpus x --nodes; got --cp {self.cp} "
                  f"with --tp {self.tp}, --pp {self.pp} on {self.gpus * self.nodes} GPUs.",
                  f"--cp 必须在 1–4096 之间，且 --tp × --pp × --cp 必须整除 --gpus × --nodes；"
                  f"实际为 --cp {self.cp}，--tp {self.tp}，--pp {self.pp}，共 {self.gpus * self.nodes} 张卡。")
        if self.zero not in (0, 1, 2, 3):
            _fail(f"--zero must be 0, 1, 2 or 3; got {self.zero}.",
                  f"--zero 只能是 0、1、2 或 3，实际为 {self.zero}。")
        if not self.cpu_offload_gib >= 0:  # NaN fails too
            _fail("--cpu-offload-gb must not be negative.",
                  "--cpu-offload-gb 不能为负数。")
        if not (self.mem_fraction is None or 0.05 <= self.mem_fraction <= 1.0):
            _fail(f"--mem-fraction must be in (0.05, 1]; got {self.mem_fraction}.",
                  f"--mem-fraction 必须在 (0.05, 1] 之内，实际为 {self.mem_fraction}。")
        if not (self.cpu_mem_bw_gbps is None or 0 < self.cpu_mem_bw_gbps <= 10_000):
            _fail(f"--cpu-mem-bw must be between 0 and 10,000 GB/s; got {self.cpu_mem_bw_gbps}.",
                  f"--cpu-mem-bw 必须在 0 到 10,000 GB/s 之间，实际为 {self.cpu_mem_bw_gbps}。")
