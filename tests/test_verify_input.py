"""`verify --from` and `estimate --calibration` refuse bad files with a clear message in both
languages and exit 2: wrong types, sizes, NaN, binary data, nesting. Never a traceback."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuwise.errors import DataError, GpuwiseError
from gpuwise.verify.raw import load_evidence
from tests.verify_fakes import FIXTURES

RAW = FIXTURES / "h100x8_raw.json"


def base() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RAW.read_text())
    return data


def edit(path: str, value: Any) -> dict[str, Any]:
    data = base()
    node: Any = data
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = copy.deepcopy(value)
    return data


BAD: dict[str, tuple[Any, str]] = {
    "gpus-is-a-number": (edit("gpus", 5), "gpus must be a list"),
    "memory-is-text": (edit("gpus.3.memory_total_bytes", "x"), "gpus[3].memory_total_bytes"),
    "memory-negative": (edit("gpus.0.memory_total_bytes", -1), "whole number >= 0"),
    "name-missing": (edit("gpus.1", {"index": 1}), "lacks 'name'"),
    "ecc-is-text": (edit("gpus.2.ecc_current", "yes"), "true or false"),
    "power-nan": (edit("gpus.2.power_limit_w", float("nan")), "finite number"),
    "na-without-reason": (edit("gpus.0.vbios", {"na": 5}), "reason string"),
    "topology-not-square": (edit("topology", [["X", "NV18"]]), "square matrix"),
    "topology-wrong-size": (edit("topology", [["X", "NV18"], ["NV18", "X"]]), "2 x 2 for 8 GPUs"),
    "bench-is-text": (edit("bench", "fast"), "bench must be a list"),
    "bench-stray-gpu": (edit("bench.0.index", 42), "GPU index 42"),
    "matmul-is-object": (edit("bench.0.matmul", {"bf16": 1}), "must be a list"),
    "load-samples-text": (edit("load.0.samples", "many"), "load[0].samples"),
    "allreduce-correct-text": (edit("allreduce.correct", "yes"), "allreduce.correct"),
    "software-is-list": (edit("software", []), "software must be an object"),
    "duplicate-index": (edit("gpus.1.index", 0), "same index"),
    "too-many-gpus": (edit("gpus", [dict(base()["gpus"][0], index=i) for i in range(65)]), "at most 64"),
    "xid-is-text": (edit("gpus.0.xid_events", [{"xid": "79", "source": "nvml"}]), "xid_events[0].xid"),
    "host-cores-float": (edit("host_info", {"cpu_cores": 1.5}), "host_info.cpu_cores"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_evidence_file_is_refused_with_the_field_named(tmp_path: Path, name: str) -> None:
    data, words = BAD[name]
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        load_evidence(path)
    assert words in err.value.message.en, err.value.message.en
    assert str(path) in err.value.message.zh and err.value.hint is not None


@pytest.mark.parametrize("content, words", [
    (b"\x89PNG\r\n\x1a\n\0\0\0", "binary"), (b"\xff\xfe{", "Cannot read"), (b"[1, 2]", "not a JSON object"),
    (b"{" * 100_000, "Cannot read"), (b'{"kind": "other"}', "not a gpuwise verify raw file"), (b"", "Cannot read"),
], ids=["png", "utf16", "list", "deep", "wrong-kind", "empty"])
def test_files_that_are_not_evidence_at_all_are_refused(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "raw.json"
    path.write_bytes(content)
    with pytest.raises(GpuwiseError) as err:
        load_evidence(path)
    assert words in err.value.message.en


def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "raw.json"
    with path.open("wb") as fh:
        fh.truncate(40 << 20)
    with pytest.raises(DataError, match="larger than"):
        load_evidence(path)


def test_a_fifo_or_a_device_is_refused_without_hanging(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "raw.json"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(DataError, match="not a file|not a regular file"):
            load_evidence(path)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is a directory"):
        load_evidence(tmp_path)


def test_an_evidence_file_saved_before_the_new_fields_still_loads() -> None:
    ev = load_evidence(FIXTURES.parent / "calibration" / "h100_sxm_raw.json")
    assert len(ev.gpus) == 8 and ev.gpus[0].xid_events == ()


def gpuwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True,
                          timeout=300, check=False, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


@pytest.mark.parametrize("name", ["gpus-is-a-number", "memory-is-text", "power-nan"])
def test_the_cli_answers_bad_files_with_exit_2_and_no_traceback(tmp_path: Path, name: str) -> None:
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(BAD[name][0]))
    for args in (("verify", "--from", str(path), "--lang", "zh"),
                 ("estimate", "llama-3-8b", "--card", "h100-sxm", "--calibration", str(path))):
        out = gpuwise(*args)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr + out.stdout


def test_a_nan_measurement_is_refused_by_verify_from(tmp_path: Path) -> None:
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(edit("bench.3.mem_bw_bytes_per_s", float("nan"))))
    out = gpuwise("verify", "--from", str(path), "--json")
    assert out.returncode == 2 and "GPU 3 memory bandwidth is nan" in json.loads(out.stdout)["message"]


def test_a_calibration_from_a_run_where_a_gpu_crashed_is_refused(tmp_path: Path) -> None:
    from gpuwise.errors import InputError
    from gpuwise.verify.calibration import load_calibration

    data = edit("bench.2.errors", [{"kind": "matmul", "message": "RuntimeError: CUDA error: ECC", "precision": "bf16"}])
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="crashed on GPU 2"):
        load_calibration(path)


@pytest.mark.parametrize("value", ["3", "nan", "-5", "100000"])
def test_a_duration_out_of_range_is_refused_before_any_work(value: str) -> None:
    out = gpuwise("verify", "--duration", value)
    assert out.returncode == 2 and "--duration must be 5 to 86400 seconds" in out.stderr
