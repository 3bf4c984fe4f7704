"""Software checks: torch's CUDA build, the driver's CUDA against torch's, NCCL, visible GPUs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuwise.i18n import Text
from gpuwise.verify.checks import CheckResult, Thresholds, skipped
from gpuwise.verify.judge import Context, version_tuple
from gpuwise.verify.nvml import is_na

__all__ = ["CHECKS", "torch_wheel_command"]


def torch_wheel_command(th: Thresholds, cuda_driver: Any) -> str:
    """The pip command for the newest CUDA build of the pinned torch this driver supports."""
    tw = th.raw["torch_wheels"]
    variants = sorted(tw["variants"], key=lambda v: version_tuple(v[2:-1] + "." + v[-1]))
    pick = variants[0]
    if not is_na(cuda_driver) and cuda_driver:
        have = version_tuple(str(cuda_driver))
        fitting = [v for v in variants if version_tuple(v[2:-1] + "." + v[-1]) <= have]
        pick = fitting[-1] if fitting else variants[0]
    url = str(tw["index_url"]).format(variant=pick)
    return f"pip install torch=={tw['torch']} --index-url {url}"


def check_torch(cx: Context) -> CheckResult:
    sw = cx.ev.software
    if is_na(sw.torch_version):
        return skipped("software.torch", Text(
            f"torch is not installed ({sw.torch_version.reason}): `pip install 'gpuwise[verify]'`.",
            f"未安装 torch（{sw.torch_version.reason}）：`pip install 'gpuwise[verify]'`。"))
    if sw.torch_cuda is None:
        cmd = torch_wheel_command(cx.th, cx.ev.cuda_driver_version)
        return CheckResult("software.torch", "fail", f"{sw.torch_version} (CPU)", "CUDA build", "", Text(
            f"torch {sw.torch_version} is a CPU-only build (torch.version.cuda is None): it cannot "
            f"use the GPUs. Install the CUDA build: {cmd}",
            f"torch {sw.torch_version} 是仅 CPU 版本（torch.version.cuda 为 None）：无法使用 GPU。"
            f"请安装 CUDA 版本：{cmd}"))
    if sw.cuda_available is False:
        return CheckResult("software.torch", "fail", f"{sw.torch_version}", "CUDA available", "", Text(
            "torch is a CUDA build but torch.cuda.is_available() is False: run `gpuwise doctor`.",
            "torch 为 CUDA 版本但 torch.cuda.is_available() 为 False：请运行 `gpuwise doctor`。"))
    return CheckResult("software.torch", "pass", f"{sw.torch_version}", "CUDA build", "", Text(
        f"torch {sw.torch_version} built for CUDA {sw.torch_cuda}.",
        f"torch {sw.torch_version}，基于 CUDA {sw.torch_cuda} 构建。"))


def check_driver_cuda(cx: Context) -> CheckResult:
    name = "software.driver_cuda"
    sw, have = cx.ev.software, cx.ev.cuda_driver_version
    if is_na(sw.torch_cuda) or sw.torch_cuda is None or is_na(have):
        return skipped(name, Text("Needs a CUDA build of torch and the driver's CUDA version.",
                                  "需要 CUDA 版 torch 与驱动的 CUDA 版本。"))
    need, got = version_tuple(sw.torch_cuda)[:2], version_tuple(have)[:2]
    drv = cx.th.cuda_min_driver(".".join(map(str, need))) or "?"
    if got[0] < need[0]:
        return CheckResult(name, "fail", have, f">= {sw.torch_cuda}", "CUDA", Text(
            f"The driver supports CUDA {have} but torch needs {sw.torch_cuda}: upgrade the driver to "
            f">= {drv}, or {torch_wheel_command(cx.th, have)}.",
            f"驱动支持 CUDA {have}，而 torch 需要 {sw.torch_cuda}：请将驱动升级到 >= {drv}，"
            f"或 {torch_wheel_command(cx.th, have)}。"))
    if got < need:
        return CheckResult(name, "warn", have, f">= {sw.torch_cuda}", "CUDA", Text(
            f"Driver CUDA {have} is older than torch's {sw.torch_cuda}; it runs through CUDA "
            f"minor-version compatibility, but PTX-only kernels need driver >= {drv}.",
            f"驱动 CUDA {have} 低于 torch 的 {sw.torch_cuda}；依靠 CUDA 小版本兼容可运行，"
            f"但仅含 PTX 的内核需要驱动 >= {drv}。"))
    return CheckResult(name, "pass", have, f">= {sw.torch_cuda}", "CUDA", Text(
        f"Driver CUDA {have} covers torch's CUDA {sw.torch_cuda}.",
        f"驱动 CUDA {have} 满足 torch 的 CUDA {sw.torch_cuda}。"))


def check_nccl(cx: Context) -> CheckResult:
    sw = cx.ev.software
    if is_na(sw.nccl_version) or not sw.nccl_version:
        if cx.n > 1 and not is_na(sw.torch_cuda) and sw.torch_cuda:
            return CheckResult("software.nccl", "warn", None, "NCCL", "", Text(
                "torch loads no NCCL: multi-GPU training will not work.",
                "torch 未加载 NCCL：多卡训练无法工作。"))
        return skipped("software.nccl", Text("NCCL version not available (needs a CUDA build of torch).",
                                             "无法获得 NCCL 版本（需要 CUDA 版 torch）。"))
    return CheckResult("software.nccl", "pass", str(sw.nccl_version), None, "",
                       Text(f"torch loads NCCL {sw.nccl_version}.", f"torch 加载的 NCCL 为 {sw.nccl_version}。"))


def check_visible(cx: Context) -> CheckResult:
    sw = cx.ev.software
    if is_na(sw.cuda_device_count) or not sw.torch_cuda:
        return skipped("software.visible", Text("Needs a CUDA build of torch.", "需要 CUDA 版 torch。"))
    seen, n = int(sw.cuda_device_count), cx.n
    if seen < n:
        env = sw.cuda_visible_devices
        why = f" CUDA_VISIBLE_DEVICES={env!r} hides them." if env is not None else ""
        why_zh = f" CUDA_VISIBLE_DEVICES={env!r} 隐藏了它们。" if env is not None else ""
        return CheckResult("software.visible", "warn", seen, n, "GPUs", Text(
            f"torch sees {seen} of {n} GPUs.{why}", f"torch 只看到 {n} 块中的 {seen} 块 GPU。{why_zh}"))
    return CheckResult("software.visible", "pass", seen, n, "GPUs",
                       Text("torch sees every GPU.", "torch 能看到所有 GPU。"))


CHECKS: tuple[Callable[[Context], CheckResult], ...] = (
    check_torch, check_driver_cuda, check_nccl, check_visible,
)
