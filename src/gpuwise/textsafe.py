"""Make outside text (model names from GGUF headers, config.json, folder names, hub ids) safe to show
and to paste into generated files.

A name read from a file is data someone else wrote. `clean_text` turns it into one printable line:
control and format characters (Unicode categories Cc, Cf, Zl, Zp, plus lone surrogates Cs and the
noncharacters such as U+FFFF) become spaces, so newlines, tabs, NUL, bidi overrides (U+202E) and
zero-width characters cannot break out of a comment, a YAML line or a shell line, nor hide what a
line says. Runs of whitespace collapse to one space, the ends are stripped and the length is
capped. This is the first line of defence; each exporter still quotes for its own target
(`py_literal` for Python, shlex for shell, the YAML emitter's own quoting), because a cleaned line
can still hold quotes, `$(...)` or backticks.

Pure functions, no imports beyond the standard library: every layer may use them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean_text", "comment_line", "py_literal"]

# Categories replaced by a space: controls (newline, tab, NUL, ESC, U+0085), format characters
# (bidi overrides U+202A-U+202E and isolates U+2066-U+2069, zero-width space/joiners, BOM),
# line and paragraph separators (U+2028, U+2029), and lone surrogates, which no UTF-8 file can hold.
# Noncharacters go too (see _is_unsafe).
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SPACES = re.compile(r"\s+")
NAME_LIMIT = 200  # far above any real model name ("Meta-Llama-3.1-405B-Instruct-FP8" is 32)
COMMENT_LIMIT = 500  # a comment sentence around a name


def _is_unsafe(ch: str) -> bool:
    """A control/format/separator character, or a Unicode noncharacter (U+FDD0-U+FDEF and the last
    two code points of every plane), which YAML 1.2 (U+FFFE, U+FFFF) refuses even in a comment."""
    code = ord(ch)
    return (unicodedata.category(ch) in _UNSAFE_CATEGORIES or 0xFDD0 <= code <= 0xFDEF
            or code & 0xFFFE == 0xFFFE)


def clean_text(s: str, limit: int = NAME_LIMIT) -> str:
    """One printable line: control/format/separator characters -> space, whitespace collapsed,
    stripped, at most `limit` characters (cut on the right, then stripped again)."""
    text = "".join(" " if _is_unsafe(ch) else ch for ch in str(s))
    text = _SPACES.sub(" ", text).strip()
    return text[:max(0, limit)].rstrip()


def printable(s: str) -> str:
    """Text safe to print on a terminal: control/format characters -> space, line breaks kept
    (an escape sequence in a user's model or flag value must not reach the terminal)."""
    return "".join(ch if ch == "\n" or not _is_unsafe(ch) else " " for ch in str(s))


def comment_line(s: str, limit: int = COMMENT_LIMIT) -> str:
    """Text safe after `# ` in a shell, YAML or Python comment: cleaned, one line.

    Do not put it on the first two lines of a Python file: there a comment can declare the
    source encoding (PEP 263), so those lines must be fixed text."""
    return clean_text(s, limit)


def py_literal(s: str, limit: int = NAME_LIMIT) -> str:
    """A Python string literal of the cleaned text: `ast.literal_eval` gives `clean_text(s)` back."""
    return repr(clean_text(s, limit))
