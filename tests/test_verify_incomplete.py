"""Nothing unseen passes: every way a check can fail to see what it needs has a verdict and an
exit code (0 pass/warn, 1 fail, 2 bad input, 3 no GPU, 4 incomplete)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuwise.errors import DataError
from gpuwise.verify.checks import EXIT_CODES, worst
from gpuwise.verify.collect import Plan, collect
from gpuwise.verify.contract import load_contract, parse_contract
from gpuwise.verify.judge import Claim, judge
from gpuwise.verify.nvml import NotAvailable
from gpuwise.verify.raw import (
    AllReduceRun,
    BenchError,
    ChildOutcome,
    Evidence,
    SoftwareInfo,
    load_evidence,
    save_evidence,
)
from tests.verify_fakes import FIXTURES, fake_nvml

H100 = Claim(card="H100-SXM", count=8)


def healthy() -> Evidence:
    return load_evidence(FIXTURES / "h100x8_raw.json")


def status_of(ev: Evidence, name: str, claim: Claim = H100) -> str:
    return next(c.status for c in judge(ev, claim).checks if c.name == name)


def test_fail_outranks_incomplete_which_outranks_warn_and_skipped_counts_as_pass() -> None:
    assert worst(["pass", "skipped"]) == "pass"
    assert worst(["warn", "incomplete"]) == "incomplete"
    assert worst(["incomplete", "fail", "warn"]) == "fail"
    assert EXIT_CODES == {"pass": 0, "warn": 0, "fail": 1, "incomplete": 4}


def test_a_gpu_that_crashed_a_benchmark_fails_the_run() -> None:
    ev = healthy()
    crash = BenchError("mem_bw", "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    bench = tuple(replace(b, errors=(crash,), mem_bw_bytes_per_s=NotAvailable("crashed"))
                  if b.index == 3 else b for b in ev.bench)
    verdict = judge(replace(ev, bench=bench), H100)
    mem = next(c for c in verdict.checks if c.name == "performance.mem_bw")
    assert mem.status == "fail" and "GPU3" in mem.detail.en and "uncorrectable ECC" in mem.detail.en
    assert verdict.status == "fail" and verdict.exit_code == 1


def test_a_crash_recorded_by_an_older_gpuwise_in_the_slot_still_fails() -> None:
    ev = healthy()
    bench = tuple(replace(b, mem_bw_bytes_per_s=NotAvailable("RuntimeError: CUDA error: an illegal memory access"))
                  if b.index == 5 else b for b in ev.bench)
    assert status_of(replace(ev, bench=bench), "performance.mem_bw") == "fail"


def test_gpus_whose_benchmarks_never_finished_make_the_run_incomplete() -> None:
    ev = healthy()
    survivors = tuple(b for b in ev.bench if b.index < 3)
    ev = replace(ev, bench=survivors, bench_process=ChildOutcome(-9, True, 480.0, ""))
    verdict = judge(ev, H100)
    by = {c.name: c for c in verdict.checks}
    assert by["performance.mem_bw"].status == "incomplete" and "GPU3" in by["performance.mem_bw"].detail.en
    assert by["performance.completed"].status == "incomplete"
    assert "deadline" in by["performance.completed"].detail.en
    assert verdict.status == "incomplete" and verdict.exit_code == 4


def test_a_benchmark_process_that_failed_outright_is_incomplete_not_skipped() -> None:
    ev = replace(healthy(), bench=NotAvailable("benchmark process failed (-11)"))
    assert status_of(ev, "performance.mem_bw") == "incomplete"
    assert judge(ev, H100).exit_code == 4


@pytest.mark.parametrize("reason", ["all-reduce sweep did not finish in time",
                                    "an all-reduce rank exited with code 1"], ids=["hang", "lost-rank"])
def test_an_allreduce_that_hung_or_lost_a_rank_is_incomplete(reason: str) -> None:
    ev = replace(healthy(), allreduce=NotAvailable(reason))
    verdict = judge(ev, H100)
    ar = next(c for c in verdict.checks if c.name == "performance.allreduce")
    assert ar.status == "incomplete" and reason in ar.detail.en and verdict.exit_code == 4


def test_an_allreduce_over_fewer_ranks_than_gpus_is_incomplete() -> None:
    run = healthy().allreduce
    ev = replace(healthy(), allreduce=AllReduceRun(6, run.backend, run.points, True))
    assert status_of(ev, "performance.allreduce") == "incomplete"


def test_an_inventory_run_skips_what_it_never_asked_for() -> None:
    ev = replace(healthy(), mode="inventory", bench=NotAvailable("not run"), load=NotAvailable("not run"),
                 allreduce=NotAvailable("not run"))
    verdict = judge(ev, H100)
    assert status_of(ev, "performance.mem_bw") == "skipped" and verdict.exit_code == 0


def test_missing_load_evidence_in_a_quick_run_is_incomplete() -> None:
    ev = replace(healthy(), load=NotAvailable("sampler never ran"))
    verdict = judge(ev, H100)
    assert {c.name for c in verdict.checks if c.status == "incomplete"} >= {"health.throttle", "links.pcie",
                                                                          "load.window"}


def test_an_empty_topology_never_satisfies_an_nvlink_contract() -> None:
    contract = Claim(contract=parse_contract({"card": "H100-SXM", "count": 8, "nvlink": True}))
    for topo in ((), NotAvailable("nvidia-smi topo -m failed")):
        ev = replace(healthy(), topology=topo)
        verdict = judge(ev, contract)
        assert status_of(ev, "links.topology", contract) == "incomplete"
        assert verdict.status in ("incomplete", "fail") and verdict.exit_code != 0


def test_evidence_with_zero_gpus_never_exits_zero() -> None:
    ev = replace(healthy(), gpus=(), bench=(), load=(), topology=(), p2p=())
    assert judge(ev).status == "incomplete" and judge(ev).exit_code == 4
    assert judge(ev, Claim(count=8)).status == "fail"


@pytest.mark.parametrize("key, value, words", [
    ("driver_min", "abc.def", "not a version"), ("cuda_min", "twelve", "not a version"),
    ("min_mem_bw_gbps", float("nan"), "finite positive"), ("min_bf16_tflops", float("inf"), "finite positive"),
    ("pcie_gen", 9, "outside"), ("count", 0, "finite positive"), ("nvlink", "yes", "must be bool"),
])
def test_a_contract_value_that_cannot_be_read_is_an_error_not_ignored(key: str, value: Any, words: str) -> None:
    with pytest.raises(DataError) as err:
        parse_contract({key: value})
    assert words in err.value.message.en and key in err.value.message.zh


def test_a_toml_nan_in_a_contract_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("min_mem_bw_gbps = nan\n")
    with pytest.raises(DataError, match="nan"):
        load_contract(path)


def test_the_new_contract_keys_are_terms(tmp_path: Path) -> None:
    c = parse_contract({"cpu_cores": 512, "host_ram_gb": 4000, "fabric": True, "max_temperature_c": 50,
                        "min_sustained_bf16_tflops": 800, "disk_free_gb": 10, "numa_affinity": True})
    claim = Claim(card="H100-SXM", count=8, contract=c)
    by = {r.name: r.status for r in judge(healthy(), claim).checks}
    assert by["host.cpu"] == "fail" and by["host.ram"] == "fail" and by["host.disk_free"] == "pass"
    assert by["health.temperature"] == "fail" and by["load.sustained"] == "fail"
    assert by["links.fabric"] == "pass" and by["host.numa"] == "pass"


def gpuwise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True, text=True,
                          timeout=300, check=False, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})


def test_the_cli_exits_4_on_incomplete_evidence_and_says_so_in_json(tmp_path: Path) -> None:
    path = tmp_path / "raw.json"
    save_evidence(replace(healthy(), allreduce=NotAvailable("all-reduce sweep did not finish in time")), path)
    out = gpuwise("verify", "--from", str(path), "--json")
    data = json.loads(out.stdout)
    assert out.returncode == 4 and data["status"] == "incomplete" and data["exit_code"] == 4
    assert data["counts"]["incomplete"] >= 1


# ------------------------------------------------------------------ the real children, on the CPU

TINY = Plan("quick", copy_bytes=1 << 16, matmul_n=32, pcie_bytes=1 << 16, iters=3, load_s=2.0,
            allreduce_max_bytes=1 << 16, allreduce_iters=2, bench_timeout_s=60.0, allreduce_timeout_s=120.0,
            memtest_fraction=0.5, disk_test_bytes=0)
CPU_SW = SoftwareInfo("2.13.0", None, True, 2, NotAvailable("CPU"), None)


def _cpu_collect(plan: Plan) -> Evidence:
    base = healthy()
    return collect("quick", nvml_lib=fake_nvml("rtx4090x2_nvml.json"), run_software=lambda: CPU_SW,
                   device_type="cpu", plan=plan, read_host=lambda p: (base.host_info, [], {}))


def test_a_cpu_run_loads_every_gpu_together_and_records_the_window() -> None:
    ev = _cpu_collect(TINY)
    assert ev.load_seconds == 2.0 and len(ev.load) == 2 and not ev.bench_process.timed_out
    for s in ev.load:
        assert s.seconds >= 2.0 and s.sustained_flops_per_s > 0 and s.burst_flops_per_s > 0
    assert all(b.memtest.mismatches == 0 and b.mem_bw_bytes_per_s > 0 for b in ev.bench)
    assert ev.allreduce.correct and ev.allreduce.n_gpus == 2


def test_a_benchmark_child_killed_at_its_deadline_leaves_an_incomplete_verdict() -> None:
    ev = _cpu_collect(replace(TINY, bench_timeout_s=0.0, startup_s=0.3))
    assert ev.bench_process.timed_out
    verdict = judge(ev, Claim(card="RTX 4090", count=2))
    by = {c.name: c.status for c in verdict.checks}
    assert by["performance.completed"] == "incomplete" and by["performance.mem_bw"] == "incomplete"
    # a CPU torch build also fails software.torch here, and fail outranks incomplete
    assert verdict.status in ("incomplete", "fail") and verdict.exit_code in (1, 4)


def test_a_busy_gpu_is_not_benchmarked_without_force() -> None:
    base = healthy()
    busy = {"nvmlDeviceGetMemoryInfo": {"total": 85520809984, "free": 50e9, "used": 30 * 2**30}}
    ev = collect("quick", nvml_lib=fake_nvml(per_device={"2": busy}), run_software=lambda: base.software,
                 read_host=lambda p: (base.host_info, [], {}))
    assert "not benchmarked without --force" in ev.bench.reason and "GPU2: 30.0 GiB in use" in ev.bench.reason
    verdict = judge(ev, H100)
    by = {c.name: c.status for c in verdict.checks}
    assert by["inventory.tenancy"] == "fail" and by["performance.mem_bw"] == "incomplete"
    assert verdict.exit_code == 1


def test_a_crash_in_the_sustained_window_is_a_crash_of_that_gpu() -> None:
    from gpuwise.verify.phases import fold_bench

    gpus = healthy().gpus[:2]
    records = [{"kind": "load", "index": 1, "error": "RuntimeError: CUDA error: unspecified launch failure"}]
    bench = fold_bench(gpus, [(0, 0), (1, 1)], records)
    assert bench[1].errors[0].kind == "load" and not bench[0].errors
