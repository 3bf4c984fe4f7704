"""Verify and fleet results in the Prometheus text format, named and labelled like DCGM exporter.

NVIDIA's DCGM exporter labels every series with `gpu`, `UUID`, `modelName` and `Hostname`
(dcgm-exporter README, "sample output": `DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-...",
device="nvidia0",modelName="NVIDIA A100-SXM4-40GB",Hostname="..."}`), so a Grafana panel can
join our acceptance figures with its live utilisation, memory, temperature and power. Our
series use `Hostname` the same way; per-GPU info carries `gpu`, `UUID` and `modelName`.
Metric names follow the Prometheus naming guide: a `gpuwise_` prefix and the unit last.
prometheus_client is imported here only, never by `import gpuwise`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuwise.errors import InputError
from gpuwise.fleet.judge import FleetReport
from gpuwise.fleet.rules import load_rules
from gpuwise.i18n import Text

__all__ = ["STATUS_VALUE", "FleetCollector", "client", "families", "fleet_text", "write_fleet_metrics"]

# One number per verdict, worst highest, so `max by (Hostname)` is the node's verdict: a check that
# could not run (incomplete) ranks above a warning and below a failure.
STATUS_VALUE = {"pass": 0, "skipped": 1, "warn": 2, "incomplete": 2.5, "fail": 3}


def client() -> Any:
    """prometheus_client, or the install hint."""
    try:
        import prometheus_client
    except ImportError as exc:
        raise InputError(Text("Prometheus output needs prometheus_client: pip install 'gpuwise[fleet]'.",
                              "Prometheus 输出需要 prometheus_client：pip install 'gpuwise[fleet]'。")) from exc
    return prometheus_client


def families(report: FleetReport) -> Iterator[Any]:
    from prometheus_client.core import GaugeMetricFamily

    rules, node_labels = load_rules(), ["Hostname", "card"]
    info = GaugeMetricFamily("gpuwise_verify_gpu_info", "GPUs gpuwise verified (value 1), with DCGM "
                             "exporter's labels.", labels=["Hostname", "gpu", "UUID", "modelName"])
    status = GaugeMetricFamily("gpuwise_verify_status", "Node acceptance verdict: 0 pass, 2 warn, 3 fail.",
                               labels=node_labels)
    checks = GaugeMetricFamily("gpuwise_verify_check_status", "Each verify check: 0 pass, 1 skipped, "
                               "2 warn, 3 fail.", labels=[*node_labels, "check"])
    suspect = GaugeMetricFamily("gpuwise_fleet_suspect", "1 when the node is over the threshold below "
                                "its fleet median in any metric.", labels=node_labels)
    ratio = GaugeMetricFamily("gpuwise_fleet_ratio_to_median", "Node value / fleet median, per metric.",
                              labels=[*node_labels, "check"])
    values = {m.check: GaugeMetricFamily(m.prometheus, f"{m.label.en} ({m.unit}).", labels=node_labels)
              for m in rules.metrics}
    for g in report.groups:
        suspects = set(g.suspects())
        for n in g.nodes:
            who = [n.host, n.card]
            status.add_metric(who, STATUS_VALUE.get(n.status, 3))
            suspect.add_metric(who, 1 if n.host in suspects else 0)
            for gpu in n.gpus:
                info.add_metric([n.host, str(gpu.index), gpu.uuid or "", gpu.name], 1)
            for c in n.checks:
                checks.add_metric([*who, c.name], STATUS_VALUE.get(c.status, 3))
        for t in g.tables:
            for cell in t.cells:
                card = next(n.card for n in g.nodes if n.host == cell.host)
                if cell.value is not None:
                    values[t.metric.check].add_metric([cell.host, card], cell.value)
                if cell.ratio is not None:
                    ratio.add_metric([cell.host, card, t.metric.check], cell.ratio)
    yield from (info, status, checks, suspect, ratio, *values.values())


class FleetCollector:
    """A prometheus_client collector that rebuilds the report on every scrape."""

    def __init__(self, make_report: Callable[[], FleetReport]) -> None:
        self._make_report = make_report

    def collect(self) -> Iterator[Any]:
        yield from families(self._make_report())


def fleet_text(report: FleetReport) -> str:
    """The report in the Prometheus text exposition format (version 0.0.4)."""
    prom = client()
    registry = prom.CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(lambda: report))
    return str(prom.generate_latest(registry).decode("utf-8"))


def write_fleet_metrics(report: FleetReport, path: Path) -> None:
    """Write the text for node_exporter's textfile collector or any file-based scrape."""
    path.write_text(fleet_text(report), encoding="utf-8")
