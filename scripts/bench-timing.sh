#!/usr/bin/env bash
# Kernel-time agreement (issue 12 targets), on the GPU suite's apps sized so each kernel runs
# ≥ 20 µs: a PyTorch elementwise kernel, a softmax and the cuBLAS GEMM (test/apps/torch_app.py at
# scale 4), a Triton kernel (test/apps/triton_app.py, 2^24 elements) and the compute-bound
# fma_loop of test/apps/verdicts.cu. Each is captured once and replayed twice with --json; the
# table gives the in-app GPU duration (manifest timing.app_launch_us, method appLaunchMethod), the
# first replay's median and p10–p90, |median − in-app| in %, the two replays' medians against each
# other in %, and whether the targets hold (≤ 10% against the app, ≤ 3% between replays; judged
# only for kernels whose in-app time is ≥ 20 µs). Figures also go to $OUT/bench-timing.json when
# OUT is set. Usage: scripts/bench-timing.sh [ITERS] (timed launches per replay, default 50).
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
iters="${1:-50}"
work="${TMPDIR:-/tmp}/kerncap-bench-timing"
unset BUN_BE_BUN
say() { echo "[bench-timing] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"
export TRITON_CACHE_DIR="$work/triton-cache"
nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu || { say "nvcc failed"; exit 1; }
# label | --kernel | --dispatch | app argv
cases=(
  "torch-mul|MulFunctor|1|python3 test/apps/torch_app.py 2 4"
  "torch-softmax|softmax|1|python3 test/apps/torch_app.py 2 4"
  "torch-gemm|gemm|nvjet|xmma|cutlass|1|python3 test/apps/torch_app.py 2 4"
  "triton-add-relu|fused_add_relu|1|python3 test/apps/triton_app.py 3 24"
  "cuda-fma|fma_loop|1|$work/verdicts fma"
)
for c in "${cases[@]}"; do
  label="${c%%|*}"; rest="${c#*|}"
  app="${rest##*|}"; rest="${rest%|*}"
  dispatch="${rest##*|}"; kernel="${rest%|*}"
  # shellcheck disable=SC2086  # the app's argv is split on purpose
  if ! "$bin" run --kernel "$kernel" --dispatch "$dispatch" --out "$work/$label" --json -- $app > "$work/$label.run.json" 2> "$work/$label.run.err"; then
    say "$label: capture failed: $(tail -3 "$work/$label.run.err")"; continue
  fi
  for k in 1 2; do
    "$bin" replay "$work/$label" --iters "$iters" --json > "$work/$label.replay$k.json" 2> "$work/$label.replay$k.err" || say "$label: replay $k exited $? ($(tail -1 "$work/$label.replay$k.err"))"
  done
done
python3 - "$work" "${OUT:-}" "${cases[@]}" <<'PY'
import json, os, sys
work, out, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception: return None
rows, doc = [], {}
for c in cases:
    label = c.split("|", 1)[0]
    m = load(os.path.join(work, label, "kerncap.json"))
    a, b = load(os.path.join(work, f"{label}.replay1.json")), load(os.path.join(work, f"{label}.replay2.json"))
    if not m or not a or not b or "timing" not in a or "timing" not in b:
        rows.append([label, "-", "-", "-", "-", "-", "capture or replay failed"]); continue
    app = m.get("timing", {}).get("app_launch_us")
    ta, tb = a["timing"], b["timing"]
    vs_app = abs(ta["medianUs"] / app - 1) * 100 if app and app > 0 else None
    between = abs(tb["medianUs"] / ta["medianUs"] - 1) * 100
    if app is None or app < 20: ok = "n/a (< 20 µs in the app)"
    else: ok = ("ok" if vs_app <= 10 else "MISS") + " / " + ("ok" if between <= 3 else "MISS")
    rows.append([label, f"{app:.2f}" if app is not None else "?", f"{ta['medianUs']:.2f}", f"{ta['p10Us']:.2f}–{ta['p90Us']:.2f}",
                 f"{vs_app:.1f}" if vs_app is not None else "?", f"{between:.1f}", ok])
    doc[label] = {"kernel": a.get("kernel"), "verdict": a.get("verdict"), "appUs": app, "appMethod": m.get("appLaunchMethod"),
                  "replay1": ta, "replay2": tb, "vsAppPercent": vs_app, "betweenPercent": between}
head = ["kernel", "in-app µs", "replay median µs", "p10–p90 µs", "|diff| %", "replay-vs-replay %", "targets (≤10% / ≤3%)"]
w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
line = lambda r: "  ".join(x.ljust(w[i]) if i in (0, len(head) - 1) else x.rjust(w[i]) for i, x in enumerate(r))
print("[bench-timing] kernel time: in the app (GPU timestamps of the captured launch) vs replay (median of the timed launches)")
print(line(head))
for r in rows: print(line(r))
if out:
    with open(os.path.join(out, "bench-timing.json"), "w") as f: json.dump(doc, f, indent=2)
PY
