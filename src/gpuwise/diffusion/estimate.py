"""One diffusion estimate: memory, speed, fit, cost, what happens when it does not fit (per OS)
and the fixes that would make it fit, in order of what they cost in speed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from gpuwise.catalog.cards import Card
from gpuwise.diffusion.job import OFFLOADS, ImageJob, geometry
from gpuwise.diffusion.memory import DiffusionMemory, estimate_memory, precision_of
from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.diffusion.speed import DiffusionSpeed, estimate_speed
from gpuwise.estimate.workload import choose
from gpuwise.i18n import Text
from gpuwise.units import GiB

OS = Literal["linux", "windows"]
SCHEMA_VERSION = 1
# Windows' desktop (DWM) and the WDDM driver keep part of a display card's memory: assumed 0.8 GiB
# on a card that also drives the screen (Task Manager's "Dedicated GPU memory" shows it in use at idle).
WINDOWS_DESKTOP_BYTES = int(0.8 * GiB)


@dataclass(frozen=True)
class Fix:
    # (action, value): offload | vae_tiling | weights | te_weights | te_cpu | runtime
    changes: tuple[tuple[str, str], ...]
    required: int
    seconds: float  # per image or video with the changes


@dataclass(frozen=True)
class DiffusionEstimate:
    model: DiffusionModel
    job: ImageJob
    card: Card
    os: OS
    memory: DiffusionMemory
    speed: DiffusionSpeed
    usable: int
    fixes: tuple[Fix, ...] = ()
    cost: Any = None  # gpuwise.estimate.cost.Cost

    @property
    def fits(self) -> bool:
        return self.memory.required <= self.usable

    def failure(self) -> Text | None:
        """What the user sees when it does not fit.

        Linux: the PyTorch caching allocator raises torch.OutOfMemoryError. Windows: NVIDIA driver
        536.40 added the "CUDA - Sysmem Fallback Policy" (default: fall back to shared system memory;
        NVIDIA support answer 5490, "System Memory Fallback for Stable Diffusion",
        https://nvidia.custhelp.com/app/answers/detail/a_id/5490), and Windows resets a driver whose GPU
        work runs past TdrDelay, 2 seconds by default ("Timeout Detection and Recovery (TDR)",
        https://learn.microsoft.com/windows-hardware/drivers/display/timeout-detection-and-recovery)."""
        if self.fits:
            return None
        phase = {"encode": ("text encoding", "文本编码"), "denoise": ("denoising", "去噪"),
                 "decode": ("VAE decode", "VAE 解码")}[self.memory.peak_phase]
        short = (self.memory.required - self.usable) / GiB
        if self.os == "linux":
            return Text(f"Linux: PyTorch raises torch.OutOfMemoryError (\"CUDA out of memory. Tried to allocate "
                        f"...\") in the {phase[0]} phase, about {short:,.1f} GiB short; the run stops.",
                        f"Linux：{phase[1]}阶段 PyTorch 抛出 torch.OutOfMemoryError（\"CUDA out of memory. "
                        f"Tried to allocate ...\"），约差 {short:,.1f} GiB，任务中止。")
        return Text(f"Windows: with the NVIDIA driver's default CUDA Sysmem Fallback Policy (driver 536.40+), the "
                    f"{phase[0]} phase spills about {short:,.1f} GiB into shared system memory over PCIe: the run "
                    "slows many times over instead of failing, and a kernel that runs past the 2-second TDR limit "
                    "resets the driver (\"GPU crash dump triggered\", a black screen). Set \"Prefer No Sysmem "
                    "Fallback\" for python.exe in the NVIDIA Control Panel to get a plain out-of-memory error.",
                    f"Windows：NVIDIA 驱动（536.40 起）默认的 CUDA 系统内存回退策略会让{phase[1]}阶段把约 "
                    f"{short:,.1f} GiB 溢出到共享系统内存（经 PCIe）：不会报错而是慢很多倍；单个内核运行超过 "
                    "2 秒的 TDR 上限时驱动会重置（\"GPU crash dump triggered\"、黑屏）。在 NVIDIA 控制面板中为 "
                    "python.exe 设置“Prefer No Sysmem Fallback”可改为直接报显存不足。")

    def to_dict(self) -> dict[str, Any]:
        m, s, j = self.memory, self.speed, self.job
        geo = geometry(self.model, j)
        fail = self.failure()
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "kind": "diffusion", "task": self.model.kind,
            "engine": j.runtime, "card": self.card.id, "card_name": self.card.name, "gpus": 1, "gpus_total": 1,
            "os": self.os,
            "model": {"name": self.model.name, "id": self.model.id, "source": self.model.source,
                      "params_total": self.model.params_total,
                      "components": [{"name": c.name, "class": c.class_name, "role": c.role, "params": c.params,
                                      "approximate": c.approximate, "precision": precision_of(self.model, c, j),
                                      "stored_bytes": c.stored_bytes or None} for c in self.model.components]},
            "job": {"width": j.width, "height": j.height, "frames": j.frames, "batch": j.batch, "steps": j.steps,
                    "guidance": j.guidance, "weights": precision_of(self.model, self.model.denoiser, j),
                    "te_weights": j.te_weights, "offload": j.offload, "vae_tiling": j.vae_tiling,
                    "vae_slicing": j.vae_slicing, "te_cpu": j.te_cpu, "latent_tokens": geo.image_tokens,
                    "text_tokens": geo.text_tokens},
            "memory": {"required": m.required, "peak_phase": m.peak_phase, "weights_total": m.weights_total,
                       "allocated_peak": m.allocated_peak, "reserved_peak": m.reserved_peak,
                       "items": [{"name": x.name, "bytes": x.bytes, "why": x.why.en, "why_zh": x.why.zh}
                                 for x in m.lines],
                       "phases": {p.phase: p.bytes for p in m.phases}, "host_ram": m.host_bytes,
                       "streamed_per_call": m.streamed_per_call},
            "usable_bytes": self.usable, "headroom_bytes": self.usable - m.required, "fits": self.fits,
            "speed": {"seconds_per_output": s.per_output_s, "total_s": s.total_s, "step_s": s.step_s,
                      "denoise_s": s.denoise_s, "text_encoders_s": s.text_s, "vae_decode_s": s.vae_s,
                      "offload_transfer_s": s.transfer_s, "denoiser_call_tflop": s.call_flops / 1e12,
                      "achieved_tflops": s.achieved_tflops},
            "failure": fail.en if fail else None, "failure_zh": fail.zh if fail else None,
            "fixes": [{"changes": [{"action": a, "value": v} for a, v in f.changes], "required_bytes": f.required,
                       "seconds_per_output": f.seconds} for f in self.fixes],
            "notes": [n.en for n in self.model.notes], "notes_zh": [n.zh for n in self.model.notes],
        }
        if self.cost is not None:
            cost = self.cost.to_dict()
            cost["per_output"] = round(self.cost.per_run / j.batch, 6) if self.cost.per_run else None
            out["cost"] = cost
        return out


def usable_bytes(card: Card, os: OS) -> int:
    return card.usable_bytes - (WINDOWS_DESKTOP_BYTES if os == "windows" else 0)


# Candidate changes, each a set applied together; the ones that fit are ranked by seconds per output.
_FIXES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("vae_tiling", "on"),), (("offload", "model"),), (("offload", "model"), ("vae_tiling", "on")),
    (("te_cpu", "on"),), (("weights", "fp8"),), (("weights", "gguf:Q8_0"),), (("weights", "nf4"),),
    (("weights", "nf4"), ("te_weights", "nf4")), (("offload", "model"), ("weights", "fp8")),
    (("offload", "model"), ("weights", "gguf:Q8_0")), (("offload", "model"), ("weights", "gguf:Q4_K_S")),
    (("offload", "model"), ("weights", "fp8"), ("vae_tiling", "on")), (("offload", "group"),),
    (("offload", "group"), ("vae_tiling", "on")), (("offload", "sequential"),),
    (("offload", "sequential"), ("vae_tiling", "on")), (("runtime", "comfyui --lowvram"),))


def _with(job: ImageJob, action: str, value: str) -> ImageJob:
    if action == "vae_tiling":
        return replace(job, vae_tiling=True)
    if action == "te_cpu":
        return replace(job, te_cpu=True)
    if action == "runtime":
        return replace(job, runtime="comfyui", offload="lowvram")
    if action == "offload":
        return replace(job, offload=choose(value, OFFLOADS, "--offload"))  # one of OFFLOADS (_FIXES)
    return replace(job, weights=value) if action == "weights" else replace(job, te_weights=value)


def find_fixes(model: DiffusionModel, job: ImageJob, card: Card, os: OS, limit: int = 4) -> tuple[Fix, ...]:
    """The fastest change sets that make the job fit (a quality-changing quantization is one of them)."""
    usable = usable_bytes(card, os)
    found: list[Fix] = []
    for changes in _FIXES:
        candidate = job
        for action, value in changes:
            candidate = _with(candidate, action, value)
        if candidate == job:
            continue
        mem = estimate_memory(model, candidate, usable)
        if mem.required <= usable:
            found.append(Fix(changes, mem.required, estimate_speed(model, candidate, card, mem).per_output_s))
    kept: list[Fix] = []
    for fix in sorted(found, key=lambda f: (f.seconds, len(f.changes))):
        if not any(set(k.changes) <= set(fix.changes) for k in kept):  # a superset of a kept fix adds nothing
            kept.append(fix)
    return tuple(kept[:limit])


def estimate_diffusion(model: DiffusionModel, job: ImageJob, card: Card, os: OS = "linux",
                       calibration: object = None, cost: Any = None) -> DiffusionEstimate:
    usable = usable_bytes(card, os)
    mem = estimate_memory(model, job, usable)
    speed = estimate_speed(model, job, card, mem, calibration)
    fixes = () if mem.required <= usable else find_fixes(model, job, card, os)
    return DiffusionEstimate(model, job, card, os, mem, speed, usable, fixes, cost)
