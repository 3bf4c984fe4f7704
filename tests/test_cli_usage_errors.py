"""The command line's own parse errors (a value that does not convert, an unknown flag, a missing
value or argument, an unknown command) reach the user as gpuwise's messages, in the user's
language, with a non-zero exit: never Typer's / Click's / pydantic's English text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from gpuwise.cli.app import run
from gpuwise.cli.helpfmt import cells

# Fragments of the parser's own English: none may reach a user.
PARSER_ENGLISH = ("Invalid value", "Input should", "No such option", "Missing option", "Missing argument",
                  "Try '", "Usage:", "Got unexpected", "requires an argument", "does not take a value",
                  "No such command", "Possible options", "unable to parse")
_CJK = re.compile(r"[\u4e00-\u9fff]")
EST = ("estimate", "qwen2.5-7b", "--card", "rtx-4090")

BAD = {
    "int given nan": (*EST, "--task", "lora", "--micro-batch", "nan"),
    "int given a fraction": (*EST, "--micro-batch", "1.5"),
    "int given =word": (*EST, "--context=lots"),
    "float given a word": (*EST, "--gpu-memory-utilization", "abc"),
    "float flag renamed": (*EST, "--tokens", "many"),
    "typer-ranged int out of range": ("serve", "--port", "0"),
    "typer-ranged int given a word": ("serve", "--port", "x"),
    "one-sided typer range": ("fleet", "verify", "--ray-address", "auto", "--timeout", "0"),
    "misspelt flag": (*EST, "--micro-bach", "2"),
    "unknown short flag": ("-x",),
    "option without its value": (*EST, "--card"),
    "switch given a value": (*EST, "--json=1"),
    "negative switch given a value": (*EST, "--no-packing=1"),
    "missing required option": ("estimate", "qwen2.5-7b"),
    "missing argument": ("estimate", "--card", "4090"),
    "missing argument of a subcommand": ("prices", "import"),
    "extra argument": (*EST, "extra"),
    "misspelt command": ("estimat", "qwen2.5-7b"),
    "plan int given a word": ("plan", "qwen2.5-7b", "--top", "x"),
}


def call(args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        run(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GPUWISE_LANG", "LC_ALL", "LC_MESSAGES", "LANGUAGE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("name", BAD)
def test_a_parse_error_is_gpuwise_s_message_in_the_user_s_language(
        name: str, lang: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = call((*BAD[name], "--lang", lang), capsys)
    assert code == 2, err
    assert not [frag for frag in PARSER_ENGLISH if frag in err], err
    assert err.startswith("错误：" if lang == "zh" else "error: "), err
    assert bool(_CJK.search(err)) == (lang == "zh"), err
    too_wide = [line for line in err.splitlines() if cells(line) > 80]
    assert not too_wide, too_wide


@pytest.mark.parametrize("name", BAD)
def test_a_zh_locale_without_lang_words_a_parse_error_in_chinese(
        name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    code, _, err = call(BAD[name], capsys)
    assert code == 2 and err.startswith("错误："), err
    assert not [frag for frag in PARSER_ENGLISH if frag in err], err


def test_a_value_that_does_not_convert_names_the_flag_the_value_and_the_range(
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, zh = call(BAD["int given nan"] + ("--lang", "zh"), capsys)
    assert "--micro-batch 必须是 1 到 65,536 之间的整数，实际为 'nan'。" in zh
    _, _, en = call(BAD["int given nan"] + ("--lang", "en"), capsys)
    assert "--micro-batch must be a whole number from 1 to 65,536; got 'nan'." in en
    _, _, port = call(("serve", "--port", "x", "--lang", "en"), capsys)
    assert "--port must be a whole number from 1 to 65,535; got 'x'." in port


def test_a_misspelt_flag_or_command_suggests_only_close_spellings(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, flag = call(BAD["misspelt flag"] + ("--lang", "zh"), capsys)
    assert "'--micro-batch'" in flag and "--no-packing" not in flag and "gpuwise estimate --help" in flag
    _, _, command = call(BAD["misspelt command"] + ("--lang", "en"), capsys)
    assert "Unknown command 'estimat'. Did you mean 'estimate'?" in command


def test_a_missing_card_points_at_the_card_list(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = call(("estimate", "qwen2.5-7b", "--lang", "zh"), capsys)
    assert "缺少必填选项 --card。" in err and "gpuwise cards" in err


def test_a_subcommand_s_help_hint_is_a_command_one_can_type(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = call(("prices", "import", "--lang", "en"), capsys)
    assert "`gpuwise prices import --help`" in err  # not Click's 'gpuwise prices [card] import'


def test_with_json_a_parse_error_is_the_json_error_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call(BAD["int given nan"] + ("--json",), capsys)
    body = json.loads(out)
    assert code == 2 and body["error"] == "InputError"
    assert "--micro-batch" in body["message"] and "整数" in body["message_zh"]


def test_an_unknown_lang_is_refused_in_the_locale_s_language(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    code, _, err = call((*EST, "--lang", "fr"), capsys)
    assert code == 2 and "未知语言“fr”" in err, err


def test_help_and_version_still_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert call(("--help",), capsys)[0] == 0
    assert call(("--version",), capsys)[0] == 0
    assert call(("estimate", "--help"), capsys)[0] == 0


def test_the_installed_command_words_the_known_defect_in_chinese() -> None:
    """The real entry point (`python -m gpuwise`, its fast --json path included) on the report's case."""
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8"}
    env.pop("GPUWISE_LANG", None)
    proc = subprocess.run([sys.executable, "-m", "gpuwise", *BAD["int given nan"], "--lang", "zh"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("错误：--micro-batch 必须是"), proc.stderr


@pytest.mark.parametrize("args", [("plan", "flux.1-dev", "--max-seconds", "nan"),
                                  ("plan", "flux.1-dev", "--max-seconds", "0"),
                                  ("plan", "flux.1-dev", "--top", "0"),
                                  ("plan", "qwen2.5-7b", "--max-seconds", "inf")], ids=" ".join)
def test_a_diffusion_plan_s_numbers_are_bounded_like_every_other(
        args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = call((*args, "--lang", "zh"), capsys)
    assert code == 2 and err.startswith("错误：") and "必须是" in err, err  # was: ranked, '≤ nan s'


def test_an_unknown_flag_with_no_close_spelling_suggests_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = call(("plan", "qwen2.5-7b", "--min-memory", "3", "--lang", "zh"), capsys)
    assert "未知的选项“--min-memory”。" in err and "您是否想输入" not in err and "可选：。" not in err, err
