"""How gpuwise objects become JSON: Text as its English, objects through their to_dict()."""

from __future__ import annotations

from typing import Any

from gpuwise.i18n import Text


def json_default(obj: Any) -> Any:
    """`default=` for json.dumps, shared by the CLI's --json and the web API."""
    if isinstance(obj, Text):
        return obj.en
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
