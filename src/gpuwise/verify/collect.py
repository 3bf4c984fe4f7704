"""Gather the evidence on this machine: inventory, software, benchmarks under load.

NVML first, `nvidia-smi -q -x` when NVML is unusable, NoDeviceError when neither finds
a GPU. Benchmarks run in a child process with a deadline (gpuwise.verify.bench) while
this process samples links, clocks-event reasons and temperatures: that is how links
are read under load. Nothing here changes a GPU setting.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gpuwise.errors import NoDeviceError
from gpuwise.i18n import Text
from gpuwise.verify import inventory as inv
from gpuwise.verify.nvml import NotAvailable, Nvml, NvmlUnavailable, is_na
from gpuwise.verify.raw import (
    SCHEMA_VERSION,
    Evidence,
    GpuBench,
    LoadSample,
    MatmulRun,
    SoftwareInfo,
)
from gpuwise.verify.smi_xml import load_reading_from_xml, parse_smi_xml, parse_topo_matrix, run_smi

__all__ = ["PLANS", "Plan", "collect", "no_device_error", "software"]

Progress = Callable[[str, float], None]  # (what is happening, fraction done 0..1)
GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Plan:
    """How hard a run pushes: sizes, repetitions, load time and deadlines."""

    name: str
    copy_bytes: int
    matmul_n: int
    pcie_bytes: int
    iters: int
    load_s: float
    allreduce_max_bytes: int
    allreduce_iters: int
    bench_timeout_s: float  # per GPU, plus a fixed 60 s for start-up
    allreduce_timeout_s: float


PLANS = {
    # >= 1 GiB copies and 8192^3 matmuls (acceptance.md s4); NCCL >= 512 MiB (nccl-tests#212).
    "quick": Plan("quick", 1 * GiB, 8192, 256 * MiB, 10, 3.0, 512 * MiB, 5, 60.0, 180.0),
    "full": Plan("full", 4 * GiB, 8192, 1 * GiB, 50, 15.0, 4 * GiB, 20, 180.0, 420.0),
}


def no_device_error(why: str) -> NoDeviceError:
    return NoDeviceError(
        Text(f"No NVIDIA GPU or driver found ({why}).", f"未找到 NVIDIA GPU 或驱动（{why}）。"),
        hint=Text("Run `gpuwise doctor` to see why and how to fix it; "
                  "`gpuwise verify --from raw.json` judges saved evidence without a GPU.",
                  "运行 `gpuwise doctor` 查看原因与修复方法；"
                  "`gpuwise verify --from raw.json` 可在无 GPU 时评判已保存的数据。"))


def software() -> SoftwareInfo:
    from gpuwise.verify.bench import software_info

    info = software_info()
    if "error" in info:
        na = NotAvailable(str(info["error"]))
        return SoftwareInfo(na, na, na, na, na, info.get("cuda_visible_devices"))
    nccl = info.get("nccl_version")
    if nccl is None:
        nccl = NotAvailable(str(info.get("nccl_version_error", "no NCCL in this torch build")))
    return SoftwareInfo(info["torch_version"], info["torch_cuda"], info["cuda_available"],
                        info["cuda_device_count"], nccl, info.get("cuda_visible_devices"))


def _inventory_nvml(nv: Nvml) -> dict[str, Any]:
    n = nv.device_count()
    if n == 0:
        raise no_device_error("NVML sees no GPU")
    driver, cuda = inv.read_system(nv)
    gpus = tuple(inv.read_gpu(nv, i) for i in range(n))
    topo, p2p = inv.read_topology(nv, n)
    return {"source": "nvml", "driver_version": driver, "cuda_driver_version": cuda, "gpus": gpus,
            "topology": topo, "p2p": p2p}


def _inventory_smi(why: str) -> dict[str, Any]:
    text = run_smi(["-q", "-x"])
    if text is None:
        raise no_device_error(f"{why}; nvidia-smi is missing or failed")
    try:
        parsed = parse_smi_xml(text)
    except (ValueError, SyntaxError) as exc:
        raise no_device_error(f"{why}; nvidia-smi output unreadable: {exc}") from exc
    if not parsed.gpus:
        raise no_device_error("nvidia-smi lists no GPU")
    topo_text = run_smi(["topo", "-m"]) if len(parsed.gpus) > 1 else None
    topo: Any = parse_topo_matrix(topo_text) if topo_text else NotAvailable("nvidia-smi topo -m failed")
    return {"source": "nvidia-smi", "driver_version": parsed.driver_version,
            "cuda_driver_version": parsed.cuda_driver_version, "gpus": parsed.gpus,
            "topology": topo, "p2p": NotAvailable("needs NVML (nvidia-ml-py)")}


class _Sampler:
    """Polls each GPU every `period` seconds in a thread while the load runs."""

    def __init__(self, read: Callable[[int], dict[str, Any]], n: int, period: float = 0.25) -> None:
        self.read, self.n, self.period = read, n, period
        self.readings: dict[int, list[dict[str, Any]]] = {i: [] for i in range(n)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for i in range(self.n):
                reading = self.read(i)
                if reading:
                    self.readings[i].append(reading)
            self._stop.wait(self.period)

    def __enter__(self) -> _Sampler:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def result(self) -> tuple[LoadSample, ...]:
        return tuple(inv.merge_load(i, self.readings[i]) for i in range(self.n))


def _smi_reader(n: int) -> Callable[[int], dict[str, Any]]:
    cache: dict[str, Any] = {"t": 0.0, "els": ()}

    def read(i: int) -> dict[str, Any]:
        if time.monotonic() - cache["t"] > 1.0:  # nvidia-smi is slow: one call per second
            text = run_smi(["-q", "-x"], timeout_s=10)
            cache["els"] = parse_smi_xml(text).gpu_elements if text else ()
            cache["t"] = time.monotonic()
        els = cache["els"]
        return load_reading_from_xml(els[i]) if i < len(els) else {}

    return read


def _run_bench_child(spec: dict[str, Any], timeout_s: float, progress: Progress,
                     total: int) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "gpuwise.verify.bench", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    records: list[dict[str, Any]] = []
    try:
        for line in proc.stdout or ():
            if line.startswith("{"):
                records.append(json.loads(line))
                progress(f"bench {records[-1]['kind']} GPU{records[-1]['index']}",
                         0.2 + 0.6 * min(1.0, len(records) / total))
        proc.wait()
    finally:
        timer.cancel()
    if proc.returncode != 0 and not records:
        err = (proc.stderr.read() if proc.stderr else "")[-400:]
        records.append({"kind": "fatal", "error": f"benchmark process failed ({proc.returncode}): {err}"})
    return records


def _fold_bench(n: int, records: list[dict[str, Any]]) -> tuple[GpuBench, ...]:
    out = []
    for i in range(n):
        mine = [r for r in records if r.get("index") == i]
        fields: dict[str, Any] = {}
        for kind, key in (("mem_bw", "mem_bw_bytes_per_s"), ("h2d", "h2d_bytes_per_s"),
                          ("d2h", "d2h_bytes_per_s")):
            rec = next((r for r in mine if r["kind"] == kind), None)
            fields[key] = (rec["result"]["bytes_per_s"] if rec and "result" in rec
                           else NotAvailable(rec["error"] if rec else "did not run (timeout?)"))
        runs = tuple(MatmulRun(**r["result"]) for r in mine if r["kind"] == "matmul" and "result" in r)
        skipped = tuple((r["precision"], r.get("skipped") or r.get("error", "?"))
                        for r in mine if r["kind"] == "matmul" and "result" not in r)
        out.append(GpuBench(index=i, matmul=runs, matmul_skipped=skipped, **fields))
    return tuple(out)


def _benchmarks(plan: Plan, n: int, reader: Callable[[int], dict[str, Any]],
                progress: Progress) -> tuple[Any, Any]:
    spec = {"gpus": list(range(n)), "device_type": "cuda", "copy_bytes": plan.copy_bytes,
            "matmul_n": plan.matmul_n, "pcie_bytes": plan.pcie_bytes, "iters": plan.iters,
            "precisions": ["bf16", "fp16", "fp8"], "load_s": plan.load_s}
    with _Sampler(reader, n) as sampler:
        records = _run_bench_child(spec, 60.0 + plan.bench_timeout_s * n, progress, total=7 * n)
    fatal = next((r for r in records if r["kind"] == "fatal"), None)
    if fatal and len(records) == 1:
        return NotAvailable(fatal["error"]), sampler.result()
    return _fold_bench(n, records), sampler.result()


def _allreduce(plan: Plan, n: int) -> Any:
    from gpuwise.verify.nccl import allreduce_sweep, sweep_sizes

    try:
        return allreduce_sweep(n, sweep_sizes(plan.allreduce_max_bytes, step=8),
                               iters=plan.allreduce_iters, timeout_s=plan.allreduce_timeout_s)
    except (RuntimeError, TimeoutError, OSError) as exc:
        return NotAvailable(str(exc))


def collect(mode: str = "quick", *, nvml_lib: Any | None = None, progress: Progress | None = None,
            run_software: Callable[[], SoftwareInfo] = software) -> Evidence:
    """Collect evidence here. mode: "quick", "full" or "inventory" (no benchmarks)."""
    say = progress or (lambda what, frac: None)
    say("inventory", 0.0)
    nv: Nvml | None = None
    try:
        nv = Nvml(nvml_lib).open()
        base = _inventory_nvml(nv)
    except NvmlUnavailable as exc:
        base = _inventory_smi(str(exc))
    try:
        say("software", 0.1)
        sw = run_software()
        n = len(base["gpus"])
        ev = Evidence(schema_version=SCHEMA_VERSION,
                      collected_at=datetime.now(UTC).isoformat(timespec="seconds"),
                      host=socket.gethostname(), mode=mode, software=sw, **base)
        if mode == "inventory":
            return ev
        if not sw.cuda_available or is_na(sw.cuda_available):
            why = sw.torch_version.reason if is_na(sw.torch_version) else "torch cannot use CUDA"
            return replace(ev, bench=NotAvailable(why), load=NotAvailable(why),
                           allreduce=NotAvailable(why))
        reader = (lambda i: inv.read_load_sample(nv, i)) if nv else _smi_reader(n)
        bench, load = _benchmarks(PLANS[mode], n, reader, say)
        say("all-reduce", 0.85)
        ar: Any = _allreduce(PLANS[mode], n) if n > 1 else NotAvailable("one GPU")
        say("done", 1.0)
        return replace(ev, bench=bench, load=load, allreduce=ar)
    finally:
        if nv is not None:
            nv.close()
