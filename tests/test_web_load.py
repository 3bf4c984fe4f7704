"""The load test (benchmarks/load_test.py) itself: distinct requests, loopback only, bounded,
and its report, run small against a real server. Figures are reported, never asserted."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from benchmarks import load_test


def test_every_plan_request_of_the_load_test_is_distinct() -> None:
    seen = {tuple(sorted(load_test.plan_params(n).items())) for n in range(20_000)}
    assert len(seen) == 20_000


@pytest.mark.parametrize("url", ["http://example.com:8000", "http://10.0.0.1:8000", "https://127.0.0.1:8000"])
def test_the_load_test_refuses_to_flood_anything_but_loopback_http(url: str) -> None:
    with pytest.raises(SystemExit):
        load_test.loopback(url)


def test_a_small_bounded_run_reports_every_figure_and_no_failure() -> None:
    with load_test.own_server(("--workers", "1")) as (port, pid):
        report = load_test.run("127.0.0.1", port, clients=8, duration=2.0, max_requests=40, procs=1,
                               server_pid=pid)
    assert report["failed"] == 0, report["failures"]
    assert 1 <= report["requests"] <= 40 and report["answered"] >= 1
    assert report["answered"] + report["refused_503"] == report["requests"]
    for key in ("latency_ms_all", "latency_ms_answered"):
        assert set(report[key]) == {"p50", "p95", "p99", "max"}
    probe = report["estimates_during_plans"]
    assert probe["requests"] >= 1 and probe["ok"] == probe["requests"]
    assert report["server_cpu_ms_per_answer"] is not None and report["server_cpu_ms_per_answer"] > 0
    assert isinstance(report["target"]["held"], bool)
