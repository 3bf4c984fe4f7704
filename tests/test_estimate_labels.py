"""Every memory line the estimate can produce has words on screen in both languages."""

from __future__ import annotations

import re
from pathlib import Path

import gpuwise
from gpuwise.cli.estimate_view import _LABELS

_ITEM = re.compile(r'Item\("([a-z0-9_]+)"')


def test_every_breakdown_item_has_an_english_and_a_chinese_label() -> None:
    src = Path(gpuwise.__file__).parent
    keys = {k for path in src.rglob("*.py") for k in _ITEM.findall(path.read_text(encoding="utf-8"))}
    assert {"weights", "kv_cache", "runtime"} <= keys  # the pattern still finds the items
    missing = sorted(keys - set(_LABELS))
    assert not missing, f"no label in cli/estimate_view.py for {missing}"
    for key in keys:
        en, zh = _LABELS[key]
        assert en.strip() and zh.strip()
