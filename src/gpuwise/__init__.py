"""gpuwise: does it fit, can it be fed, how fast, what does it cost — and is the server what you paid for.

Importing this package is cheap: no torch, rich, typer, fastapi or ray. The public API is
re-exported lazily so `import gpuwise` costs a few milliseconds.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "load_model": "gpuwise.catalog.sources",
    "count_params": "gpuwise.catalog.params",
    "ModelArch": "gpuwise.catalog.arch",
    "load_cards": "gpuwise.catalog.cards",
    "resolve_card": "gpuwise.catalog.cards",
    "estimate": "gpuwise.estimate.api",
    "estimate_memory": "gpuwise.estimate.api",
    "Workload": "gpuwise.estimate.workload",
    "Deployment": "gpuwise.estimate.workload",
    "EstimateRequest": "gpuwise.service",
    "PlanRequest": "gpuwise.service_plan",
    "estimate_json": "gpuwise.service",
    "plan_json": "gpuwise.service_plan",
    "GpuwiseError": "gpuwise.errors",
}

__all__ = [
    "Deployment",
    "EstimateRequest",
    "GpuwiseError",
    "ModelArch",
    "PlanRequest",
    "Workload",
    "__version__",
    "count_params",
    "estimate",
    "estimate_json",
    "estimate_memory",
    "load_cards",
    "load_model",
    "plan_json",
    "resolve_card",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuwise' has no attribute {name!r}")
    return getattr(import_module(module), name)
