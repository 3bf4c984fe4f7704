"""Bilingual text: every user-facing string carries English and Chinese.

Library code builds `Text(en=..., zh=...)` and never decides the language; the shells
call `.render(lang)` with the language picked by `pick_lang()`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")


@dataclass(frozen=True)
class Text:
    """One message in both languages."""

    en: str
    zh: str

    def render(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en

    def __str__(self) -> str:
        return self.en

    def __add__(self, other: Text) -> Text:
        return Text(self.en + other.en, self.zh + other.zh)


def pick_lang(flag: str | None = None) -> Lang:
    """`--lang` wins, then GPUWISE_LANG, then the locale (LC_ALL, LC_MESSAGES, LANG)."""
    for value in (flag, os.environ.get("GPUWISE_LANG")):
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    for var in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    import locale  # only here: most runs are settled by the variables above

    loc = locale.getlocale()[0] or ""
    return "zh" if loc.lower().startswith("zh") else "en"
