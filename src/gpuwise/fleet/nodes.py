"""Evidence files -> judged nodes.

A fleet report reads what `gpuwise verify --save` writes (raw evidence, judged here by
verify's own `judge`, so a node passes or fails exactly as `verify --from` would say) or
what `gpuwise verify --json` prints (a verdict, read as it stands). Files from Slurm
`srun`, a Kubernetes DaemonSet or `gpuwise fleet verify` look the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import DataError, GpuwiseError
from gpuwise.i18n import Text
from gpuwise.verify.checks import STATUS_ORDER, CheckResult
from gpuwise.verify.raw_schema import MAX_FILE_BYTES  # the size verify itself accepts: one cap

__all__ = ["MAX_FILE_BYTES", "GpuLabel", "NodeResult", "load_node", "node_from_dict", "node_from_verdict"]


@dataclass(frozen=True)
class GpuLabel:
    """What identifies one GPU of a node in metrics (DCGM exporter's gpu, UUID, modelName)."""

    index: int
    name: str
    uuid: str | None


@dataclass(frozen=True)
class NodeResult:
    """One node as the fleet sees it: its own verdict and the checks behind it."""

    origin: str  # the file (or Ray node id) it came from
    host: str
    card: str  # catalog card id, else the GPU product name
    gpu_count: int
    status: str  # verify's own verdict: pass / warn / fail
    checks: tuple[CheckResult, ...]
    gpus: tuple[GpuLabel, ...] = ()

    @property
    def group(self) -> str:
        """Nodes are compared only with nodes of the same card type and GPU count."""
        return f"{self.gpu_count} x {self.card}"

    def measured(self, check: str) -> float | None:
        """A check's numeric measurement; None when it was skipped, not a number, or absent."""
        c = next((c for c in self.checks if c.name == check), None)
        if c is None or c.status == "skipped" or isinstance(c.measured, bool):
            return None
        return float(c.measured) if isinstance(c.measured, (int, float)) else None


def _bad(origin: str, en: str, zh: str) -> DataError:
    return DataError(Text(f"{origin}: {en}", f"{origin}：{zh}"),
                     hint=Text("Fleet reports read `gpuwise verify --save FILE` (or `--json`) output.",
                               "fleet report 读取 `gpuwise verify --save FILE`（或 `--json`）的输出。"))


def _read(path: Path) -> dict[str, Any]:
    """Bounded, strict JSON through gpuwise.safefile (a FIFO or /dev/zero is refused, never a hang);
    a parse failure is worded with the fleet's hint."""
    from gpuwise.safefile import loads_json, read_bytes

    raw = read_bytes(path, MAX_FILE_BYTES, Text("verify file", "verify 文件"))
    try:
        data = loads_json(raw, path)
    except DataError as exc:
        raise _bad(str(path), f"cannot be read as JSON ({exc.message.en})",
                   f"无法按 JSON 读取（{exc.message.zh}）") from None
    if not isinstance(data, dict):
        raise _bad(str(path), "not a JSON object.", "不是 JSON 对象。")
    return data


def node_from_verdict(verdict: Any, origin: str) -> NodeResult:
    """A verify `Verdict` (judged here or on the node) as a fleet node."""
    ev = verdict.evidence
    names = sorted({g.name for g in ev.gpus})
    gpus = tuple(GpuLabel(int(g.index), str(g.name), g.uuid if isinstance(g.uuid, str) else None)
                 for g in ev.gpus)
    return NodeResult(origin=origin, host=str(ev.host), card=verdict.card_id or " / ".join(names) or "?",
                      gpu_count=len(ev.gpus), status=verdict.status, checks=tuple(verdict.checks), gpus=gpus)


def _check(origin: str, row: Any) -> CheckResult:
    if not isinstance(row, dict) or not isinstance(row.get("name"), str) \
            or row.get("status") not in STATUS_ORDER:
        raise _bad(origin, f"a check without a name or a known status: {str(row)[:80]}",
                   f"检查项缺少名称或状态未知：{str(row)[:80]}")
    measured = row.get("measured")
    if not isinstance(measured, (int, float, str)) and measured is not None:
        measured = None
    return CheckResult(row["name"], row["status"], measured, None, str(row.get("unit") or ""),
                       Text(str(row.get("detail") or ""), str(row.get("detail_zh") or "")))


def _from_verdict_dict(data: dict[str, Any], origin: str) -> NodeResult:
    checks, gpus = data.get("checks"), data.get("gpus")
    if not isinstance(checks, list) or not isinstance(gpus, list):
        raise _bad(origin, "a verify verdict without 'checks' or 'gpus'.", "verify 结论缺少 checks 或 gpus。")
    names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)})
    labels = tuple(GpuLabel(g["index"], str(g.get("name")), None) for g in gpus
                   if isinstance(g, dict) and isinstance(g.get("index"), int))
    status = data.get("status")
    if status not in ("pass", "warn", "fail", "incomplete"):  # verify's verdicts (checks.py)
        raise _bad(origin, f"unknown status {status!r}.", f"未知状态 {status!r}。")
    return NodeResult(origin=origin, host=str(data.get("host") or origin),
                      card=str(data.get("card") or " / ".join(names) or "?"), gpu_count=len(gpus),
                      status=str(status), checks=tuple(_check(origin, c) for c in checks), gpus=labels)


def node_from_dict(data: dict[str, Any], origin: str, claim: Any = None) -> NodeResult:
    """Raw evidence (judged now against `claim`) or a saved verdict, told apart by `kind`."""
    from gpuwise.verify.judge import judge
    from gpuwise.verify.raw import KIND, evidence_from_dict

    kind = data.get("kind")
    if kind == "gpuwise.verify":
        return _from_verdict_dict(data, origin)
    if kind != KIND:
        raise _bad(origin, f"kind is {kind!r}, not a gpuwise verify file.",
                   f"kind 为 {kind!r}，不是 gpuwise verify 文件。")
    evidence = evidence_from_dict(data, origin=origin)
    try:
        verdict = judge(evidence, claim)
    except GpuwiseError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # evidence that loads but that verify's checks cannot read (a field of the wrong type)
        raise _bad(origin, f"evidence verify cannot judge ({type(exc).__name__}: {exc}).",
                   f"verify 无法评判的证据（{type(exc).__name__}：{exc}）。") from exc
    return node_from_verdict(verdict, origin)


def load_node(path: Path, claim: Any = None) -> NodeResult:
    return node_from_dict(_read(path), str(path), claim)
