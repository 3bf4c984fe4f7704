"""`gpuwise fleet report`: nodes judged against the datasheet and against each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.errors import DataError
from gpuwise.fleet.api import fleet_report
from gpuwise.fleet.rules import load_rules, parse_rules
from gpuwise.verify.raw import load_evidence
from tests.fixtures.fleet.helpers import cli
from tests.fixtures.fleet.make_fleet import RECORDED, write_fleet


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_fleet(tmp_path_factory.mktemp("fleet"))


def test_the_fleet_is_the_recorded_node_with_its_own_host_and_figures(shipped: list[Path]) -> None:
    recorded = load_evidence(RECORDED)
    nodes = [load_evidence(p) for p in shipped]
    assert [n.host for n in nodes] == [f"node-{i:02d}" for i in range(1, 9)]
    assert all(n.gpus == recorded.gpus for n in nodes)  # the inventory is the recorded one
    slow, fast = _figures(nodes[4]), _figures(nodes[0])
    assert slow[0] == pytest.approx(fast[0] * 0.93)  # node-05's memory bandwidth is 7% below node-01's


def _figures(ev: object) -> list[float]:
    out: list[float] = []
    for b in ev.bench:  # type: ignore[attr-defined]
        out += [b.mem_bw_bytes_per_s, b.h2d_bytes_per_s, b.d2h_bytes_per_s, *(r.flops_per_s for r in b.matmul)]
    return out + [p.busbw_bytes_per_s for p in ev.allreduce.points]  # type: ignore[attr-defined]


def test_eight_nodes_where_one_is_7_percent_slow_mark_that_node_and_only_it(shipped: list[Path]) -> None:
    report = fleet_report(shipped)
    assert len(report.nodes) == 8 and len(report.groups) == 1
    assert report.suspects == ("node-05",)
    assert report.failed == ()  # every node passes its own datasheet acceptance
    tables = {t.metric.check: t for t in report.groups[0].tables}
    assert tables["performance.mem_bw"].outliers == ("node-05",)
    assert tables["performance.allreduce"].outliers == ("node-05",)
    assert tables["performance.matmul_bf16"].outliers == ()
    slow = next(c for c in tables["performance.mem_bw"].cells if c.host == "node-05")
    assert slow.ratio is not None and 0.92 < slow.ratio < 0.94
    assert not report.ok


def test_a_healthy_fleet_passes_and_a_node_3_percent_slow_is_within_the_5_percent_threshold(
        tmp_path: Path) -> None:
    assert fleet_report(write_fleet(tmp_path / "a", slow_factor=1.0)).ok
    report = fleet_report(write_fleet(tmp_path / "b", slow_factor=0.97))
    assert report.ok and report.suspects == ()


@pytest.fixture()
def fleet_dir(tmp_path: Path) -> Path:
    (tmp_path / "h100").mkdir()
    write_fleet(tmp_path / "h100")
    return tmp_path / "h100"


def test_the_cli_prints_a_table_per_metric_marks_the_outlier_and_exits_1(fleet_dir: Path) -> None:
    out = cli("fleet", "report", *map(str, sorted(fleet_dir.glob("*.json"))), "--lang", "en")
    assert out.code == 1
    assert out.stdout.count("median") >= 7
    line = next(x for x in out.stdout.splitlines() if "node-05" in x and "SUSPECT" in x)
    assert "-6.9%" in line
    assert "1 suspect" in out.stdout and "node-05" in out.stdout.splitlines()[-1]


def test_json_and_html_say_the_same(fleet_dir: Path, tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    out = cli("fleet", "report", *map(str, sorted(fleet_dir.glob("*.json"))), "--json", "--html", str(page))
    data = out.json()
    assert out.code == 1 and data["kind"] == "gpuwise.fleet" and data["status"] == "fail"
    assert data["suspects"] == ["node-05"]
    group = data["groups"][0]
    assert group["group"] == "8 x h100-sxm"
    assert [n["fleet_status"] for n in group["nodes"]].count("suspect") == 1
    mem = next(m for m in group["metrics"] if m["check"] == "performance.mem_bw")
    assert mem["unit"] == "GB/s" and mem["outliers"] == ["node-05"] and mem["median"] > 2800
    html = page.read_text()
    assert html.startswith("<!doctype html>") and html.count("SUSPECT") == 2 and "node-05" in html


def test_chinese_output_names_the_suspect_node(fleet_dir: Path) -> None:
    out = cli("fleet", "report", *map(str, sorted(fleet_dir.glob("*.json"))), "--lang", "zh")
    assert "可疑" in out.stdout and "中位数" in out.stdout


def _retype(path: Path, gpu_name: str) -> None:
    data = json.loads(path.read_text())
    for g in data["gpus"]:
        g["name"] = gpu_name
    path.write_text(json.dumps(data))


def test_mixed_card_types_are_reported_per_type(fleet_dir: Path) -> None:
    files = sorted(fleet_dir.glob("*.json"))
    for f in files[:2]:
        _retype(f, "NVIDIA H200")
    report = fleet_report(files)
    assert [g.key for g in report.groups] == ["8 x h100-sxm", "8 x h200-sxm"]
    assert report.notes and "2 kinds of node" in report.notes[0].en
    h200 = report.groups[1]
    assert all(c.status == "no_fleet" for t in h200.tables for c in t.cells)  # 2 nodes: no median
    assert "at least 3" in h200.notes[0].en
    # node-05 is still the outlier among the six H100 nodes
    assert report.groups[0].suspects() == ("node-05",)


def test_a_saved_verify_json_verdict_counts_as_a_node(fleet_dir: Path, tmp_path: Path) -> None:
    verdict = cli("verify", "--from", str(RECORDED), "--json")
    saved = tmp_path / "verdict.json"
    saved.write_text(verdict.stdout)
    files = [*sorted(fleet_dir.glob("*.json"))[:7], saved]
    report = fleet_report(files)
    assert len(report.nodes) == 8 and "h100-node-01" in [n.host for n in report.nodes]
    assert report.suspects == ("node-05",)


def test_an_incomplete_verify_verdict_never_passes_the_fleet(fleet_dir: Path, tmp_path: Path) -> None:
    verdict = json.loads(cli("verify", "--from", str(RECORDED), "--json").stdout)
    verdict["status"] = "incomplete"  # a node whose own acceptance could not see everything
    saved = tmp_path / "verdict.json"
    saved.write_text(json.dumps(verdict))
    report = fleet_report([*sorted(fleet_dir.glob("*.json"))[:7], saved])
    assert report.incomplete == ("h100-node-01",) and not report.ok
    assert report.to_dict()["incomplete"] == ["h100-node-01"]


def test_a_host_in_two_files_is_kept_twice_and_named_with_its_file(fleet_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "again.json"
    copy.write_text((fleet_dir / "node-01.json").read_text())
    report = fleet_report([*sorted(fleet_dir.glob("*.json")), copy])
    assert len(report.nodes) == 9 and any("more than one file" in n.en for n in report.groups[0].notes)
    # the same path twice is read once
    assert len(fleet_report([fleet_dir / "node-01.json"] * 3).nodes) == 1


def test_a_card_claim_judges_every_node_against_it(fleet_dir: Path) -> None:
    out = cli("fleet", "report", *map(str, sorted(fleet_dir.glob("*.json"))), "--card", "H200", "--json")
    data = out.json()
    assert out.code == 1 and len(data["failed"]) == 8  # H100s are not the H200s that were claimed


@pytest.mark.parametrize(("content", "words"), [
    (None, "No such file"),
    ("not json", "cannot be read as JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"kind": "something.else"}', "not a gpuwise verify file"),
    ('{"kind": "gpuwise.verify.raw", "schema_version": 99}', "schema_version 99"),
    ('{"kind": "gpuwise.verify", "status": "pass", "gpus": [], "checks": [{"x": 1}]}', "without a name"),
])
def test_bad_files_give_a_clear_message_and_exit_2(tmp_path: Path, content: str | None, words: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    out = cli("fleet", "report", str(path))
    assert out.code == 2 and words in out.stderr and "Traceback" not in out.stderr


def test_an_unknown_card_suggests_close_matches(fleet_dir: Path) -> None:
    out = cli("fleet", "report", str(fleet_dir / "node-01.json"), "--card", "H10O-SXM")
    assert out.code == 2 and "Did you mean" in out.stderr


def test_the_fleet_rules_file_is_checked() -> None:
    rules = load_rules()
    assert rules.suspect_below == 0.05 and rules.min_nodes >= 3
    assert {m.check for m in rules.metrics} >= {"performance.mem_bw", "performance.allreduce"}
    with pytest.raises(DataError, match="suspect_below"):
        parse_rules({"schema_version": 1, "suspect_below": 5, "min_nodes": 3, "metric": []})


@pytest.mark.parametrize("command", [["place"], ["mig"], ["submit"], ["fleet", "report"]])
def test_a_fifo_or_nan_input_file_is_refused_never_read_forever(command: list[str], tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "input.toml"
    os.mkfifo(fifo)  # read without the bounded reader, this would block the command forever
    out = cli(*command, str(fifo))
    assert out.code == 2 and "FIFO" in out.stderr
    nan = tmp_path / "nan.toml"
    nan.write_text("x = nan\n")
    if command != ["fleet", "report"]:
        out = cli(*command, str(nan))
        assert out.code == 2 and "nan.toml" in out.stderr
