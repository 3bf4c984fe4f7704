"""The web answers as JSON bytes: the same JSON value as the CLI's --json (gpuwise.jsonable), in
compact form, by orjson when it is installed (the `web` extra).

A whole-catalog plan answer (46 KiB) costs 0.79 ms of CPU with the standard encoder and 0.07 ms
with orjson (measured here, 18 plans of the load test's mix), time taken from the plan workers
on a 2-core server. Both write a NaN or an Infinity as null (RFC 8259 has neither). Whatever
orjson refuses (an integer past 64 bits, a key that is not text, a float subclass) goes to the
standard encoder, so the value never differs, only the spaces. No web framework is imported here.
"""

from __future__ import annotations

from typing import Any

from gpuwise.jsonable import dumps, json_default

try:
    import orjson

    # Dataclasses and datetimes go through json_default (their to_dict(), or a TypeError), as
    # with the standard encoder, not through orjson's own field-by-field or ISO forms.
    _OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
    HAVE_ORJSON = True
except ImportError:  # the standard encoder alone: the same JSON, slower
    HAVE_ORJSON = False


def encoded(obj: Any) -> bytes:
    """Strict JSON bytes (UTF-8, never NaN or Infinity) of one web answer."""
    if HAVE_ORJSON:
        try:
            return orjson.dumps(obj, default=json_default, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError is one: the standard encoder decides
            pass
    return dumps(obj).encode("utf-8")


__all__ = ["encoded"]
