"""Time `gpuwise verify`: judging saved evidence (`--from`, no GPU needed) and, where a GPU
exists, `--quick` and `--full` on the machine itself.

    python benchmarks/verify_timing.py            # prints a small table
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "tests" / "fixtures" / "verify" / "h100x8_raw.json"


def _time(args: list[str], repeat: int) -> tuple[float, int]:
    times, rc = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, "-m", "gpuwise", *args], capture_output=True,
                            check=False).returncode
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rc


def _in_process(repeat: int = 50) -> float:
    from gpuwise.verify.judge import judge
    from gpuwise.verify.raw import load_evidence

    t0 = time.perf_counter()
    for _ in range(repeat):
        judge(load_evidence(RAW))
    return (time.perf_counter() - t0) / repeat


def main() -> None:
    rows = [("judge(load_evidence(fixture)) in process", _in_process(), 0)]
    t, rc = _time(["verify", "--from", str(RAW), "--json"], 5)
    rows.append(("gpuwise verify --from fixture --json (CLI, median of 5)", t, rc))
    t, rc = _time(["verify", "--from", str(RAW), "--report", "/tmp/gpuwise-timing.html"], 3)
    rows.append(("gpuwise verify --from fixture --report x.html", t, rc))
    if shutil.which("nvidia-smi"):
        for mode in ("--quick", "--full"):
            t, rc = _time(["verify", mode, "--json"], 1)
            rows.append((f"gpuwise verify {mode} (this machine)", t, rc))
    else:
        rows.append(("gpuwise verify --quick / --full", float("nan"), -1))
    from gpuwise.verify.collect import PLANS, planned_seconds

    for name, plan in PLANS.items():
        for n in (1, 8):
            rows.append((f"planned --{name} on {n} GPU(s) (sustained window {plan.load_s:.0f} s)",
                         planned_seconds(plan, n), 0))
    print(f"{'what':<58} {'seconds':>9} {'rc':>4}")
    for what, secs, rc in rows:
        print(f"{what:<58} {secs:>9.3f} {rc:>4}" + ("  (no GPU here: skipped)" if rc == -1 else ""))


if __name__ == "__main__":
    main()
