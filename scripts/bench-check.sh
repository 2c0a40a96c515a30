#!/usr/bin/env bash
# kerncap check as a regression suite (issue 28), one run on the GPU node:
#  1. a corpus of N captures (default 50) made from the GPU suite's apps: eight distinct kernels
#     (test/apps/structs.cu scale_jobs and axpy_inplace, test/apps/verdicts.cu hist, sum and fma,
#     test/apps/triton_app.py fused_add_relu, test/apps/torch_app.py's elementwise kernel and
#     softmax), each packed (`kerncap pack`) and unpacked in another folder (`kerncap unpack`),
#     then copied (same VAs) until there are N;
#  2. throughput: one `kerncap check` of the corpus (one worker, one CUDA context) against one
#     `kerncap replay` process per capture, in the same run. Target: check's time per capture
#     beyond the capture's own replay work (its replay call: reserve, restore, verify, launches,
#     compare) at most 0.2 s;
#  3. `--gpus 0,0,0,0` (four workers on GPU 0): the same verdicts as one worker;
#  4. a toolchain change, simulated: two Triton captures (the elementwise kernel, and the
#     autotuned matmul of test/apps/triton_matmul_autotune.py) checked with `--rebuild` (the
#     baseline written by a first `--rebuild` check), then a copy of each with pinned.json's
#     num_warps changed (→ 1, as a Triton that picked another default would compile it) checked
#     again with --rebuild against that baseline, at the default --slower 10: a change beyond 10%
#     is `slower` with its interval, exit 1, in JUnit; the unchanged rebuilds stay `ok`.
# Figures in $KERNCAP_GPU_OUT/bench-check.json (or the work folder), a summary on stdout.
# Usage: scripts/bench-check.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
n="${1:-50}"
work="${TMPDIR:-/tmp}/kerncap-bench-check"
out="${KERNCAP_GPU_OUT:-$work}"
unset BUN_BE_BUN
say() { echo "[bench-check] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work/made" "$work/archives" "$work/elsewhere" "$work/corpus" "$out"
export TRITON_CACHE_DIR="$work/triton-cache"
now() { date +%s.%N; }
nvcc -O2 -lineinfo -arch=sm_90 -o "$work/structs" test/apps/structs.cu
nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu
# label | --kernel | --dispatch | app argv
cases=(
  "scale_jobs|scale_jobs|1|$work/structs 3"
  "axpy|axpy_inplace|2|$work/structs 3"
  "hist|histogram|1|$work/verdicts hist"
  "sum|partial_sums|1|$work/verdicts sum"
  "fma|fma_loop|1|$work/verdicts fma"
  "triton|fused_add_relu|1|python3 test/apps/triton_app.py 3 22"
  "torch-mul|MulFunctor|1|python3 test/apps/torch_app.py 2 1"
  "torch-softmax|softmax|1|python3 test/apps/torch_app.py 2 1"
)
t_made=$(now)
labels=()
for c in "${cases[@]}"; do
  label="${c%%|*}"; rest="${c#*|}"
  app="${rest##*|}"; rest="${rest%|*}"
  dispatch="${rest##*|}"; kernel="${rest%|*}"
  # shellcheck disable=SC2086  # the app's argv is split on purpose
  if ! "$bin" run --kernel "$kernel" --dispatch "$dispatch" --out "$work/made/$label" -- $app >/dev/null 2>"$work/made/$label.err"; then
    say "$label: capture failed: $(tail -3 "$work/made/$label.err")"; continue
  fi
  "$bin" pack "$work/made/$label" -o "$work/archives/$label.zip" >/dev/null
  (cd "$work/elsewhere" && "$bin" unpack "$work/archives/$label.zip" -o "$label" >/dev/null)
  labels+=("$label")
done
say "${#labels[@]} distinct captures made, packed and unpacked in $(python3 -c "print(round($(now) - $t_made, 1))") s"
[ "${#labels[@]}" -gt 0 ] || exit 1
for i in $(seq 1 "$n"); do
  l="${labels[$(( (i - 1) % ${#labels[@]} ))]}"
  cp -r "$work/elsewhere/$l" "$work/corpus/$l-$i"
done
iters=20
t0=$(now)
set +e
"$bin" check "$work/corpus" --iters "$iters" --json --results "$work/res1" --junit "$work/check1.xml" >"$work/check1.json" 2>"$work/check1.log"; rc1=$?
t1=$(now)
for d in "$work"/corpus/*; do
  "$bin" replay "$d" --iters "$iters" --json >"$d.replay.json" 2>>"$work/replays.log"
done
t2=$(now)
"$bin" check "$work/corpus" --iters "$iters" --json --gpus 0,0,0,0 --results "$work/res4" >"$work/check4.json" 2>"$work/check4.log"; rc4=$?
t3=$(now)

# 4. the simulated toolchain change: Triton captures rebuilt as captured, then with num_warps
#    changed (the elementwise kernel and the autotuned matmul's chosen config)
mkdir -p "$work/tool"
"$bin" run --kernel '^matmul_kernel$' --dispatch 1 --out "$work/made/matmul" -- python3 test/apps/triton_matmul_autotune.py 3 >/dev/null 2>"$work/made/matmul.err" || say "matmul: capture failed: $(tail -3 "$work/made/matmul.err")"
for l in triton matmul; do
  [ -d "$work/made/$l" ] || continue
  cp -r "$work/made/$l" "$work/tool/$l-same"
  cp -r "$work/made/$l" "$work/tool/$l-warps"
done
"$bin" check "$work/tool" --rebuild --trust --iters 50 --json --results "$work/tool-res0" --write-baseline "$work/tool-baseline.json" >"$work/tool0.json" 2>"$work/tool0.log"; rc_t0=$?
for p in "$work"/tool/*-warps/pinned.json; do
python3 - "$p" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
was = d["options"].get("num_warps")
d["options"]["num_warps"] = 1 if (was or 4) > 1 else 4
print(f"[bench-check] pinned.json num_warps {was} -> {d['options']['num_warps']} in {p}")
json.dump(d, open(p, "w"), indent=2)
PY
done
"$bin" check "$work/tool" --rebuild --trust --iters 50 --json --results "$work/tool-res1" --baseline "$work/tool-baseline.json" --junit "$work/tool1.xml" >"$work/tool1.json" 2>"$work/tool1.log"; rc_t1=$?
set -e
cp "$work/check1.xml" "$work/tool1.xml" "$out/" 2>/dev/null || true
python3 - "$work" "$out" "$n" "$t0" "$t1" "$t2" "$t3" "$rc1" "$rc4" "$rc_t0" "$rc_t1" <<'PY'
import glob, json, os, sys
import xml.etree.ElementTree as ET
work, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0, t1, t2, t3 = map(float, sys.argv[4:8])
rc1, rc4, rc_t0, rc_t1 = map(int, sys.argv[8:12])
def load(p):
    try: return json.load(open(p))
    except Exception as e: return {"error": str(e)}
c1, c4 = load(f"{work}/check1.json"), load(f"{work}/check4.json")
caps1, caps4 = c1.get("captures", []), c4.get("captures", [])
replays = [load(p) for p in sorted(glob.glob(f"{work}/corpus/*.replay.json"))]
check_wall = t1 - t0
own = sum(c.get("replaySeconds", 0) for c in caps1)
beyond = (check_wall - own) / n
per_replay_process = (t2 - t1) / n
v1 = {c["id"].split("/")[-1]: (c["status"], c["verdict"], c["numerics"]) for c in caps1}
v4 = {c["id"].split("/")[-1]: (c["status"], c["verdict"], c["numerics"]) for c in caps4}
rv = {r["dir"].rstrip("/").split("/")[-1]: r.get("verdict") for r in replays if "dir" in r}
junit = ET.parse(f"{work}/check1.xml").getroot() if os.path.exists(f"{work}/check1.xml") else None
tool0, tool1 = load(f"{work}/tool0.json"), load(f"{work}/tool1.json")
tool = {c["id"].split("/")[-1]: {"status": c["status"], "time": c.get("time"), "rebuild": c.get("rebuild")} for c in tool1.get("captures", [])}
figures = {
    "captures": n, "distinct": len({k.rsplit("-", 1)[0] for k in v1}), "iters": 20, "checkExit": rc1, "gpus4Exit": rc4,
    "checkWallSeconds": round(check_wall, 3), "checkOwnReplaySeconds": round(own, 3),
    "checkBeyondReplayPerCaptureSeconds": round(beyond, 4), "target": 0.2, "targetMet": beyond <= 0.2,
    "replayProcessPerCaptureSeconds": round(per_replay_process, 3),
    "speedupOverReplayProcesses": round(per_replay_process / (check_wall / n), 2) if n and check_wall else None,
    "gpus4WallSeconds": round(t3 - t2, 3), "gpus4VerdictsEqual": v1 == v4,
    "checkVerdictsEqualReplay": all(v1[k][1] == rv.get(k) for k in v1),
    "statuses": {s: sum(1 for x in v1.values() if x[0] == s) for s in sorted(set(x[0] for x in v1.values()))},
    "junitTests": int(junit.get("tests", -1)) if junit is not None else None,
    "toolchainChange": {"firstExit": rc_t0, "firstStatuses": sorted(c["status"] for c in tool0.get("captures", [])), "exit": rc_t1, "records": tool},
}
json.dump(figures, open(f"{out}/bench-check.json", "w"), indent=2)
print(f"[bench-check] {n} captures ({figures['distinct']} distinct kernels, packed and unpacked elsewhere): kerncap check {check_wall:.2f} s ({check_wall / n:.3f} s each, of which {own / n:.3f} s replay work: "
      f"{beyond:.3f} s beyond it, target ≤ 0.2 s: {'MET' if beyond <= 0.2 else 'MISSED'}), exit {rc1}; "
      f"one kerncap replay process each: {per_replay_process:.3f} s each ({figures['speedupOverReplayProcesses']}× check's time per capture)")
print(f"[bench-check] statuses {figures['statuses']}; JUnit tests {figures['junitTests']}; --gpus 0,0,0,0: {t3 - t2:.2f} s, exit {rc4}, verdicts equal to one worker: {v1 == v4}; check's verdicts equal replay's: {figures['checkVerdictsEqualReplay']}")
for k, r in sorted(tool.items()):
    t = r["time"] or {}
    print(f"[bench-check] toolchain change, {k}: {r['status']} {t.get('reason') or ''} (ratio {t.get('ratio')}, interval {t.get('low')}–{t.get('high')})")
print(f"[bench-check] toolchain change: first --rebuild check exit {rc_t0} {figures['toolchainChange']['firstStatuses']}, after the num_warps change: exit {rc_t1} (1 when a capture is slower beyond --slower 10)")
PY
