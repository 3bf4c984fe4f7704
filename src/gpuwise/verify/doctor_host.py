"""More `gpuwise doctor` probes: nouveau, a DKMS module built for another kernel, the CUDA
toolkit (nvcc) that source builds need, /dev/nvidia-uvm, and Windows' TDR and DirectML.

Each probe takes doctor's Probe and returns Findings; read-only, like the rest of doctor.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpuwise.i18n import Text

if TYPE_CHECKING:
    from gpuwise.verify.doctor import Finding, Probe, Severity

__all__ = ["host_findings"]


def _finding(id: str, severity: Severity, title: Text, fix: Text | None = None, evidence: str = "") -> Finding:
    from gpuwise.verify.doctor import Finding  # doctor imports this module: not at the top

    return Finding(id, severity, title, fix, evidence)


def _nouveau(p: Probe) -> list[Finding]:
    lsmod = p.run(["lsmod"])
    if lsmod is None or not any(line.split()[:1] == ["nouveau"] for line in lsmod[1].splitlines()):
        return []
    return [_finding("nouveau", "error", Text(
        "The open-source nouveau driver is loaded: the NVIDIA driver cannot take the GPU.",
        "已加载开源 nouveau 驱动：NVIDIA 驱动无法接管 GPU。"), Text(
        "Blacklist it: write `blacklist nouveau` and `options nouveau modeset=0` to "
        "/etc/modprobe.d/blacklist-nouveau.conf, run `sudo update-initramfs -u` (RHEL: `sudo dracut "
        "--force`), then reboot.",
        "将其加入黑名单：在 /etc/modprobe.d/blacklist-nouveau.conf 写入 `blacklist nouveau` 与 "
        "`options nouveau modeset=0`，运行 `sudo update-initramfs -u`（RHEL：`sudo dracut --force`），然后重启。"))]


def _dkms(p: Probe) -> list[Finding]:
    """An upgraded kernel without the NVIDIA module built for it: DKMS lists other kernels only."""
    status, kernel = p.run(["dkms", "status"]), p.run(["uname", "-r"])
    if status is None or kernel is None or status[0] != 0:
        return []
    running = kernel[1].strip()
    built = [line for line in status[1].splitlines() if line.lower().startswith("nvidia")]
    if not built or any(running in line and "installed" in line for line in built):
        return []
    return [_finding("dkms_mismatch", "error", Text(
        f"The NVIDIA module is built by DKMS for other kernels, not the running {running} (a kernel "
        "upgrade without a rebuild).",
        f"DKMS 为其他内核构建了 NVIDIA 模块，但没有为当前运行的 {running} 构建（升级内核后未重建）。"), Text(
        f"Install the headers and rebuild: `sudo apt install linux-headers-{running}` then "
        "`sudo dkms autoinstall` and reboot (or boot the previous kernel).",
        f"安装头文件并重建：`sudo apt install linux-headers-{running}`，然后 `sudo dkms autoinstall` 并重启"
        "（或启动旧内核）。"), "; ".join(built[:3]))]


def _nvcc(p: Probe) -> list[Finding]:
    out = p.run(["nvcc", "--version"])
    torch_cuda = p.torch_info().get("torch_cuda")
    if out is None or out[0] != 0:
        return [_finding("no_nvcc", "info", Text(
            "No CUDA toolkit (nvcc): prebuilt wheels run, but building FlashAttention, TensorRT "
            "plugins, DeepSpeed ops or other CUDA extensions from source fails.",
            "没有 CUDA 工具包（nvcc）：预编译的 wheel 可以运行，但从源码构建 FlashAttention、TensorRT 插件、"
            "DeepSpeed 算子等 CUDA 扩展会失败。"), Text(
            "Install the toolkit matching torch's CUDA (e.g. `sudo apt install cuda-toolkit-12-8`, or "
            "`conda install -c nvidia cuda-nvcc`), or use a prebuilt wheel of the extension.",
            "安装与 torch 的 CUDA 相同版本的工具包（如 `sudo apt install cuda-toolkit-12-8`，或 "
            "`conda install -c nvidia cuda-nvcc`），或使用扩展的预编译 wheel。"))]
    match = re.search(r"release (\d+)\.(\d+)", out[1])
    if match and isinstance(torch_cuda, str) and torch_cuda.split(".")[0] != match.group(1):
        return [_finding("nvcc_mismatch", "warn", Text(
            f"nvcc is CUDA {match.group(1)}.{match.group(2)} but torch is built for CUDA {torch_cuda}: "
            "extensions built with this nvcc will not load.",
            f"nvcc 为 CUDA {match.group(1)}.{match.group(2)}，而 torch 基于 CUDA {torch_cuda}："
            "用它构建的扩展无法加载。"), Text(
            "Put the matching toolkit first on PATH (CUDA_HOME=/usr/local/cuda-X.Y).",
            "把匹配版本的工具包放在 PATH 最前（CUDA_HOME=/usr/local/cuda-X.Y）。"))]
    return []


def _uvm(p: Probe) -> list[Finding]:
    if p.read("/proc/driver/nvidia/version") is None or p.exists("/dev/nvidia-uvm"):
        return []
    return [_finding("no_nvidia_uvm", "error", Text(
        "/dev/nvidia-uvm is missing: the driver is loaded but CUDA programs cannot start "
        "(cudaErrorUnknown / 'CUDA driver initialization failed').",
        "缺少 /dev/nvidia-uvm：驱动已加载，但 CUDA 程序无法启动（cudaErrorUnknown / 'CUDA driver "
        "initialization failed'）。"), Text(
        "`sudo modprobe nvidia-uvm && sudo nvidia-modprobe -u -c=0`; in a container, pass the device "
        "(NVIDIA Container Toolkit does it with `--gpus all`).",
        "`sudo modprobe nvidia-uvm && sudo nvidia-modprobe -u -c=0`；容器中需传入该设备（NVIDIA Container "
        "Toolkit 的 `--gpus all` 会处理）。"))]


def _windows(p: Probe) -> list[Finding]:
    if not p.platform.startswith("win"):
        return []
    return [_finding("windows_tdr", "info", Text(
        "On Windows, 'GPU crash dump triggered' or a black screen mid-job is usually TDR (Timeout "
        "Detection and Recovery): the display driver resets a GPU that stops answering for 2 s, most "
        "often after running out of VRAM (Windows then pages GPU memory and stalls).",
        "在 Windows 上，任务中出现“GPU crash dump triggered”或黑屏，通常是 TDR（超时检测与恢复）：GPU 2 秒无响应"
        "时显示驱动会重置它，最常见的原因是显存耗尽（Windows 随后换页显存并卡住）。"), Text(
        "Lower the batch or context so the model fits (`gpuwise estimate`), turn off the driver's "
        "'CUDA - Sysmem Fallback Policy', or raise TdrDelay under "
        "HKLM\\System\\CurrentControlSet\\Control\\GraphicsDrivers (Microsoft TDR registry keys); "
        "WSL2 with the CUDA driver behaves like Linux.",
        "减小批大小或上下文使模型放得下（`gpuwise estimate`），关闭驱动的“CUDA - 系统内存回退策略”，或在 "
        "HKLM\\System\\CurrentControlSet\\Control\\GraphicsDrivers 下调大 TdrDelay（微软 TDR 注册表项）；"
        "装有 CUDA 驱动的 WSL2 表现与 Linux 相同。")),
        _finding("directml", "info", Text(
            "torch-directml runs on any DirectX 12 GPU but is much slower than CUDA on NVIDIA cards "
            "and lacks fused kernels (FlashAttention, bf16 GEMM paths): gpuwise's estimates assume CUDA.",
            "torch-directml 可在任何 DirectX 12 GPU 上运行，但在 NVIDIA 显卡上远慢于 CUDA，且缺少融合内核"
            "（FlashAttention、bf16 GEMM 路径）：gpuwise 的估算以 CUDA 为准。"), Text(
            "On an NVIDIA GPU, install the CUDA build of torch (native or in WSL2) instead of DirectML.",
            "在 NVIDIA GPU 上请安装 CUDA 版 torch（原生或在 WSL2 中），而不是 DirectML。"))]


def host_findings(p: Probe) -> list[Finding]:
    return [*_nouveau(p), *_dkms(p), *_uvm(p), *_nvcc(p), *_windows(p)]
