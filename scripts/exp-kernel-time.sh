#!/usr/bin/env bash
# Where the replay's warm kernel time parts from ncu's on the application, in one run (≤ 150 s on
# the H200). Captures PyTorch's elementwise mul (`a * 2.0`, 2^24 floats) and softmax
# (test/apps/torch_app.py 2 4) and the 2^20-float mul (torch_app.py 2 1) with the real binary
# (KERNCAP_BIN, default dist/kerncap), then measures:
#  - ncu on the application, the captured launch alone (`--clock-control none`, `--cache-control
#    none`: L2 as the app left it; then `all`, if time is left): duration, DRAM bytes read/written;
#  - `kerncap replay DIR --iters 50` under each timing setup of KERNCAP_TIMING
#    (src/replay/timing-setup.ts): l2=reread (L2 written back, the launch's ranges read again),
#    the default (l2=restored: L2 as the device-to-device restore leaves it), write-back only,
#    --flush-l2, back to back (no restore), the restore from the host, no spin, a 2 ms spin, 20
#    warm-ups;
#  - ncu on the replay's timed launches (`-s 3 -c 3` of `replay --runs 1 --iters 5`, the same ncu
#    options) under l2=restored (the default) and l2=reread: the kernel's own duration and DRAM bytes in the
#    state each leaves, without the event pair;
#  - test/apps/l2_state.cu: the same shape without kerncap, timed by events after each L2
#    preparation, on cudaMalloc and on cuMemCreate+cuMemMap memory, and the empty kernel's events
#    beside ncu's duration of it (what the event pair costs by itself).
# EXP_TRITON=1 adds the Triton add+relu of 2^24 floats (test/apps/triton_app.py 3 24, its 2nd
# launch): about 30 s more, over the 150 s.
# Prints one table per kernel and writes $OUT/exp-kernel-time.json (when OUT is set).
# Usage: scripts/exp-kernel-time.sh   (the binary: KERNCAP_BIN, else dist/kerncap, unpacked from
# .carry/kerncap.xz when missing; EXP_BUDGET_S: seconds before optional steps are skipped, default 140)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
work="${TMPDIR:-/tmp}/kerncap-exp-kernel-time"
budget="${EXP_BUDGET_S:-140}"
unset BUN_BE_BUN KERNCAP_TIMING
say() { echo "[exp-kernel-time] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
# the binary built elsewhere, as scripts/gpu-test.sh unpacks it
if [ -z "${KERNCAP_BIN:-}" ] && [ ! -x "$bin" ] && [ -f .carry/kerncap.xz ]; then mkdir -p dist && xz -dc .carry/kerncap.xz > "$bin" && chmod +x "$bin"; fi
[ -x "$bin" ] || { say "skipped: no kerncap binary at $bin (bash scripts/build.sh, or set KERNCAP_BIN)"; exit 0; }
ncu="$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")"
[ -x "$ncu" ] || { say "no ncu: the ncu columns stay empty"; ncu=""; }
python3 -c "import torch" 2>/dev/null && have_torch=1 || { say "no PyTorch: only test/apps/l2_state.cu runs"; have_torch=0; }
rm -rf "$work"; mkdir -p "$work"
t_start=$SECONDS
# fits SECONDS: whether a step of about SECONDS still ends within the budget
fits() { [ $((SECONDS - t_start + $1)) -le "$budget" ]; }
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
ncu_opts=(--clock-control none --kernel-name-base demangled --csv --page details --print-units base --metrics "$metrics")
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm --format=csv,noheader 2>&1 | head -1; }
clocks > "$work/clocks-before.txt"

# the microbenchmark builds while the captures run
(nvcc -O2 -arch=sm_90 -o "$work/l2_state" test/apps/l2_state.cu > "$work/l2_state.build.txt" 2>&1 || echo "nvcc failed" >> "$work/l2_state.build.txt") &
build_pid=$!

declare -A dirs=() # case → capture folder
# 1. captures: the 2nd launch of the mul and of softmax at scale 4 (one run, one folder each), the 2nd mul at scale 1
if [ "$have_torch" = 1 ]; then
  timeout 60 "$bin" run --kernel MulFunctor --kernel softmax --dispatch 1 --out "$work/s4" -- python3 test/apps/torch_app.py 2 4 > "$work/s4.run.out" 2>&1 &
  p4=$!
  timeout 60 "$bin" run --kernel MulFunctor --dispatch 1 --out "$work/mul-1m" -- python3 test/apps/torch_app.py 2 1 > "$work/s1.run.out" 2>&1 &
  p1=$!
  if [ "${EXP_TRITON:-0}" = 1 ]; then
    TRITON_CACHE_DIR="$work/triton-cache" timeout 90 "$bin" run --kernel fused_add_relu --dispatch 1 --out "$work/triton" -- python3 test/apps/triton_app.py 3 24 > "$work/triton.run.out" 2>&1 || say "Triton capture failed: $(tail -3 "$work/triton.run.out")"
    [ -f "$work/triton/kerncap.json" ] && dirs[triton]="$work/triton"
  fi
  wait "$p4" || say "capture at scale 4 failed: $(tail -3 "$work/s4.run.out")"
  wait "$p1" || say "capture at scale 1 failed: $(tail -3 "$work/s1.run.out")"
  [ -f "$work/mul-1m/kerncap.json" ] && dirs[mul-1m]="$work/mul-1m"
  # one folder per kernel (DIR/<n>-<name>), told apart by the kernel's name in the manifest
  for d in "$work"/s4/*/; do
    [ -f "$d/kerncap.json" ] || continue
    if grep -q MulFunctor "$d/kerncap.json"; then dirs[mul-16m]="${d%/}"; else dirs[softmax]="${d%/}"; fi
  done
fi
say "captures done at $((SECONDS - t_start)) s: ${!dirs[*]}"

# 2. ncu on the application, L2 as the app left it (the reference)
ncu_app() { # CACHE SCALE REGEX SKIP COUNT [APP…]: scale names the output (s4, s1, triton)
  local cc=$1 scale=$2 re=$3 skip=$4 count=$5
  shift 5
  [ $# -gt 0 ] || set -- python3 test/apps/torch_app.py 2 "$scale"
  TRITON_CACHE_DIR="$work/triton-cache" timeout 40 "$ncu" "${ncu_opts[@]}" --cache-control "$cc" -k "regex:$re" -s "$skip" -c "$count" "$@" > "$work/ncu-app-$cc-s$scale.csv" 2>&1 || say "ncu on the app ($cc, $scale) exited $?"
}
if [ -n "$ncu" ] && [ "$have_torch" = 1 ]; then
  # matching launches in order: mul, softmax of round 0, then of round 1 (the captured ones)
  ncu_app none 4 'MulFunctor|softmax' 2 2
  ncu_app none 1 MulFunctor 1 1
  [ -n "${dirs[triton]:-}" ] && ncu_app none triton fused_add_relu 1 1 python3 test/apps/triton_app.py 3 24
fi
say "ncu on the app done at $((SECONDS - t_start)) s"

# 3. the replay's event timing under each setup: label|KERNCAP_TIMING|extra replay options
variants=(
  "reread (L2 written back, ranges read again)|l2=reread|"
  "default: L2 as the restore left it|l2=restored|"
  "L2 written back only|l2=evicted|"
  "--flush-l2||--flush-l2"
  "back to back (no restore), L2 restored|restore=none,l2=restored|"
  "back to back, L2 written back + reread|restore=none,l2=reread|"
  "restore from the host, L2 restored|restore=host,l2=restored|"
  "no spin, L2 restored|spin=0,l2=restored|"
  "spin 2000 us, L2 restored|spin=2000,l2=restored|"
  "20 warm-ups, L2 restored|warmup=20,l2=restored|"
  "no spin, reread|spin=0,l2=reread|"
)
cases=(mul-16m softmax mul-1m triton)
for c in "${cases[@]}"; do
  [ -n "${dirs[$c]:-}" ] || continue
  for i in "${!variants[@]}"; do
    fits 8 || { say "budget: replay variants of $c from #$i on skipped"; break; }
    IFS='|' read -r label timing extra <<< "${variants[$i]}"
    # shellcheck disable=SC2086  # extra holds one option or none
    KERNCAP_TIMING="$timing" timeout 60 "$bin" replay "${dirs[$c]}" --iters 50 --runs 1 --json $extra > "$work/$c.v$i.json" 2> "$work/$c.v$i.err" || say "$c: replay ($label) exited $?: $(tail -2 "$work/$c.v$i.err")"
  done
done
say "replays done at $((SECONDS - t_start)) s"

# 4. ncu on the replay's timed launches (launches of the kernel: 1 checked, 2 warm-ups, then timed: -s 3 -c 3)
kre() { case "$1" in softmax) echo softmax ;; triton) echo fused_add_relu ;; *) echo MulFunctor ;; esac; }
if [ -n "$ncu" ]; then
  for c in "${cases[@]}"; do
    [ -n "${dirs[$c]:-}" ] || continue
    for setup in "new|l2=reread" "old|l2=restored"; do
      fits 10 || { say "budget: ncu on the replay of $c skipped"; break; }
      name="${setup%%|*}"
      KERNCAP_TIMING="${setup#*|}" timeout 60 "$ncu" "${ncu_opts[@]}" --cache-control none -k "regex:$(kre "$c")" -s 3 -c 3 "$bin" replay "${dirs[$c]}" --runs 1 --iters 5 > "$work/$c.ncu-replay-$name.csv" 2>&1 || say "$c: ncu on the replay ($name) exited $?"
    done
  done
fi
say "ncu on the replay done at $((SECONDS - t_start)) s"

# 5. the microbenchmark, and ncu's duration of its empty kernel
wait "$build_pid"
if [ -x "$work/l2_state" ] && fits 10; then
  timeout 60 "$work/l2_state" > "$work/l2_state.jsonl" 2> "$work/l2_state.err" || say "l2_state exited $?: $(tail -2 "$work/l2_state.err")"
  if [ -n "$ncu" ] && fits 8; then
    timeout 40 "$ncu" "${ncu_opts[@]}" --cache-control none -k regex:empty_kernel -s 5 -c 5 "$work/l2_state" empty > "$work/ncu-empty.csv" 2>&1 || say "ncu on the empty kernel exited $?"
  fi
else
  say "l2_state not run ($(tail -1 "$work/l2_state.build.txt" 2>/dev/null))"
fi

# 6. ncu on the application with L2 flushed (the --flush-l2 reference), while time is left
if [ -n "$ncu" ] && [ "$have_torch" = 1 ]; then
  if fits 16; then ncu_app all 4 'MulFunctor|softmax' 2 2; else say "budget: ncu --cache-control all on the app skipped"; fi
  if fits 14; then ncu_app all 1 MulFunctor 1 1; else say "budget: ncu --cache-control all at scale 1 skipped"; fi
  if [ -n "${dirs[triton]:-}" ] && fits 20; then ncu_app all triton fused_add_relu 1 1 python3 test/apps/triton_app.py 3 24; fi
fi
clocks > "$work/clocks-after.txt"
say "measured in $((SECONDS - t_start)) s"

python3 - "$work" "${OUT:-}" "${variants[@]}" <<'PY'
import csv, io, json, os, statistics, sys
work, out, variants = sys.argv[1], sys.argv[2], [v.split("|") for v in sys.argv[3:]]
TIME = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3}
BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
def ncu_rows(path):
    """One dict per profiled launch (by ID): kernel name, duration µs, DRAM bytes read and written."""
    try: text = open(path).read()
    except OSError: return []
    i = text.find('"ID"')
    if i < 0: return []
    by = {}
    for r in csv.DictReader(io.StringIO(text[i:])):
        if not r.get("Metric Name") or not r.get("Kernel Name"): continue  # the profiled program's own output, interleaved
        d = by.setdefault(r.get("ID"), {"kernel": r["Kernel Name"]})
        try: x = float((r.get("Metric Value") or "").replace(",", ""))
        except ValueError: continue
        u = r.get("Metric Unit", "")
        d[r.get("Metric Name", "")] = x * TIME.get(u, BYTES.get(u, 1))
    return [{"kernel": d["kernel"], "us": d.get("gpu__time_duration.sum"), "dramRead": d.get("dram__bytes_read.sum"), "dramWrite": d.get("dram__bytes_write.sum")} for d in by.values()]
def pick(rows, word):
    rs = [r for r in rows if word in r["kernel"]]
    return rs[-1] if rs else None
def med(rows):
    us = [r["us"] for r in rows if r["us"] is not None]
    if not us: return None
    mid = lambda k: statistics.median([r[k] for r in rows if r[k] is not None]) if any(r[k] is not None for r in rows) else None
    return {"us": statistics.median(us), "dramRead": mid("dramRead"), "dramWrite": mid("dramWrite"), "launches": len(us)}
def load(p):
    try: return json.load(open(p))
    except Exception: return None
f = lambda x, d=2: "?" if x is None else f"{x:.{d}f}"
mb = lambda r: "?" if not r or r.get("dramRead") is None else f"{r['dramRead'] / 1e6:.1f}+{r['dramWrite'] / 1e6:.1f}"
doc = {"clocksBefore": open(f"{work}/clocks-before.txt").read().strip(), "clocksAfter": open(f"{work}/clocks-after.txt").read().strip() if os.path.exists(f"{work}/clocks-after.txt") else None, "cases": {}}
CASES = {"mul-16m": ("PyTorch a*2.0, 2^24 floats", 4, "MulFunctor"), "softmax": ("PyTorch softmax 16384x1000", 4, "softmax"), "mul-1m": ("PyTorch a*2.0, 2^20 floats", 1, "MulFunctor"),
         "triton": ("Triton add+relu, 2^24 floats", "triton", "fused_add_relu")}
for c, (title, scale, word) in CASES.items():
    warm = pick(ncu_rows(f"{work}/ncu-app-none-s{scale}.csv"), word)
    cold = pick(ncu_rows(f"{work}/ncu-app-all-s{scale}.csv"), word)
    ref = warm["us"] if warm else None
    rows, doc_rows = [], []
    app_us = None
    for i, (label, timing, extra) in enumerate(variants):
        r = load(f"{work}/{c}.v{i}.json")
        if not r or "timing" not in r: continue
        t = r["timing"]
        app_us = t.get("appUs", app_us)
        m = t.get("medianUs")
        d = {"label": label, "KERNCAP_TIMING": timing, "options": extra, "medianUs": m, "p10Us": t.get("p10Us"), "p90Us": t.get("p90Us"), "method": t.get("method"), "clocks": t.get("clocks"), "verdict": r.get("verdict")}
        doc_rows.append(d)
        delta = f"{(m / ref - 1) * 100:+.1f}% ({m - ref:+.2f} µs)" if ref and m else "?"
        rows.append([label, f(m), f"{f(t.get('p10Us'))}–{f(t.get('p90Us'))}", delta])
    nr = {k: med(ncu_rows(f"{work}/{c}.ncu-replay-{k}.csv")) for k in ("new", "old")}
    doc["cases"][c] = {"title": title, "ncuAppWarm": warm, "ncuAppFlushed": cold, "appEventsUs": app_us, "replay": doc_rows, "ncuOnReplay": nr}
    if not rows and not warm: continue
    print(f"\n[exp-kernel-time] {title}: ncu on the app {f(ref)} µs warm (DRAM MB read+write {mb(warm)}), {f(cold['us'] if cold else None)} µs flushed ({mb(cold)}); the capture's events in the app {f(app_us)} µs")
    for k, lab in (("new", "reread"), ("old", "default (l2=restored)")):
        x = nr[k]
        if x: print(f"  ncu --cache-control none on the replay's timed launches, {lab}: {f(x['us'])} µs ({(x['us'] / ref - 1) * 100:+.1f}% of the app's), DRAM MB {mb(x)}" if ref else f"  ncu on the replay, {lab}: {f(x['us'])} µs, DRAM MB {mb(x)}")
    head = ["replay setup", "median µs", "p10–p90", "vs ncu on the app (warm)"]
    w = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)] if rows else [len(h) for h in head]
    print("  " + "  ".join(h.ljust(w[j]) for j, h in enumerate(head)))
    for r in rows: print("  " + "  ".join(x.ljust(w[j]) for j, x in enumerate(r)))
l2 = []
try:
    l2 = [json.loads(l) for l in open(f"{work}/l2_state.jsonl") if l.strip()]
except OSError: pass
empty_ncu = med(ncu_rows(f"{work}/ncu-empty.csv"))
doc["l2State"] = l2
doc["emptyKernelNcu"] = empty_ncu
if l2:
    print(f"\n[exp-kernel-time] test/apps/l2_state.cu (events after a 30 µs spin, medians of 40); ncu's duration of the empty kernel: {f(empty_ncu['us'] if empty_ncu else None, 3)} µs")
    w0 = max(len(x["case"]) for x in l2)
    for x in l2: print(f"  {x['case'].ljust(w0)}  {str(x['floats']).rjust(8)}  {x['memory'].ljust(20)}  {x['medianUs']:8.2f} µs  ({x['p10Us']:.2f}–{x['p90Us']:.2f})")
print(f"\n[exp-kernel-time] clocks (sm, mem, applications, max; MHz) before {doc['clocksBefore']!r}, after {doc['clocksAfter']!r}")
if out:
    with open(os.path.join(out, "exp-kernel-time.json"), "w") as fh: json.dump(doc, fh, indent=2)
    print(f"[exp-kernel-time] wrote {os.path.join(out, 'exp-kernel-time.json')}")
PY
