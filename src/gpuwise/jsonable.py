"""How gpuwise objects become JSON: Text as its English, objects through their to_dict(), and
never a NaN or an Infinity (`dumps`)."""

from __future__ import annotations

import json
import math
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


def finite(obj: Any) -> Any:
    """`obj` with every NaN or infinite float replaced by None (JSON's null): RFC 8259 has no
    NaN or Infinity, and a strict parser refuses them."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if isinstance(obj, Text) or callable(getattr(obj, "to_dict", None)):
        return finite(json_default(obj))
    return obj


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Strict JSON text (never NaN or Infinity) for the CLI's --json, saved files and the web API.

    The common case costs one `json.dumps`; a non-finite number found on the way is written as
    null rather than as the invalid token `NaN`."""
    try:
        return json.dumps(obj, ensure_ascii=False, indent=indent, default=json_default, allow_nan=False)
    except ValueError:
        return json.dumps(finite(obj), ensure_ascii=False, indent=indent, default=json_default, allow_nan=False)
