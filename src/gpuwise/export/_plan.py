"""The exporters' view of a plan: the planner's own frozen `Plan`, and its reader for plan files.

Exporters only present a plan; they never size it and never reach back into the catalog.
"""

from __future__ import annotations

from gpuwise.plan.load import plan_from_dict as parse_plan
from gpuwise.plan.value import TRAIN_TASKS, Plan, slug

__all__ = ["TRAIN_TASKS", "Plan", "parse_plan", "slug"]
