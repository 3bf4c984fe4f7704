"""How fast a serving deployment runs, by phase: `infer_speed` puts the steady state together from
one decode step (speed_decode.py) and one prompt's prefill (here: its FLOPs, one read of the
weights, its all-reduces, packed forwards under load), giving TTFT, the time per output token with
the other requests' prefills, and throughput. `benchmark_run` turns the steady state into a finite
run of N prompts sent at once (ramp, prefills and the drain behind the longest outputs). The
linear layers' rates live in speed_gemm.py. Training lives in speed_train.py (re-exported here for
callers of this module).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import Precision
from gpuwise.catalog.params import count_params
from gpuwise.estimate.breakdown import MemoryResult
from gpuwise.estimate.links import Rates, efficiency_table
from gpuwise.estimate.memory_infer import tensor_parallel
from gpuwise.estimate.speed_decode import (
    _allreduce_busbw,
    _avg_kv_tokens,
    _collective_path,
    _decode_step,
    _decode_weight_bytes,
    _Step,
    allreduce_message_seconds,
)
from gpuwise.estimate.speed_gemm import (
    POOL_ENGINES,
    _decode_gemm_share,
    _marlin_prefill,
    _peak_flops,
    compute_precision,
)
from gpuwise.estimate.speed_train import TrainSpeed, train_speed
from gpuwise.estimate.weights import weight_bytes
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.units import GB

__all__ = ["InferSpeed", "TrainSpeed", "benchmark_run", "infer_speed", "output_lengths", "train_speed"]


@dataclass(frozen=True)
class InferSpeed:
    decode_tokens_per_s: float  # per sequence
    throughput_tokens_per_s: float  # all sequences together
    prefill_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    bound: str  # "memory" | "compute" | "communication" | "offload" | "kernel-latency"
    step_breakdown_s: dict[str, float]
    collective_busbw_bytes_per_s: float = 0.0  # the all-reduce bus bandwidth the step assumed (0: one GPU)
    collective_path: str = "none"  # links.link_path: nvls | nvlink | pcie-p2p | pcie-host-bounce ...
    run_requests: int = 0  # > 0: throughput and tpot_s are a finite run's (N prompts at once; tpot its median gap)
    run_seconds: float = 0.0  # that run's duration (prefills, decode steps, the drain of the longest)
    kernel_floor_s: float = 0.0  # the part of step_breakdown_s["overhead"] that is per-layer kernel floors

    def to_dict(self) -> dict[str, Any]:
        # as asdict gives the fields (its one dict copied), without deep-copying every value
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: round(v, 6) if isinstance(v, float) else dict(v) if isinstance(v, dict) else v
                for k, v in out.items()}


def micro_batch(batch: int, pp: int) -> int:
    """Sequences in the largest of the pp micro-batches a pipelined engine splits `batch` into (at
    least one: with fewer sequences than stages, each sequence is its own micro-batch)."""
    return max(1, math.ceil(batch / pp)) if pp > 1 else batch


def infer_speed(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates) -> InferSpeed:
    tp = tensor_parallel(model, d)
    batch = w.concurrency
    cap = mem.capacity
    if d.engine in POOL_ENGINES and cap is not None and 1 <= cap.max_concurrency < batch:
        batch = int(cap.max_concurrency)  # the engine queues what its KV pool cannot hold
    # Pipeline parallel: the engine splits the running batch into pp micro-batches (vLLM's virtual
    # engines, one scheduler each); each stage passes one micro-batch at a time, so a token of every
    # sequence takes pp stage passes of its micro-batch, and the stages overlap across micro-batches.
    # Fewer sequences than stages leave stages idle: each sequence is a micro-batch of one.
    micro = micro_batch(batch, d.pp)
    step = _decode_step(model, w, d, mem, r, micro, tp)
    stage = step.total  # one stage's pass over one micro-batch (the whole batch without pipelining)
    tpot = stage * d.pp
    decode_rate = batch / tpot
    parts = {"gemm": step.gemm, "attention": step.attention, "communication": step.communication,
             "offload": step.offload}
    bound = _bound(step)
    weights = _decode_weight_bytes(model, w, batch) / (tp * d.pp)
    pre = _prefill(model, w, d, mem, r, tp, compute_precision(model, w, d), weights)
    ttft = pre.seconds()
    prefill_tps = pre.prompt / ttft
    packed = pre.packed
    # Each request also costs its prefill: B requests of O output tokens take O decode steps plus
    # B prompt prefills (continuous batching interleaves them; their compute adds up).
    out = w.output_len
    # Under load the waiting prompts fill whole prefill forwards: each adds its packed cost.
    throughput = batch * out / (batch * out / decode_rate + (batch * packed / d.pp if w.prompt_len else 0.0))
    stall = _prefill_stall(w, d, batch, pre.prompt / packed)
    msg = micro * model.hidden_size * 2.0  # one decode all-reduce a GPU (_decode_step's)
    loaded = tpot + stall  # what each user sees per output token
    return InferSpeed(decode_tokens_per_s=1 / loaded, throughput_tokens_per_s=throughput,
                      prefill_tokens_per_s=prefill_tps, ttft_s=ttft + tpot, tpot_s=loaded, bound=bound,
                      step_breakdown_s={**parts, "overhead": step.overhead + step.kernel_floor, "cpu": step.cpu,
                                        "prefill_stall": stall},
                      collective_busbw_bytes_per_s=_allreduce_busbw(d, r, msg, micro) if tp > 1 else 0.0,
                      collective_path=_collective_path(d, tp, msg, micro), kernel_floor_s=step.kernel_floor)


def _prefill_stall(w: Workload, d: Deployment, batch: int, prefill_tps: float) -> float:
    """Seconds each running sequence waits per output token for the other sequences' prefills: a
    continuous-batching engine admits a new request whenever one finishes (batch / output of them
    per step in the steady state) and runs its prompt in or beside the decode step (V0 as a
    prefill step all decoding sequences wait for; chunked prefill inside the mixed step), so the
    time per output token each user sees (benchmark_serving's TPOT and ITL) carries the prefills
    of the other batch - 1 requests. A request's own prefill is its TTFT, not its TPOT."""
    if d.engine not in POOL_ENGINES or batch <= 1:
        return 0.0
    return (batch - 1) * max(w.prompt_len, 1) / (max(w.output_len, 1) * prefill_tps * d.pp)


def _bound(step: _Step) -> str:
    """What limits the step: communication, offload or the layers' kernel floors (kernel-latency:
    small kernels one after another, as DeepSeek-V3 at batch 1) when they dominate; else the GEMMs'
    and attention's side of their rooflines (memory when both read more than they compute)."""
    parts = {"memory": step.gemm + step.attention, "communication": step.communication, "offload": step.offload,
             "kernel-latency": step.kernel_floor}
    return max(parts, key=lambda k: parts[k])


class _Prefill(NamedTuple):
    """One prompt's prefill, by part (seconds), and how many prompt tokens the engine packs into one
    forward when several prompts wait (efficiency.toml [overheads] prefill_batch_tokens)."""

    prompt: int  # tokens of one prompt (at least 1)
    compute: float  # its FLOPs at the prefill rate
    read: float  # one pass over the weights (shared by every prompt of a packed forward)
    comm: float  # its all-reduces under tensor parallel, the prompt alone in its forward
    offload: float  # weights kept off the GPU, crossing the host link once per forward
    budget: int  # prompt tokens one forward holds (>= prompt)
    comm_forward: float | None = None  # one full forward's all-reduces (None: comm x budget / prompt)

    @property
    def _comm_full(self) -> float:
        return self.comm * self.budget / self.prompt if self.comm_forward is None else self.comm_forward

    def _comm_tokens(self, tokens: float) -> float:
        """All-reduces of one forward of `tokens` prompt tokens (prompt <= tokens <= budget): each layer
        all-reduces the forward's hidden states, every prompt's tokens in one message; between the two
        sizes costed (one prompt, a full forward) linear in the tokens."""
        if self.budget <= self.prompt:
            return self.comm
        part = (tokens - self.prompt) / (self.budget - self.prompt)
        return self.comm + min(max(part, 0.0), 1.0) * (self._comm_full - self.comm)

    def seconds(self, prompts: float = 1.0) -> float:
        """`prompts` prompts prefilled together: their FLOPs add; the weights are read once per
        forward of `budget` tokens (a prompt alone reads them all, as its TTFT does), and each forward
        all-reduces its tokens together."""
        if prompts == 1.0:
            return max(self.compute, self.read) + self.comm + self.offload
        tokens = prompts * self.prompt
        forwards = max(1.0, math.ceil(tokens / self.budget - 1e-9))
        comm = forwards * self._comm_tokens(tokens / forwards)
        return max(prompts * self.compute, forwards * self.read) + comm + forwards * self.offload

    @property
    def packed(self) -> float:
        """Seconds a prompt adds in a loaded engine, where waiting prompts fill whole forwards (their
        weight pass, their all-reduces and their host crossings shared)."""
        share = self.prompt / self.budget
        return max(self.compute, share * self.read) + share * self._comm_full + share * self.offload


@functools.cache
def _prefill_batch_tokens(engine: str) -> int:
    """Prompt tokens one prefill forward packs (efficiency.toml [overheads] prefill_batch_tokens;
    1 where the engine prefills one request at a time)."""
    return int(efficiency_table()["overheads"]["prefill_batch_tokens"].get(engine, 1))


def _prefill(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates, tp: int,
             precision: Precision, weights: float) -> _Prefill:
    """One prompt: 2 x active params x tokens + causal attention 2 x layers x q_dim x tokens^2,
    at the family's prefill fraction of peak (FP8 at its own GEMM share), or the time to read the
    weights once, whichever is longer; TP adds two all-reduces per layer of the forward's tokens
    (_prefill_comm); weights kept off the GPU cross PCIe once per forward (llama.cpp too: it offloads
    large batches' CPU layers to the GPU). Where the engine's weight-only Marlin kernel stops scaling at large batch
    (_marlin_prefill) the prompt's linear FLOPs take Marlin's plateau in place of the GEMM share
    (_decode_gemm_share); attention keeps the prefill rate."""
    prompt = max(w.prompt_len, 1)  # a request of one token still prefills that token
    p = count_params(model)
    linear = 2 * p.active * prompt / tp
    attention = 2 * model.num_layers * model.q_dim * prompt * prompt / tp
    base = r.prefill_llamacpp if d.engine == "llamacpp" and r.prefill_llamacpp else r.prefill
    rate = base * r.gemm_at(precision) / r.gemm
    linear_rate = rate
    if _marlin_prefill(model, w, d):  # the prompt's GEMMs at Marlin's plateau, not cuBLAS's share
        linear_rate = rate * _decode_gemm_share(model, w, d, r, precision) / r.gemm_at(precision)
    compute = (linear / linear_rate + attention / rate) / _peak_flops(d, precision)
    budget = max(prompt, w.max_num_batched_tokens or _prefill_batch_tokens(d.engine))  # the user's token budget wins
    comm, comm_forward = (_prefill_comm(model, d, r, tp, tokens) for tokens in (prompt, budget))
    off_gpu = (mem.host.cpu_ram + mem.host.nvme) / max(d.gpus, 1)
    if d.engine == "llamacpp" and d.gpu_layers is not None:  # weights only: the CPU layers' KV stays put
        total = weight_bytes(model, w.weights).total / tp
        off_gpu = total * (1 - min(max(d.gpu_layers, 0), model.num_layers) / model.num_layers)
    link = float(efficiency_table()["links"]["nvme_gbps"]) * GB if mem.host.nvme else r.pcie_h2d
    return _Prefill(prompt=prompt, compute=compute, read=weights / r.mem_bw,
                    comm=comm, offload=off_gpu / link, budget=budget, comm_forward=comm_forward)


def _prefill_comm(model: ModelArch, d: Deployment, r: Rates, tp: int, tokens: int) -> float:
    """Two all-reduces per layer of a prefill forward of `tokens` prompt tokens: the message is the
    forward's hidden states (tokens x hidden x 2 bytes), all its prompts' tokens together (a packed
    forward runs its layers once over the concatenated prompts), at the bus bandwidth the engine gets
    for that size."""
    return 2 * model.num_layers * allreduce_message_seconds(d, r, tokens * model.hidden_size * 2.0, tp, tokens)


def output_lengths(requests: int, mean: int, cap: int) -> list[int]:
    """Output lengths of `requests` chat requests: exponential quantiles with `mean` (ShareGPT's
    are: the 320 prompts of LambdaLabsML/vllm-benchmark results/prompt_320/1xH100-80GB-SXM/
    Mistral-7B-Instruct-v0.3_tp1_len2000.json@de55d46 have mean 224.4 and standard deviation 228.9,
    a coefficient of variation of 1.02 where an exponential has 1.0), each at most `cap`, in a
    fixed shuffled order (benchmark_serving sends the sampled dataset in its own order)."""
    import random

    raw = [-math.log(1 - (i + 0.5) / requests) for i in range(requests)]
    scale = mean * requests / sum(raw)
    lengths = [min(cap, max(1, round(x * scale))) for x in raw]
    random.Random(0).shuffle(lengths)
    return lengths


def benchmark_run(model: ModelArch, w: Workload, d: Deployment, mem: MemoryResult, r: Rates,
                  requests: int, steady: InferSpeed,
                  recorded: Sequence[tuple[int, int]] | None = None) -> InferSpeed:
    """A finite benchmark run (vLLM benchmark_serving --num-prompts N --request-rate inf): N prompts
    sent at once, at most the engine's running slots (--concurrency, less when the KV pool holds
    fewer) decoding together; each admitted request's prefill runs before its first token (V0 runs
    prefill steps; chunked prefill spends the same compute); every decode step takes the step time
    of the batch still running, so the run drains at small batches behind its longest outputs.
    The throughput is the run's output tokens over its duration, as benchmark_serving reports it; the
    time per output token is the run's median inter-token gap (benchmark_serving's median ITL): the
    median over every token of its step's time, the collector pauses apart (a few long gaps).
    `recorded` replays a recorded run's own (prompt, output) tokens per request, in the order sent
    (gpuwise.replay), in place of `requests` drawn lengths at the workload's means: a prompt's prefill
    is costed by its tokens (its attention's quadratic part at the workload's mean prompt), and a
    request counted at 0 output tokens still takes one step (its end-of-sequence token) but adds no
    tokens, as the benchmark counts them."""
    tp = tensor_parallel(model, d)
    slots = w.concurrency
    cap = mem.capacity
    if d.engine in POOL_ENGINES and cap is not None and 1 <= cap.max_concurrency < slots:
        slots = int(cap.max_concurrency)
    if recorded:
        prompts = [p for p, _ in recorded]
        counted = [o for _, o in recorded]  # gpuwise.replay: each >= 0
    else:
        counted = output_lengths(requests, w.output_len, max(1, model.max_context - w.prompt_len))
        prompts = [w.prompt_len] * len(counted)
    lengths = [max(1, o) for o in counted]
    weights = _decode_weight_bytes(model, w, slots) / (tp * d.pp)
    pre = _prefill(model, w, d, mem, r, tp, compute_precision(model, w, d), weights)
    stage: dict[int, _Step] = {}

    def step_time(batch: int, held: float) -> tuple[float, float]:
        """One step (a token for each of `batch` sequences holding `held` tokens; the step is costed
        at the mean hold), and its pause part: under pipeline parallel, pp stage passes of a
        micro-batch (infer_speed)."""
        micro = micro_batch(batch, d.pp)
        if micro not in stage:
            stage[micro] = _decode_step(model, w, d, mem, r, micro, tp)
        part = stage[micro]
        t = part.holding(held / (batch * _avg_kv_tokens(w)))
        return t * d.pp, part.pause * d.pp

    import heapq

    seconds, step, queue = 0.0, 0, iter(zip(lengths, prompts, strict=True))
    running: list[tuple[int, int, int]] = []  # (the step each running request ends at, the step it began, its prompt)
    began = 0  # the sum of the running requests' first steps
    held_prompts = 0  # the sum of the running requests' prompt tokens
    gaps: list[tuple[float, int]] = []  # (a step's time without its pause, tokens it gives)
    waiting = len(lengths)
    while waiting or running:
        admitted = 0
        while waiting and len(running) < slots:
            length, prompt = next(queue)
            heapq.heappush(running, (step + length, step, prompt))
            began += step
            held_prompts += prompt
            waiting -= 1
            admitted += max(1, prompt)
        if admitted:  # the prompts admitted together fill whole prefill forwards
            seconds += pre.seconds(admitted / pre.prompt)
        steps = running[0][0] - step  # until the next request finishes, the batch stays the same
        n = len(running)
        held = held_prompts + n * (step + steps / 2) - began  # each holds its prompt and its output so far
        t, pause = step_time(n, held)
        seconds += steps * t
        gaps.append((t - pause, steps * n))
        step = running[0][0]
        while running and running[0][0] == step:
            _, first, prompt = heapq.heappop(running)
            began -= first
            held_prompts -= prompt
    itl = _weighted_median(gaps)
    return dataclasses.replace(steady, throughput_tokens_per_s=sum(counted) / seconds, run_requests=len(lengths),
                               run_seconds=seconds, tpot_s=itl, decode_tokens_per_s=1 / itl)


def _weighted_median(values: list[tuple[float, int]]) -> float:
    """The value at which half the total weight lies below (the median over every token)."""
    ordered = sorted(values)
    half = sum(weight for _, weight in ordered) / 2
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]
