"""textsafe: outside text becomes one printable line, and a Python literal of exactly that line."""

from __future__ import annotations

import ast
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.textsafe import clean_text, comment_line, py_literal

_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def has_unsafe(text: str) -> bool:
    return any(unicodedata.category(ch) in _UNSAFE for ch in text)


@pytest.mark.parametrize("raw, clean", [
    ("Meta-Llama-3.1-8B-Instruct", "Meta-Llama-3.1-8B-Instruct"),
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B"),
    ("通义千问 Qwen2.5 72B", "通义千问 Qwen2.5 72B"),
    ('x"""\nimport os; os.system("touch PWNED")\n#', 'x""" import os; os.system("touch PWNED") #'),
    ("tiny\ntouch PWNED", "tiny touch PWNED"),
    ("a\r\n\tb", "a b"),
    ("  padded   name  ", "padded name"),
    ("evil\u202etxt.exe", "evil txt.exe"),  # right-to-left override
    ("zero\u200bwidth\ufeff", "zero width"),
    ("line\u2028sep\u2029para\x85nel", "line sep para nel"),
    ("nul\x00esc\x1b[31m", "nul esc [31m"),
    ("non\ufffechar\uffff\ufdd0", "non char"),
    ("\n\t\u202e", ""),
    ("$(touch PWNED) `id` it's", "$(touch PWNED) `id` it's"),  # quoting is the exporter's job
])
def test_clean_text_makes_one_printable_line(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_clean_text_caps_the_length_without_a_trailing_space() -> None:
    assert clean_text("a" * 500) == "a" * 200
    assert clean_text("ab " * 100, limit=30) == ("ab " * 10).strip()
    assert clean_text("abc", limit=0) == ""


def test_comment_line_is_one_line_and_longer_than_a_name() -> None:
    long = "SkyPilot task for " + "m" * 300 + "\nfile_mounts:\n  /: /"
    line = comment_line(long)
    assert "\n" not in line and line.startswith("SkyPilot task for mmm") and len(line) <= 500


def test_py_literal_is_a_python_string_of_the_cleaned_text() -> None:
    lit = py_literal('x"""\nimport os\n')
    assert ast.literal_eval(lit) == 'x""" import os'
    assert "\n" not in lit


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_no_control_format_or_separator_character_survives(text: str) -> None:
    out = clean_text(text)
    assert not has_unsafe(out)
    assert out == out.strip() and "  " not in out and len(out) <= 200
    assert not has_unsafe(comment_line(text)) and "\n" not in comment_line(text)


@settings(max_examples=500, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=300))
def test_py_literal_reads_back_as_the_cleaned_text(text: str, limit: int) -> None:
    assert ast.literal_eval(py_literal(text, limit)) == clean_text(text, limit)
    assert len(clean_text(text, limit)) <= limit


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_cleaning_twice_changes_nothing(text: str) -> None:
    once = clean_text(text)
    assert clean_text(once) == once and comment_line(once) == once
