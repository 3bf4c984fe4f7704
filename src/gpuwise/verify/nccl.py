"""All-reduce bus-bandwidth sweep over torch.distributed (NCCL on GPUs, gloo on the CPU).

One process per GPU, as training runs it. Conventions from nccl-tests doc/PERFORMANCE.md:
algbw = S / t for a message of S bytes; busbw = algbw x 2(n-1)/n for all-reduce, which
makes the number comparable with a link's bandwidth whatever n is.
The sweep is time-bounded: ranks that outlive the deadline are killed.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import socket
import time
from datetime import timedelta
from typing import Any

from gpuwise.verify.raw import AllReducePoint, AllReduceRun

__all__ = ["allreduce_sweep", "busbw", "sweep_sizes"]

MiB = 2**20


def busbw(algbw: float, n: int) -> float:
    """All-reduce bus bandwidth: algbw x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    return algbw * 2 * (n - 1) / n


def sweep_sizes(max_bytes: int, min_bytes: int = 1 * MiB, step: int = 4) -> list[int]:
    """Message sizes from min to max, multiplying by `step` (1 MiB, 4 MiB, ... max)."""
    sizes, s = [], min_bytes
    while s < max_bytes:
        sizes.append(s)
        s *= step
    sizes.append(max_bytes)
    return sizes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world: int, spec: dict[str, Any], out: Any) -> None:
    """One rank: check a sum, then time each message size; rank 0 reports."""
    import torch
    import torch.distributed as dist

    cuda = spec["device_type"] == "cuda"
    dev = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(spec["backend"], init_method=spec["init_method"], rank=rank,
                            world_size=world, timeout=timedelta(seconds=spec["timeout_s"]))
    try:
        probe = torch.full((1024,), float(rank + 1), device=dev)
        dist.all_reduce(probe)
        correct = bool(torch.all(probe == world * (world + 1) / 2).item())
        points = []
        for size in spec["sizes"]:
            t = torch.zeros(size // 4, dtype=torch.float32, device=dev)
            for _ in range(spec["warmup"]):
                dist.all_reduce(t)
            _sync(torch, cuda)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(spec["iters"]):
                dist.all_reduce(t)
            _sync(torch, cuda)
            elapsed = torch.tensor([(time.perf_counter() - t0) / spec["iters"]], device=dev)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
            points.append((size, float(elapsed.item())))
            # correctness at this size too (nccl-tests -c): the large-message protocols differ
            # from the small probe's, and a faulty link corrupts only some of them
            t.fill_(float(rank + 1))
            dist.all_reduce(t)
            correct = correct and bool(torch.all(t == world * (world + 1) / 2).item())
            del t
        if rank == 0:
            out.put({"points": points, "correct": correct})
    finally:
        dist.destroy_process_group()


def _sync(torch: Any, cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def allreduce_sweep(n: int, sizes: list[int], *, backend: str = "nccl", device_type: str = "cuda",
                    iters: int = 10, warmup: int = 3, timeout_s: float = 180.0) -> AllReduceRun:
    """Spawn n ranks, sweep `sizes` (bytes), return algbw and busbw per size.

    Raises TimeoutError when the ranks do not finish within timeout_s (they are killed),
    RuntimeError when a rank dies.
    """
    spec = {"backend": backend, "device_type": device_type, "sizes": sizes, "iters": iters,
            "warmup": warmup, "timeout_s": timeout_s,
            "init_method": f"tcp://127.0.0.1:{_free_port()}"}
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, n, spec, out), daemon=True) for r in range(n)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    try:
        result = _wait(out, procs, deadline)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
    points = tuple(AllReducePoint(size_bytes=s, seconds=t, algbw_bytes_per_s=s / t,
                                  busbw_bytes_per_s=busbw(s / t, n)) for s, t in result["points"])
    return AllReduceRun(n_gpus=n, backend=backend, points=points, correct=result["correct"])


def _wait(out: Any, procs: list[Any], deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        try:
            return dict(out.get(timeout=0.5))
        except queue_mod.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"an all-reduce rank exited with code {dead[0].exitcode}")
    raise TimeoutError("all-reduce sweep did not finish in time")
