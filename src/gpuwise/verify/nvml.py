"""The one wrapper around NVML (nvidia-ml-py, module `pynvml`).

Every NVML call goes through `Nvml.query`: a query the card or driver does not support
comes back as an explicit `NotAvailable(reason)` value, never as an exception (the
pattern of nvitop's `nvmlQuery`). Only a missing library or driver raises
`NvmlUnavailable`, which makes the caller fall back to `nvidia-smi -q -x`.

This module only reads. It never calls an NVML setter (clocks, power limits, ECC, MIG,
persistence): a test scans this package for setter calls to keep it that way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Maybe", "NotAvailable", "Nvml", "NvmlUnavailable", "is_na"]


@dataclass(frozen=True)
class NotAvailable:
    """A value a card, driver or environment could not give, with the reason why."""

    reason: str

    def __bool__(self) -> bool:
        return False

    def to_json(self) -> dict[str, str]:
        return {"na": self.reason}


# A reading that may be missing: the value, or NotAvailable with its reason.
Maybe = Any

NOT_ON_CARD = "not available on this card"


def is_na(value: object) -> bool:
    return isinstance(value, NotAvailable)


class NvmlUnavailable(Exception):
    """NVML cannot be used at all here: no library, no driver, or init failed."""


# NVML return codes (nvml.h) that deserve a plain-words reason.
_REASONS = {
    3: NOT_ON_CARD,                                   # NVML_ERROR_NOT_SUPPORTED
    4: "needs root (NVML: no permission)",            # NVML_ERROR_NO_PERMISSION
    13: "driver too old for this query",              # NVML_ERROR_FUNCTION_NOT_FOUND
    15: "GPU is lost (fell off the bus): reboot or reseat",  # NVML_ERROR_GPU_IS_LOST
    19: "GPU is in an invalid state",                 # NVML_ERROR_INVALID_STATE (some MIG queries)
}


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


class Nvml:
    """A read-only NVML session. `lib` is the `pynvml` module or a stand-in with its API."""

    def __init__(self, lib: Any = None) -> None:
        if lib is None:
            try:
                import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py
            except ImportError as exc:
                raise NvmlUnavailable("nvidia-ml-py is not installed") from exc
            lib = pynvml
        self.lib: Any = lib
        self._open = False

    def open(self) -> Nvml:
        try:
            self.lib.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            raise NvmlUnavailable(f"NVML could not start: {exc}") from exc
        self._open = True
        return self

    def close(self) -> None:
        if self._open:
            try:
                self.lib.nvmlShutdown()
            except Exception:  # noqa: BLE001, S110  (shutting down must never mask the real result)
                pass
            self._open = False

    def __enter__(self) -> Nvml:  # noqa: PYI034
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def const(self, name: str, default: Any = None) -> Any:
        value = getattr(self.lib, name, default)
        # pynvml defines NVML_P2P_CAPS_INDEX_READ = 0, (a tuple): unwrap it.
        if isinstance(value, tuple) and len(value) == 1:
            return value[0]
        return value

    def query(self, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        """Call `pynvml.<fn_name>`; unsupported or failing queries become NotAvailable."""
        fn = getattr(self.lib, fn_name, None)
        if fn is None:
            return NotAvailable(f"{fn_name} is not in this nvidia-ml-py; upgrade it")
        try:
            return _decode(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001  (every NVMLError subclass, by design)
            code = getattr(exc, "value", None)
            if isinstance(code, int) and code in _REASONS:
                return NotAvailable(_REASONS[code])
            return NotAvailable(f"NVML error in {fn_name}: {exc}")

    def device_count(self) -> int:
        count = self.query("nvmlDeviceGetCount")
        return 0 if is_na(count) else int(count)

    def handle(self, index: int) -> Any:
        return self.query("nvmlDeviceGetHandleByIndex", index)
