"""`gpuwise submit` on Ray: the job runs as a task asking for its declared GPU memory.

Ray starts a task only on a node whose free custom resources cover the request, so two
jobs that together need more `gpu_memory_gib` than a node has wait or go elsewhere: the
small-team queue the guides describe, with Ray's scheduler doing the matching. A request
no node could ever satisfy is refused up front (Ray would leave it pending forever).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.jobs import JobSpec
from gpuwise.fleet.ray_conn import GPU_MEMORY, RayNode, alive_nodes, connect
from gpuwise.i18n import Text

__all__ = ["JobResult", "cluster_inventory", "run_here", "submit_jobs"]

_TAIL = 4000  # characters of stdout/stderr kept


@dataclass(frozen=True)
class JobResult:
    job: JobSpec
    node_id: str
    node_ip: str
    returncode: int
    stdout: str
    stderr: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.job.name, "memory_gib": self.job.memory_gib, "memory_source": self.job.memory_source,
                "gpus": self.job.gpus, "node_id": self.node_id, "node_ip": self.node_ip,
                "returncode": self.returncode, "stdout": self.stdout, "stderr": self.stderr}


def run_here(command: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """Runs on the node Ray chose: the command without a shell, its exit status and output tails."""
    import subprocess

    import ray

    try:
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s, check=False)
        code, so, se = out.returncode, out.stdout, out.stderr
    except FileNotFoundError as exc:
        code, so, se = 127, "", str(exc)
    except subprocess.TimeoutExpired as exc:
        code, so, se = 124, str(exc.stdout or ""), f"timed out after {timeout_s:g} s"
    ctx = ray.get_runtime_context()
    return {"node_id": ctx.get_node_id(), "returncode": code, "stdout": so[-_TAIL:], "stderr": se[-_TAIL:]}


def _check_feasible(job: JobSpec, nodes: list[RayNode]) -> None:
    need = job.memory_gib or 0.0
    fits = [n for n in nodes if n.gpu_memory_gib >= need and n.gpus >= job.gpus]
    if not fits:
        best = max((n.gpu_memory_gib for n in nodes), default=0.0)
        raise InputError(Text(f"Job '{job.name}' asks for {need:g} GiB of GPU memory and {job.gpus} GPU(s); the "
                              f"largest node advertises {best:g} GiB: it would wait forever.",
                              f"任务“{job.name}”需要 {need:g} GiB 显存与 {job.gpus} 张 GPU；最大的节点只有 "
                              f"{best:g} GiB：它会永远等待。"),
                         hint=Text("Advertise memory with `ray start --resources` as `gpuwise inventory` prints, "
                                   "or ask for less.",
                                   "请按 `gpuwise inventory` 的输出用 `ray start --resources` 声明显存，或减少需求。"))


def submit_jobs(jobs: Sequence[JobSpec], address: str | None, connect_s: float = 30.0) -> list[JobResult]:
    """Run the jobs (sized already) on the cluster at once; Ray places each by its declared memory."""
    ray = connect(address, connect_s)
    nodes = alive_nodes(ray)
    for job in jobs:
        _check_feasible(job, nodes)
    task = ray.remote(run_here)
    refs = [task.options(name=j.name, num_gpus=j.gpus, num_cpus=j.cpus, max_retries=0,
                         resources={GPU_MEMORY: j.memory_gib or 0.0}).remote(j.command, j.timeout_s) for j in jobs]
    deadline = max(j.timeout_s for j in jobs) + 60.0
    _done, pending = ray.wait(refs, num_returns=len(refs), timeout=deadline)
    if pending:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise InputError(Text(f"{len(pending)} job(s) were not done within {deadline:g} s.",
                              f"有 {len(pending)} 个任务未在 {deadline:g} 秒内完成。"))
    ips = {n.node_id: n.ip for n in nodes}
    return [JobResult(j, out["node_id"], ips.get(out["node_id"], "?"), out["returncode"], out["stdout"], out["stderr"])
            for j, out in zip(jobs, (ray.get(r) for r in refs), strict=True)]


def cluster_inventory(address: str | None, connect_s: float = 30.0) -> list[dict[str, Any]]:
    ray = connect(address, connect_s)
    return [{"node_id": n.node_id, "ip": n.ip, "gpus": n.gpus, GPU_MEMORY: n.gpu_memory_gib,
             "cpus": n.resources.get("CPU", 0.0)} for n in alive_nodes(ray)]
