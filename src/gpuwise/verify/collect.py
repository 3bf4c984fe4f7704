"""Gather the evidence on this machine: inventory, host, software, load, benchmarks.

NVML first, `nvidia-smi -q -x` when NVML is unusable, NoDeviceError when neither finds a
GPU. Then, unless a GPU is already busy (and --force is not given):
1. CUDA's device list, mapped to NVML GPUs by PCI bus id (never by index);
2. the sustained window: one child per GPU, every GPU running GEMM and copies together for
   the plan's `load_s`, sampled once a second (clocks, reasons, power, temperature, link, ECC)
   while an NVML event set collects Xids;
3. the per-GPU benchmarks (pattern test over most of the free memory, copies, matmuls,
   host<->device), one GPU at a time so host copies do not share the host's bandwidth;
4. the all-reduce sweep.
Every child has a deadline; what did not finish is recorded as such, never dropped.
Nothing here changes a GPU setting.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gpuwise.errors import NoDeviceError
from gpuwise.i18n import Text
from gpuwise.verify import inventory as inv
from gpuwise.verify.nvml import NotAvailable, Nvml, NvmlUnavailable, is_na
from gpuwise.verify.raw import SCHEMA_VERSION, Evidence, SoftwareInfo
from gpuwise.verify.smi_xml import load_reading_from_xml, parse_smi_xml, parse_topo_matrix, run_smi

__all__ = ["PLANS", "Plan", "collect", "no_device_error", "planned_seconds", "software"]

Progress = Callable[[str, float], None]  # (what is happening, fraction done 0..1)
GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Plan:
    """How hard a run pushes: sizes, repetitions, the sustained window and deadlines."""

    name: str
    copy_bytes: int
    matmul_n: int
    pcie_bytes: int
    iters: int
    load_s: float  # the sustained window, every GPU loaded together
    allreduce_max_bytes: int
    allreduce_iters: int
    bench_timeout_s: float  # per GPU for the per-GPU benchmarks, plus a fixed 60 s for start-up
    allreduce_timeout_s: float
    memtest_fraction: float = 0.9  # of the free memory, written and read back
    disk_test_bytes: int = 256 * MiB
    startup_s: float = 60.0  # allowed for a child to import torch and start CUDA


PLANS = {
    # >= 1 GiB copies (the H100's L2 is 50 MB, the H200's 60 MB: 20x larger) and 8192^3 matmuls
    # (acceptance.md s4); NCCL >= 512 MiB (nccl-tests#212). quick: a 20 s window + ~2 s per GPU
    # of per-GPU benchmarks + start-ups + ~10 s all-reduce: ~42 s on 1 GPU, ~66 s on 8 (planned,
    # not yet timed on a GPU); full: 5 minutes of sustained load (DCGM diagnostic runs 180 s),
    # ~5.5 min on 1 GPU, ~7 min on 8.
    "quick": Plan("quick", 1 * GiB, 8192, 256 * MiB, 20, 20.0, 512 * MiB, 5, 30.0, 180.0),
    "full": Plan("full", 4 * GiB, 8192, 1 * GiB, 50, 300.0, 4 * GiB, 20, 120.0, 420.0,
                 disk_test_bytes=1 * GiB),
}


def planned_seconds(plan: Plan, n: int) -> float:
    """The planned length of a run on n GPUs (start-ups included), for docs and progress."""
    per_gpu = 2.0 if plan.name == "quick" else 8.0  # memtest + copies + 3 matmuls + host copies
    return 10 + plan.load_s + 10 + per_gpu * n + (10 if plan.name == "quick" else 40) * (n > 1)


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




def _attach_xids(gpus: tuple[Any, ...], events: list[tuple[Any, Any]]) -> tuple[Any, ...]:
    """Add Xid events to their GPUs: keys are NVML indices, or kernel-log PCI buses "0000:18:00"."""
    from gpuwise.verify.judge_identity import bus_key

    out = []
    for g in gpus:
        bus = None if is_na(g.pci_bus_id) else bus_key(g.pci_bus_id).rsplit(".", 1)[0]
        mine = [e for key, e in events if key == g.index or (isinstance(key, str) and key == bus)]
        out.append(replace(g, xid_events=tuple(g.xid_events) + tuple(mine)) if mine else g)
    return tuple(out)


def _read_host(plan: Plan | None) -> tuple[Any, list[tuple[Any, Any]], Any]:
    from gpuwise.verify.host import read_host, read_raw_outputs

    info, xids = read_host(disk_test_bytes=plan.disk_test_bytes if plan else 0)
    return info, list(xids), read_raw_outputs()


def collect(mode: str = "quick", *, nvml_lib: Any | None = None, progress: Progress | None = None,
            run_software: Callable[[], SoftwareInfo] = software, duration_s: float | None = None,
            force: bool = False, device_type: str = "cuda", plan: Plan | None = None,
            read_host: Callable[[Plan | None], tuple[Any, list[Any], Any]] = _read_host) -> Evidence:
    """Collect evidence here. mode: "quick", "full" or "inventory" (no load, no benchmarks).
    `duration_s` replaces the plan's sustained window; `force` benchmarks busy GPUs too;
    `device_type="cpu"` runs the same children on the CPU with `plan`'s small sizes (the test
    suite's path)."""
    from gpuwise.verify.checks import load_thresholds
    from gpuwise.verify.phases import busy_gpus, run_loaded

    say = progress or (lambda what, frac: None)
    say("inventory", 0.0)
    nv: Nvml | None = None
    try:
        nv = Nvml(nvml_lib).open()
        base = _inventory_nvml(nv)
    except NvmlUnavailable as exc:
        base = _inventory_smi(str(exc))
    plan = None if mode == "inventory" else plan or PLANS.get(mode)
    try:
        say("host and software", 0.05)
        host, kernel_xids, raw_outputs = read_host(plan)
        sw = run_software()
        base["gpus"] = _attach_xids(base["gpus"], kernel_xids)
        n = len(base["gpus"])
        ev = Evidence(schema_version=SCHEMA_VERSION,
                      collected_at=datetime.now(UTC).isoformat(timespec="seconds"),
                      host=socket.gethostname(), mode=mode, software=sw, host_info=host,
                      raw_outputs=raw_outputs, **base)
        if plan is None:
            return ev
        seconds = plan.load_s if duration_s is None else duration_s
        ev = replace(ev, load_seconds=seconds)
        if device_type == "cuda" and (not sw.cuda_available or is_na(sw.cuda_available)):
            why = sw.torch_version.reason if is_na(sw.torch_version) else "torch cannot use CUDA"
            return replace(ev, bench=NotAvailable(why), load=NotAvailable(why), allreduce=NotAvailable(why))
        busy = busy_gpus(ev.gpus, float(load_thresholds().get("tenancy", "used_fail_gib")) * GiB)
        if busy and not force:
            why = "GPU busy, not benchmarked without --force: " + "; ".join(busy)
            return replace(ev, bench=NotAvailable(why), load=NotAvailable(why), allreduce=NotAvailable(why))
        from gpuwise.verify.events import XidWatcher

        watcher = XidWatcher(nv, n).start() if nv is not None else None
        reader = (lambda i: inv.read_load_sample(nv, i)) if nv else _smi_reader(n)
        loaded = run_loaded(plan, ev.gpus, reader, say, device_type=device_type, load_s=seconds)
        say("all-reduce", 0.85)
        ar: Any = _allreduce(plan, n, device_type) if n > 1 else NotAvailable("one GPU")
        during = watcher.stop() if watcher is not None else []
        say("done", 1.0)
        return replace(ev, gpus=_attach_xids(ev.gpus, list(during)), bench=loaded.bench, load=loaded.load,
                       allreduce=ar, cuda_devices=loaded.cuda_devices, bench_process=loaded.outcome)
    finally:
        if nv is not None:
            nv.close()


def _allreduce(plan: Plan, n: int, device_type: str = "cuda") -> Any:
    from gpuwise.verify.nccl import allreduce_sweep, sweep_sizes

    backend = "nccl" if device_type == "cuda" else "gloo"
    sizes = sweep_sizes(plan.allreduce_max_bytes, step=8) if device_type == "cuda" else [1 << 16]
    try:
        return allreduce_sweep(n, sizes, backend=backend, device_type=device_type,
                               iters=plan.allreduce_iters, timeout_s=plan.allreduce_timeout_s)
    except (RuntimeError, TimeoutError, OSError) as exc:
        return NotAvailable(str(exc))
