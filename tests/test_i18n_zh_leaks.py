"""Under --lang zh no English of gpuwise's own leaks into what a user reads: help written in both
languages shows its Chinese only (whole, from cli/help_zh.INLINE_ZH, where the inline Chinese is a
shorter gloss), and verify's measured and expected values and details carry Chinese units and words.
Quoted material stays as it is: NVML reason names, an exception's text, commands, file names."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from gpuwise.cli.app import command, run
from gpuwise.cli.help_zh import INLINE_ZH
from gpuwise.cli.helpfmt import has_cjk, zh_part
from gpuwise.cli.verify_view import value_words


def _tree(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    out = [(path, cmd)]
    for name, sub in getattr(cmd, "commands", {}).items():
        out += _tree(sub, (*path, name))
    return out


def _english_half(text: str) -> str | None:
    zh = zh_part(text)
    return " ".join(text[:len(text.rstrip()) - len(zh)].split()) if zh and has_cjk(text) else None


def _bilingual(cmd: object) -> list[str]:
    texts = [getattr(cmd, "help", None) or "", *(getattr(p, "help", None) or "" for p in getattr(cmd, "params", ()))]
    return [e for e in map(_english_half, texts) if e]


TREE = _tree(command())


def test_every_inline_translation_belongs_to_a_help_text() -> None:
    halves = {e for _, cmd in TREE for e in _bilingual(cmd)}
    assert not set(INLINE_ZH) - halves, sorted(set(INLINE_ZH) - halves)[:3]


@pytest.mark.parametrize("path", [p for p, cmd in TREE if _bilingual(cmd)], ids=lambda p: " ".join(p) or "gpuwise")
def test_a_chinese_help_page_shows_no_english_half(path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        run([*path, "--lang", "zh", "--help"])
    page = " ".join(out.getvalue().split())
    cmd = dict(TREE)[path]
    for english in _bilingual(cmd):
        assert english not in page, english
    assert not re.search(r"[A-Za-z]+ [a-z]+ [a-z]+ [a-z]+ [a-z]+", page), page


@pytest.mark.parametrize("value,unit", [("<= 512 rows", ""), (37, "words"), (0.9, "of free"),
                                        ("GPU0 Xid 94 (during load)", ""), ("1 GPU(s) crashed", ""),
                                        ("a NUMA node per GPU", ""), ("inactive", ""), (224.0, "cores")])
def test_verify_values_are_worded_in_chinese(value: object, unit: str) -> None:
    shown = value_words(value, unit, "zh")
    assert has_cjk(shown) and not re.search(r"\b(rows|words|free|during|crashed|node|per|inactive|cores)\b",
                                            shown), shown


@pytest.mark.parametrize("scenario,absent", [
    ("remap-600-rows", ("rows",)), ("memtest-mismatch", ("words",)), ("xid-94", ("during load",)),
    ("numa-flattened", ("NUMA node per GPU",)), ("bench-crashed-ecc", ("GPU(s)",)),
    ("bench-gpus-never-ran", ("no result",)), ("h100-pcie-bridged", ("ID与", "SM与")),
])
def test_a_chinese_verdict_of_a_faulty_server_has_no_english_of_gpuwise_s_own(
        scenario: str, absent: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.verify_faults import apply, load_scenarios

    spec = next(s for s in load_scenarios() if s["id"] == scenario)
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(apply(spec)))
    monkeypatch.setenv("COLUMNS", "200")
    args = ["verify", "--from", str(raw), "--lang", "zh"]
    if spec.get("card"):
        args += ["--card", str(spec["card"])]
    with pytest.raises(SystemExit):
        run(args)
    out = capsys.readouterr().out
    assert "逻辑 CPU" in out and "cores" not in out
    for word in absent:
        assert word not in out, word
