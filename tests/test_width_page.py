"""What the page says, from the API's objects: its own words for fixes and fields, the frontier."""

from __future__ import annotations

from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.web.labels import labels
from gpuwise.web.view import fixes, page_words, pareto


def test_flags_in_library_messages_become_the_pages_field_names() -> None:
    en, zh = labels("en"), labels("zh")
    said = page_words("no targets were set (add --max-ttft or --budget)", en)
    assert "--" not in said and en["max_ttft"] in said and en["budget"] in said
    assert page_words("--context 必须在 1 到 10 之间", zh).startswith(f"“{zh['context']}”")
    assert page_words("use --include-non-cuda", en) == "use --include-non-cuda"  # no such field: kept


def test_a_fix_on_the_page_is_words_and_the_flags_are_a_separate_hint() -> None:
    est = estimate_json(EstimateRequest(model="llama-3.1-70b", card="4090"))
    shown = fixes(est, "en")
    assert shown and all("--" not in f["words"] and f["flags"].startswith("--") for f in shown)
    assert any(f["flags"] == "--gpus 8" and "8 GPUs" in f["words"] for f in shown)
    assert all("--" not in f["words"] for f in fixes(est, "zh"))


def test_the_frontier_keeps_the_plans_no_other_plan_beats_on_cost_and_speed() -> None:
    points = [{"x": 1.0, "y": 100.0}, {"x": 2.0, "y": 300.0}, {"x": 3.0, "y": 200.0}, {"x": 2.0, "y": 300.0}]
    assert pareto(points) == [True, True, False, True]
