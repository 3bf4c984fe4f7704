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
    return ImageJob(width=req.width or d.width, height=req.height or d.height, frames=req.frames or d.frames,
                    batch=req.images, steps=req.steps or d.steps,
                    guidance=d.guidance if req.guidance is None else req.guidance, weights=req.weights,
                    te_weights=req.te_weights, offload=offload, vae_tiling=req.vae_tiling,
                    vae_slicing=req.vae_slicing, runtime=req.runtime, te_cpu=req.te_cpu)


def check_os(value: str) -> OS:
    if value not in ("linux", "windows"):
        raise unknown_name(Text("--os value", "--os 取值"), value, ("linux", "windows"), "gpuwise estimate --help")
    return value  # type: ignore[return-value]


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
