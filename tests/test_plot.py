"""`--plot out.png|out.svg`: charts of estimate and plan results (matplotlib, the [plot] extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from gpuwise.errors import InputError
from gpuwise.report.plot import cjk_font_available, save_plot
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.service_plan import PlanRequest, plan_json

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def estimate() -> dict:
    return estimate_json(EstimateRequest(model="llama-3.1-70b", card="4090", context=8192))


def test_an_estimate_is_drawn_as_png_and_as_svg(estimate: dict, tmp_path: Path) -> None:
    png = save_plot(estimate, tmp_path / "e.png")
    svg = save_plot(estimate, tmp_path / "e.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in svg.read_text(encoding="utf-8")


def test_a_plan_is_drawn_with_its_scatter_and_so_is_an_empty_plan(tmp_path: Path) -> None:
    plan = plan_json(PlanRequest(model="llama-3.1-8b", context=8192, concurrency=8))
    assert save_plot(plan, tmp_path / "p.svg").stat().st_size > 5_000
    empty = {**plan, "plans": []}
    assert save_plot(empty, tmp_path / "empty.png").stat().st_size > 1_000


@pytest.mark.skipif(not cjk_font_available(), reason="no CJK font: apt-get install fonts-noto-cjk")
def test_chinese_labels_draw_without_missing_glyph_warnings(estimate: dict, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s) DejaVu Sans" would raise
        save_plot(estimate, tmp_path / "zh.png", "zh")


def test_a_plot_file_that_is_not_png_or_svg_is_refused(estimate: dict, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="png or .svg"):
        save_plot(estimate, tmp_path / "e.pdf")


def test_estimate_plot_writes_the_chart_and_keeps_the_json_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "chart.svg"
    args = ["estimate", "llama-3.1-8b", "--card", "4090", "--json"]
    env = {**os.environ, "GPUWISE_LANG": "en"}
    plain = subprocess.run([sys.executable, "-m", "gpuwise", *args], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True)
    plotted = subprocess.run([sys.executable, "-m", "gpuwise", *args, "--plot", str(out)], cwd=ROOT,
                             env=env, capture_output=True, text=True, check=True)
    assert json.loads(plotted.stdout) == json.loads(plain.stdout)
    assert out.exists() and out.stat().st_size > 5_000


def test_chinese_without_a_cjk_font_falls_back_to_english_and_says_why(estimate: dict, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuwise.report import plot

    monkeypatch.setattr(plot, "cjk_font_available", lambda: False)
    path, note = plot.draw(estimate, tmp_path / "zh.svg", "zh")
    assert note is not None and "fonts-noto-cjk" in note.zh and "中文字体" in note.zh
    text = path.read_text(encoding="utf-8")  # matplotlib writes each label as an SVG comment too
    assert "权重" not in text and "weights" in text
    _, none = plot.draw(estimate, tmp_path / "en.svg", "en")
    assert none is None


@pytest.mark.skipif(not cjk_font_available(), reason="no CJK font: apt-get install fonts-noto-cjk")
def test_a_cjk_font_missing_from_matplotlibs_cache_is_found_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib import font_manager

    from gpuwise.report import plot

    cjk = [f for f in font_manager.fontManager.ttflist if f.name in plot.CJK_FONTS]
    monkeypatch.setattr(font_manager.fontManager, "ttflist",
                        [f for f in font_manager.fontManager.ttflist if f.name not in plot.CJK_FONTS])
    assert cjk and plot.cjk_font_available()  # the stale list is refreshed from the font files


@pytest.mark.skipif(not cjk_font_available(), reason="no CJK font: apt-get install fonts-noto-cjk")
def test_a_chinese_svg_has_chinese_labels(estimate: dict, tmp_path: Path) -> None:
    from gpuwise.report import plot

    path, note = plot.draw(estimate, tmp_path / "zh.svg", "zh")
    assert note is None
    assert "权重" in path.read_text(encoding="utf-8")
