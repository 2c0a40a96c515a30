#!/usr/bin/env bash
# Profiling without the application (issue 27), on the GPU suite's apps (the cases of
# scripts/bench-timing.sh): for each kernel, time to the first Nsight Compute report by
# `ncu -k regex:K -s N -c 1 APP` (the whole application under ncu) against `kerncap profile DIR`
# (the capture's replay under ncu), both with --clock-control none --cache-control none; the
# agreement of ncu's duration and DRAM bytes between the two; and the replay's own timing
# (`kerncap replay DIR --iters ITERS`, CUDA events) against ncu's gpu__time_duration on the app.
# Figures also go to $OUT/bench-profile.json when OUT is set. Usage: scripts/bench-profile.sh [ITERS]
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
iters="${1:-50}"
work="${TMPDIR:-/tmp}/kerncap-bench-profile"
unset BUN_BE_BUN
say() { echo "[bench-profile] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
ncu="$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")"
[ -x "$ncu" ] || { say "skipped: no ncu"; exit 0; }
rm -rf "$work"; mkdir -p "$work"
export TRITON_CACHE_DIR="$work/triton-cache"
nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu || { say "nvcc failed"; exit 1; }
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
# label | --kernel (kerncap ERE = ncu regex) | --dispatch | app argv
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
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$ncu" --clock-control none --cache-control none -k "regex:$kernel" -s "$dispatch" -c 1 --metrics "$metrics" -o "$work/$label-app" -f $app > "$work/$label.ncu-app.out" 2>&1 || say "$label: ncu on the app exited $?"
  t1=$(date +%s.%N)
  "$ncu" --import "$work/$label-app.ncu-rep" --csv --page details > "$work/$label.ncu-app.csv" 2>> "$work/$label.ncu-app.out"
  echo "$t0 $t1" > "$work/$label.ncu-app.time"
  "$bin" profile "$work/$label" --json -- --clock-control none --cache-control none > "$work/$label.profile.json" 2> "$work/$label.profile.err" || say "$label: kerncap profile exited $? ($(tail -2 "$work/$label.profile.err"))"
  "$bin" replay "$work/$label" --iters "$iters" --json > "$work/$label.replay.json" 2> "$work/$label.replay.err" || say "$label: replay exited $?"
done
python3 - "$work" "${OUT:-}" "${cases[@]}" <<'PY'
import csv, io, json, os, sys
work, out, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception: return None
def ncu_app(label):
    """gpu__time_duration (µs) and DRAM bytes of the profiled launch, by metric name."""
    try: text = open(os.path.join(work, f"{label}.ncu-app.csv")).read()
    except Exception: return None, None
    i = text.find('"ID"')
    if i < 0: return None, None
    vals = {}
    for r in csv.DictReader(io.StringIO(text[i:])):
        n, u, v = r.get("Metric Name", ""), r.get("Metric Unit", ""), (r.get("Metric Value") or "").replace(",", "")
        try: x = float(v)
        except ValueError: continue
        vals[n] = x * TIME.get(u, BYTES.get(u, 1))
    d = vals.get("gpu__time_duration.sum", vals.get("Duration"))
    rd, wr = vals.get("dram__bytes_read.sum"), vals.get("dram__bytes_write.sum")
    return d, (rd + wr if rd is not None and wr is not None else None)
rows, doc = [], {}
pct = lambda a, b: f"{(a / b - 1) * 100:+.1f}" if a is not None and b else "?"
for c in cases:
    label = c.split("|", 1)[0]
    prof, rep = load(os.path.join(work, f"{label}.profile.json")), load(os.path.join(work, f"{label}.replay.json"))
    app_us, app_dram = ncu_app(label)
    try: t0, t1 = map(float, open(os.path.join(work, f"{label}.ncu-app.time")).read().split())
    except Exception: t0 = t1 = None
    f = (prof or {}).get("figures") or {}
    kp_s = sum((prof or {}).get("seconds", {}).values()) if prof else None
    rep_us = (rep or {}).get("timing", {}).get("medianUs")
    doc[label] = {"ncuAppSeconds": (t1 - t0) if t0 else None, "kerncapProfileSeconds": kp_s, "ncuAppDurationUs": app_us, "profileDurationUs": f.get("durationUs"),
                  "ncuAppDramBytes": app_dram, "profileDramBytes": f.get("dramBytes"), "replayMedianUs": rep_us, "limiter": f.get("limiter"), "clocks": (rep or {}).get("timing", {}).get("clocks")}
    rows.append([label, f"{t1 - t0:.1f}" if t0 else "?", f"{kp_s:.1f}" if kp_s else "?", f"{app_us:.2f}" if app_us else "?", f"{f['durationUs']:.2f}" if f.get("durationUs") else "?",
                 pct(f.get("durationUs"), app_us), pct(f.get("dramBytes"), app_dram), f"{rep_us:.2f}" if rep_us else "?", pct(rep_us, app_us)])
head = ["kernel", "ncu app s", "kerncap profile s", "ncu app µs", "ncu replay µs", "duration Δ%", "DRAM bytes Δ%", "replay events µs", "events vs ncu Δ%"]
w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
print("[bench-profile] time to the first ncu report, ncu's figures on the app vs on the replay, the replay's event timing vs ncu's duration")
print("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(head)))
for r in rows: print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(r)))
if out:
    with open(os.path.join(out, "bench-profile.json"), "w") as fh: json.dump(doc, fh, indent=2)
PY
