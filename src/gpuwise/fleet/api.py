"""What the shells call: evidence files -> a fleet report, and the report's files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuwise.errors import InputError
from gpuwise.fleet.judge import FleetReport, judge_fleet
from gpuwise.fleet.nodes import NodeResult, load_node
from gpuwise.i18n import Lang, Text

__all__ = ["MAX_NODES", "fleet_report", "make_claim", "write_html"]

MAX_NODES = 4096  # far beyond any fleet one report reads; a bound on a glob gone wrong


def make_claim(card: str | None = None, contract: Path | None = None) -> object | None:
    """The verify Claim every node is judged against (None: each node's own recognised card)."""
    if card is None and contract is None:
        return None
    from gpuwise.verify.contract import load_contract
    from gpuwise.verify.judge import Claim, claimed_card

    claim = Claim(card=card, contract=load_contract(contract) if contract else None)
    if claim.card_name:
        claimed_card(claim.card_name)  # an unknown card fails once, before any file is read
    return claim


def fleet_report(files: Sequence[Path], claim: object | None = None) -> FleetReport:
    if not files:
        raise InputError(Text("Give at least one evidence file (`gpuwise verify --save FILE` output).",
                              "请至少给出一个证据文件（`gpuwise verify --save FILE` 的输出）。"))
    if len(files) > MAX_NODES:
        raise InputError(Text(f"{len(files):,} files: a report reads at most {MAX_NODES:,}.",
                              f"{len(files):,} 个文件：一份报告最多读取 {MAX_NODES:,} 个。"))
    seen: set[Path] = set()
    nodes: list[NodeResult] = []
    for f in files:  # the same file named twice (a glob and a name) counts once
        key = Path(f).resolve()
        if key not in seen:
            seen.add(key)
            nodes.append(load_node(Path(f), claim))
    return judge_fleet(nodes)


def write_html(report: FleetReport, path: Path, lang: Lang) -> None:
    from gpuwise.fleet.html import render_fleet_html

    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(Text(f"--html must end in .html, got '{path}'.",
                              f"--html 的扩展名必须是 .html，实际为“{path}”。"))
    path.write_text(render_fleet_html(report, lang), encoding="utf-8")
