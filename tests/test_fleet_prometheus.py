"""Prometheus text for verify/fleet results, the exporter on loopback, and the Grafana dashboard."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from gpuwise.errors import InputError
from gpuwise.fleet.api import fleet_report
from gpuwise.fleet.exporter import make_exporter
from gpuwise.fleet.prometheus import STATUS_VALUE, fleet_text
from tests.fixtures.fleet.helpers import cli
from tests.fixtures.fleet.make_fleet import fleet_dir

ROOT = Path(__file__).resolve().parent.parent
FLEET = fleet_dir()  # the 8-node fleet, node-05 7% slow, written from the recorded node
DASHBOARD = ROOT / "dashboards" / "gpuwise-fleet.json"
# NVIDIA dcgm-exporter etc/default-counters.csv: the live metrics the dashboard shows beside ours.
DCGM_DEFAULTS = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}


def samples(text: str) -> dict[str, list[Any]]:
    """Parsed by prometheus_client's own parser: family name -> samples."""
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def value(fams: dict[str, list[Any]], name: str, **labels: str) -> float:
    hits = [s.value for s in fams[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, hits)
    return float(hits[0])


def test_the_fleet_text_parses_and_carries_dcgm_style_labels() -> None:
    report = fleet_report(sorted(FLEET.glob("*.json")))
    fams = samples(fleet_text(report))
    assert value(fams, "gpuwise_fleet_suspect", Hostname="node-05") == 1
    assert value(fams, "gpuwise_fleet_suspect", Hostname="node-01") == 0
    own = next(n for n in report.nodes if n.host == "node-05").status  # its own verdict, as verify says
    assert value(fams, "gpuwise_verify_status", Hostname="node-05", card="h100-sxm") == STATUS_VALUE[own]
    mem = next(c for t in report.groups[0].tables if t.metric.check == "performance.mem_bw" for c in t.cells
               if c.host == "node-05")
    assert value(fams, "gpuwise_verify_mem_bw_gbps", Hostname="node-05") == mem.value
    ratio = value(fams, "gpuwise_fleet_ratio_to_median", Hostname="node-05", check="performance.mem_bw")
    assert 0.92 < ratio < 0.94
    info = [s for s in fams["gpuwise_verify_gpu_info"] if s.labels["Hostname"] == "node-03"]
    assert len(info) == 8 and {s.labels["gpu"] for s in info} == {str(i) for i in range(8)}
    assert all(s.labels["UUID"].startswith("GPU-") and s.labels["modelName"] == "NVIDIA H100 80GB HBM3"
               for s in info)
    checks = {s.labels["check"] for s in fams["gpuwise_verify_check_status"] if s.labels["Hostname"] == "node-01"}
    assert {"performance.mem_bw", "health.ecc", "software.torch"} <= checks


def test_prometheus_for_one_node_from_the_cli(tmp_path: Path) -> None:
    out_file = tmp_path / "node.prom"
    out = cli("fleet", "report", str(FLEET / "node-05.json"), "--prometheus", str(out_file), "--json")
    assert out.code == 0  # one node: judged on its own, it passes
    fams = samples(out_file.read_text())
    assert value(fams, "gpuwise_verify_mem_bw_gbps", Hostname="node-05") == pytest.approx(2705.1)
    assert fams["gpuwise_fleet_ratio_to_median"] == []  # no fleet to compare with


@pytest.fixture()
def exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    folder = tmp_path / "evidence"
    folder.mkdir()
    for f in sorted(FLEET.glob("*.json"))[:4]:
        (folder / f.name).write_text(f.read_text())
    server = make_exporter([folder], "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics", folder
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def scrape(url: str) -> dict[str, list[Any]]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        return samples(resp.read().decode())


def test_the_exporter_serves_on_loopback_and_rereads_the_files_on_each_scrape(
        exporter: tuple[str, Path]) -> None:
    url, folder = exporter
    assert url.startswith("http://127.0.0.1:")
    first = scrape(url)
    assert value(first, "gpuwise_exporter_up") == 1
    assert {s.labels["Hostname"] for s in first["gpuwise_verify_status"]} == {f"node-0{i}" for i in range(1, 5)}
    (folder / "node-05.json").write_text((FLEET / "node-05.json").read_text())
    second = scrape(url)
    assert len(second["gpuwise_verify_status"]) == 5
    assert value(second, "gpuwise_fleet_suspect", Hostname="node-05") == 1


def test_a_bad_file_turns_up_to_0_with_the_reason_instead_of_a_500(exporter: tuple[str, Path]) -> None:
    url, folder = exporter
    (folder / "broken.json").write_text("{not json")
    fams = scrape(url)
    up = fams["gpuwise_exporter_up"]
    assert len(up) == 1 and up[0].value == 0 and "broken.json" in up[0].labels["error"]


def test_a_port_in_use_is_a_clear_error() -> None:
    first = make_exporter([FLEET], "127.0.0.1", 0)
    try:
        with pytest.raises(InputError, match="Cannot listen on 127.0.0.1"):
            make_exporter([FLEET], "127.0.0.1", first.server_address[1])
    finally:
        first.server_close()


def test_the_exporter_command_listens_on_127_0_0_1_by_default() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "gpuwise", "exporter", str(FLEET), "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert match, line
        fams = scrape(match.group(0))
        assert value(fams, "gpuwise_fleet_suspect", Hostname="node-05") == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_dashboard_asks_only_for_metrics_that_exist() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    names = {m for e in exprs for m in re.findall(r"\b(gpuwise_[a-z0-9_]+|DCGM_FI_[A-Z_]+)\b", e)}
    report = fleet_report(sorted(FLEET.glob("*.json")))
    ours = set(samples(fleet_text(report))) | {"gpuwise_exporter_up"}
    assert {n for n in names if n.startswith("gpuwise_")} <= ours
    assert {n for n in names if n.startswith("DCGM_")} <= DCGM_DEFAULTS
    assert any(n.startswith("DCGM_") for n in names)  # shown beside DCGM exporter's live metrics
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_import_gpuwise_and_the_fleet_library_stay_free_of_ray_and_prometheus_client() -> None:
    code = ("import sys, gpuwise, gpuwise.fleet.api, gpuwise.fleet.mig, gpuwise.fleet.judge;"
            "bad = [m for m in ('ray', 'prometheus_client', 'torch', 'rich', 'typer') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
