"""The pipeline file `gpuwise place` reads (TOML), checked into typed stages.

    [gpus]
    card = "rtx-4090"
    count = 3

    [[stage]]
    name = "embed"            # unique
    kind = "embed"            # data/fleet_place.toml [[kind]]
    model = "qwen3-0.6b"      # a preset, HF id or config.json (estimated by gpuwise)
    tokens = 512              # tokens per call (prompt + output for generate)
    batch = 8                 # calls served at once
    calls_per_request = 1     # e.g. a reranker scores 20 passages per query
    inputs = []               # stages whose output it takes

Diffusion components (kind text_encoder / unet / vae) either name their pipeline, which gpuwise
sizes for the workload given:

    [[stage]]
    name = "unet"
    kind = "unet"
    model = "flux.1-dev"      # a diffusion preset, diffusers folder or single-file checkpoint
    width = 1024              # also height, frames (video), steps; default: the pipeline's own
    weights = "fp8"           # the denoiser's precision; te_weights the large text encoder's
    batch = 1                 # images (or videos) per generation

or declare memory_gib and seconds_per_call (and output_bytes) instead of model.
The stages must form one connected graph without cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError, close_matches
from gpuwise.fleet.spec_file import check_keys, read_spec
from gpuwise.i18n import Text

__all__ = ["MAX_GPUS", "MAX_STAGES", "Pipeline", "StageSpec", "load_pipeline", "parse_pipeline"]

MAX_STAGES, MAX_GPUS = 8, 8  # 8^8 placements is the most the exhaustive search will try


@dataclass(frozen=True)
class StageSpec:
    name: str
    kind: str
    model: str | None = None
    checkpoint: str | None = None  # what the settings load (default: the preset's HF id or model)
    weights: str = "auto"
    tokens: int = 1024
    output_tokens: int = 256  # generate stages: tokens produced per call (part of `tokens`)
    batch: int = 1
    calls_per_request: int = 1
    inputs: tuple[str, ...] = ()
    memory_gib: float | None = None  # declared stages
    seconds_per_call: float | None = None  # declared stages
    output_bytes: int | None = None  # bytes one call hands downstream (default: by kind)
    width: int | None = None  # diffusion components: the workload (default: the pipeline's)
    height: int | None = None
    frames: int | None = None
    steps: int | None = None
    te_weights: str = "auto"  # diffusion: the large text encoder's precision


@dataclass(frozen=True)
class Pipeline:
    card: str
    gpus: int
    stages: tuple[StageSpec, ...]

    def stage(self, name: str) -> StageSpec:
        return next(s for s in self.stages if s.name == name)


def _bad(origin: str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{origin}: {en}", f"{origin}：{zh}"),
                     hint=Text("The pipeline file format: `gpuwise place --help` and tests/fixtures/place/.",
                               "流水线文件格式见 `gpuwise place --help` 与 tests/fixtures/place/。"))


_INTS = {"tokens": (1, 1 << 20), "output_tokens": (1, 1 << 20), "batch": (1, 4096), "calls_per_request": (1, 10_000),
         "output_bytes": (0, 1 << 40), "width": (64, 8192), "height": (64, 8192), "frames": (1, 1025),
         "steps": (1, 1000)}  # the diffusion bounds: gpuwise.diffusion.job.BOUNDS
_FLOATS = {"memory_gib": (0.001, 10_000.0), "seconds_per_call": (1e-6, 86_400.0)}


def _field(origin: str, where: str, key: str, v: Any) -> Any:
    if key in _INTS or key in _FLOATS:
        lo, hi = _INTS.get(key) or _FLOATS[key]
        ok_type = (int,) if key in _INTS else (int, float)
        if isinstance(v, bool) or not isinstance(v, ok_type) or not lo <= v <= hi:
            raise _bad(origin, f"{where}: {key} must be a number from {lo:g} to {hi:g}, got {v!r}.",
                       f"{where}：{key} 必须是 {lo:g} 到 {hi:g} 的数，实际为 {v!r}。")
        return v if key in _INTS else float(v)
    if key == "inputs":
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _bad(origin, f"{where}: inputs must be a list of stage names.", f"{where}：inputs 必须是阶段名列表。")
        return tuple(v)
    if not isinstance(v, str) or not v.strip() or len(v) > 500:
        raise _bad(origin, f"{where}: {key} must be a short string, got {v!r}.", f"{where}：{key} 必须是短字符串。")
    return v.strip()


def _stage(origin: str, i: int, row: Any) -> StageSpec:
    where = f"[[stage]] #{i + 1}"
    if not isinstance(row, dict):
        raise _bad(origin, f"{where} is not a table.", f"{where} 不是表。")
    check_keys(origin, where, row, [f.name for f in fields(StageSpec)], _bad)
    for key in ("name", "kind"):
        if key not in row:
            raise _bad(origin, f"{where} has no {key}.", f"{where} 缺少 {key}。")
    return StageSpec(**{k: _field(origin, where, k, v) for k, v in row.items()})


def _check_graph(origin: str, stages: tuple[StageSpec, ...]) -> None:
    names = [s.name for s in stages]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _bad(origin, f"stage names used twice: {', '.join(dupes)}.", f"阶段名重复：{', '.join(dupes)}。")
    for s in stages:
        for src in s.inputs:
            if src not in names:
                near = close_matches(src, names)
                tip = f" Did you mean '{near[0]}'?" if near else ""
                raise _bad(origin, f"stage '{s.name}' takes input from unknown stage '{src}'.{tip}",
                           f"阶段“{s.name}”的输入“{src}”不存在。{tip}")
    _check_acyclic(origin, stages)
    _check_connected(origin, stages)


def _check_acyclic(origin: str, stages: tuple[StageSpec, ...]) -> None:
    pending = {s.name: set(s.inputs) for s in stages}
    while pending:
        ready = [n for n, deps in pending.items() if not deps]
        if not ready:
            loop = " -> ".join(sorted(pending))
            raise _bad(origin, f"the stages form a cycle ({loop}): a pipeline must flow one way.",
                       f"阶段之间形成了环（{loop}）：流水线必须单向流动。")
        for n in ready:
            del pending[n]
        for deps in pending.values():
            deps.difference_update(ready)


def _check_connected(origin: str, stages: tuple[StageSpec, ...]) -> None:
    links: dict[str, set[str]] = {s.name: set() for s in stages}
    for s in stages:
        for src in s.inputs:
            links[s.name].add(src)
            links[src].add(s.name)
    seen, todo = set(), [stages[0].name]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += links[n] - seen
    apart = [s.name for s in stages if s.name not in seen]
    if apart:
        raise _bad(origin, f"stage(s) {', '.join(apart)} are not connected to '{stages[0].name}': place "
                           "separate pipelines with separate files.",
                   f"阶段 {', '.join(apart)} 与“{stages[0].name}”不相连：不同的流水线请分文件放置。")


def parse_pipeline(doc: dict[str, Any], origin: str) -> Pipeline:
    gpus = doc.get("gpus")
    if not isinstance(gpus, dict) or not isinstance(gpus.get("card"), str):
        raise _bad(origin, "needs [gpus] with card = \"...\" and count = N.", "需要 [gpus]，含 card 与 count。")
    count = gpus.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_GPUS:
        raise _bad(origin, f"[gpus] count must be 1 to {MAX_GPUS}, got {count!r}.",
                   f"[gpus] count 必须在 1 到 {MAX_GPUS} 之间，实际为 {count!r}。")
    rows = doc.get("stage")
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_STAGES:
        raise _bad(origin, f"needs 1 to {MAX_STAGES} [[stage]] tables.", f"需要 1 到 {MAX_STAGES} 个 [[stage]]。")
    stages = tuple(_stage(origin, i, r) for i, r in enumerate(rows))
    _check_graph(origin, stages)
    return Pipeline(gpus["card"], count, stages)


def load_pipeline(path: Path) -> Pipeline:
    doc = read_spec(path, Text("pipeline file", "流水线文件"))
    return parse_pipeline(doc, str(path))
