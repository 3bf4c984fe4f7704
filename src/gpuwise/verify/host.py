"""The host around the GPUs: CPUs, memory, disk, NUMA, kernel modules, fabric manager, the
kernel log's Xid lines, and the raw tool outputs kept in the evidence bundle. Read-only,
Linux paths; anything unreadable becomes NotAvailable with the reason."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuwise.verify.nvml import NotAvailable
from gpuwise.verify.raw import HostInfo, XidEvent

__all__ = ["Reader", "parse_xid_lines", "read_host", "read_raw_outputs"]

Reader = Callable[[str], str | None]
Runner = Callable[[list[str]], str | None]
_MODULES = ("nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nouveau")
# "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),?(.*)")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _meminfo_bytes(text: str | None) -> Any:
    match = re.search(r"^MemTotal:\s+(\d+) kB", text or "", re.MULTILINE)
    return int(match.group(1)) * 1024 if match else NotAvailable("/proc/meminfo not readable")


def _cpu_model(text: str | None) -> Any:
    match = re.search(r"^model name\s*:\s*(.+)$", text or "", re.MULTILINE)
    return match.group(1).strip() if match else NotAvailable("/proc/cpuinfo has no model name")


def _modules(text: str | None) -> Any:
    if text is None:
        return NotAvailable("/proc/modules not readable")
    loaded = {line.split()[0] for line in text.splitlines() if line.strip()}
    return tuple(sorted(m for m in _MODULES if m in loaded))


def _numa_nodes() -> Any:
    try:
        nodes = [d for d in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", d)]
    except OSError:
        return NotAvailable("/sys/devices/system/node not readable")
    return len(nodes) or NotAvailable("no NUMA node listed")


def _fabric_manager(run: Runner) -> Any:
    if shutil.which("systemctl") is None:
        return NotAvailable("systemctl not available")
    state = run(["systemctl", "is-active", "nvidia-fabricmanager"])
    if state is not None:
        return state.strip() or "unknown"
    listed = run(["systemctl", "list-unit-files", "nvidia-fabricmanager.service"])
    return "inactive" if listed and "nvidia-fabricmanager" in listed else "not installed"


def _disk_rate(path: str, size: int) -> tuple[Any, Any]:
    """A short write (fsync'd) and read of `size` bytes in `path`; page cache may help the read."""
    block = os.urandom(1 << 20)
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".gpuwise-disk-") as fh:
            t0 = time.perf_counter()
            for _ in range(size >> 20):
                fh.write(block)
            fh.flush()
            os.fsync(fh.fileno())
            write = size / (time.perf_counter() - t0)
            fh.seek(0)
            t0 = time.perf_counter()
            while fh.read(1 << 24):
                pass
            return write, size / (time.perf_counter() - t0)
    except OSError as exc:
        na = NotAvailable(f"disk test failed: {exc}")
        return na, na


def parse_xid_lines(text: str) -> list[tuple[str, XidEvent]]:
    """(PCI bus "0000:18:00", event) for each `NVRM: Xid` line of a kernel log."""
    out = []
    for line in text.splitlines():
        match = _XID.search(line)
        if match:
            out.append((match.group(1).lower(), XidEvent(int(match.group(2)), "kernel log", False,
                                                         match.group(3).strip()[:200])))
    return out


def read_host(read: Reader = _read, run: Runner = _run, disk_test_bytes: int = 0,
              path: str = ".") -> tuple[HostInfo, list[tuple[str, XidEvent]]]:
    """HostInfo and the kernel log's Xid events (dmesg needs privileges on many hosts)."""
    disk: Any
    free: Any
    try:
        usage: Any = shutil.disk_usage(path)
        disk, free = int(usage.total), int(usage.free)
    except OSError as exc:
        disk = free = NotAvailable(str(exc))
    write, rd = _disk_rate(path, disk_test_bytes) if disk_test_bytes else (NotAvailable("not run"),) * 2
    log = run(["dmesg"])
    xids = parse_xid_lines(log) if log else []
    info = HostInfo(
        cpu_cores=os.cpu_count() or NotAvailable("os.cpu_count() unknown"),
        cpu_model=_cpu_model(read("/proc/cpuinfo")), ram_bytes=_meminfo_bytes(read("/proc/meminfo")),
        numa_nodes=_numa_nodes(), disk_path=os.path.abspath(path), disk_bytes=disk, disk_free_bytes=free,
        disk_write_bytes_per_s=write, disk_read_bytes_per_s=rd, kernel_modules=_modules(read("/proc/modules")),
        dev_nvidia_uvm=os.path.exists("/dev/nvidia-uvm"), fabric_manager=_fabric_manager(run),
        kernel_log="read" if log is not None else "dmesg not readable (needs root or kernel.dmesg_restrict=0)")
    return info, xids


def read_raw_outputs(run: Runner = _run, limit: int = 2_000_000) -> dict[str, str]:
    """The tools' own outputs, kept verbatim (truncated at `limit` characters) in the bundle."""
    out = {}
    for name, cmd in (("nvidia-smi -q -x", ["nvidia-smi", "-q", "-x"]),
                      ("nvidia-smi topo -m", ["nvidia-smi", "topo", "-m"]),
                      ("lspci -nn -d 10de:", ["lspci", "-nn", "-d", "10de:"]),
                      ("uname -a", ["uname", "-a"])):
        text = run(cmd)
        if text is not None:
            out[name] = text[:limit]
    return out
