"""A planned diffusion job as ready-to-run settings: a diffusers script (dtype, quantization,
offload calls, VAE tiling) and ComfyUI launch flags. Names are the libraries' own:
diffusers DiffusionPipeline.enable_model_cpu_offload / enable_sequential_cpu_offload,
ModelMixin.enable_group_offload, enable_layerwise_casting, PipelineQuantizationConfig,
GGUFQuantizationConfig, vae.enable_tiling / enable_slicing (diffusers >= 0.35); ComfyUI
comfy/cli_args.py: --gpu-only, --highvram, --normalvram, --lowvram, --novram,
--fp8_e4m3fn-unet, --fp8_e4m3fn-text-enc."""

from __future__ import annotations

from gpuwise.diffusion.job import ImageJob
from gpuwise.diffusion.memory import precision_of
from gpuwise.diffusion.pipeline import DiffusionModel

TARGETS = ("diffusers", "comfyui")


def _big_text_encoders(model: DiffusionModel) -> list[str]:
    return [c.name for c in model.by_role("text_encoder") if c.params > 1e9]


def _quant_lines(model: DiffusionModel, job: ImageJob) -> list[str]:
    prec = precision_of(model, model.denoiser, job)
    te = [n for n in _big_text_encoders(model) if precision_of(model, model.component(n), job) in ("nf4", "int8")]
    if prec in ("nf4", "int8") or te:
        parts = [*(list(model.denoisers) if prec in ("nf4", "int8") else []), *te]
        kwargs = ('quant_kwargs={"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", '
                  '"bnb_4bit_compute_dtype": torch.bfloat16}' if "nf4" in (prec, job.te_weights) else
                  'quant_kwargs={"load_in_8bit": True}')
        backend = "bitsandbytes_4bit" if "nf4" in (prec, job.te_weights) else "bitsandbytes_8bit"
        return ["from diffusers.quantizers import PipelineQuantizationConfig",
                f'quant = PipelineQuantizationConfig(quant_backend="{backend}", {kwargs},',
                f"                                   components_to_quantize={parts!r})"]
    return []


def diffusers_script(model: DiffusionModel, job: ImageJob, repo: str) -> str:
    prec = precision_of(model, model.denoiser, job)
    dtype = "torch.float16" if prec == "fp16" else "torch.bfloat16"
    lines = ["import torch", "from diffusers import DiffusionPipeline", ""]
    quant = _quant_lines(model, job)
    lines += quant + ([""] if quant else [])
    if prec.startswith("gguf:"):
        kind = prec.split(":")[1]
        lines += ["# GGUF denoiser: a city96-style single file, e.g. <model>-" + kind + ".gguf",
                  "from diffusers import AutoModel, GGUFQuantizationConfig",
                  (f'denoiser = AutoModel.from_single_file("<path>/model-{kind}.gguf", '
                   f"quantization_config=GGUFQuantizationConfig(compute_dtype={dtype}), torch_dtype={dtype})"), ""]
    extra = (", quantization_config=quant" if quant else "") + (f", {model.denoisers[0]}=denoiser" if
                                                                prec.startswith("gguf:") else "")
    lines.append(f'pipe = DiffusionPipeline.from_pretrained("{repo}", torch_dtype={dtype}{extra})')
    if prec == "fp8":
        for name in model.denoisers:
            lines.append(f"pipe.{name}.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, "
                         f"compute_dtype={dtype})")
    offload = {"none": 'pipe.to("cuda")', "model": "pipe.enable_model_cpu_offload()",
               "sequential": "pipe.enable_sequential_cpu_offload()", "lowvram": "pipe.enable_sequential_cpu_offload()"}
    if job.offload == "group":
        for name in [*model.denoisers, model.vae.name]:
            lines.append(f'pipe.{name}.enable_group_offload(onload_device=torch.device("cuda"), '
                         'offload_device=torch.device("cpu"), offload_type="block_level", num_blocks_per_group=1, '
                         "use_stream=True)")
        # every text encoder too, small CLIPs included: a component left out stays on the CPU while
        # the pipeline sends its inputs to the GPU (the memory estimate streams them all the same way)
        encoders = [] if job.te_cpu else [c.name for c in model.by_role("text_encoder")]
        if encoders:
            lines.append("from diffusers.hooks import apply_group_offloading")
        for name in encoders:
            lines.append(f'apply_group_offloading(pipe.{name}, onload_device=torch.device("cuda"), '
                         'offload_type="leaf_level", use_stream=True)')
    else:
        lines.append(offload[job.offload])
    if job.vae_tiling:
        lines.append("pipe.vae.enable_tiling()")
    if job.vae_slicing:
        lines.append("pipe.vae.enable_slicing()")
    size = f"height={job.height}, width={job.width}" + (f", num_frames={job.frames}" if model.kind == "video" else "")
    per_prompt = "videos" if model.kind == "video" else "images"
    lines += ["", (f"out = pipe(prompt=\"...\", {size}, num_inference_steps={job.steps}, "
                   f"guidance_scale={job.guidance}, num_{per_prompt}_per_prompt={job.batch})")]
    return "\n".join(lines) + "\n"


def comfyui_flags(model: DiffusionModel, job: ImageJob) -> str:
    """`python main.py ...` flags, with the workflow-side settings as comments."""
    vram = {"none": "--highvram", "model": "--normalvram", "group": "--lowvram", "sequential": "--novram",
            "lowvram": "--lowvram"}[job.offload]
    flags = ["python", "main.py", vram]
    prec = precision_of(model, model.denoiser, job)
    if prec == "fp8":
        flags.append("--fp8_e4m3fn-unet")
    if job.te_weights == "fp8":
        flags.append("--fp8_e4m3fn-text-enc")
    notes = []
    if prec.startswith("gguf:"):
        notes.append(f"# load the denoiser with ComfyUI-GGUF's 'Unet Loader (GGUF)' ({prec.split(':')[1]})")
    if prec in ("nf4", "int8"):
        notes.append("# bitsandbytes weights need a custom loader node (e.g. ComfyUI_bitsandbytes_NF4)")
    if job.vae_tiling:
        notes.append("# decode with the 'VAE Decode (Tiled)' node")
    if job.te_cpu:
        notes.append("# set the text encoder loader's device to cpu")
    return " ".join(flags) + "\n" + "".join(n + "\n" for n in notes)


def emit(model: DiffusionModel, job: ImageJob, target: str, repo: str) -> str:
    return diffusers_script(model, job, repo) if target == "diffusers" else comfyui_flags(model, job)
