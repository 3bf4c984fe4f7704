"""The page in a real browser: Debian's Chromium driven by Playwright, against `gpuwise serve`.

Screenshots go to test-artifacts/ (gitignored). Never `playwright install`: the browser is
/usr/bin/chromium (apt-get install chromium fonts-noto-cjk).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
sync_api = pytest.importorskip("playwright.sync_api")

from tests.web_server import ROOT, running_server

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
WAIT_MS = 15_000

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(),
                                reason="/usr/bin/chromium is missing: apt-get install -y chromium fonts-noto-cjk")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any, base: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US",
                                  extra_http_headers={"Accept-Language": "en-US,en;q=0.9"})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # A 400 answer to a bad input is expected (and shown in the page); anything else is not.
    pg.on("console", lambda m: errors.append(m.text)
          if m.type == "error" and "status of 400" not in m.text else None)
    off_site: list[str] = []
    pg.on("request", lambda r: off_site.append(r.url) if not r.url.startswith((base, "data:")) else None)
    yield pg
    context.close()
    assert not errors, errors  # no script errors, no CSP violations
    assert not off_site, off_site  # nothing loaded from another host


def shot(pg: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    pg.screenshot(path=str(path), full_page=True)
    return path


def charts_drawn(pg: Any, n: int = 2) -> None:
    pg.wait_for_selector(f"body[data-charts='{n}']", state="attached", timeout=WAIT_MS)


def test_filling_the_form_shows_a_verdict_charts_and_a_shareable_url(page: Any, base: str) -> None:
    page.goto(base + "/")
    page.fill("input[name=model]", "llama-3.1-8b")
    page.fill("input[name=context]", "8192")
    page.fill("input[name=concurrency]", "8")
    page.click("summary:has-text('Check one card')")
    page.fill("input[name=card]", "H100-SXM")
    page.click("#submit")
    page.wait_for_selector("#estimate-verdict", timeout=WAIT_MS)
    charts_drawn(page)
    assert "Fits" in page.inner_text("#estimate-verdict")
    assert "Best plan" in page.inner_text("#verdict")
    assert page.locator("#plans tbody tr").count() >= 1
    assert page.locator("#rejected tbody tr").count() >= 1
    assert page.locator("canvas#memory-chart").bounding_box()["height"] > 100
    query = parse_qs(urlparse(page.url).query)
    assert query["model"] == ["llama-3.1-8b"] and query["context"] == ["8192"] and query["card"] == ["H100-SXM"]
    assert "budget" not in query  # empty fields are left out of the shared address
    assert shot(page, "web-form-en.png").stat().st_size > 10_000


def test_a_shared_url_reproduces_the_result_without_filling_anything(page: Any, base: str) -> None:
    page.goto(base + "/?model=qwen3-8b&task=lora&train_tokens=100000000&lang=en")
    charts_drawn(page)
    assert "Best plan" in page.inner_text("#verdict")
    assert page.input_value("input[name=model]") == "qwen3-8b"
    assert page.input_value("select[name=task]") == "lora"
    assert page.locator(".config pre").count() >= 1  # the emitted configs for plan #1
    page.click(".config button.copy")
    shot(page, "web-shared-url.png")


def test_switching_the_language_keeps_the_result(page: Any, base: str) -> None:
    page.goto(base + "/?model=llama-3.1-8b&card=4090&lang=en")
    charts_drawn(page)
    page.click("#lang-switch")
    page.wait_for_selector("html[lang='zh-CN']", timeout=WAIT_MS)
    charts_drawn(page)
    assert "开始选型" in page.inner_text("#submit")
    assert "最佳方案" in page.inner_text("#verdict")
    assert page.input_value("input[name=card]") == "4090"
    shot(page, "web-zh.png")


def test_a_typo_shows_a_bilingual_error_in_place(page: Any, base: str) -> None:
    page.goto(base + "/?lang=zh")
    page.fill("input[name=model]", "llama-3.1-8b")
    page.click("summary:has-text('检查指定显卡')")
    page.fill("input[name=card]", "H100-SMX")
    page.click("#submit")
    page.wait_for_selector("#error", timeout=WAIT_MS)
    assert "您是否想输入" in page.inner_text("#error")


def test_the_page_is_usable_at_phone_width(browser: Any, base: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                  locale="zh-CN", extra_http_headers={"Accept-Language": "zh-CN"})
    pg = context.new_page()
    pg.goto(base + "/?model=llama-3.1-8b&context=8192&concurrency=8")
    charts_drawn(pg)
    width = pg.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways at phone width ({width}px)"
    assert pg.locator("#submit").bounding_box()["width"] > 300
    shot(pg, "web-phone-zh.png")
    context.close()


# Elements whose content must not run past their box: every table cell, verdict and chart.
OVERFLOW_JS = """() => {
  const bad = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) bad.push(`page ${doc.scrollWidth} > ${window.innerWidth}`);
  for (const el of document.querySelectorAll('.scroll, .verdict, .chart, td, th, .config-head')) {
    if (el.scrollWidth > el.clientWidth + 1)
      bad.push(`${el.tagName}.${el.className} #${el.id}: ${el.scrollWidth} > ${el.clientWidth}`);
  }
  return bad;
}"""
PLAN_URL = "/?model=llama-3.1-8b&context=8192&concurrency=8&card=4090&gpus=1"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_the_answer_is_on_the_first_screen_and_nothing_overflows(browser: Any, base: str, lang: str,
                                                                 width: int, height: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1,
                                  locale="zh-CN" if lang == "zh" else "en-US")
    pg = context.new_page()
    pg.goto(f"{base}{PLAN_URL}&lang={lang}")
    charts_drawn(pg)
    verdict = pg.locator("#verdict").bounding_box()
    estimate = pg.locator("#estimate-verdict").bounding_box()
    assert estimate["y"] < height and verdict["y"] < height, (estimate, verdict)  # on the first screen
    assert pg.evaluate(OVERFLOW_JS) == []
    if width < 640:  # phones: the plans are stacked cards, not a table wider than the screen
        assert pg.locator("#plans thead").evaluate("e => getComputedStyle(e).display") == "none"
        assert pg.locator("#plans tbody tr").first.bounding_box()["width"] <= width
    shot(pg, f"web-{lang}-{width}px.png")
    context.close()


def test_fixes_on_the_page_are_words_with_the_flag_only_as_a_hint(page: Any, base: str) -> None:
    page.goto(base + "/?model=llama-3.1-70b&card=4090&lang=en")
    page.wait_for_selector("#estimate-verdict ul.fixes li", timeout=WAIT_MS)
    item = page.locator("#estimate-verdict ul.fixes li").first
    words = item.evaluate("li => li.firstChild.textContent.trim()")
    assert words and "--" not in words
    assert item.locator(".hint code").inner_text().startswith("--")


def test_the_cost_speed_chart_marks_the_frontier_and_its_labels_do_not_collide(page: Any, base: str) -> None:
    page.goto(base + "/?model=llama-3.1-8b&concurrency=16&top=8&lang=en")
    charts_drawn(page)
    sets = page.evaluate("""() => { const c = Chart.getChart('scatter-chart');
      return c.data.datasets.map(d => ({type: d.type || 'scatter', n: d.data.length})); }""")
    assert sets[0]["type"] == "line" and sets[1]["n"] >= 1  # the frontier, drawn and marked
    assert sets[1]["n"] + sets[2]["n"] >= 2
    shot(page, "web-scatter-en.png")
