#!/usr/bin/env bash
# kerncap check throughput (issue 28), one run: N small captures (copies of test/apps/structs.cu's
# scale_jobs and axpy_inplace captures, at the same VAs) checked by one `kerncap check` (one
# worker, one CUDA context) against one `kerncap replay` process per capture, in the same run.
# Target: check's time per capture beyond the capture's own replay work (its replay call:
# reserve, restore, verify, launches, compare) at most 0.2 s. Then `--gpus 0,0,0,0` (four workers
# on GPU 0): the same verdicts as one worker. Figures in $KERNCAP_GPU_OUT/bench-check.json (or
# the work folder), a summary on stdout.
# Usage: scripts/bench-check.sh [N]   (default 40)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
n="${1:-40}"
work="${TMPDIR:-/tmp}/kerncap-bench-check"
out="${KERNCAP_GPU_OUT:-$work}"
unset BUN_BE_BUN
say() { echo "[bench-check] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work/corpus" "$out"
now() { date +%s.%N; }
nvcc -O2 -lineinfo -arch=sm_90 -o "$work/structs" test/apps/structs.cu
"$bin" run --kernel scale_jobs --dispatch 1 --out "$work/scale_jobs" -- "$work/structs" 3 >/dev/null
"$bin" run --kernel axpy_inplace --dispatch 2 --out "$work/axpy" -- "$work/structs" 3 >/dev/null
for i in $(seq 1 "$n"); do
  src=$([ $((i % 2)) -eq 0 ] && echo scale_jobs || echo axpy)
  cp -r "$work/$src" "$work/corpus/$src-$i"
done
iters=20
t0=$(now)
"$bin" check "$work/corpus" --iters "$iters" --json --results "$work/res1" >"$work/check1.json" 2>"$work/check1.log" || { say "kerncap check failed: $(tail -5 "$work/check1.log")"; exit 1; }
t1=$(now)
for d in "$work"/corpus/*; do
  "$bin" replay "$d" --iters "$iters" --json >"$d.replay.json" 2>>"$work/replays.log" || { say "kerncap replay $d failed: $(tail -3 "$work/replays.log")"; exit 1; }
done
t2=$(now)
"$bin" check "$work/corpus" --iters "$iters" --json --gpus 0,0,0,0 --results "$work/res4" >"$work/check4.json" 2>"$work/check4.log" || { say "kerncap check --gpus 0,0,0,0 failed: $(tail -5 "$work/check4.log")"; exit 1; }
t3=$(now)
python3 - "$work" "$out" "$n" "$t0" "$t1" "$t2" "$t3" <<'PY'
import glob, json, sys
work, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0, t1, t2, t3 = map(float, sys.argv[4:])
c1 = json.load(open(f"{work}/check1.json")); c4 = json.load(open(f"{work}/check4.json"))
replays = [json.load(open(p)) for p in sorted(glob.glob(f"{work}/corpus/*.replay.json"))]
check_wall = t1 - t0
own = sum(c["replaySeconds"] for c in c1["captures"])
beyond = (check_wall - own) / n
per_replay_process = (t2 - t1) / n
v1 = {c["id"].split("/")[-1]: (c["status"], c["verdict"], c["numerics"]) for c in c1["captures"]}
v4 = {c["id"].split("/")[-1]: (c["status"], c["verdict"], c["numerics"]) for c in c4["captures"]}
rv = {r["dir"].rstrip("/").split("/")[-1]: r["verdict"] for r in replays}
figures = {
    "captures": n, "iters": 20,
    "checkWallSeconds": round(check_wall, 3), "checkOwnReplaySeconds": round(own, 3),
    "checkBeyondReplayPerCaptureSeconds": round(beyond, 4), "target": 0.2, "targetMet": beyond <= 0.2,
    "replayProcessPerCaptureSeconds": round(per_replay_process, 3),
    "speedupOverReplayProcesses": round(per_replay_process / (check_wall / n), 2),
    "gpus4WallSeconds": round(t3 - t2, 3), "gpus4VerdictsEqual": v1 == v4,
    "checkVerdictsEqualReplay": all(v1[k][1] == rv.get(k) for k in v1),
    "statuses": sorted(set(s for s, _, _ in v1.values())),
    "medianUsCheck": sorted(c["timing"]["medianUs"] for c in c1["captures"] if c["timing"])[n // 2] if n else None,
    "medianUsReplay": sorted(r["timing"]["medianUs"] for r in replays)[n // 2] if n else None,
}
json.dump(figures, open(f"{out}/bench-check.json", "w"), indent=2)
print(f"[bench-check] {n} captures: kerncap check {check_wall:.2f} s ({check_wall / n:.3f} s each, of which {own / n:.3f} s replay work: "
      f"{beyond:.3f} s beyond it, target ≤ 0.2 s: {'MET' if beyond <= 0.2 else 'MISSED'}); "
      f"one kerncap replay process each: {per_replay_process:.3f} s each ({figures['speedupOverReplayProcesses']}× check's time per capture)")
print(f"[bench-check] --gpus 0,0,0,0: {t3 - t2:.2f} s, verdicts equal to one worker: {v1 == v4}; check's verdicts equal replay's: {figures['checkVerdictsEqualReplay']}; statuses {figures['statuses']}")
PY
