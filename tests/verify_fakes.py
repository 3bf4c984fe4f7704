"""A stand-in for `pynvml` that replays NVML values from a JSON fixture.

Fixture format (tests/fixtures/verify/*_nvml.json):
  system:     {function: value}                       nvmlSystem* calls
  count:      number of GPUs
  device:     {function: value}                       every GPU (a template)
  per_device: {"<index>": {function: value}}          overrides for one GPU
  pairs:      {function: value}                       calls that take two GPU handles
Values: "NOT_SUPPORTED" raises NVML_ERROR_NOT_SUPPORTED; a dict whose keys are the extra
arguments joined by "," selects by argument; a list selects by the first extra argument
(NVLink link index), running past its end is NOT_SUPPORTED; dicts for MemoryInfo,
PciInfo and process entries become objects with those attributes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "verify"

# Constants the wrapper reads (values from nvml.h / pynvml 13).
CONSTANTS = {
    "NVML_MEMORY_ERROR_TYPE_CORRECTED": 0, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0, "NVML_AGGREGATE_ECC": 1, "NVML_NVLINK_MAX_LINKS": 18,
    "NVML_TEMPERATURE_GPU": 0, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN": 1,
    "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR": 1, "NVML_NVLINK_DEVICE_TYPE_SWITCH": 2,
    "NVML_P2P_CAPS_INDEX_READ": (0,), "NVML_CLOCK_SM": 1, "NVML_MEMORY_LOCATION_DRAM": 2,
    "NVML_MEMORY_LOCATION_SRAM": 7,
}


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def _obj(value: Any) -> Any:
    if isinstance(value, dict) and not any("," in k or k.isdigit() for k in value):
        return SimpleNamespace(**value)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [SimpleNamespace(**v) for v in value]
    return value


class FakeNvmlLib:
    """Duck-typed `pynvml`: handles are GPU indices."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.calls: list[str] = []
        for name, value in CONSTANTS.items():
            setattr(self, name, value)

    def nvmlInit(self) -> None:
        if self.data.get("init_error"):
            raise FakeNVMLError(int(self.data["init_error"]))

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return int(self.data["count"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index >= int(self.data["count"]):
            raise FakeNVMLError(2)
        return index

    def _device_value(self, name: str, index: int) -> Any:
        per = self.data.get("per_device", {}).get(str(index), {})
        if name in per:
            return per[name]
        if name in self.data.get("device", {}):
            return self.data["device"][name]
        raise AttributeError(name)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        if name in self.data.get("system", {}):
            return lambda: self._resolve(self.data["system"][name], ())
        if name in self.data.get("pairs", {}):
            return lambda a, b, *args: self._resolve(self.data["pairs"][name], args)
        if name in self.data.get("device", {}) or any(
                name in v for v in self.data.get("per_device", {}).values()):
            def call(handle: int, *args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return self._resolve(self._device_value(name, handle), args)
            return call
        raise AttributeError(name)

    def _resolve(self, value: Any, args: tuple[Any, ...]) -> Any:
        if value == "NOT_SUPPORTED":
            raise FakeNVMLError(3)
        if isinstance(value, dict) and args and any("," in k or k.isdigit() for k in value):
            key = ",".join(str(a) for a in args)
            if key not in value:
                raise FakeNVMLError(3)
            return self._resolve(value[key], ())
        if isinstance(value, list) and args:
            if int(args[0]) >= len(value):
                raise FakeNVMLError(3)
            return self._resolve(value[int(args[0])], ())
        return _obj(value)


def load_nvml_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def fake_nvml(name: str = "h100x8_nvml.json", **overrides: Any) -> FakeNvmlLib:
    """The fixture with `device` / `per_device` / `system` entries replaced by `overrides`.

    overrides: device={...}, per_device={"3": {...}}, system={...}, pairs={...}, count=N.
    """
    data = copy.deepcopy(load_nvml_fixture(name))
    for section, values in overrides.items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            if section == "per_device":
                for idx, vals in values.items():
                    data[section].setdefault(idx, {}).update(vals)
            else:
                data[section].update(values)
        else:
            data[section] = values
    return FakeNvmlLib(data)
