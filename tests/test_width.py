"""Every command reads at 80 and 160 columns: no line runs past the edge, no word is split.

Each command is rendered in process (the real Click tree, the real Rich console) at 80, 160 and
400 columns. A word cut by the layout ("GeFo" / "rce") shows up as a token that the 400-column
rendering never prints; a line too long shows up as more terminal cells than columns.
"""

from __future__ import annotations

import contextlib
import io
import re
import unicodedata
from pathlib import Path

import pytest

from gpuwise.cli.app import command
from gpuwise.cli.common import DROPPED_NOTE
from gpuwise.cli.helpfmt import cells
from gpuwise.i18n import Lang

VERIFY_FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "verify" / "h100x8_raw.json")
COMMANDS: list[tuple[str, ...]] = [
    ("cards",),
    ("cards", "h100"),
    ("prices",),
    ("model", "deepseek-v3"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--explain"),
    ("estimate", "llama-3.1-70b", "--card", "4090"),
    ("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--task", "lora", "--tokens", "1e8"),
    ("plan", "llama-3.1-8b", "--concurrency", "16", "--objective", "cost-per-token", "--top", "3"),
    ("plan", "llama-3.1-8b", "--task", "lora", "--tokens", "1e8", "--top", "3"),
    ("plan", "flux.1-dev", "--steps", "28", "--top", "3"),
    ("verify", "--from", VERIFY_FIXTURE),
    ("--help",),
    ("estimate", "--help"),
    ("plan", "--help"),
    ("cards", "--help"),
    ("prices", "--help"),
]
_CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef]")
_FRAME = re.compile(r"[\u2500-\u257f]")  # box-drawing characters


def render(args: tuple[str, ...], lang: Lang, columns: int, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("LINES", "50")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = command().main([*args, *([] if "--help" in args else ["--lang", lang])],
                                  prog_name="gpuwise", standalone_mode=False)
        except SystemExit as done:
            code = done.code
    assert code in (0, None), out.getvalue()
    return out.getvalue()


def words(text: str) -> set[str]:
    """The Latin-script words of a rendering (CJK characters and table frames are separators)."""
    return {w.strip(".,;:()'\"") for w in _CJK.sub(" ", _FRAME.sub(" ", text)).split()} - {""}


def note_words(lang: Lang) -> set[str]:
    """Words only a narrow rendering prints: the note naming the columns it left out."""
    return words(DROPPED_NOTE.render(lang)) | words("`gpuwise cards ID` shows every field.")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_every_command_fits_80_and_160_columns_without_splitting_a_word(
        args: tuple[str, ...], lang: Lang, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = words(render(args, lang, 400, monkeypatch)) | note_words(lang)
    for columns in (80, 160):
        out = render(args, lang, columns, monkeypatch)
        too_long = [line for line in out.splitlines() if cells(line.rstrip()) > columns]
        assert not too_long, f"{columns} columns: {too_long[:3]}"
        longer = [w for w in reference if len(w) > columns - 4]  # a URL wider than the screen folds
        split = sorted(w for w in words(out) - reference if not any(w in long for long in longer))
        assert not split, f"{columns} columns: words cut or invented: {split[:10]}"


def test_cells_counts_wide_characters_twice() -> None:
    assert cells("GPU 显存") == 4 + 4
    assert all(unicodedata.east_asian_width(ch) == "W" for ch in "显存")


def test_prices_in_chinese_read_as_chinese_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The billing mode, unit and currency in Chinese words, each shipped note in Chinese, and the
    note column kept at 80 columns (Chinese breaks between characters, so its narrowest is one
    character, not the whole run between two spaces)."""
    out = render(("prices",), "zh", 80, monkeypatch)
    assert "按量" in out and "卡时" in out and " 元" in out and "备注" in out
    assert "指南未注明 SXM" in out and "未核实" in out
    for english in ("Unverified", "The guide", "gpu_hour", "hourly", "CNY"):
        assert english not in out, english
    en = render(("prices",), "en", 80, monkeypatch)
    assert "GPU-hour" in en and "Unverified" in en and "未核实" not in en


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_plan_that_nothing_meets_says_so_first_not_with_an_empty_table(
        lang: Lang, monkeypatch: pytest.MonkeyPatch) -> None:
    """Targets no card meets: the answer's first lines say there is no plan (exit 1), then why
    each card fails; no table frame with no rows."""
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = command().main(["plan", "llama-3.1-8b", "--min-throughput", "100000", "--lang", lang],
                                  prog_name="gpuwise", standalone_mode=False)
        except SystemExit as done:
            code = done.code
    assert code == 1
    lines = out.getvalue().splitlines()
    none = "没有满足条件的方案。" if lang == "zh" else "No plan meets the constraints."
    assert none in lines[:6], lines[:6]
    assert not any(_FRAME.search(line) for line in lines), "an empty table was drawn"
    assert lines[-1].strip() == none
