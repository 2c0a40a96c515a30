#!/usr/bin/env bash
# The verdict benchmark (GPU, about 5 minutes on the H200): can kerncap's verdicts be left
# unattended? Four measurements, one table:
#  1. false MISMATCH: REPLAYS (default 20) replays of each nondeterministic capture of the GPU
#     suite — atomics_timing.cu atomics (float atomics through a table of structs, captured after
#     an L2 eviction and a busy stream), verdicts.cu sum (float atomicAdd) and compact (atomic
#     append, --multiset param:2), torch index_add_ when torch is there; target 0;
#  2. the planted change: spread + 3 ulp in one element of the atomics capture's region that never
#     varies (test/gpu/plant.ts), replayed PLANTED (default 5) times; target: MISMATCH every time;
#  3. A/A false claims: `replay A --against A/kernel/module.* --repeat AA` (default 60 each, 240
#     in all; two captures never share VAs, so the launch is timed against its own module) where A
#     is a capture of atomics_timing.cu spin N, on 4 kernel sizes
#     (SIZES, default "100 1500 8000 60000" FMAs: about 2, 20, 80 and 300 µs); target ≤ 1%;
#  4. power: against a module built with -DSPIN_PCT=103 and 110 (the same kernel doing 3% and 10%
#     more FMAs on the same memory; POWER, default 40 comparisons each, on the 2nd
#     and 3rd size); target ≥ 95% found slower; the measured ratio of the medians is printed;
#  and the time one comparison takes (median). Figures to $OUT/bench-verdicts.json when OUT is set.
# Usage: scripts/bench-verdicts.sh   (KERNCAP_BIN: the kerncap binary, default dist/kerncap)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
work="${TMPDIR:-/tmp}/kerncap-bench-verdicts"
replays="${REPLAYS:-20}"; planted="${PLANTED:-5}"; aa="${AA:-60}"; power="${POWER:-40}"
sizes=(${SIZES:-100 1500 8000 60000})
say() { echo "[bench-verdicts] $*" >&2; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"
t0=$(date +%s)
nvcc -O2 -arch=sm_90 -o "$work/atomics_timing" test/apps/atomics_timing.cu || { say "nvcc atomics_timing.cu failed"; exit 1; }
nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu || { say "nvcc verdicts.cu failed"; exit 1; }
cap() { # LABEL KERNEL DISPATCH APP…
  local label=$1 kernel=$2 dispatch=$3; shift 3
  "$bin" run --kernel "$kernel" --dispatch "$dispatch" --out "$work/$label" --json -- "$@" > "$work/$label.run.json" 2> "$work/$label.run.err" || say "$label: capture failed: $(tail -2 "$work/$label.run.err")"
}

# 1. false MISMATCH over repeated replays of each nondeterministic capture
cap atomics block_sums 1 "$work/atomics_timing" atomics
cap sum partial_sums 1 "$work/verdicts" sum
cap compact compact 1 "$work/verdicts" compact
nd=(atomics sum "compact|--multiset param:2")
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  printf 'import torch\ntorch.manual_seed(0)\nx = torch.zeros(1000, 64, device="cuda")\nsrc = torch.randn(200000, 64, device="cuda")\nidx = torch.randint(0, 1000, (200000,), device="cuda")\nfor _ in range(2):\n    x.index_add_(0, idx, src)\ntorch.cuda.synchronize()\n' > "$work/index_add.py"
  cap index_add 'index(Func|_add|Add)' 0 python3 "$work/index_add.py"
  nd+=(index_add)
fi
for c in "${nd[@]}"; do
  label="${c%%|*}"; extra=""; [ "$c" != "$label" ] && extra="${c#*|}"
  [ -d "$work/$label" ] || continue
  for k in $(seq 1 "$replays"); do
    # shellcheck disable=SC2086  # extra options split on purpose
    "$bin" replay "$work/$label" --iters 1 --json $extra > "$work/$label.r$k.json" 2>> "$work/$label.replay.err"
  done
done
say "replays done after $(( $(date +%s) - t0 )) s"

# 2. the planted change in the atomics capture's region that never varied
if [ -d "$work/atomics" ]; then
  cp -r "$work/atomics" "$work/atomics-planted"
  python3 - "$work" "$replays" > "$work/plant-args" <<'PY'
import json, sys, os
work, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(os.path.join(work, "atomics", "kerncap.json")))
rs = [json.load(open(os.path.join(work, f"atomics.r{k}.json"))) for k in range(1, n + 1) if os.path.exists(os.path.join(work, f"atomics.r{k}.json"))]
varied = {x["va"] for r in rs for x in r.get("numerics", {}).get("regions", []) if x.get("spread")}
spread = max([x.get("spread", {}).get("maxUlpSpread", 0) for r in rs for x in r.get("numerics", {}).get("regions", [])] + [0])
held = {x["va"] for r in rs for x in r.get("numerics", {}).get("regions", []) if (x.get("kernelNoise") or {}).get("elementsDiffering")}
# the kernel writes only the accumulators; the plant goes into a quiet region where the app agrees bit for bit
quiet = [i for i, r in enumerate(m["regions"]) if r["changed"] and r["va"] not in varied and r["va"] not in held]
print(quiet[-1] if quiet else -1, int(spread + 0.999) + 3)
PY
  read -r region ulps < "$work/plant-args"
  if [ "$region" -ge 0 ]; then
    BUN_BE_BUN=1 "$bin" test/gpu/plant.ts "$work/atomics-planted" "$region" 5 "$ulps" > "$work/plant.json" 2>&1 || say "plant failed: $(cat "$work/plant.json")"
    for k in $(seq 1 "$planted"); do "$bin" replay "$work/atomics-planted" --iters 1 --json > "$work/planted.r$k.json" 2>/dev/null; done
  else say "no region of the atomics capture stayed quiet: nothing to plant in"; fi
fi
say "planted change done after $(( $(date +%s) - t0 )) s"

# 3-4. A/A and planted slowdowns on atomics_timing.cu spin N
for i in "${!sizes[@]}"; do
  n=${sizes[$i]}
  cap "spin$n-a" fma_spin 1 "$work/atomics_timing" spin "$n"
  # two captures are two processes, never the same VAs: A/A is the launch against its own module
  own=$(echo "$work/spin$n-a"/kernel/module.*) # the cubin, or the app's fatbin where it had PTX beside it
  "$bin" replay "$work/spin$n-a" --against "$own" --iters 24 --repeat "$aa" --json > "$work/aa$n.json" 2> "$work/aa$n.err" || say "A/A $n: exit $? ($(tail -1 "$work/aa$n.err"))"
  if [ "$i" -eq 1 ] || [ "$i" -eq 2 ]; then
    for pct in 3 10; do
      # the same kernel doing pct% more FMAs on the same memory and parameters (SPIN_PCT)
      [ -f "$work/spin-p$pct.cubin" ] || nvcc -cubin -O2 -arch=sm_90 -DSPIN_PCT=$(( 100 + pct )) -o "$work/spin-p$pct.cubin" test/apps/atomics_timing.cu
      "$bin" replay "$work/spin$n-a" --against "$work/spin-p$pct.cubin" --iters 24 --repeat "$power" --json > "$work/p$pct-$n.json" 2> "$work/p$pct-$n.err" || say "power $pct% $n: exit $? ($(tail -1 "$work/p$pct-$n.err"))"
    done
  fi
  say "size $n done after $(( $(date +%s) - t0 )) s"
done

python3 - "$work" "${OUT:-}" "$replays" "${sizes[*]}" "$(( $(date +%s) - t0 ))" <<'PY'
import json, os, sys, statistics as st
work, out, n, sizes, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split()], int(sys.argv[5])
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return None
doc, rows = {"seconds": secs}, []
def row(*c): rows.append([str(x) for x in c])
row("measurement", "case", "result", "target", "ok")
for label in ["atomics", "sum", "compact", "index_add"]:
    rs = [load(os.path.join(work, f"{label}.r{k}.json")) for k in range(1, n + 1)]
    rs = [r for r in rs if r and "verdict" in r]
    if not rs: continue
    bad = sum(r["verdict"] != "match" for r in rs)
    held = sum(any((x.get("kernelNoise") or {}).get("elementsDiffering") for x in r["numerics"]["regions"]) for r in rs)
    runs = st.median([r["determinism"]["runs"] for r in rs])
    doc[f"falseMismatch.{label}"] = {"replays": len(rs), "mismatch": bad, "judgedByKernelNoise": held, "medianRuns": runs}
    row("false MISMATCH", label, f"{bad} of {len(rs)} (kernel-level {held}, runs {runs:g})", "0", "yes" if bad == 0 else "NO")
ps = [load(os.path.join(work, f)) for f in sorted(os.listdir(work)) if f.startswith("planted.r")]
ps = [p for p in ps if p]
if ps:
    caught = sum(p.get("verdict") == "mismatch" for p in ps)
    doc["planted"] = {"replays": len(ps), "caught": caught}
    row("planted change", "atomics, spread+3 ulp", f"{caught} of {len(ps)} MISMATCH", "all", "yes" if caught == len(ps) else "NO")
claims = total = 0
secs_all = []
for s in sizes:
    d = load(os.path.join(work, f"aa{s}.json"))
    if not d or "repeats" not in d: row("A/A false claims", f"spin {s}", "failed", "≤ 1%", "-"); continue
    cs = [r["compare"] for r in d["repeats"] if r["compare"]]
    c = sum(x["verdict"] != "same" for x in cs)
    claims += c; total += len(cs)
    secs_all += [r["seconds"] for r in d["repeats"]]
    us = st.median([x["baselineMedianUs"] for x in cs])
    det = st.median([x["detectable"] for x in cs if x["detectable"] is not None] or [float("nan")])
    doc[f"aa.{s}"] = {"kernelUs": us, "comparisons": len(cs), "claims": c, "medianDetectable": det, "medianPairs": st.median([x["pairs"] for x in cs])}
    row("A/A false claims", f"{us:.1f} µs", f"{c} of {len(cs)} (could see {det*100:.1f}%)", "≤ 1%", "yes" if c <= 0.01 * len(cs) else "NO")
if total: row("A/A false claims", "all sizes", f"{claims} of {total} = {claims/total*100:.2f}%", "≤ 1%", "yes" if claims <= 0.01 * total else "NO")
for pct in (3, 10):
    for s in sizes:
        d = load(os.path.join(work, f"p{pct}-{s}.json"))
        if not d or "repeats" not in d: continue
        cs = [r["compare"] for r in d["repeats"] if r["compare"]]
        found = sum(x["verdict"] == "slower" for x in cs)
        ratio = st.median([x["candidateMedianUs"] / x["baselineMedianUs"] for x in cs])
        # the comparisons that missed the planted change, as the compare said them (margin and interval: why no claim)
        missed = [{"verdict": x["verdict"], "text": x["text"], "margin": x["margin"], "aa": x.get("aa"), "bb": x.get("bb"), "pairs": x["pairs"]} for x in cs if x["verdict"] != "slower"]
        for x in missed: print(f"[bench-verdicts] power {pct}% spin {s} missed: {x['text']} (margin {x['margin']*100:.2f}%, {x['pairs']} pairs)", file=sys.stderr)
        doc[f"power{pct}.{s}"] = {"comparisons": len(cs), "slower": found, "measuredRatio": ratio, "missed": missed}
        row(f"power at {pct}%", f"{st.median([x['baselineMedianUs'] for x in cs]):.1f} µs (measured ×{ratio:.3f})", f"{found} of {len(cs)}", "≥ 95%", "yes" if found >= 0.95 * len(cs) else "NO")
if secs_all:
    doc["secondsPerCompare"] = {"median": st.median(secs_all), "max": max(secs_all)}
    row("time of a compare", "median / max", f"{st.median(secs_all):.2f} / {max(secs_all):.2f} s", "-", "-")
w = [max(len(r[i]) for r in rows) for i in range(5)]
for r in rows: print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
print(f"({secs} s in all)")
if out:
    json.dump(doc, open(os.path.join(out, "bench-verdicts.json"), "w"), indent=1)
PY
