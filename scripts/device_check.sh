#!/usr/bin/env bash
# Run on a GPU machine (e.g. the device runner): install gpuwise with the [verify] extra,
# run the full acceptance test, and torch's own large copy and matmul for comparison.
# Everything goes under $OUT (default ./device-out). Exit status: verify's.
set -u
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
python3 -m venv "$OUT/venv" >/dev/null 2>&1 || true
# shellcheck disable=SC1091
. "$OUT/venv/bin/activate" 2>/dev/null || true
pip install -q -e '.[verify]' >"$OUT/pip.log" 2>&1 || pip install -q -e '.[verify]' --no-deps >>"$OUT/pip.log" 2>&1
nvidia-smi -q -x >"$OUT/nvidia-smi-q.xml" 2>&1
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
gpuwise doctor --json >"$OUT/doctor.json" 2>"$OUT/doctor.err"
start=$(date +%s)
timeout 540 gpuwise verify --full --json --save "$OUT/raw.json" --report "$OUT/report.md" \
  >"$OUT/verify.json" 2>"$OUT/verify.err"
rc=$?
echo "verify --full: rc=$rc, $(( $(date +%s) - start )) s" | tee "$OUT/timing.txt"
# torch's own numbers, independent of gpuwise's code: 4 GiB copy (read+write counted) and
# an 8192^3 bf16 matmul, median of 20 after warm-up.
timeout 120 python - >"$OUT/torch_reference.json" 2>"$OUT/torch_reference.err" <<'PY'
import json, torch
d = torch.device("cuda:0")
def med(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)[len(ts) // 2]
x = torch.empty(4 << 30, dtype=torch.uint8, device=d); y = torch.empty_like(x)
t = med(lambda: y.copy_(x))
m = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
tm = med(lambda: m @ m)
print(json.dumps({"device": torch.cuda.get_device_name(d), "copy_read_write_GBps": 2 * x.numel() / t / 1e9,
                  "bf16_matmul_TFLOPS": 2 * 8192**3 / tm / 1e12, "torch": torch.__version__,
                  "cuda": torch.version.cuda}))
PY
exit $rc
