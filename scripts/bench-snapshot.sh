#!/usr/bin/env bash
# Snapshot benchmark (issue 10 targets), one run: capture a PyTorch app holding GIB GiB of dense
# random device memory (default 48), replay it twice (the first from the page cache right after
# the capture, then warm), and print each figure as a ratio against the node's limits measured
# in the same run: dd with fdatasync (disk write) and pinned host<->device copies (torch).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
gib="${1:-48}"
work="${TMPDIR:-/tmp}/kerncap-bench-snapshot"
unset BUN_BE_BUN
say() { echo "[bench-snapshot] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"
now() { date +%s.%N; }
read -r d2h h2d < <(python3 -c '
import torch,time
x=torch.empty(1<<28,device="cuda"); h=torch.empty(1<<28,pin_memory=True); h.copy_(x); torch.cuda.synchronize()
t=time.perf_counter(); [h.copy_(x) for _ in range(4)]; torch.cuda.synchronize(); a=4*x.numel()*4/1e9/(time.perf_counter()-t)
t=time.perf_counter(); [x.copy_(h) for _ in range(4)]; torch.cuda.synchronize(); b=4*x.numel()*4/1e9/(time.perf_counter()-t)
print(f"{a:.1f} {b:.1f}")')
t0=$(now); dd if=/dev/urandom of="$work/rand.bin" bs=64M count=16 status=none; t0=$(now)
dd if="$work/rand.bin" of="$work/dd.bin" bs=64M conv=fdatasync status=none; t1=$(now)
disk=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", 1.073741824/(b-a)}'); rm -f "$work/dd.bin" "$work/rand.bin"
t0=$(now); python3 test/apps/torch_bigmem.py "$gib" > /dev/null; t1=$(now)
app=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
t0=$(now)
"$bin" run --kernel MulFunctor --dispatch 1 --out "$work/cap" --json -- python3 test/apps/torch_bigmem.py "$gib" > "$work/run.json"
t1=$(now)
"$bin" replay "$work/cap" --iters 20 --json > "$work/replay1.json"
t2=$(now)
"$bin" replay "$work/cap" --iters 20 --json > "$work/replay2.json"
t3=$(now)
python3 - "$work" "$d2h" "$h2d" "$disk" "$app" "$t0" "$t1" "$t2" "$t3" <<'PY'
import json, sys, os
w = sys.argv[1]; d2h, h2d, disk, app, t0, t1, t2, t3 = map(float, sys.argv[2:])
run = json.load(open(f"{w}/run.json")); r1 = json.load(open(f"{w}/replay1.json")); r2 = json.load(open(f"{w}/replay2.json"))
t = run["timing"]; live = run["beforeBytes"]; stored = t["before_bytes"]
du = int(os.popen(f"du -sb {w}/cap").read().split()[0])
over = (t1 - t0) - app
ideal = stored / 1e9 / disk
print(f"node: disk write (dd, fdatasync) {disk:.2f} GB/s; pinned D2H {d2h:.1f} GB/s, H2D {h2d:.1f} GB/s")
print(f"capture: {live/2**30:.2f} GiB live, {stored/2**30:.2f} GiB stored, folder {du/2**30:.2f} GiB; kerncap run {t1-t0:.1f} s, app alone {app:.1f} s: overhead {over:.1f} s = {over/ideal:.2f}x bytes/dd ({ideal:.1f} s) [target <= 1.2x]")
print(f"  before state {t['before_us']/1e6:.1f} s ({stored/1e9/(t['before_us']/1e6):.2f} GB/s; GPU scan {t['scan_before_us']/1e3:.0f} ms), after {t['after_us']/1e3:.0f} ms, fsync {t['fsync_us']/1e6:.1f} s, finalize {t['finalize_s']:.2f} s")
for name, r, dt in (("first replay (page cache)", r1, t2 - t1), ("warm replay", r2, t3 - t2)):
    g = r["restore"]["gbPerS"]
    print(f"{name}: restore {r['restore']['storedBytes']/2**30:.2f} GiB at {g:.1f} GB/s = {g/h2d:.2f}x pinned H2D [target >= 20 GB/s]; GPU check {r['check']['verifySeconds']:.2f} s, compare {r['check']['compareSeconds']:.2f} s; whole command {dt:.1f} s [target <= 8 s warm]; verdict {r['verdict']}; kernel {r['timing']['medianUs']:.1f} us (app {r['timing']['appUs']:.1f} us)")
PY
rm -rf "$work"
