"""Software stacks (CUDA, ROCm, CANN): engines, pinned images, device resources, env.

Data: src/gpuwise/data/software_stacks.toml, one row per value of a card's `software`
(schema: docs/data-schema.md). `software_stack(card)` is what exporters and the planner use
to choose an image, a Kubernetes resource and whether a card is in the default search.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.catalog._datafile import FieldSpec, data_error, id_rows
from gpuwise.i18n import Text

if TYPE_CHECKING:
    from gpuwise.catalog.cards import Card

StackId = Literal["cuda", "rocm", "cann"]
STACK_IDS: tuple[StackId, ...] = ("cuda", "rocm", "cann")
SHIPPED_STACKS = Path(__file__).resolve().parent.parent / "data" / "software_stacks.toml"

_F = FieldSpec
STACK_FIELDS: dict[str, FieldSpec] = {
    "id": _F("str", required=True, choices=STACK_IDS),
    "name": _F("str", required=True),
    "serving_engines": _F("strlist", required=True),
    "vllm_image": _F("str", required=True),
    "train_image": _F("str", required=True),
    "device_resource": _F("str", required=True),
    "visible_devices_env": _F("str", required=True),
    "vllm_extra_env": _F("strlist"),
    "docker_run_args": _F("strlist"),
    "default_included": _F("bool", required=True),
    "why_not_en": _F("str"),
    "why_not_zh": _F("str"),
    "sources": _F("strlist", required=True),
    "unverified": _F("strlist"),
    "notes": _F("str"),
}
_VALUE_FIELDS = ("serving_engines", "vllm_image", "train_image", "device_resource",
                 "visible_devices_env", "vllm_extra_env", "docker_run_args", "default_included")


@dataclass(frozen=True)
class SoftwareStack:
    """One row of software_stacks.toml. `why_not` is None for a stack the planner includes."""

    id: StackId
    name: str
    serving_engines: tuple[str, ...]
    vllm_image: str
    train_image: str
    device_resource: str
    visible_devices_env: str
    default_included: bool
    sources: tuple[str, ...]
    why_not: Text | None = None
    vllm_extra_env: tuple[str, ...] = ()  # NAME=value pairs to set in the serving container
    docker_run_args: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()
    notes: str = ""


def load_stacks(path: Path) -> dict[str, SoftwareStack]:
    """Every stack of one file by id; a bad row is a DataError naming the file and the row."""
    out: dict[str, SoftwareStack] = {}
    for where, values in id_rows(path, "stack", STACK_FIELDS, Text("stack", "软件栈")):
        _check_stack(values, path, where)
        en, zh = values.pop("why_not_en", None), values.pop("why_not_zh", None)
        why_not = Text(en, zh) if en is not None and zh is not None else None
        out[values["id"]] = SoftwareStack(**values, why_not=why_not)
    missing = [s for s in STACK_IDS if s not in out]
    if missing:
        raise data_error(path, Text("stacks", "软件栈"), f"no row for {', '.join(missing)}.",
                         f"缺少 {', '.join(missing)} 的行。")
    return out


def _check_stack(values: dict[str, Any], path: Path, where: Text) -> None:
    for field in ("vllm_image", "train_image"):
        image = str(values[field])
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        if not tag or tag == "latest":
            raise data_error(path, where, f"{field} '{image}' must be pinned to a tag, not latest.",
                             f"{field}“{image}”必须固定到具体标签，不能用 latest。")
    has_en, has_zh = "why_not_en" in values, "why_not_zh" in values
    if has_en != has_zh or (not values["default_included"] and not has_en):
        raise data_error(path, where, "a stack left out by default needs why_not_en and why_not_zh.",
                         "默认不包含的软件栈必须给出 why_not_en 和 why_not_zh。")
    for name in values.get("unverified", ()):
        if name not in _VALUE_FIELDS:
            raise data_error(path, where, f"'unverified' names '{name}', which is not a value field.",
                             f"“unverified”中的“{name}”不是数值字段。")


@functools.cache
def stacks() -> dict[str, SoftwareStack]:
    """The shipped stacks by id (cuda, rocm, cann), read once."""
    return load_stacks(SHIPPED_STACKS)


def software_stack(card: Card) -> SoftwareStack:
    """The stack a card runs (its `software` field)."""
    return stacks()[card.software]


__all__ = [
    "SHIPPED_STACKS",
    "STACK_FIELDS",
    "STACK_IDS",
    "SoftwareStack",
    "StackId",
    "load_stacks",
    "software_stack",
    "stacks",
]
