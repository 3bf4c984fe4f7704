"""`gpuwise doctor`: why can't this machine use its NVIDIA GPU, and how to fix it.

Each probe reads the environment through `Probe` (injectable, so the tests can play any
broken machine) and yields Findings with a fix in English and Chinese. Read-only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gpuwise.i18n import Text
from gpuwise.verify.checks import load_thresholds
from gpuwise.verify.judge import version_tuple
from gpuwise.verify.judge_perf import torch_wheel_command

__all__ = ["DoctorReport", "Finding", "Probe", "diagnose"]

Severity = Literal["ok", "info", "warn", "error"]
DOCTOR_SCHEMA_VERSION = 1
_X_NAMES = ("Xorg", "/usr/lib/xorg/Xorg", "Xwayland", "gnome-shell", "kwin", "X")


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    title: Text
    fix: Text | None = None
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "title": self.title.en,
                "title_zh": self.title.zh, "fix": self.fix.en if self.fix else None,
                "fix_zh": self.fix.zh if self.fix else None, "evidence": self.evidence}


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": DOCTOR_SCHEMA_VERSION, "kind": "gpuwise.doctor", "ok": self.ok,
                "findings": [f.to_dict() for f in self.findings]}


def _run(cmd: list[str], timeout_s: float = 20.0) -> tuple[int, str] | None:
    """(exit code, stdout+stderr), or None when the program is not installed."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 124, str(exc)
    return done.returncode, done.stdout + done.stderr


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _torch_info() -> dict[str, Any]:
    from gpuwise.verify.bench import software_info

    return software_info()


@dataclass(frozen=True)
class Probe:
    """How doctor sees the machine; every reader can be replaced in tests."""

    read: Callable[[str], str | None] = _read
    run: Callable[[list[str]], tuple[int, str] | None] = _run
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    torch_info: Callable[[], dict[str, Any]] = _torch_info
    exists: Callable[[str], bool] = os.path.exists
    platform: str = sys.platform


@dataclass
class _State:
    """What earlier probes learned, for later ones."""

    driver: str | None = None
    cuda: str | None = None
    gpus: int | None = None
    smi_xml: str | None = None


def _hw_present(p: Probe) -> Finding | None:
    out = p.run(["lspci", "-d", "10de:"])
    if out is None or out[0] != 0:
        return None
    if not out[1].strip():
        return Finding("no_nvidia_device", "error", Text(
            "No NVIDIA device on the PCI bus.", "PCI 总线上没有 NVIDIA 设备。"), Text(
            "This machine (or VM) has no GPU attached: check the instance type or GPU passthrough.",
            "这台机器（或虚拟机）没有挂载 GPU：请检查实例规格或 GPU 直通配置。"))
    return None


def _secure_boot(p: Probe) -> Finding | None:
    sb = p.run(["mokutil", "--sb-state"])
    dmesg = p.run(["dmesg"])
    hints = [line for line in (dmesg[1] if dmesg else "").splitlines()
             if "nvidia" in line.lower() and any(k in line for k in (
                 "Key was rejected", "module verification failed", "Lockdown", "signature"))]
    enabled = sb is not None and "enabled" in sb[1].lower()
    if not enabled and not hints:
        return None
    return Finding("secure_boot", "error", Text(
        "Secure Boot is on and the NVIDIA kernel module is not signed for it, so it is not loaded.",
        "已开启安全启动（Secure Boot），而 NVIDIA 内核模块未签名，因此无法加载。"), Text(
        "Enroll the driver's signing key (`sudo mokutil --import /var/lib/shim-signed/mok/MOK.der`, "
        "then reboot and confirm in the MOK manager), install the distribution's signed driver "
        "packages, or turn Secure Boot off in the firmware.",
        "导入驱动签名密钥（`sudo mokutil --import /var/lib/shim-signed/mok/MOK.der`，重启后在 MOK "
        "管理界面确认），或安装发行版已签名的驱动包，或在固件中关闭安全启动。"),
        "; ".join(hints[:2]) or (sb[1].strip() if sb else ""))


def _kernel_module(p: Probe, st: _State) -> list[Finding]:
    version = p.read("/proc/driver/nvidia/version")
    if version:
        st.driver = next((w for w in version.split() if w[:3].isdigit() and "." in w), None)
        return [Finding("driver", "ok", Text(f"NVIDIA kernel module loaded (driver {st.driver}).",
                                              f"NVIDIA 内核模块已加载（驱动 {st.driver}）。"))]
    out: list[Finding] = [f for f in (_hw_present(p),) if f]
    lsmod = p.run(["lsmod"])
    loaded = lsmod is not None and any(line.split()[:1] == ["nvidia"] for line in lsmod[1].splitlines())
    if not loaded:
        out.append(Finding("no_driver", "error", Text(
            "No NVIDIA driver: /proc/driver/nvidia is missing and the kernel module is not loaded.",
            "没有 NVIDIA 驱动：/proc/driver/nvidia 不存在，内核模块未加载。"), Text(
            "Install the driver (Ubuntu: `sudo ubuntu-drivers install` or "
            "`sudo apt install nvidia-driver-570-server`), then `sudo modprobe nvidia` or reboot. "
            "In a container, start it with `--gpus all` (NVIDIA Container Toolkit).",
            "安装驱动（Ubuntu：`sudo ubuntu-drivers install` 或 `sudo apt install nvidia-driver-570-server`），"
            "然后 `sudo modprobe nvidia` 或重启。容器内请用 `--gpus all` 启动（NVIDIA Container Toolkit）。")))
        sb = _secure_boot(p)
        if sb:
            out.append(sb)
    return out


def _smi(p: Probe, st: _State) -> list[Finding]:
    out = p.run(["nvidia-smi", "-q", "-x"])
    if out is None:
        return [Finding("no_nvidia_smi", "warn", Text("nvidia-smi is not installed.", "未安装 nvidia-smi。"),
                        Text("Install the driver's utilities (Ubuntu: `sudo apt install nvidia-utils-570-server`).",
                             "安装驱动工具包（Ubuntu：`sudo apt install nvidia-utils-570-server`）。"))]
    rc, text = out
    if rc != 0:
        mismatch = "version mismatch" in text.lower()
        fix = Text("The driver was upgraded but the old module is still loaded: reboot.",
                   "驱动已升级但旧模块仍在运行：请重启。") if mismatch else Text(
            "nvidia-smi cannot talk to the driver: reinstall the driver and reboot; see `dmesg | grep -i nvrm`.",
            "nvidia-smi 无法与驱动通信：请重装驱动并重启；查看 `dmesg | grep -i nvrm`。")
        return [Finding("nvidia_smi_failed", "error", Text("nvidia-smi fails.", "nvidia-smi 运行失败。"),
                        fix, text.strip()[:300])]
    st.smi_xml = text
    from gpuwise.verify.smi_xml import parse_smi_xml

    try:
        parsed = parse_smi_xml(text)
    except (ValueError, SyntaxError):
        return []
    st.gpus = len(parsed.gpus)
    st.cuda = None if hasattr(parsed.cuda_driver_version, "reason") else str(parsed.cuda_driver_version)
    if hasattr(parsed.driver_version, "reason") is False:
        st.driver = str(parsed.driver_version)
    return [Finding("nvidia_smi", "ok", Text(
        f"nvidia-smi sees {st.gpus} GPU(s); the driver supports CUDA up to {st.cuda}.",
        f"nvidia-smi 看到 {st.gpus} 块 GPU；驱动最高支持 CUDA {st.cuda}。"))]


def _torch(p: Probe, st: _State) -> list[Finding]:
    info = p.torch_info()
    if "error" in info:
        return [Finding("no_torch", "warn", Text("PyTorch is not installed.", "未安装 PyTorch。"),
                        Text("`pip install 'gpuwise[verify]'` (installs torch and nvidia-ml-py).",
                             "`pip install 'gpuwise[verify]'`（安装 torch 与 nvidia-ml-py）。"))]
    ver, cuda = info.get("torch_version"), info.get("torch_cuda")
    if cuda is None:
        cmd = torch_wheel_command(load_thresholds(), st.cuda)
        return [Finding("torch_cpu_only", "error", Text(
            f"torch {ver} is a CPU-only build (torch.version.cuda is None).",
            f"torch {ver} 是仅 CPU 版本（torch.version.cuda 为 None）。"),
            Text(f"Install the CUDA build that matches the driver: {cmd}",
                 f"安装与驱动匹配的 CUDA 版本：{cmd}"))]
    if st.cuda and version_tuple(st.cuda)[:1] < version_tuple(cuda)[:1]:
        need = load_thresholds().cuda_min_driver(".".join(cuda.split(".")[:2])) or "a newer one"
        return [Finding("driver_too_old", "error", Text(
            f"The driver supports CUDA {st.cuda}, but torch {ver} needs CUDA {cuda}.",
            f"驱动支持 CUDA {st.cuda}，但 torch {ver} 需要 CUDA {cuda}。"), Text(
            f"Upgrade the driver to >= {need}, or {torch_wheel_command(load_thresholds(), st.cuda)}.",
            f"将驱动升级到 >= {need}，或 {torch_wheel_command(load_thresholds(), st.cuda)}。"))]
    if not info.get("cuda_available") and st.gpus:
        return [Finding("cuda_unavailable", "error", Text(
            f"torch {ver} (CUDA {cuda}) cannot use the GPUs: torch.cuda.is_available() is False.",
            f"torch {ver}（CUDA {cuda}）无法使用 GPU：torch.cuda.is_available() 为 False。"), Text(
            "Check CUDA_VISIBLE_DEVICES, the container's GPU access (--gpus all), and `dmesg` for Xid errors.",
            "检查 CUDA_VISIBLE_DEVICES、容器的 GPU 权限（--gpus all）以及 `dmesg` 中的 Xid 错误。"))]
    return [Finding("torch", "ok", Text(f"torch {ver} with CUDA {cuda}.", f"torch {ver}，CUDA {cuda}。"))]


def _xserver(st: _State) -> list[Finding]:
    if not st.smi_xml:
        return []
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(st.smi_xml.strip())
    except ET.ParseError:
        return []
    held = []
    for i, gpu in enumerate(root.findall("gpu")):
        for proc in gpu.findall("processes/process_info"):
            name = (proc.findtext("process_name") or "").strip()
            if os.path.basename(name.split()[0] if name else "") in {os.path.basename(x) for x in _X_NAMES}:
                held.append(f"GPU{i}: {name} (pid {proc.findtext('pid')})")
    if not held:
        return []
    return [Finding("x_server", "warn", Text("A display server holds a GPU: " + "; ".join(held),
                                             "显示服务占用了 GPU：" + "；".join(held)), Text(
        "It takes memory and can share the GPU with your jobs. On a server, stop it "
        "(`sudo systemctl isolate multi-user.target`) or drive the display from another GPU.",
        "它会占用显存并与您的任务共享 GPU。服务器上请停止它（`sudo systemctl isolate multi-user.target`），"
        "或让显示使用另一块 GPU。"))]


def _visible(p: Probe, st: _State) -> list[Finding]:
    value = p.env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return []
    entries = [v for v in value.split(",") if v.strip()]
    if not entries or entries == ["-1"] or value.strip() in ("", "-1", "none", "NoDevFiles"):
        return [Finding("cuda_visible_none", "error", Text(
            f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA programs.",
            f"CUDA_VISIBLE_DEVICES={value!r} 让 CUDA 程序看不到任何 GPU。"),
            Text("`unset CUDA_VISIBLE_DEVICES` (or list the GPUs you want).",
                 "`unset CUDA_VISIBLE_DEVICES`（或列出您要用的 GPU）。"))]
    if st.gpus is not None and len(entries) < st.gpus:
        return [Finding("cuda_visible_some", "warn", Text(
            f"CUDA_VISIBLE_DEVICES={value!r} shows {len(entries)} of {st.gpus} GPUs to CUDA programs.",
            f"CUDA_VISIBLE_DEVICES={value!r} 只向 CUDA 程序显示 {st.gpus} 块中的 {len(entries)} 块 GPU。"),
            Text("Intended? Otherwise `unset CUDA_VISIBLE_DEVICES`.",
                 "是有意的吗？否则请 `unset CUDA_VISIBLE_DEVICES`。"))]
    return []


def diagnose(probe: Probe | None = None) -> DoctorReport:
    """Run every probe; findings are ordered driver -> tools -> torch -> environment."""
    p = probe or Probe()
    st = _State()
    findings = _kernel_module(p, st)
    findings += _smi(p, st)
    findings += _torch(p, st)
    findings += _xserver(st)
    findings += _visible(p, st)
    from gpuwise.verify.doctor_host import host_findings

    findings += host_findings(p)
    return DoctorReport(tuple(findings))
