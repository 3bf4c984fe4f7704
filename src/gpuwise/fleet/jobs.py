"""Jobs that declare the GPU memory they need: the job file, and its Kubernetes form.

    name = "eval-7b"
    command = ["python", "eval.py"]   # run as is, no shell
    gpus = 1
    memory_gib = 20                    # declared; or leave it out and give [estimate]
    timeout_s = 3600
    [estimate]                         # gpuwise sizes it: memory per GPU x gpus
    model = "qwen2.5-7b"
    card = "rtx-4090"
    task = "infer"                     # any `gpuwise estimate` task
    context = 8192

On Ray the job is a task asking for `gpu_memory_gib` (the resource `gpuwise inventory`
tells each node to advertise) plus its GPUs, so Ray's scheduler only starts it where that
much GPU memory is free. On Kubernetes a memory-aware device plugin does the same: HAMi's
`nvidia.com/gpumem` (MiB per GPU) beside `nvidia.com/gpu` (HAMi README, "resources").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError, close_matches
from gpuwise.fleet.spec_file import check_keys, read_spec
from gpuwise.i18n import Text
from gpuwise.units import GiB

__all__ = ["JobSpec", "k8s_job", "load_job", "parse_job", "ray_job_submit_line", "sized"]

_LIMITS = {"gpus": (0, 64), "cpus": (0.0, 1024.0), "memory_gib": (0.0, 65_536.0), "timeout_s": (1.0, 7 * 86_400.0)}


@dataclass(frozen=True)
class JobSpec:
    name: str
    command: tuple[str, ...]
    gpus: int = 1
    cpus: float = 1.0
    memory_gib: float | None = None  # GPU memory for the whole job (all its GPUs together)
    timeout_s: float = 3600.0
    image: str = "python:3.11-slim"  # the Kubernetes form's container
    estimate: dict[str, Any] = field(default_factory=dict)  # `gpuwise estimate` flags, by name
    memory_source: str = "declared"


def _bad(origin: str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{origin}: {en}", f"{origin}：{zh}"),
                     hint=Text("See `gpuwise submit --help` for the job file.",
                               "任务文件格式见 `gpuwise submit --help`。"))


def _number(origin: str, key: str, v: Any) -> float:
    lo, hi = _LIMITS[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi or (key == "gpus" and v != int(v)):
        raise _bad(origin, f"{key} must be a number from {lo:g} to {hi:g}, got {v!r}.",
                   f"{key} 必须是 {lo:g} 到 {hi:g} 的数，实际为 {v!r}。")
    return float(v)


def parse_job(doc: dict[str, Any], origin: str) -> JobSpec:
    check_keys(origin, "", doc, [f.name for f in fields(JobSpec) if f.name != "memory_source"], _bad)
    cmd = doc.get("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(x, str) and x for x in cmd):
        raise _bad(origin, "command must be a non-empty list of strings, e.g. [\"python\", \"train.py\"].",
                   "command 必须是非空字符串列表，例如 [\"python\", \"train.py\"]。")
    name = doc.get("name", Path(origin).stem)
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum() or len(name) > 63:
        raise _bad(origin, f"name must be letters, digits, - and _ (at most 63), got {name!r}.",
                   f"name 只能含字母、数字、- 与 _（至多 63 个），实际为 {name!r}。")
    values: dict[str, Any] = {k: _number(origin, k, doc[k]) for k in _LIMITS if k in doc}
    if "gpus" in values:
        values["gpus"] = int(values["gpus"])
    est = doc.get("estimate", {})
    if not isinstance(est, dict):
        raise _bad(origin, "[estimate] must be a table.", "[estimate] 必须是表。")
    if "memory_gib" not in values and not est:
        raise _bad(origin, "declare memory_gib, or give [estimate] for gpuwise to size the job.",
                   "请声明 memory_gib，或给出 [estimate] 让 gpuwise 估算。")
    image = doc.get("image", JobSpec.image)
    return JobSpec(name=name.lower().replace("_", "-"), command=tuple(cmd), estimate=dict(est),
                   image=str(image), **values)


def load_job(path: Path) -> JobSpec:
    doc = read_spec(path, Text("job file", "任务文件"))
    return parse_job(doc, str(path))


def sized(job: JobSpec) -> JobSpec:
    """The job with memory_gib filled: declared, or gpuwise's estimate per GPU x GPUs."""
    if job.memory_gib is not None:
        return job
    from dataclasses import replace

    from gpuwise.service import EstimateRequest, run_estimate

    known = set(EstimateRequest.field_names())
    bad = sorted(set(job.estimate) - known)
    if bad:
        near = close_matches(bad[0], known)
        tip = f" Did you mean '{near[0]}'?" if near else ""
        raise _bad(job.name, f"[estimate] has unknown key '{bad[0]}'.{tip}", f"[estimate] 有未知的键“{bad[0]}”。{tip}")
    args = {"gpus": max(job.gpus, 1), **job.estimate}
    result, _ = run_estimate(EstimateRequest(**args))
    per_gpu = result.memory.breakdown.required / GiB
    total = math.ceil(per_gpu * max(job.gpus, 1) * 10) / 10
    return replace(job, memory_gib=total, memory_source=f"estimate: {args.get('model')} on {args.get('card')}")


def ray_job_submit_line(job: JobSpec) -> str:
    """The same request for Ray's job server (`ray job submit`, needs the dashboard)."""
    import json
    import shlex

    res = json.dumps({"gpu_memory_gib": job.memory_gib})
    return (f"ray job submit --entrypoint-num-gpus {job.gpus} --entrypoint-num-cpus {job.cpus:g} "
            f"--entrypoint-resources {shlex.quote(res)} -- {shlex.join(job.command)}")


def k8s_job(job: JobSpec) -> dict[str, Any]:
    """A batch/v1 Job asking HAMi for the GPUs and the GPU memory per GPU (MiB)."""
    limits: dict[str, Any] = {"cpu": f"{job.cpus:g}"}
    if job.gpus:
        per_gpu_mib = math.ceil((job.memory_gib or 0) * 1024 / job.gpus)
        limits.update({"nvidia.com/gpu": job.gpus, "nvidia.com/gpumem": per_gpu_mib})
    container = {"name": job.name, "image": job.image, "command": list(job.command),
                 "resources": {"limits": limits}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job.name},
            "spec": {"backoffLimit": 0, "activeDeadlineSeconds": int(job.timeout_s),
                     "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}
