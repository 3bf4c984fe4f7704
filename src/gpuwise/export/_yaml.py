"""A small YAML writer for the config exporters (no runtime dependency on PyYAML).

It writes the subset the exporters need: mappings (in insertion order), sequences, strings,
ints, floats, bools and null. A string is written plain only when YAML 1.1 and 1.2 both read
it back as the same string; otherwise it is double-quoted, with escapes for what YAML does not
allow raw. Multi-line strings become literal blocks (`|`), which is
how SkyPilot `setup`/`run` scripts are normally written. Comment texts pass through
`textsafe.comment_line`, so a name with a newline never starts a YAML line of its own. Tests
parse every output back with PyYAML.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuwise.textsafe import comment_line

__all__ = ["dump", "dump_all"]

# Plain (unquoted) only for a safe alphabet: starts with a letter, `_`, `/` or `$`; inner
# single spaces allowed; no `:`, `#`, quotes, brackets or other YAML indicators anywhere.
_PLAIN = re.compile(r"[A-Za-z_/$](?:[A-Za-z0-9_./$=+-]| (?! ))*(?<! )")
# Words YAML 1.1 (PyYAML, many Go and Ruby parsers) reads as bools or null.
_RESERVED = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})
_INDENT = "  "


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"cannot write {value!r} as YAML")
    text = repr(value)
    if "e" in text and "." not in text:  # YAML 1.1 floats need a dot: 1e+16 -> 1.0e+16
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _quoted(text: str) -> str:
    """A double-quoted scalar; printable characters (CJK too) stay as they are."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 0x20 <= code < 0x7F or (code > 0xA0 and ch.isprintable()
                                      and code not in (0x2028, 0x2029, 0xFEFF)):
            out.append(ch)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out) + '"'


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
            return value
        return _quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _block(text: str, depth: int) -> list[str]:
    """A literal block scalar: `|` keeps one final newline, `|-` none, `|+` all of them."""
    stripped = text.rstrip("\n")
    trailing = len(text) - len(stripped)
    indicator = "|-" if trailing == 0 else "|" if trailing == 1 else "|+"
    pad = _INDENT * depth
    body = [pad + line if line else "" for line in stripped.split("\n")]
    return [indicator, *body, *([""] * (trailing - 1 if trailing > 1 else 0))]


def _is_block(value: Any) -> bool:
    """Multi-line text that a literal block keeps exactly."""
    if not isinstance(value, str) or "\n" not in value:
        return False
    if value[:1] in (" ", "\n") or "\r" in value or "\t" in value:
        return False
    return all(ch.isprintable() for ch in value.replace("\n", ""))


def _lines(value: Any, depth: int) -> list[str]:
    """The lines of a mapping or sequence at `depth` levels of indentation."""
    pad = _INDENT * depth
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            out += _entry(pad + _scalar(str(key)) + ":", item, depth)
    else:
        for item in value:
            if isinstance(item, Mapping) and item:
                inner = _lines(item, depth + 1)
                out.append(pad + "- " + inner[0].lstrip())
                out += inner[1:]
            else:
                out += _entry(pad + "-", item, depth)
    return out


def _entry(head: str, item: Any, depth: int) -> list[str]:
    if isinstance(item, Mapping) and item:
        return [head, *_lines(item, depth + 1)]
    if isinstance(item, Sequence) and not isinstance(item, str) and item:
        # A sequence under a key sits at the key's own indentation (the usual k8s style).
        return [head, *_lines(item, depth if head.endswith(":") else depth + 1)]
    if isinstance(item, Mapping):
        return [head + " {}"]
    if isinstance(item, Sequence) and not isinstance(item, str):
        return [head + " []"]
    if _is_block(item):
        block = _block(item, depth + 1)
        return [head + " " + block[0], *block[1:]]
    return [head + " " + _scalar(item)]


def _comments(comments: Sequence[str]) -> list[str]:
    """`# text` lines, each text cleaned to one line (a model name may hold newlines)."""
    lines = (comment_line(c) for c in comments)
    return [f"# {c}" if c else "#" for c in lines]


def dump(doc: Mapping[str, Any], comments: Sequence[str] = ()) -> str:
    """One YAML document; `comments` become `# ...` lines at the top."""
    return "\n".join([*_comments(comments), *_lines(doc, 0)]) + "\n"


def dump_all(docs: Sequence[Mapping[str, Any]], comments: Sequence[str] = ()) -> str:
    """Several documents separated by `---` (a Kubernetes Service + Job, say)."""
    head = "".join(line + "\n" for line in _comments(comments))
    return head + "---\n".join(dump(d) for d in docs)
