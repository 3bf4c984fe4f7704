"""`estimate --calibration raw.json`: measured rates replace the catalog's assumed fractions,
but only for the card that was measured and only when the readings are plausible for it."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise.catalog.cards import load_cards, resolve_card
from gpuwise.errors import DataError, GpuwiseError, InputError
from gpuwise.estimate.links import card_rates
from gpuwise.service import EstimateRequest, estimate_json
from gpuwise.verify.calibration import Calibration, load_calibration
from gpuwise.verify.nvml import NotAvailable, Nvml
from gpuwise.verify.raw import Evidence, load_evidence, save_evidence

RAW = "tests/fixtures/verify/h100x8_raw.json"  # the verify tests' H100 SXM evidence
SXM = "tests/fixtures/calibration/h100_sxm_raw.json"  # the same run, with device ids 10de:2330
PCIE = "tests/fixtures/calibration/h100_pcie_raw.json"  # one H100 PCIe, 10de:2331


def _estimate(card: str, calibration: str | Path | None = None) -> dict[str, Any]:
    return estimate_json(EstimateRequest(model="llama-3.1-8b", card=card,
                                         calibration=None if calibration is None else str(calibration)))


def _saved(tmp_path: Path, ev: Evidence, name: str = "raw.json") -> Path:
    path = tmp_path / name
    save_evidence(ev, path)
    return path


def _with_bench(ev: Evidence, index: int, **change: Any) -> Evidence:
    bench = tuple(replace(b, **change) if b.index == index else b for b in ev.bench)
    return replace(ev, bench=bench)


# ------------------------------------------------------------------ applied

def test_a_verify_result_changes_the_speed_and_says_so() -> None:
    base = _estimate("H100-SXM")
    cal = _estimate("H100-SXM", SXM)
    assert cal["calibrated"] and not base["calibrated"]
    assert cal["speed"]["decode_tokens_per_s"] != base["speed"]["decode_tokens_per_s"]
    assert any(SXM in w for w in cal["warnings"])


def test_a_good_file_is_applied_and_the_output_names_the_file_the_card_and_the_date() -> None:
    out = _estimate("h100-sxm", SXM)
    assert f"Speeds calibrated from {SXM} (H100 SXM5 80GB, 2026-01-15)." in out["warnings"]
    assert any(f"{SXM}" in w and "H100 SXM5 80GB" in w and "2026-01-15" in w for w in out["warnings_zh"])
    assert not any("not checked" in w for w in out["warnings"])
    assert out["calibration"] == {"file": SXM, "card": "h100-sxm", "pci_device_id": "10de:2330",
                                  "collected_at": "2026-01-15T08:00:00+00:00", "device_id_checked": True}


def test_the_calibration_exposes_where_it_came_from() -> None:
    cal = load_calibration(PCIE, resolve_card("h100-pcie").card)
    assert (cal.card_id, cal.card_name, cal.pci_device_id) == ("h100-pcie", "H100 PCIe 80GB", "10de:2331")
    assert (cal.source, cal.collected_at, cal.device_id_checked) == (PCIE, "2026-02-03T10:30:00+00:00", True)


def test_an_estimate_without_calibration_has_no_calibration_object() -> None:
    assert "calibration" not in _estimate("h100-sxm")


def test_a_file_saved_before_device_ids_still_loads_and_matches_on_name_with_a_not_checked_note(
        tmp_path: Path) -> None:
    data = json.loads(Path(SXM).read_text(encoding="utf-8"))
    for gpu in data["gpus"]:
        del gpu["pci_device_id"]  # as `verify --save` wrote it before the field existed
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = _estimate("h100-sxm", path)
    assert out["calibrated"] and out["calibration"]["device_id_checked"] is False
    assert out["calibration"]["pci_device_id"] is None
    note = next(w for w in out["warnings"] if str(path) in w)
    assert "(H100 SXM5 80GB, 2026-01-15)" in note and "PCI device id was not checked" in note
    assert any("未核对 PCI 设备 ID" in w for w in out["warnings_zh"])


def test_a_card_the_catalog_has_no_device_id_for_matches_on_name_and_says_it_did_not_check() -> None:
    card = replace(resolve_card("h100-sxm").card, pci_device_ids=())
    cal = load_calibration(SXM, card)
    assert cal.device_id_checked is False and "not checked" in cal.note.en


# ------------------------------------------------------------------ another card

def test_an_h100_file_on_an_a100_estimate_is_refused_naming_both_cards_and_the_file() -> None:
    with pytest.raises(InputError) as err:
        _estimate("a100-80gb-sxm", RAW)
    message = err.value.message.en
    assert RAW in message and "h100-sxm" in message and "a100-80gb-sxm" in message
    assert err.value.hint is not None and "--card h100-sxm" in err.value.hint.en


def test_an_h100_pcie_file_on_an_h100_sxm_estimate_is_refused() -> None:
    with pytest.raises(InputError, match=r"h100-pcie.*h100-sxm"):
        _estimate("h100-sxm", PCIE)


def test_the_same_gpu_name_with_another_cards_device_id_is_refused(tmp_path: Path) -> None:
    ev = load_evidence(SXM)
    path = _saved(tmp_path, replace(ev, gpus=tuple(replace(g, pci_device_id="10de:2331") for g in ev.gpus)))
    with pytest.raises(InputError) as err:
        _estimate("h100-sxm", path)
    message = err.value.message.en
    assert str(path) in message and "10de:2331" in message
    assert "H100 PCIe 80GB (h100-pcie)" in message and "H100 SXM5 80GB (h100-sxm)" in message
    assert "10de:2330" in message  # the ids the estimated card has


def test_one_gpu_of_another_card_in_the_file_is_refused(tmp_path: Path) -> None:
    ev = load_evidence(SXM)
    gpus = (*ev.gpus[:7], replace(ev.gpus[7], name="NVIDIA A100-SXM4-80GB", pci_device_id="10de:20b2"))
    with pytest.raises(InputError, match="a100-80gb-sxm"):
        _estimate("h100-sxm", _saved(tmp_path, replace(ev, gpus=gpus)))


def test_a_gpu_the_catalog_does_not_know_is_refused(tmp_path: Path) -> None:
    ev = load_evidence(RAW)
    path = _saved(tmp_path, replace(ev, gpus=tuple(replace(g, name="NVIDIA Fantasy 9000") for g in ev.gpus)))
    with pytest.raises(InputError, match="not in the card catalog"):
        _estimate("h100-sxm", path)


# ------------------------------------------------------------------ implausible readings

@pytest.mark.parametrize("value, shown", [
    pytest.param(-2.95e12, "-2,950 GB/s", id="negative"),
    pytest.param(5 * 3.35e12, "16,750 GB/s", id="5x-datasheet"),
    pytest.param(0.2 * 3.35e12, "670 GB/s", id="a-fifth-of-the-datasheet"),
])
def test_an_implausible_memory_bandwidth_on_any_gpu_is_refused_with_the_value(
        tmp_path: Path, value: float, shown: str) -> None:
    path = _saved(tmp_path, _with_bench(load_evidence(SXM), 3, mem_bw_bytes_per_s=value))
    with pytest.raises(InputError) as err:
        _estimate("h100-sxm", path)
    message = err.value.message.en
    assert str(path) in message and "GPU 3 memory bandwidth" in message and shown in message


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_non_finite_bandwidth_is_saved_as_null_and_refused_naming_the_field(tmp_path: Path, value: float) -> None:
    # evidence is written as strict JSON (no NaN token): the reading becomes null, which the loader
    # refuses with the file and the field named
    path = _saved(tmp_path, _with_bench(load_evidence(SXM), 3, mem_bw_bytes_per_s=value))
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()
    with pytest.raises(GpuwiseError) as err:
        _estimate("h100-sxm", path)
    assert str(path) in err.value.message.en and "bench[3].mem_bw_bytes_per_s" in err.value.message.en


def test_an_out_of_band_bandwidth_message_gives_the_datasheet_figure_and_the_band(tmp_path: Path) -> None:
    path = _saved(tmp_path, _with_bench(load_evidence(SXM), 0, mem_bw_bytes_per_s=5 * 3.35e12))
    with pytest.raises(InputError) as err:
        _estimate("h100-sxm", path)
    assert re.search(r"30%-110% of the datasheet 3,350 GB/s \(1,005-3,685 GB/s\)", err.value.message.en)
    assert "3,350 GB/s" in err.value.message.zh


def test_a_matmul_faster_than_the_dense_datasheet_is_refused(tmp_path: Path) -> None:
    ev = load_evidence(SXM)
    runs = tuple(replace(r, flops_per_s=1.5e15) if r.precision == "bf16" else r for r in ev.bench[0].matmul)
    with pytest.raises(InputError, match=r"bf16 matmul 1,500 TFLOPS .* 989 TFLOPS"):
        _estimate("h100-sxm", _saved(tmp_path, _with_bench(ev, 0, matmul=runs)))


def test_a_host_link_faster_than_pcie_allows_is_refused(tmp_path: Path) -> None:
    path = _saved(tmp_path, _with_bench(load_evidence(SXM), 0, h2d_bytes_per_s=200e9))
    with pytest.raises(InputError, match=r"host-to-device copy 200 GB/s .* theoretical maximum 63 GB/s"):
        _estimate("h100-sxm", path)


def test_an_all_reduce_faster_than_nvlink_is_refused(tmp_path: Path) -> None:
    ev = load_evidence(SXM)
    points = (*ev.allreduce.points[:-1], replace(ev.allreduce.points[-1], busbw_bytes_per_s=900e9))
    path = _saved(tmp_path, replace(ev, allreduce=replace(ev.allreduce, points=points)))
    with pytest.raises(InputError, match=r"all-reduce bus bandwidth 900 GB/s .* 450 GB/s"):
        _estimate("h100-sxm", path)


def test_the_bands_are_data_with_their_reasons() -> None:
    from gpuwise.verify.checks import load_thresholds

    th = load_thresholds()
    assert (th.get("calibration", "mem_bw_min_ratio"), th.get("calibration", "matmul_min_ratio"),
            th.get("calibration", "max_ratio")) == (0.30, 0.10, 1.10)
    assert th.get("calibration", "sources")


def test_the_estimate_layer_refuses_a_non_finite_rate_handed_to_it_directly() -> None:
    card = resolve_card("h100-sxm").card
    with pytest.raises(InputError, match="mem_bw_bytes_per_s is nan"):
        card_rates(card, Calibration(card_id="h100-sxm", n_gpus=1, mem_bw_bytes_per_s=math.nan))


# ------------------------------------------------------------------ files without measurements

def test_a_file_with_no_gpus_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="lists no GPUs"):
        _estimate("h100-sxm", _saved(tmp_path, replace(load_evidence(SXM), gpus=())))


def test_a_benchmark_that_crashed_is_a_data_error_with_its_reason(tmp_path: Path) -> None:
    ev = replace(load_evidence(SXM), bench=NotAvailable("CUDA error: out of memory"))
    with pytest.raises(DataError, match="CUDA error: out of memory"):
        _estimate("h100-sxm", _saved(tmp_path, ev))


# ------------------------------------------------------------------ the shell

def _cli(*args: str) -> Any:
    import typer

    from gpuwise.cli import estimate_cmd

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """gpuwise (test shell)."""

    estimate_cmd.register(app)
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
def test_the_cli_refuses_another_cards_file_with_a_nonzero_exit_and_no_traceback(json_flag: tuple[str, ...]) -> None:
    result = _cli("estimate", "llama-3.1-8b", "--card", "a100-80gb-sxm", "--calibration", RAW,
                  "--lang", "en", *json_flag)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an uncaught error
    assert RAW in result.output and "h100-sxm" in result.output and "a100-80gb-sxm" in result.output


def test_the_cli_applies_a_good_file() -> None:
    result = _cli("estimate", "llama-3.1-8b", "--card", "h100-sxm", "--calibration", SXM, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["calibration"]["device_id_checked"] is True


# ------------------------------------------------------------------ device ids recorded

def test_nvml_records_the_pci_device_id_as_vendor_colon_device() -> None:
    from gpuwise.verify.inventory import read_gpu
    from tests.verify_fakes import fake_nvml

    pci = {"busId": "00000000:18:00.0", "pciDeviceId": 0x233010DE}
    with Nvml(fake_nvml(per_device={"0": {"nvmlDeviceGetPciInfo": pci}})) as nv:
        assert read_gpu(nv, 0).pci_device_id == "10de:2330"
    with Nvml(fake_nvml()) as nv:  # the fixture's PciInfo has no pciDeviceId
        assert isinstance(read_gpu(nv, 0).pci_device_id, NotAvailable)


def test_nvidia_smi_xml_records_the_pci_device_id_with_or_without_0x() -> None:
    from gpuwise.verify.smi_xml import parse_smi_xml

    text = Path("tests/fixtures/verify/h100x2_smi.xml").read_text(encoding="utf-8")
    assert [g.pci_device_id for g in parse_smi_xml(text).gpus] == ["10de:2330", "10de:2330"]
    prefixed = text.replace("<pci_device_id>233010DE<", "<pci_device_id>0x233110DE<", 1)
    assert parse_smi_xml(prefixed).gpus[0].pci_device_id == "10de:2331"


# ------------------------------------------------------------------ the catalog's ids

def test_no_two_cards_share_a_pci_device_id() -> None:
    owners: dict[str, str] = {}
    for card in load_cards():
        for pci in card.pci_device_ids:
            assert pci not in owners, f"{pci} is listed by {owners.get(pci)} and {card.id}"
            owners[pci] = card.id
    assert owners["10de:2330"] == "h100-sxm" and owners["10de:2331"] == "h100-pcie"


def test_a_malformed_device_id_in_a_cards_file_is_a_data_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "cards.toml"
    path.write_text('[[card]]\nid = "h100-sxm"\npci_device_ids = ["0x2330"]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"0x2330.*10de:2330"):
        load_cards([path])
