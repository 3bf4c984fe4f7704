"""The torch benchmark functions, run for real on the CPU with tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gpuwise.verify import bench
from gpuwise.verify.nccl import allreduce_sweep, busbw, sweep_sizes

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_device_copy_counts_read_plus_write() -> None:
    r = bench.device_copy_bandwidth("cpu", 1 << 20, iters=3, warmup=1)
    assert r.convention == "read+write" and r.size_bytes == 1 << 20
    assert r.bytes_per_s == pytest.approx(2 * r.size_bytes / r.seconds)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_matmul_reports_flops_and_a_small_error_against_fp32(precision: str) -> None:
    r = bench.matmul_tflops("cpu", precision, 64, iters=2, warmup=1)
    assert r.flops_per_s > 0 and r.n == 64
    assert 0 < r.rel_error < r.tolerance


def test_fp8_matmul_is_skipped_on_the_cpu_with_a_reason() -> None:
    assert "CUDA" in (bench.fp8_supported("cpu") or "")
    with pytest.raises(RuntimeError):
        bench.matmul_tflops("cpu", "fp8", 64)


def test_host_device_copies_run_in_both_directions() -> None:
    for direction in ("h2d", "d2h"):
        r = bench.host_device_bandwidth("cpu", 1 << 20, direction, iters=2, warmup=1)
        assert r.bytes_per_s > 0 and r.convention == "once"
    with pytest.raises(ValueError):
        bench.host_device_bandwidth("cpu", 1024, "sideways")


def test_software_info_sees_a_cpu_only_build_here() -> None:
    info = bench.software_info()
    assert info["torch_version"].startswith("2.13.0")
    if not torch.cuda.is_available():
        assert info["torch_cuda"] is None and info["cuda_available"] is False


def _child(spec: dict[str, object]) -> list[dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "gpuwise.verify.bench", json.dumps(spec)],
                         capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_the_bench_child_process_prints_one_json_line_per_result() -> None:
    spec = {"phase": "micro", "targets": [[3, 0]], "device_type": "cpu", "copy_bytes": 1 << 16,
            "matmul_n": 32, "pcie_bytes": 1 << 16, "iters": 4, "precisions": ["bf16", "fp8"],
            "memtest_fraction": 0.5}
    records = _child(spec)
    assert [r["kind"] for r in records] == ["memtest", "mem_bw", "matmul", "matmul", "h2d", "d2h"]
    assert all(r["index"] == 3 for r in records)  # NVML's index, whatever CUDA calls it
    assert records[0]["result"]["mismatches"] == 0 and records[0]["result"]["bytes_tested"] > 0
    assert "result" in records[2] and "skipped" in records[3]
    assert records[2]["result"]["iters"] == 4 and records[2]["result"]["spread"] >= 0


def test_the_window_child_reports_its_rate_every_interval_then_its_length() -> None:
    spec = {"phase": "window", "targets": [[1, 0]], "device_type": "cpu", "load_s": 2.2,
            "matmul_n": 64, "copy_bytes": 1 << 16}
    records = _child(spec)
    rates = [r for r in records if r["kind"] == "rate"]
    assert len(rates) >= 2 and all(float(str(r["flops_per_s"])) > 0 for r in rates)
    assert records[-1]["kind"] == "load" and float(str(records[-1]["result"]["seconds"])) >= 2.2  # type: ignore[index]


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert busbw(100.0, 8) == pytest.approx(175.0)
    assert busbw(100.0, 2) == pytest.approx(100.0)
    assert busbw(100.0, 1) == 0.0
    assert sweep_sizes(64 << 20, 1 << 20, 4) == [1 << 20, 4 << 20, 16 << 20, 64 << 20]


@pytest.mark.slow
def test_the_allreduce_sweep_runs_over_gloo_on_two_cpu_ranks() -> None:
    run = allreduce_sweep(2, [1 << 12, 1 << 16], backend="gloo", device_type="cpu",
                          iters=2, warmup=1, timeout_s=120)
    assert run.correct and run.n_gpus == 2 and [p.size_bytes for p in run.points] == [4096, 65536]
    for p in run.points:
        assert p.busbw_bytes_per_s == pytest.approx(p.algbw_bytes_per_s * 2 * 1 / 2)


@pytest.mark.gpu
@cuda
def test_a_large_device_copy_on_the_gpu_reaches_a_plausible_bandwidth() -> None:
    r = bench.device_copy_bandwidth("cuda:0", 1 << 30)
    assert r.bytes_per_s > 100e9


@pytest.mark.gpu
@cuda
def test_bf16_matmul_on_the_gpu_is_correct() -> None:
    r = bench.matmul_tflops("cuda:0", "bf16", 4096)
    assert r.rel_error < r.tolerance and r.flops_per_s > 1e12
