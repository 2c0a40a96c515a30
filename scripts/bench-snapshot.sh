#!/usr/bin/env bash
# Snapshot benchmark: capture a PyTorch app holding GIB GiB of device memory (default 8), then
# replay it. Prints capture and restore throughput against the node's limits measured in the same
# run: pinned device->host copy (torch, 1 GiB) and a plain sequential file write (dd, 2 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
gib="${1:-8}"
work="${TMPDIR:-/tmp}/kerncap-bench-snapshot"
unset BUN_BE_BUN
say() { echo "[bench-snapshot] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"
d2h=$(python3 -c '
import torch,time
x=torch.empty(1<<28,device="cuda"); h=torch.empty(1<<28,pin_memory=True); h.copy_(x); torch.cuda.synchronize()
t=time.perf_counter(); [h.copy_(x) for _ in range(4)]; torch.cuda.synchronize(); print(f"{4*x.numel()*4/1e9/(time.perf_counter()-t):.1f}")')
t0=$(date +%s.%N); dd if=/dev/zero of="$work/dd.bin" bs=64M count=32 conv=fdatasync status=none; t1=$(date +%s.%N)
disk=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", 2.147483648/(b-a)}'); rm -f "$work/dd.bin"
t0=$(date +%s.%N)
"$bin" run --kernel MulFunctor --dispatch 1 --out "$work/cap" --json -- python3 test/apps/torch_bigmem.py "$gib" > "$work/run.json"
t1=$(date +%s.%N)
"$bin" replay "$work/cap" --iters 5 --json > "$work/replay.json"
t2=$(date +%s.%N)
"$bin" replay "$work/cap" --iters 5 --no-verify --json > "$work/replay-noverify.json"
t3=$(date +%s.%N)
python3 - "$work" "$d2h" "$disk" "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, sys
w, d2h, disk, t0, t1, t2, t3 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), *map(float, sys.argv[4:])
run = json.load(open(f"{w}/run.json")); rep = json.load(open(f"{w}/replay.json")); rnv = json.load(open(f"{w}/replay-noverify.json"))
b = run["beforeBytes"]; t = run["timing"]
before_s = t["before_us"] / 1e6
print(f"snapshot: {b/2**30:.2f} GiB in {len(open(f'{w}/cap/kerncap.json').read())} B manifest; kerncap run {t1-t0:.1f} s (app alone to capture {t['app_to_capture_s']:.1f} s)")
print(f"capture before-state: {b/1e9/before_s:.2f} GB/s = {b/1e9/before_s/disk:.2f}x disk write ({disk:.2f} GB/s dd) = {b/1e9/before_s/d2h:.3f}x pinned D2H ({d2h:.1f} GB/s)")
print(f"finalize (sha256 of every region): {t['finalize_s']:.1f} s")
for name, r, dt in (("replay (verify)", rep, t2-t1), ("replay --no-verify", rnv, t3-t2)):
    g = r["restore"]["gbPerS"]
    print(f"{name}: restore {r['restore']['bytes']/2**30:.2f} GiB at {g:.2f} GB/s = {g/d2h:.3f}x pinned copy limit; whole command {dt:.1f} s; verdict {r['verdict']}; kernel {r['timing']['medianUs']:.1f} us (app {r['timing']['appUs']:.1f} us)")
PY
