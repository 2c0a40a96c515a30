#!/usr/bin/env bash
# Profiling and timing without the application, on the GPU suite's apps. For each
# kernel (captured first):
#  - ncu on the application, the launch alone (`--kernel-name-base demangled -k regex:K -s N -c 1`,
#    gpu__time_duration and DRAM bytes), twice: `--clock-control none --cache-control none` (L2 as
#    the app left it) and `--cache-control all` (L2 flushed and invalidated before the launch);
#  - `kerncap profile DIR -- --clock-control none --cache-control all`: ncu's duration and DRAM
#    bytes on the replay, against the app's under the same control (targets: 3% and 1%);
#  - `kerncap replay DIR --iters ITERS` (CUDA events, L2 as the restore leaves it) against ncu's
#    duration on the app with --cache-control none, and `--flush-l2` against --cache-control all
#    (target: 3%, or 0.5 µs for kernels under 10 µs).
# And the time to the first full ncu report (ncu's default set): `ncu -k … -c 1 APP` against
# `kerncap profile DIR`, for the trivial one-kernel program (verdicts fma: target within 1 s of
# ncu's own cost) and for the PyTorch app. Clocks: nvidia-smi before and after.
# Figures also go to $OUT/bench-profile.json when OUT is set. Usage: scripts/bench-profile.sh [ITERS]
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
iters="${1:-100}"
work="${TMPDIR:-/tmp}/kerncap-bench-profile"
unset BUN_BE_BUN
say() { echo "[bench-profile] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
ncu="$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")"
[ -x "$ncu" ] || { say "skipped: no ncu"; exit 0; }
rm -rf "$work"; mkdir -p "$work"
export TRITON_CACHE_DIR="$work/triton-cache"
nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu || { say "nvcc failed"; exit 1; }
nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm --format=csv,noheader > "$work/clocks-before.txt" 2>&1
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
now() { date +%s.%N; }
# label | --kernel (kerncap ERE = ncu regex on the demangled name) | --dispatch | app argv
cases=(
  "cuda-fma|fma_loop|1|$work/verdicts fma"
  "triton-add-relu|fused_add_relu|1|python3 test/apps/triton_app.py 3 24"
  "torch-mul|MulFunctor|1|python3 test/apps/torch_app.py 2 4"
  "torch-softmax|softmax|1|python3 test/apps/torch_app.py 2 4"
  "torch-gemm|gemm|nvjet|xmma|cutlass|1|python3 test/apps/torch_app.py 2 4"
  "tiny-mul|MulFunctor|1|python3 test/apps/torch_app.py 2 1"
)
for c in "${cases[@]}"; do
  label="${c%%|*}"; rest="${c#*|}"
  app="${rest##*|}"; rest="${rest%|*}"
  dispatch="${rest##*|}"; kernel="${rest%|*}"
  # shellcheck disable=SC2086  # the app's argv is split on purpose
  if ! "$bin" run --kernel "$kernel" --dispatch "$dispatch" --out "$work/$label" --json -- $app > "$work/$label.run.json" 2> "$work/$label.run.err"; then
    say "$label: capture failed: $(tail -3 "$work/$label.run.err")"; continue
  fi
  for cc in none all; do
    # shellcheck disable=SC2086
    "$ncu" --clock-control none --cache-control $cc --kernel-name-base demangled -k "regex:$kernel" -s "$dispatch" -c 1 --csv --page details --print-units base --metrics "$metrics" $app > "$work/$label.ncu-app-$cc.csv" 2>&1 || say "$label: ncu on the app ($cc) exited $?"
  done
  "$bin" profile "$work/$label" --name all --json -- --clock-control none --cache-control all > "$work/$label.profile.json" 2> "$work/$label.profile.err" || say "$label: kerncap profile exited $? ($(tail -2 "$work/$label.profile.err"))"
  "$bin" replay "$work/$label" --iters "$iters" --json > "$work/$label.replay.json" 2> "$work/$label.replay.err" || say "$label: replay exited $?"
  "$bin" replay "$work/$label" --iters "$iters" --flush-l2 --json > "$work/$label.replay-flush.json" 2> "$work/$label.replay-flush.err" || say "$label: replay --flush-l2 exited $?"
done
# time to the first full report (ncu's default set, its default clock and cache control)
for label in cuda-fma torch-gemm; do
  [ -d "$work/$label" ] || continue
  for c in "${cases[@]}"; do [ "${c%%|*}" = "$label" ] && spec="$c"; done
  rest="${spec#*|}"; app="${rest##*|}"; rest="${rest%|*}"; dispatch="${rest##*|}"; kernel="${rest%|*}"
  t0=$(now)
  # shellcheck disable=SC2086
  "$ncu" --kernel-name-base demangled -k "regex:$kernel" -s "$dispatch" -c 1 -o "$work/$label-app-default" -f $app > "$work/$label.ncu-default.out" 2>&1
  t1=$(now)
  "$bin" profile "$work/$label" --name default --json > "$work/$label.profile-default.json" 2> "$work/$label.profile-default.err"
  t2=$(now)
  echo "$t0 $t1 $t2" > "$work/$label.report-times"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm --format=csv,noheader > "$work/clocks-after.txt" 2>&1
python3 - "$work" "${OUT:-}" "${cases[@]}" <<'PY'
import csv, io, json, os, sys
work, out, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12}
def load(p):
    try:
        with open(p) as f: return json.load(f)
    except Exception: return None
def ncu_app(label, cc):
    """gpu__time_duration (µs) and DRAM bytes (read + write) of the profiled launch, by metric name."""
    try: text = open(os.path.join(work, f"{label}.ncu-app-{cc}.csv")).read()
    except Exception: return None, None
    i = text.find('"ID"')
    if i < 0: return None, None
    vals = {}
    for r in csv.DictReader(io.StringIO(text[i:])):
        n, u, v = r.get("Metric Name", ""), r.get("Metric Unit", ""), (r.get("Metric Value") or "").replace(",", "")
        try: x = float(v)
        except ValueError: continue
        vals[n] = x * TIME.get(u, BYTES.get(u, 1))
    d = vals.get("gpu__time_duration.sum")
    rd, wr = vals.get("dram__bytes_read.sum"), vals.get("dram__bytes_write.sum")
    return d, (rd + wr if rd is not None and wr is not None else None)
def pct(a, b): return (a / b - 1) * 100 if a is not None and b else None
fmt = lambda x, d=2: "?" if x is None else f"{x:.{d}f}"
sgn = lambda x: "?" if x is None else f"{x:+.1f}"
rows, doc = [], {"clocksBefore": open(f"{work}/clocks-before.txt").read().strip(), "clocksAfter": open(f"{work}/clocks-after.txt").read().strip(), "cases": {}}
for c in cases:
    label = c.split("|", 1)[0]
    prof = load(os.path.join(work, f"{label}.profile.json")) or {}
    rep, repf = (load(os.path.join(work, f"{label}.{k}.json")) or {} for k in ("replay", "replay-flush"))
    warm_us, warm_dram = ncu_app(label, "none")
    cold_us, cold_dram = ncu_app(label, "all")
    f = prof.get("figures") or {}
    ev, evf = (r.get("timing", {}).get("medianUs") for r in (rep, repf))
    d = {"ncuAppWarmUs": warm_us, "ncuAppFlushedUs": cold_us, "ncuAppFlushedDramBytes": cold_dram, "ncuAppWarmDramBytes": warm_dram,
         "profileFlushedUs": f.get("durationUs"), "profileFlushedDramBytes": f.get("dramBytes"),
         "replayWarmUs": ev, "replayFlushedUs": evf, "replayMethod": rep.get("timing", {}).get("method"), "clocks": rep.get("timing", {}).get("clocks")}
    doc["cases"][label] = d
    rows.append([label, fmt(warm_us), fmt(ev), sgn(pct(ev, warm_us)), fmt(cold_us), fmt(evf), sgn(pct(evf, cold_us)), fmt(f.get("durationUs")), sgn(pct(f.get("durationUs"), cold_us)),
                 fmt(cold_dram, 0), fmt(f.get("dramBytes"), 0), f"{pct(f.get('dramBytes'), cold_dram):+.2f}" if pct(f.get("dramBytes"), cold_dram) is not None else "?"])
head = ["kernel", "ncu app warm µs", "replay µs", "Δ%", "ncu app flushed µs", "replay --flush-l2 µs", "Δ%", "profile µs", "Δ%", "ncu app DRAM B", "profile DRAM B", "Δ%"]
w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
print("[bench-profile] ncu on the app (clocks not locked; L2 warm = --cache-control none, flushed = all) against the replay's events and kerncap profile (--cache-control all)")
print("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(head)))
for r in rows: print("  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(r)))
for label in ("cuda-fma", "torch-gemm"):
    p = os.path.join(work, f"{label}.report-times")
    if not os.path.exists(p): continue
    t0, t1, t2 = map(float, open(p).read().split())
    pd = load(os.path.join(work, f"{label}.profile-default.json")) or {}
    doc["cases"].setdefault(label, {})["reportSeconds"] = {"ncuOnApp": t1 - t0, "kerncapProfile": t2 - t1, "kerncapSeconds": pd.get("seconds")}
    print(f"[bench-profile] time to the first full ncu report, {label}: ncu on the app {t1 - t0:.2f} s, kerncap profile {t2 - t1:.2f} s (difference {t2 - t1 - (t1 - t0):+.2f} s; kerncap's own split {pd.get('seconds')})")
print(f"[bench-profile] clocks (sm, mem, applications, max; MHz) before {doc['clocksBefore']!r}, after {doc['clocksAfter']!r}")
if out:
    with open(os.path.join(out, "bench-profile.json"), "w") as fh: json.dump(doc, fh, indent=2)
PY
