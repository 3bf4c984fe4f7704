"""`gpuwise exporter`: serve verify and fleet results for Prometheus to scrape.

Each scrape re-reads the evidence files (a cron'd `gpuwise verify --save` or a DaemonSet
refreshes them), judges them as `gpuwise fleet report` does, and answers in the text
format. A file that goes bad does not take the endpoint down: the scrape says
`gpuwise_exporter_up 0` with the reason. Listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError, InputError
from gpuwise.i18n import Text, os_reason

__all__ = ["DEFAULT_PORT", "evidence_paths", "make_exporter"]

# DCGM exporter listens on 9400 (dcgm-exporter README: "-a, --address ... default :9400");
# the next port keeps the two side by side on one node.
DEFAULT_PORT = 9401


def evidence_paths(items: Sequence[Path]) -> list[Path]:
    """Files as given; a folder stands for the *.json files in it."""
    out: list[Path] = []
    for p in items:
        out += sorted(p.glob("*.json")) if p.is_dir() else [p]
    return out


class _Collector:
    def __init__(self, items: Sequence[Path], claim: object | None) -> None:
        self._items, self._claim = list(items), claim

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from gpuwise.fleet.api import fleet_report
        from gpuwise.fleet.prometheus import families

        up = GaugeMetricFamily("gpuwise_exporter_up", "1 when every evidence file was read and judged.",
                               labels=["error"])
        try:
            report = fleet_report(evidence_paths(self._items), self._claim)
        except GpuwiseError as err:
            up.add_metric([err.message.en[:200]], 0)
            yield up
            return
        up.add_metric([""], 1)
        yield up
        yield from families(report)


def make_exporter(items: Sequence[Path], host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                  claim: object | None = None) -> Any:
    """A WSGI server (not yet serving) whose /metrics judges `items` on every scrape."""
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from gpuwise.fleet.prometheus import client

    prom = client()
    registry = prom.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(items, claim))

    class _Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes every 15 s would flood the terminal."""

    try:
        return make_server(host, port, prom.make_wsgi_app(registry), handler_class=_Quiet)
    except OSError as exc:
        raise InputError(Text(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.",
                              f"无法监听 {host}:{port}：{os_reason(exc).zh}。"),
                         hint=Text("Pick another --port, or stop what holds this one.",
                                   "请换一个 --port，或停止占用该端口的程序。")) from exc
