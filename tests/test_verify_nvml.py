"""The NVML wrapper: unsupported queries become explicit values, never errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuwise.verify.collect import collect
from gpuwise.verify.nvml import NOT_ON_CARD, NotAvailable, Nvml, NvmlUnavailable, is_na
from gpuwise.verify.raw import SoftwareInfo
from tests.verify_fakes import fake_nvml

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "verify"


def test_a_query_the_card_does_not_support_becomes_not_available_on_this_card() -> None:
    nv = Nvml(fake_nvml("rtx4090x2_nvml.json")).open()
    value = nv.query("nvmlDeviceGetEccMode", nv.handle(0))
    assert value == NotAvailable(NOT_ON_CARD) and not value and is_na(value)


def test_a_function_missing_from_an_old_nvidia_ml_py_is_not_an_error() -> None:
    nv = Nvml(fake_nvml()).open()
    value = nv.query("nvmlDeviceGetSomethingNew", 0)
    assert is_na(value) and "upgrade" in value.reason


def test_nvml_that_cannot_start_raises_nvml_unavailable_for_the_fallback() -> None:
    with pytest.raises(NvmlUnavailable):
        Nvml(fake_nvml(init_error=9)).open()


def test_p2p_caps_index_tuple_quirk_of_pynvml_is_unwrapped() -> None:
    assert Nvml(fake_nvml()).const("NVML_P2P_CAPS_INDEX_READ") == 0


def test_the_h100_fixture_reads_as_eight_gpus_with_all_nvlinks_up() -> None:
    ev = collect("inventory", nvml_lib=fake_nvml(), run_software=SoftwareInfo)
    assert len(ev.gpus) == 8 and ev.source == "nvml"
    assert ev.driver_version == "570.124.06" and ev.cuda_driver_version == "12.8"
    g = ev.gpus[3]
    assert (g.nvlink_up, g.nvlink_down, g.ecc_current, g.remap_pending) == (18, 0, True, False)
    assert g.power_limit_w == 700.0 and g.memory_total_bytes == 81559 * 2**20
    assert ev.topology[2] == ("NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18")
    assert all(cell in ("X", "OK") for row in ev.p2p for cell in row)


def test_the_geforce_fixture_reads_pcie_topology_without_nvlink_or_p2p() -> None:
    ev = collect("inventory", nvml_lib=fake_nvml("rtx4090x2_nvml.json"), run_software=SoftwareInfo)
    g = ev.gpus[0]
    assert is_na(g.nvlink_up) and is_na(g.ecc_current) and is_na(g.mig_current)
    assert ev.topology == (("X", "SYS"), ("SYS", "X")) and ev.p2p[0][1] == "NS"


def test_the_verify_package_never_calls_an_nvml_setter_or_changes_gpu_settings() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in SRC.glob("*.py"))
    assert not re.search(r"nvmlDeviceSet|nvmlDeviceReset|nvmlDeviceClear", text)
    assert not re.search(r"\"-(pm|e|pl|lgc|rgc|mig|ac|rac|r)\",", text)


def test_importing_the_library_does_not_import_torch_or_rich() -> None:
    import subprocess
    import sys

    code = ("import sys, gpuwise.verify.judge, gpuwise.verify.collect, gpuwise.verify.bench, "
            "gpuwise.verify.nccl, gpuwise.verify.doctor, gpuwise.verify.report; "
            "print(any(m in sys.modules for m in ('torch', 'rich', 'typer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
