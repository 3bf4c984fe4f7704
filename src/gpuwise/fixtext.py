"""How a command line spells a fix: `("gpus", 4), ("zero", 3)` -> `--gpus 4 --zero 3`.

The estimate layer says what to change as data (a `Fix`: an action, the settings it changes and
the words for it, gpuwise.estimate.fit); each shell words it. The CLI appends these flags; the page
says the words ("use 4 GPUs") and shows the flags only as a hint to copy. Kept beside textsafe
(standard library only) so the estimate layer never names a flag itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwise.i18n import Text

__all__ = ["flags_of", "with_flags"]

# Settings whose `gpuwise estimate` flag is not `--` + the name with dashes.
_FLAG = {"train_tokens": "--tokens"}


def flags_of(params: Sequence[tuple[str, object]]) -> str:
    """The `gpuwise estimate` flags that apply the settings: a switch for True, `--no-x` for False."""
    parts = []
    for key, value in params:
        flag = _FLAG.get(key, "--" + key.replace("_", "-"))
        if value is True:
            parts.append(flag)
        elif value is False:
            parts.append("--no-" + flag[2:])
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def with_flags(words: Text, params: Sequence[tuple[str, object]], *notes: Text) -> Text:
    """'use 4 GPUs with tensor parallel (--gpus 4)': the words, then the flags and any notes."""
    flags = flags_of(params)
    en = "; ".join(x for x in (flags, *(n.en for n in notes)) if x)
    zh = "；".join(x for x in (flags, *(n.zh for n in notes)) if x)
    return Text(f"{words.en} ({en})" if en else words.en, f"{words.zh}（{zh}）" if zh else words.zh)
