"""GPU memory of one generation: each component's weights by precision, the transient peak of
each phase (text encoding, denoising, VAE decode), and what the offload mode keeps resident.

Phases run one after another, so the peak is the largest phase: with everything on the GPU
(`pipe.to("cuda")`) every phase also holds all the other components' weights; with model
offload (`enable_model_cpu_offload`) only the component that runs; with sequential offload
(`enable_sequential_cpu_offload`) one leaf module; with group offload two blocks; ComfyUI
--lowvram loads what fits and streams the rest. Constants: data/models/diffusion/constants.toml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuwise.diffusion.count_dit import layerwise_kept
from gpuwise.diffusion.job import Geometry, ImageJob, cfg_passes, constants, geometry
from gpuwise.diffusion.pipeline import Component, DiffusionModel
from gpuwise.estimate.constants import runtime_overhead_bytes
from gpuwise.i18n import Text

Phase = Literal["encode", "denoise", "decode"]
_BNB = ("nf4", "int8")  # bitsandbytes: Linear layers only; T5's wo kept in fp32
_TORCH_DTYPES = ("fp32", "fp16", "bf16")  # a pipeline's torch_dtype
_JOINT = ("FluxTransformer2DModel", "SD3Transformer2DModel", "HunyuanVideoTransformer3DModel",
          "CogVideoXTransformer3DModel")  # text tokens join the image tokens in attention


@dataclass(frozen=True)
class MemLine:
    name: str  # a component name, "activations", "vae_decode", "runtime"
    bytes: int
    why: Text


@dataclass(frozen=True)
class PhasePeak:
    phase: Phase
    bytes: int  # weights resident during the phase + its transient (runtime excluded)


@dataclass(frozen=True)
class DiffusionMemory:
    lines: tuple[MemLine, ...]  # the peak phase, line by line
    phases: tuple[PhasePeak, ...]
    peak_phase: Phase
    required: int  # bytes the GPU must hold at the peak: the allocated peak + the CUDA context
    weights_total: int  # every component's weights at its precision
    host_bytes: int  # weights held in CPU RAM by the offload mode
    streamed_per_call: int  # weight bytes crossing PCIe per denoiser call (sequential, group, lowvram)
    allocated_peak: int = 0  # tensors at the peak (torch.cuda.max_memory_allocated)
    reserved_peak: int = 0  # the caching allocator's pool then (torch.cuda.max_memory_reserved)

    def line(self, name: str) -> int:
        return sum(x.bytes for x in self.lines if x.name == name)


def _bpp(precision: str) -> float:
    return float(constants()["precision"][precision]["bytes_per_param"])


def precision_of(model: DiffusionModel, comp: Component, job: ImageJob) -> str:
    """The precision a component is held in: the denoiser --weights, the large text encoder
    --te-weights, everything else bf16 ("auto": the stored dtype, else bf16). A plain float
    --weights (fp32, fp16, bf16) is the pipeline's torch_dtype: from_pretrained(torch_dtype=...)
    loads every component in it, so the others follow unless told otherwise."""
    follows = job.weights if job.weights in _TORCH_DTYPES else "auto"
    if comp.role == "denoiser":
        chosen = job.weights
    elif comp.role == "text_encoder" and comp.params > 1e9:
        chosen = job.te_weights if job.te_weights != "auto" else follows
    else:
        chosen = follows
    if chosen != "auto":
        return chosen
    if f"gguf:{comp.stored_dtype}" in constants()["precision"]:  # a GGUF file's main ggml type
        return f"gguf:{comp.stored_dtype}"
    return {"F8_E4M3": "fp8", "F8_E5M2": "fp8", "F32": "fp32", "F16": "fp16"}.get(comp.stored_dtype, "bf16")


def weight_bytes(comp: Component, precision: str, stored_ok: bool = True) -> int:
    """Bytes of a component's weights. A stored checkpoint in that precision counts exactly."""
    if stored_ok and comp.stored_bytes:
        return comp.stored_bytes
    c = comp.config
    if comp.class_name in ("T5EncoderModel", "UMT5EncoderModel") and (precision in _BNB or precision == "fp16"):
        d, d_ff, layers = int(c["d_model"]), int(c["d_ff"]), int(c["num_layers"])
        wo, emb = layers * d_ff * d, int(c["vocab_size"]) * d
        return int(wo * 4 + emb * 2 + (comp.params - wo - emb) * _bpp(precision))  # wo fp32, embedding bf16
    if comp.role == "text_encoder" and precision in _BNB:
        emb = int(c.get("vocab_size", 0)) * comp.width  # embeddings are not Linear layers: bf16
        return int(emb * 2 + (comp.params - emb) * _bpp(precision))
    if precision == "fp8" and comp.role == "denoiser":  # layerwise casting skips the *norm* modules
        kept = min(comp.params, layerwise_kept(comp.class_name, c))
        return int(kept * 2 + (comp.params - kept) * _bpp(precision))
    return int(comp.params * _bpp(precision))


def _ffn_ratio(comp: Component) -> float:
    ffn = comp.config.get("ffn_dim")
    return float(ffn) / comp.width if isinstance(ffn, int) and comp.width else 4.0


def denoiser_activations(model: DiffusionModel, job: ImageJob, geo: Geometry) -> int:
    """Transient bytes of one denoiser call at its widest block (bf16 activations)."""
    den = model.denoiser
    samples, _ = cfg_passes(model, job)
    live = int(constants()["activations"]["live_d_tensors"])
    if den.class_name == "UNet2DConditionModel":
        return samples * _unet_activations(den, geo)
    seq = geo.image_tokens + (geo.text_tokens if den.class_name in _JOINT else 0)
    return int(samples * seq * den.width * 2 * (live + 2 * _ffn_ratio(den)))


def _unet_activations(unet: Component, geo: Geometry) -> int:
    """Skip connections kept for the up path plus the widest level's transient, per sample."""
    ch = [int(c) for c in unet.config["block_out_channels"]]
    per = int(unet.config.get("layers_per_block", 2))
    kinds = list(unet.config["down_block_types"])
    skips, transient = 0, 0
    for i, c in enumerate(ch):
        cells = (geo.latent_h >> i) * (geo.latent_w >> i)
        skips += (per + 1) * c * cells
        width = 6 + 8 if "CrossAttn" in kinds[i] else 4  # attention + GEGLU (2 x 4c), or a resnet
        transient = max(transient, width * c * cells)
    return (skips + transient) * 2


def _vae_channels(vae: Component) -> tuple[int, int, int]:
    """(channels into the last up block, its output channels, pixel divisor of its resolution)."""
    c = vae.config
    if vae.class_name == "AutoencoderKLWan":
        base = int(c.get("decoder_base_dim") or c.get("base_dim", 96))
        patch = int(c.get("patch_size") or 1)
        return 2 * base, base, patch * patch
    ch = [int(x) for x in c["block_out_channels"]]
    return ch[1], ch[0], 1


def vae_upcast(model: DiffusionModel, job: ImageJob) -> bool:
    """SDXL's pipeline decodes in float32 when the VAE is fp16 and its config says force_upcast
    (diffusers StableDiffusionXLPipeline: needs_upcasting = vae.dtype == float16 and
    vae.config.force_upcast); the other pipelines decode in the model's dtype."""
    return (model.denoiser.class_name == "UNet2DConditionModel" and bool(model.vae.config.get("force_upcast"))
            and precision_of(model, model.denoiser, job) == "fp16")


def vae_decode_bytes(model: DiffusionModel, job: ImageJob) -> int:
    """Peak transient of the VAE decode: the full-resolution tensors of the last up block."""
    vae, k = model.vae, constants()["vae"]
    c_in, c_out, div = _vae_channels(vae)
    video = model.kind == "video"
    fixed, per = float(k["copies_2d_fixed"]), float(k["copies_2d_per_sample"])
    if video:  # the 3D measurement, split in the 2D proportion
        scale = float(k["copies_3d"]) / (fixed + per)
        fixed, per = fixed * scale, per * scale
    tile = int(k["tile_px"].get(vae.class_name, vae.config.get("sample_size") or 512))
    h, w = (min(job.height, tile), min(job.width, tile)) if job.vae_tiling else (job.height, job.width)
    frames = min(job.frames, int(k["frames_per_pass"].get(vae.class_name, 1)))
    samples = 1 if (job.vae_slicing and not video) else job.batch
    element = 4 if vae_upcast(model, job) or precision_of(model, vae, job) == "fp32" else 2
    decode = frames * h * w // div * (c_in + c_out) * element * (fixed + per * samples)
    output = job.batch * job.frames * 3 * job.height * job.width * 2  # the decoded frames, bf16
    return int(decode + output)


def _largest_leaf(comp: Component, precision: str) -> int:
    """Bytes of the largest single weight (sequential offload holds one leaf module at a time)."""
    c, d = comp.config, comp.width
    vocab = int(c.get("vocab_size", 0))
    if comp.role == "vae" or not d:
        return 0
    widest = max(vocab * d, d * int(c.get("ffn_dim") or c.get("d_ff") or c.get("intermediate_size") or 4 * d))
    return int(widest * (2 if vocab * d == widest else _bpp(precision)))


def _blocks(comp: Component) -> int:
    c = comp.config
    return int(c.get("num_layers") or c.get("num_hidden_layers") or 1) + int(c.get("num_single_layers") or 0)


def _block_bytes(comp: Component, total: int) -> int:
    """Bytes of one block; dual-stream blocks (Flux, HunyuanVideo) hold about 2.4x a single-stream
    one (36 d^2 vs 15 d^2 weights), so the largest block is taken as 1.5x the average."""
    mixed = 1.5 if comp.config.get("num_single_layers") else 1.0
    return int(total / _blocks(comp) * mixed)


def _resident(model: DiffusionModel, job: ImageJob, wb: dict[str, int], phase: Phase, active: list[str],
              budget: int) -> dict[str, int]:
    """Weight bytes on the GPU during a phase, per component."""
    if job.offload == "none" and job.runtime == "diffusers":
        return dict(wb)
    if job.offload in ("none", "model"):  # one model at a time (ComfyUI unloads what it must)
        return {n: wb[n] for n in active[:1] if phase != "denoise"} | {n: wb[n] for n in active if phase == "denoise"
                                                                       and n == model.denoisers[0]}
    if job.offload == "sequential":
        return {n: _largest_leaf(model.component(n), precision_of(model, model.component(n), job)) for n in active}
    if job.offload == "group":
        group = int(constants()["offload"]["group_blocks_resident"])
        return {n: min(wb[n], group * _block_bytes(model.component(n), wb[n])) for n in active}
    # lowvram: the denoiser loads as much as fits in what the activations leave
    return {n: max(min(wb[n], budget), 2 * _block_bytes(model.component(n), wb[n])) if phase == "denoise"
            else min(wb[n], max(budget, 0)) for n in active}


def estimate_memory(model: DiffusionModel, job: ImageJob, usable: int = 0) -> DiffusionMemory:
    geo = geometry(model, job)
    runtime = int(runtime_overhead_bytes(False))
    wb = {c.name: weight_bytes(c, precision_of(model, c, job)) for c in model.components}
    te = [] if job.te_cpu else [c.name for c in model.by_role("text_encoder")]
    if job.te_cpu:
        wb = {n: b for n, b in wb.items() if model.component(n).role != "text_encoder"}
    transients: dict[Phase, tuple[list[str], str, int]] = {
        "encode": (sorted(te, key=lambda n: -wb[n]), "text_encoding", 0),
        "denoise": (list(model.denoisers), "activations", denoiser_activations(model, job, geo)),
        "decode": ([model.vae.name], "vae_decode", vae_decode_bytes(model, job)),
    }
    phases, lines_of = [], {}
    for phase, (active, label, transient) in transients.items():
        budget = usable - runtime - transient
        resident = _resident(model, job, wb, phase, active, budget)
        phases.append(PhasePeak(phase, sum(resident.values()) + transient))
        lines_of[phase] = [MemLine(n, b, _why_weights(model, n, job, wb[n], b)) for n, b in resident.items() if b] + \
            ([MemLine(label, transient, _why_transient(label, model, job, geo))] if transient else [])
    peak = max(phases, key=lambda p: p.bytes)
    lines = tuple(lines_of[peak.phase]) + (MemLine("runtime", runtime, Text(
        "CUDA context + cuBLAS workspace (data/engines.toml [runtime])",
        "CUDA 上下文与 cuBLAS 工作区（data/engines.toml [runtime]）")),)
    denoise_resident = sum(_resident(model, job, wb, "denoise", list(model.denoisers),
                                     usable - runtime - transients["denoise"][2]).values())
    streamed = 0 if job.offload in ("none", "model") else max(0, wb[model.denoisers[0]] - denoise_resident // len(
        model.denoisers))
    host = 0 if job.offload == "none" and job.runtime == "diffusers" else sum(wb.values())
    if job.te_cpu:
        host += sum(weight_bytes(c, precision_of(model, c, job)) for c in model.by_role("text_encoder"))
    return DiffusionMemory(lines, tuple(phases), peak.phase, peak.bytes + runtime, sum(wb.values()), host, streamed,
                           peak.bytes, _reserved(phases, transients["decode"][2]))


def _reserved(phases: list[PhasePeak], decode: int) -> int:
    """The allocator's pool at the peak: the decode frees and allocates full-resolution tensors of
    changing sizes, so its blocks stay cached beside the ones in use ([vae] reserved_cache_factor);
    PyTorch frees that cache and retries before it reports out-of-memory, so the fit is judged on
    the allocated peak."""
    factor = float(constants()["vae"]["reserved_cache_factor"])
    return max(p.bytes + (int(factor * decode) if p.phase == "decode" else 0) for p in phases)


def _why_weights(model: DiffusionModel, name: str, job: ImageJob, full: int, resident: int) -> Text:
    comp = model.component(name)
    prec = precision_of(model, comp, job)
    how = "summed from the safetensors headers" if comp.stored_bytes else f"{comp.params:,} params x {prec}"
    part = "" if resident == full else (f"; {resident / 2**30:,.2f} of {full / 2**30:,.2f} GiB"
                                        f" on the GPU ({job.offload} offload)")
    part_zh = "" if resident == full else (f"；GPU 上 {resident / 2**30:,.2f} / {full / 2**30:,.2f} GiB"
                                           f"（{job.offload} 卸载）")
    how_zh = "按 safetensors 头部求和" if comp.stored_bytes else f"{comp.params:,} 参数 × {prec}"
    return Text(f"{comp.class_name}: {how}{part}", f"{comp.class_name}：{how_zh}{part_zh}")


def _why_transient(label: str, model: DiffusionModel, job: ImageJob, geo: Geometry) -> Text:
    samples, _ = cfg_passes(model, job)
    if label == "activations":
        return Text(f"one denoiser call: {samples} sample(s) x {geo.image_tokens:,} latent tokens"
                    f" (+{geo.text_tokens} text) at the widest block; attention by SDPA (no s^2 matrix)",
                    f"一次去噪调用：{samples} 个样本 × {geo.image_tokens:,} 个潜空间 token（+{geo.text_tokens} 文本），"
                    "按最宽的块计；注意力走 SDPA（无 s^2 矩阵）")
    tiled = "tiled" if job.vae_tiling else "untiled"
    return Text(f"VAE decode of {job.width}x{job.height}" + (f" x {job.frames} frames" if job.frames > 1 else "")
                + f", {tiled}: the full-resolution tensors of the last up block",
                f"VAE 解码 {job.width}x{job.height}" + (f" × {job.frames} 帧" if job.frames > 1 else "")
                + ("，分块" if job.vae_tiling else "，不分块") + "：最后一个上采样块的全分辨率张量")
