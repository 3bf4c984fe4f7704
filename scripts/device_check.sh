#!/usr/bin/env bash
# One prepared GPU check (issue 12): run on a GPU machine, e.g. the device runner:
#     OUT=/some/dir bash scripts/device_check.sh            # verify --full (about 6-8 min)
#     VERIFY_MODE=quick bash scripts/device_check.sh        # verify --quick (about 1-2 min)
# It installs gpuwise with the [verify] extra, records the tools' own outputs, runs
# `gpuwise doctor`, `gpuwise verify --<mode> --json --save --bundle`, the fault suite on the
# recorded fixtures, and an independent plain-torch check of HBM bandwidth and bf16 GEMM on
# every GPU (no gpuwise code), so the two can be compared. Everything goes under $OUT
# (default ./device-out); summary.txt has the figures. Exit status: verify's
# (0 pass/warn, 1 fail, 2 bad input, 3 no GPU, 4 incomplete; 124 = this script's timeout).
set -u
OUT="${OUT:-$PWD/device-out}"
MODE="${VERIFY_MODE:-full}"
VERIFY_TIMEOUT="${VERIFY_TIMEOUT:-480}"
mkdir -p "$OUT"
log() { echo "$*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"

python3 -m venv "$OUT/venv" >/dev/null 2>&1 || true
# shellcheck disable=SC1091
. "$OUT/venv/bin/activate" 2>/dev/null || true
pip install -q -e '.[verify]' >"$OUT/pip.log" 2>&1 || pip install -q -e '.[verify]' --no-deps >>"$OUT/pip.log" 2>&1
log "gpuwise $(python -c 'import gpuwise; print(gpuwise.__version__)' 2>/dev/null || echo '?'), mode $MODE"

nvidia-smi -q -x >"$OUT/nvidia-smi-q.xml" 2>&1
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
nvidia-smi --query-gpu=index,name,pci.bus_id,pci.device_id,memory.total,power.limit,clocks.max.sm \
  --format=csv >"$OUT/gpus.csv" 2>&1
(lspci -nn -d 10de: || true) >"$OUT/lspci.txt" 2>&1
gpuwise doctor --json >"$OUT/doctor.json" 2>"$OUT/doctor.err"
log "doctor: rc=$?"

start=$(date +%s)
timeout "$VERIFY_TIMEOUT" gpuwise verify "--$MODE" --json --save "$OUT/raw.json" --bundle "$OUT/bundle" \
  >"$OUT/verify.json" 2>"$OUT/verify.err"
rc=$?
log "verify --$MODE: rc=$rc, $(( $(date +%s) - start )) s wall"
python - "$OUT/verify.json" >>"$OUT/summary.txt" 2>&1 <<'PY'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as exc:  # noqa: BLE001
    print(f"verify.json unreadable: {exc}"); sys.exit(0)
print("status", v.get("status"), "counts", v.get("counts"))
for c in v.get("checks", []):
    if c["status"] != "pass" or c["name"].startswith(("performance.", "load.", "peers.")):
        print(f"  {c['name']:28} {c['status']:10} {c.get('measured')!s:>14} {c.get('unit', '')}  {c['detail'][:150]}")
PY

# torch's own numbers, independent of gpuwise's code, on every GPU: a 4 GiB device copy (bytes
# counted read + write, as gpuwise does) and an 8192^3 bf16 matmul; medians of 20 timed runs,
# each with its own CUDA events, after 3 warm-ups.
timeout 240 python - >"$OUT/torch_reference.json" 2>"$OUT/torch_reference.err" <<'PY'
import json, torch
def med(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
    ts.sort(); return ts[len(ts) // 2], (ts[int(0.9 * (n - 1))] - ts[int(0.1 * (n - 1))]) / ts[len(ts) // 2]
rows = []
for i in range(torch.cuda.device_count()):
    d = torch.device(f"cuda:{i}")
    x = torch.empty(4 << 30, dtype=torch.uint8, device=d); y = torch.empty_like(x)
    t, s = med(lambda: y.copy_(x)); del x, y
    m = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
    tm, sm = med(lambda: m @ m); del m
    p = torch.cuda.get_device_properties(d)
    rows.append({"cuda_index": i, "device": p.name, "sm_count": p.multi_processor_count,
                 "copy_read_write_GBps": round(2 * (4 << 30) / t / 1e9, 1), "copy_spread": round(s, 4),
                 "bf16_matmul_TFLOPS": round(2 * 8192**3 / tm / 1e12, 1), "matmul_spread": round(sm, 4)})
    torch.cuda.empty_cache()
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": rows}, indent=1))
PY
log "torch reference: rc=$? $(tr -d '\n ' <"$OUT/torch_reference.json" | head -c 600)"

timeout 120 python -m benchmarks.verify_faults >"$OUT/verify_faults.txt" 2>&1
log "fault suite: $(tail -1 "$OUT/verify_faults.txt")"
exit $rc
