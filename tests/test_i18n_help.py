"""--help in the user's language: a Chinese help page (by --lang zh or a zh locale) shows every
option's help and every command's summary in Chinese and Click's headings in Chinese, within 80
terminal cells; every option in the tree has its Chinese (inline or in cli/help_zh.py)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from gpuwise.cli.app import command, run
from gpuwise.cli.help_zh import HELP_ZH
from gpuwise.cli.helpfmt import SUMMARY_ZH, cells, has_cjk

HELP_PAGES = [("--help",), ("estimate", "--help"), ("plan", "--help"), ("model", "--help"),
              ("fleet", "--help"), ("prices", "import", "--help"), ("verify", "--help")]


def _tree(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _tree(sub, (*path, name))
    return out


def test_every_option_s_help_has_its_chinese() -> None:
    missing = [(" ".join(path), p.opts[0], p.help) for path, cmd in _tree(command())
               for p in getattr(cmd, "params", ()) if getattr(p, "help", None)
               and not has_cjk(p.help) and p.help not in HELP_ZH]
    assert not missing, f"add to gpuwise/cli/help_zh.py: {missing[:5]}"


def test_every_command_s_summary_has_its_chinese() -> None:
    missing = [" ".join(path) for path, cmd in _tree(command())[1:]
               if not has_cjk(cmd.short_help or "") and (cmd.short_help or "") not in SUMMARY_ZH]
    assert not missing, missing


def page(args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, lang_env: str = "C.UTF-8") -> str:
    for var in ("GPUWISE_LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", lang_env)
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        run(list(args))
    assert done.value.code == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("how", ["--lang zh", "LANG=zh_CN"])
@pytest.mark.parametrize("args", HELP_PAGES, ids=" ".join)
def test_a_chinese_help_page_is_chinese_and_fits_80_cells(
        args: tuple[str, ...], how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (page((*args[:-1], "--lang", "zh", "--help"), monkeypatch) if how == "--lang zh"
            else page(args, monkeypatch, "zh_CN.UTF-8"))
    assert text.startswith("用法：") and "选项：" in text and "Options:" not in text
    assert "Show this message and exit." not in text and "[default:" not in text and "[required]" not in text
    too_wide = [line for line in text.splitlines() if cells(line) > 80]
    assert not too_wide, too_wide
    if args[0] in ("estimate", "plan", "model"):  # pages whose option help is English only in the code
        english = [line for line in text.splitlines() if line.startswith("  -") and not has_cjk(line)
                   and re.search(r"[A-Za-z]{3,} [a-z]{2,} [a-z]{2,}", line)]
        assert not english, english


def test_the_command_list_shows_chinese_summaries_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    text = page(("--help",), monkeypatch, "zh_CN.UTF-8")
    assert "  estimate   估算每卡显存、速度与成本。" in text and "命令：" in text
    fleet = page(("fleet", "--help"), monkeypatch)  # English: whole first sentences, never '...'
    assert "against each other." in fleet and not re.search(r"\w\.\.\.$", fleet, re.MULTILINE), fleet


def test_a_bracketed_default_never_breaks_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    text = page(("estimate", "--lang", "zh", "--help"), monkeypatch)
    assert "[必填]" in text and "[默认：1]" in text
    assert not re.search(r"\[\s*$", text, re.MULTILINE), text


def test_an_english_help_page_is_unchanged_by_a_chinese_run_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    page(("estimate", "--lang", "zh", "--help"), monkeypatch)
    text = page(("estimate", "--help"), monkeypatch)
    assert text.startswith("Usage:") and "GPUs per node." in text and "[default: 1]" in text


def test_a_lang_before_the_command_chooses_its_language(monkeypatch: pytest.MonkeyPatch) -> None:
    text = page(("--lang", "zh", "estimate", "qwen2.5-7b", "--card", "rtx-4090"), monkeypatch)
    assert "（每卡）" in text and "放得下" in text
