"""The nvidia-smi fallback: both XML layouts, the topology matrix, and judging from them."""

from __future__ import annotations

import pytest

from gpuwise.verify.judge import Claim, judge
from gpuwise.verify.nvml import is_na
from gpuwise.verify.raw import SCHEMA_VERSION, Evidence
from gpuwise.verify.smi_xml import load_reading_from_xml, parse_smi_xml, parse_topo_matrix
from tests.verify_fakes import FIXTURES


def _xml(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _evidence(name: str) -> Evidence:
    parsed = parse_smi_xml(_xml(name))
    return Evidence(SCHEMA_VERSION, "2026-01-01T00:00:00+00:00", "test", "nvidia-smi", "inventory",
                    parsed.driver_version, parsed.cuda_driver_version, parsed.gpus)


def test_the_modern_h100_layout_parses_ecc_remap_power_and_links() -> None:
    parsed = parse_smi_xml(_xml("h100x2_smi.xml"))
    assert (parsed.driver_version, parsed.cuda_driver_version) == ("550.54.15", "12.4")
    g = parsed.gpus[1]
    assert g.name == "NVIDIA H100 80GB HBM3" and g.memory_total_bytes == 81559 * 2**20
    assert (g.ecc_current, g.ecc_uncorrected_volatile, g.remap_pending) == (True, 0, False)
    assert (g.pcie_gen_max, g.pcie_width_max, g.power_limit_w, g.power_default_w) == (5, 16, 700.0, 700.0)
    assert g.throttle_reasons_idle == 0x1 and g.temperature_slowdown_c == 92


def test_the_legacy_geforce_layout_turns_n_a_into_not_available() -> None:
    g = parse_smi_xml(_xml("rtx4090_smi.xml")).gpus[0]
    assert is_na(g.ecc_current) and is_na(g.remap_pending) and is_na(g.serial)
    assert (g.pcie_gen_max, g.pcie_gen_idle, g.power_limit_w) == (4, 1, 450.0)
    assert g.persistence_mode is False
    # the display server (type G) is not a tenant; the compute process is
    assert [p.name for p in g.processes] == ["python3"]


def test_a_load_reading_comes_from_one_gpu_element() -> None:
    parsed = parse_smi_xml(_xml("rtx4090_smi.xml"))
    reading = load_reading_from_xml(parsed.gpu_elements[0])
    fields = ("pcie_gen", "pcie_width", "throttle", "temperature", "power_w")
    assert {k: reading[k] for k in fields} == {"pcie_gen": 1, "pcie_width": 16, "throttle": 1,
                                               "temperature": 45, "power_w": 25.0}
    assert {"sm_mhz", "ecc_unc"} <= set(reading)


def test_the_topology_matrix_keeps_gpu_columns_and_drops_nics() -> None:
    topo = parse_topo_matrix(_xml("h100x8_topo.txt"))
    assert len(topo) == 8 and all(len(r) == 8 for r in topo)
    assert topo[0][0] == "X" and topo[7][3] == "NV18"


def test_xml_with_entity_declarations_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_smi_xml('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                      "<nvidia_smi_log>&e;</nvidia_smi_log>")


def test_judging_nvidia_smi_evidence_works_without_nvml() -> None:
    verdict = judge(_evidence("h100x2_smi.xml"), Claim(card="H100-SXM", count=2))
    status = {c.name: c.status for c in verdict.checks}
    assert status["inventory.model"] == "pass" and status["health.ecc"] == "pass"
    assert status["links.nvlink"] == "fail"  # NVLink expected, neither NVML nor topology read


def test_the_geforce_xml_flags_the_other_process_and_persistence() -> None:
    verdict = judge(_evidence("rtx4090_smi.xml"), Claim(card="RTX 4090"))
    status = {c.name: c.status for c in verdict.checks}
    assert status["inventory.processes"] == "fail" and status["inventory.persistence"] == "warn"
    assert status["health.ecc"] == "skipped"


def test_the_modern_xml_gives_the_error_sources_tenancy_and_clocks() -> None:
    from gpuwise.verify.smi_xml import load_reading_from_xml, parse_smi_xml

    parsed = parse_smi_xml((FIXTURES / "h100x2_smi.xml").read_text(encoding="utf-8"))
    g = parsed.gpus[0]
    assert g.pci_bus_id == "00000000:18:00.0" and g.memory_used_bytes == 2**20
    assert (g.compute_mode, g.virtualization_mode) == ("default", "none")
    assert (g.pcie_replay_count, g.fabric_state, g.fabric_status, g.sm_clock_max_mhz) == (0, "completed", 0, 1980)
    assert (g.ecc_sram_uncorrected_volatile, g.ecc_dram_uncorrected_aggregate) == (0, 0)
    reading = load_reading_from_xml(parsed.gpu_elements[0])
    assert reading["sm_mhz"] == 345 and reading["ecc_unc"] == 0


def test_the_legacy_xml_says_the_sram_dram_split_is_not_available() -> None:
    from gpuwise.verify.nvml import NotAvailable
    from gpuwise.verify.smi_xml import parse_smi_xml

    g = parse_smi_xml((FIXTURES / "rtx4090_smi.xml").read_text(encoding="utf-8")).gpus[0]
    assert isinstance(g.ecc_sram_uncorrected_aggregate, NotAvailable)
