"""One exception hierarchy for everything the user can get wrong.

The CLI turns a `GpuwiseError` into its message (in the user's language), the hint, and
exit status 2; it never shows a traceback for one.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuwise.i18n import Text


class GpuwiseError(Exception):
    """Base class: a message for the user, an optional next step, an exit status."""

    exit_code = 2

    def __init__(self, message: Text, *, hint: Text | None = None,
                 suggestions: tuple[str, ...] = ()) -> None:
        super().__init__(message.en)
        self.message = message
        self.hint = hint
        self.suggestions = suggestions

    def __reduce__(self) -> tuple[object, ...]:
        """Picklable with every field (a web worker process sends errors back to the server)."""
        return (_rebuild, (type(self), self.__dict__.copy(), self.args))

    def to_dict(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "message": self.message.en,
            "message_zh": self.message.zh,
            "hint": self.hint.en if self.hint else None,
            "hint_zh": self.hint.zh if self.hint else None,
            "suggestions": list(self.suggestions),
        }


def _rebuild(cls: type[GpuwiseError], state: dict[str, object], args: tuple[object, ...]) -> GpuwiseError:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class InputError(GpuwiseError):
    """A value the user gave is out of range or inconsistent."""


class UnknownNameError(GpuwiseError):
    """A card, model, provider or format name that is not in the catalog."""


class DataError(GpuwiseError):
    """A data file (ours or the user's) or a model file is malformed."""


class SourceUnavailableError(GpuwiseError):
    """A model source could not be reached (no network, no such repo, gated)."""


class NoDeviceError(GpuwiseError):
    """No NVIDIA GPU or driver on this machine."""

    exit_code = 3


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> tuple[str, ...]:
    """Names close to `word`, compared case-insensitively; original spelling returned."""
    import difflib  # only on the way to an error message

    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=0.5)
    return tuple(by_lower[f] for f in found)


def unknown_name(kind: Text, word: str, choices: Iterable[str], list_command: str) -> UnknownNameError:
    """The standard 'unknown X' error: quote it, suggest close matches, name the listing command."""
    choices = list(choices)
    matches = close_matches(word, choices)
    gap = " " if kind.zh[:1].isascii() else ""  # '未知的 --objective 取值', '未知的显卡'
    message = Text(f"Unknown {kind.en} '{word}'.", f"未知的{gap}{kind.zh}“{word}”。")
    options = list(dict.fromkeys(choices))
    if matches:  # a Chinese list is joined with 、, an English one with commas
        quoted = [f"'{m}'" for m in matches]
        message = message + Text(f" Did you mean {', '.join(quoted)}?", f"您是否想输入 {'、'.join(quoted)}？")
    elif options and len(options) <= 8:  # a short closed list: name every choice
        message = message + Text(f" Choose one of: {', '.join(options)}.", f"可选：{'、'.join(options)}。")
    hint = Text(f"Run `{list_command}` to list them.", f"运行 `{list_command}` 查看全部。")
    return UnknownNameError(message, hint=hint, suggestions=matches)
