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


# ------------------------------------------------------------------ error sources, tenancy, placement

def test_the_new_fields_are_read_through_nvml() -> None:
    from gpuwise.verify.inventory import read_gpu
    from gpuwise.verify.nvml import Nvml
    from tests.verify_fakes import fake_nvml

    with Nvml(fake_nvml()) as nv:
        g0, g5 = read_gpu(nv, 0), read_gpu(nv, 5)
    assert g0.pci_bus_id == "00000000:18:00.0" and g0.numa_node == 0 and g5.numa_node == 1
    assert g0.compute_mode == "default" and g0.virtualization_mode == "none"
    assert g0.memory_used_bytes == 533069824 and g0.sm_clock_max_mhz == 1980
    counters = (g0.pcie_replay_count, g0.nvlink_crc_errors, g0.nvlink_replay_errors, g0.nvlink_recovery_errors)
    assert counters == (0, 0, 0, 0)
    assert (g0.ecc_sram_uncorrected_volatile, g0.ecc_dram_uncorrected_aggregate) == (0, 0)
    assert (g0.fabric_state, g0.fabric_status) == ("completed", 0)


def test_nvlink_error_counters_are_summed_over_the_links_that_are_up() -> None:
    from gpuwise.verify.inventory import read_gpu
    from gpuwise.verify.nvml import Nvml
    from tests.verify_fakes import fake_nvml

    counters = {"0,2": 40, "0,3": 10, "1,0": 7, "2,1": 3}  # (link, counter): CRC flit, CRC data, replay, recovery
    with Nvml(fake_nvml(per_device={"6": {"nvmlDeviceGetNvLinkErrorCounter": counters}})) as nv:
        g = read_gpu(nv, 6)
    assert (g.nvlink_crc_errors, g.nvlink_replay_errors, g.nvlink_recovery_errors) == (50, 7, 3)


def test_unsupported_error_sources_are_not_available_not_zero() -> None:
    from gpuwise.verify.inventory import read_gpu
    from gpuwise.verify.nvml import NotAvailable, Nvml
    from tests.verify_fakes import fake_nvml

    with Nvml(fake_nvml("rtx4090x2_nvml.json")) as nv:
        g = read_gpu(nv, 0)
    for field in ("pcie_replay_count", "nvlink_crc_errors", "ecc_sram_uncorrected_volatile", "fabric_state"):
        assert isinstance(getattr(g, field), NotAvailable), field


def test_modes_are_named_in_words() -> None:
    from gpuwise.verify.inventory import read_gpu
    from gpuwise.verify.nvml import Nvml
    from tests.verify_fakes import fake_nvml

    lib = fake_nvml(device={"nvmlDeviceGetComputeMode": 2, "nvmlDeviceGetVirtualizationMode": 2,
                            "nvmlDeviceGetGpuFabricInfo": {"state": 1, "status": 0}})
    with Nvml(lib) as nv:
        g = read_gpu(nv, 0)
    assert (g.compute_mode, g.virtualization_mode, g.fabric_state) == ("prohibited", "vgpu", "not_started")


class _EventLib:
    """The NVML event calls of pynvml, on top of the fixture fake: one Xid 79 on GPU 2."""

    def __init__(self) -> None:
        from tests.verify_fakes import fake_nvml

        self.base = fake_nvml()
        self.pending = [type("E", (), {"device": 2, "eventData": 79})()]
        self.freed = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.base, name)

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceRegisterEvents(self, handle: int, kinds: int, event_set: str) -> None:
        assert kinds == 0x8 and event_set == "set"

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> object:
        if self.pending:
            return self.pending.pop()
        from tests.verify_fakes import FakeNVMLError

        raise FakeNVMLError(10)  # NVML_ERROR_TIMEOUT

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.freed = True


def test_xid_events_during_the_run_are_collected_per_gpu() -> None:
    import time

    from gpuwise.verify.events import XidWatcher
    from gpuwise.verify.nvml import Nvml

    lib = _EventLib()
    with Nvml(lib) as nv:
        watcher = XidWatcher(nv, 8, poll_ms=1).start()
        deadline = time.monotonic() + 5
        while not watcher.events and time.monotonic() < deadline:
            time.sleep(0.01)
        events = watcher.stop()
    assert [(i, e.xid, e.during_load) for i, e in events] == [(2, 79, True)] and lib.freed


def test_events_unsupported_leave_a_note_and_no_thread() -> None:
    from gpuwise.verify.events import XidWatcher
    from gpuwise.verify.nvml import Nvml
    from tests.verify_fakes import fake_nvml

    with Nvml(fake_nvml()) as nv:
        watcher = XidWatcher(nv, 8).start()
        assert watcher.stop() == [] and "nvmlEventSetCreate" in watcher.note


def test_kernel_log_xids_are_parsed_and_attached_to_their_gpu_by_pci_bus() -> None:
    from gpuwise.verify.collect import collect
    from gpuwise.verify.host import parse_xid_lines, read_host
    from tests.verify_fakes import fake_nvml

    log = ("[ 12.3] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06\n"
           "[812.1] NVRM: Xid (PCI:0000:2a:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
           "[813.0] NVRM: Xid (PCI:0000:18:00): 13, pid=99, Graphics Exception\n")
    found = parse_xid_lines(log)
    assert [(bus, e.xid) for bus, e in found] == [("0000:2a:00", 79), ("0000:18:00", 13)]
    host, xids = read_host(read=lambda path: None, run=lambda cmd: log if cmd == ["dmesg"] else None)
    assert host.kernel_log == "read" and len(xids) == 2
    ev = collect("inventory", nvml_lib=fake_nvml(), read_host=lambda plan: (host, xids, {}))
    assert [e.xid for e in ev.gpus[1].xid_events] == [79] and [e.xid for e in ev.gpus[0].xid_events] == [13]
    assert ev.gpus[2].xid_events == ()


def test_host_modules_and_memory_are_read_from_proc() -> None:
    from gpuwise.verify.host import read_host

    files = {"/proc/modules": "nvidia_uvm 1 0 - Live\nnvidia 2 1 nvidia_uvm, Live\nnouveau 3 0 - Live\n",
             "/proc/meminfo": "MemTotal:       2015000000 kB\n", "/proc/cpuinfo": "model name\t: Xeon 8480+\n"}
    host, _ = read_host(read=files.get, run=lambda cmd: None)
    assert host.kernel_modules == ("nouveau", "nvidia", "nvidia_uvm")
    assert host.ram_bytes == 2015000000 * 1024 and host.cpu_model == "Xeon 8480+"
    assert host.kernel_log.startswith("dmesg not readable")
