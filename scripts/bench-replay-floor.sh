#!/usr/bin/env bash
# A small capture's `kerncap replay` against the bare cost of a CUDA context on the node (issue 27:
# within 0.1 s), in one run: test/apps/ctx_floor.c (cuInit, the primary context retained, one
# allocation; libcuda opened with dlopen, as kerncap opens it) and `kerncap replay DIR --iters 0 --runs 1` of test/apps/structs.cu's
# scale_jobs capture, alternated, ROUNDS times each (default 7); medians of the wall times.
# Usage: scripts/bench-replay-floor.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
rounds="${1:-7}"
work="${TMPDIR:-/tmp}/kerncap-bench-floor"
unset BUN_BE_BUN
say() { echo "[bench-floor] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"

gcc -O2 -o "$work/ctx_floor" test/apps/ctx_floor.c -ldl
nvcc -O2 -arch=sm_90 -o "$work/structs" test/apps/structs.cu
"$bin" run --kernel scale_jobs --dispatch 1 --out "$work/cap" -- "$work/structs" 3 >/dev/null 2>&1
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
ctx=(); rep=(); full=()
for _ in $(seq 1 "$rounds"); do
  ctx+=("$(t "$work/ctx_floor")")
  rep+=("$(t "$bin" replay "$work/cap" --iters 0 --runs 1)")
  full+=("$(t "$bin" replay "$work/cap")")
done
python3 - "${ctx[*]}" "${rep[*]}" "${full[*]}" <<'PY'
import statistics, sys
ctx, rep, full = ([float(x) for x in a.split()] for a in sys.argv[1:4])
mc, mr, mf = statistics.median(ctx), statistics.median(rep), statistics.median(full)
print(f"[bench-floor] CUDA context alone {mc:.3f} s; kerncap replay --iters 0 --runs 1 {mr:.3f} s ({mr - mc:+.3f} s, target ≤ +0.1 s: {'MET' if mr - mc <= 0.1 else 'MISSED'}); kerncap replay (defaults: 3 checked runs, 10 timed) {mf:.3f} s ({mf - mc:+.3f} s); medians of {len(ctx)}")
PY
