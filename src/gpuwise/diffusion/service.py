"""The diffusion side of `gpuwise estimate`, `gpuwise model` and `gpuwise plan`: plain request
values in, the JSON objects out. gpuwise.service dispatches here when the model is a diffusion
pipeline (a preset, a diffusers folder or a single-file checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuwise.diffusion.estimate import OS, estimate_diffusion
from gpuwise.diffusion.job import ImageJob
from gpuwise.diffusion.pipeline import DiffusionModel
from gpuwise.diffusion.resolve import load_diffusion
from gpuwise.errors import unknown_name
from gpuwise.i18n import Text

_OFFLOAD_ALIASES = {"cpu": "model"}  # the LLM side's --offload cpu: the nearest diffusers mode


def job_from(req: Any, model: DiffusionModel) -> ImageJob:
    """An ImageJob from an EstimateRequest / PlanRequest; unset sizes take the model's defaults."""
    d = model.defaults
    offload = _OFFLOAD_ALIASES.get(req.offload, req.offload)
    def pick(value: int | None, default: int) -> int:
        return default if value is None else value  # 0 is a value (refused by the bounds), not "unset"
    return ImageJob(width=pick(req.width, d.width), height=pick(req.height, d.height),
                    frames=pick(req.frames, d.frames), batch=req.images, steps=pick(req.steps, d.steps),
                    guidance=d.guidance if req.guidance is None else req.guidance, weights=req.weights,
                    te_weights=req.te_weights, offload=offload, vae_tiling=req.vae_tiling,
                    vae_slicing=req.vae_slicing, runtime=req.runtime, te_cpu=req.te_cpu)


_SYSTEMS: tuple[OS, ...] = ("linux", "windows")


def check_os(value: str) -> OS:
    for system in _SYSTEMS:
        if value == system:
            return system
    raise unknown_name(Text("--os value", "--os 取值"), value, _SYSTEMS, "gpuwise estimate --help")


def diffusion_estimate_json(req: Any) -> dict[str, Any]:
    """`gpuwise estimate --json` for a diffusion pipeline (req: gpuwise.service.EstimateRequest)."""
    from gpuwise.catalog.cards import load_cards, resolve_card
    from gpuwise.catalog.prices import load_prices
    from gpuwise.estimate.cost import job_cost

    os_name = check_os(req.os)
    catalog = load_cards([Path(req.cards_file)] if req.cards_file else [])
    resolved = resolve_card(req.card, catalog)
    model = load_diffusion(req.model)
    job = job_from(req, model)
    calibration = None
    if req.calibration:
        from gpuwise.verify.calibration import load_calibration

        calibration = load_calibration(Path(req.calibration), resolved.card)
    result = estimate_diffusion(model, job, resolved.card, os_name, calibration)
    offers = tuple(load_prices([req.prices_file])) if req.prices_file else None
    cost = job_cost(resolved.card.id, 1, provider=req.provider, billing=req.billing,
                    run_seconds=result.speed.total_s, offers=offers)
    out = estimate_diffusion(model, job, resolved.card, os_name, calibration, cost).to_dict()
    if resolved.note is not None:
        out["card_note"], out["card_note_zh"] = resolved.note.en, resolved.note.zh
    return out


def diffusion_model_json(src: str) -> dict[str, Any]:
    """`gpuwise model --json` for a diffusion pipeline: components, counts, published sizes."""
    m = load_diffusion(src)
    return {
        "schema_version": 1, "kind": "diffusion", "name": m.name, "id": m.id, "source": m.source, "task": m.kind,
        "params_total": m.params_total, "denoisers": list(m.denoisers), "cfg": m.cfg,
        "components": [{"name": c.name, "class": c.class_name, "role": c.role, "params": c.params,
                        "approximate": c.approximate, "stored_bytes": c.stored_bytes or None,
                        "stored_dtype": c.stored_dtype or None} for c in m.components],
        "defaults": m.defaults.__dict__, "latent": {"spatial": m.latent.spatial, "temporal": m.latent.temporal,
                                                    "patch": list(m.latent.patch)},
        "published": [p.__dict__ for p in m.published],
        "notes": [n.en for n in m.notes], "notes_zh": [n.zh for n in m.notes],
    }


class _PlanView:
    """A PlanRequest seen as the job fields an ImageJob needs (plans choose offload themselves)."""

    def __init__(self, req: Any) -> None:
        self._req = req

    def __getattr__(self, name: str) -> Any:
        defaults = {"offload": "none", "te_weights": "auto", "vae_tiling": False, "vae_slicing": False,
                    "te_cpu": False, "runtime": "diffusers", "images": 1}
        value = getattr(self._req, name, defaults.get(name))
        return "auto" if name == "weights" else value


def run_diffusion_plan(req: Any, cards: list[Any], excluded: dict[str, Text]) -> tuple[Any, Any, list[Any], list[Any]]:
    from gpuwise.catalog.prices import load_prices
    from gpuwise.diffusion.plan import plan_diffusion
    from gpuwise.estimate.cost import job_cost

    os_name = check_os(req.os)
    if req.objective not in ("cost", "speed"):
        raise unknown_name(Text("--objective value", "--objective 取值"), req.objective, ("cost", "speed"),
                           "gpuwise plan --help")
    model = load_diffusion(req.model)
    job = job_from(_PlanView(req), model)
    offers = tuple(load_prices([req.prices_file])) if req.prices_file else None

    def price(card: Any, seconds: float) -> Any:
        return job_cost(card.id, 1, provider=req.provider, billing=req.billing, run_seconds=seconds, offers=offers)
    plans, rejected = plan_diffusion(model, job, cards, os=os_name, weights=req.weights,
                                     allow_offload=True, max_seconds=req.max_seconds, objective=req.objective,
                                     price=price, top=req.top, excluded=excluded)
    return model, job, plans, rejected


def diffusion_plan_json(req: Any, cards: list[Any], excluded: dict[str, Text]) -> dict[str, Any]:
    """`gpuwise plan --json` for a diffusion pipeline: ranked cards, each with its settings."""
    from gpuwise.diffusion.export import comfyui_flags, diffusers_script

    model, job, plans, rejected = run_diffusion_plan(req, cards, excluded)
    repo = req.deploy_model or _repo_of(model, req.model)
    out_plans = []
    for p in plans:
        d = p.estimate.to_dict()
        d["reasons"], d["reasons_zh"] = [r.en for r in p.reasons], [r.zh for r in p.reasons]
        d["per_output_cost"] = p.per_output_cost
        d["exports"] = {"diffusers": diffusers_script(model, p.estimate.job, repo),
                        "comfyui": comfyui_flags(model, p.estimate.job)}
        out_plans.append(d)
    return {"schema_version": 1, "kind": "diffusion", "model": model.name, "task": model.kind,
            "objective": req.objective, "max_seconds": req.max_seconds,
            "job": {"width": job.width, "height": job.height, "frames": job.frames, "steps": job.steps,
                    "guidance": job.guidance, "batch": job.batch},
            "plans": out_plans,
            "rejected": [{"card": r.card.id, "reasons": [r.reason.en], "reasons_zh": [r.reason.zh]} for r in rejected],
            "evaluated": len(cards)}


def _repo_of(model: DiffusionModel, src: str) -> str:
    return model.hf_id or src


def diffusion_emit_json(req: Any, target: str, cards: list[Any], excluded: dict[str, Text]) -> dict[str, Any]:
    """`gpuwise plan --emit diffusers|comfyui` for a diffusion pipeline: the top plan's settings."""
    from gpuwise.diffusion.export import TARGETS, emit

    if target not in TARGETS:
        raise unknown_name(Text("export target for an image/video model", "图像/视频模型的导出目标"), target, TARGETS,
                           "gpuwise plan --help")
    model, _, plans, _ = run_diffusion_plan(req, cards, excluded)
    if not plans:
        from gpuwise.errors import InputError

        raise InputError(Text("No plan meets the constraints, so there is nothing to export.",
                              "没有满足条件的方案，无法导出配置。"))
    best = plans[0].estimate
    return {"schema_version": 1, "target": target, "card": best.card.id,
            "config": emit(model, best.job, target, req.deploy_model or _repo_of(model, req.model))}


def vlm_estimate_json(req: Any) -> dict[str, Any]:
    """`gpuwise estimate` for a vision-language model shown `images` images of width x height: their
    tokens join the prompt (prefill and KV), the vision tower's run is added to the time to first token."""
    import dataclasses

    from gpuwise.catalog.cards import load_cards, resolve_card
    from gpuwise.catalog.sources import load_model
    from gpuwise.diffusion.vlm import image_tokens, vision_flops
    from gpuwise.estimate.links import card_rates
    from gpuwise.service import estimate_json

    arch = load_model(req.model, hub=req.hub)
    top = _model_config(req.model)
    vision = top.get("vision_config") if top else None
    vision = vision if isinstance(vision, dict) else None
    if not arch.vision_params or vision is None:
        from gpuwise.errors import InputError

        raise InputError(Text(f"{arch.name} has no vision tower: --width/--height describe an image for a "
                              "vision-language model (or the size of an image/video model's output).",
                              f"{arch.name} 没有视觉编码器：--width/--height 用于视觉语言模型的输入图像"
                              "（或图像/视频模型的输出尺寸）。"))
    one = image_tokens(vision, req.height, req.width, top)
    tokens = one.tokens * req.images
    inner = dataclasses.replace(req, context=req.context + tokens, width=None, height=None)
    out = estimate_json(inner)
    card = resolve_card(req.card, load_cards([Path(req.cards_file)] if req.cards_file else [])).card
    rates = card_rates(card)
    rate = (card.dense_tflops("bf16") or 1.0) * 1e12 * rates.prefill
    encoder_s = vision_flops(vision, arch.vision_params, one.patches, one.tiles) * req.images / rate
    if out.get("speed") and "ttft_s" in out["speed"]:
        out["speed"]["ttft_s"] += encoder_s
        out["speed"]["vision_encoder_s"] = encoder_s
    out["vision"] = {**one.to_dict(), "images": req.images, "image_tokens": tokens,
                     "text_context": req.context, "context_with_images": req.context + tokens,
                     "encoder_s": encoder_s}
    return out


def _model_config(src: str) -> dict[str, Any] | None:
    """The whole config of a preset, a config.json or a model folder (None elsewhere): InternVL keeps
    its tiling keys (max_dynamic_patch, use_thumbnail, downsample_ratio) beside vision_config."""
    from gpuwise.catalog.presets import find_preset

    preset = find_preset(src)
    if preset is not None:
        cfg: Any = preset.config
    else:
        path = Path(src).expanduser()
        path = path / "config.json" if path.is_dir() else path
        if not (path.is_file() and path.suffix == ".json"):
            return None
        from gpuwise.catalog.sources import read_config_file

        cfg = read_config_file(path)
    return cfg if isinstance(cfg, dict) else None
