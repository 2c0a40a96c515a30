#!/usr/bin/env bash
# The build side of `kerncap eval`, no GPU needed: N candidate edits of a CUDA capture built with
# `eval --build-only`, once from the pruned TU (the default: src/eval/pruned.ts, its check of the
# capture's own source included) and once with --full-build (each candidate by the capture's
# build.sh), in one run; prints both walls, the ratio, the builders the records name and whether
# every candidate got the same registers both ways.
# Usage: scripts/bench-eval-builds.sh [N] [DIR]
#   N: candidates (default 16); DIR: a CUDA capture whose TU holds the line `p->a * p->x.data[i]`
#   (default: `kerncap demo` with cub's headers included by its TU, made here, so that the TU has
#   something to prune). The binary: KERNCAP_BIN, else dist/kerncap (built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
n="${1:-16}"
[ -x "$bin" ] || bash scripts/build.sh >/dev/null
work="$(mktemp -d "${TMPDIR:-/tmp}/kerncap-bench-eval-builds.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export KERNCAP_LIBCUDA="" XDG_STATE_HOME="$work/state"
dir="${2:-}"
if [ -z "$dir" ]; then
  dir="$work/cap"
  "$bin" demo "$dir" >/dev/null 2>&1
  sed -i '0,/^#include/s||#include <cub/cub.cuh>\n#include|' "$dir/src/saxpy.cu"
fi
tu="$(grep -l 'p->a \* p->x.data\[i\]' "$dir"/src/*.cu | grep -v kerncap-slice | head -1)"
[ -n "$tu" ] || { echo "[bench-eval-builds] $dir/src has no TU with the line p->a * p->x.data[i]"; exit 1; }
cands=()
for i in $(seq 1 "$n"); do
  mkdir -p "$work/c$i"
  sed "s/p->a \* p->x.data\[i\]/p->a * p->x.data[i] * ${i}.5f/" "$tu" >"$work/c$i/$(basename "$tu")"
  cands+=("$work/c$i/$(basename "$tu")")
done
run() { # $1: label, then eval's extra options
  local label="$1"; shift
  rm -rf "$dir/build/eval"
  local t0 t1
  t0=$(date +%s.%N)
  "$bin" eval "$dir" "${cands[@]}" --build-only --json "$@" >"$work/$label.jsonl" 2>"$work/$label.err" || true
  t1=$(date +%s.%N)
  python3 -c "print(round($t1 - $t0, 2))"
}
full=$(run full --full-build)
pruned=$(run pruned)
python3 - "$work" "$n" "$full" "$pruned" "$(nproc)" <<'PY'
import json, sys
work, n, full, pruned, cpus = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def recs(label):
    return {r["label"]: r for r in (json.loads(l) for l in open(f"{work}/{label}.jsonl") if l.strip()) if r.get("schema") == "kerncap.eval-record/1"}
f, p = recs("full"), recs("pruned")
builders = {}
for r in p.values():
    b = r["build"].get("builder", "none"); builders[b] = builders.get(b, 0) + 1
same = sum(1 for k in f if k in p and f[k]["build"].get("registers") == p[k]["build"].get("registers") and f[k]["verdict"] == p[k]["verdict"])
print(f"[bench-eval-builds] {n} candidates on {cpus} CPUs: --full-build {full:.2f} s ({n / full * 60:.1f}/min), pruned {pruned:.2f} s ({n / pruned * 60:.1f}/min, the check included): {full / pruned:.2f}x")
print(f"[bench-eval-builds] pruned run's builders {builders}; verdicts and registers equal for {same} of {len(f)}")
PY
grep -h "eval builds" "$work/pruned.err" | sed 's/^/[bench-eval-builds] /' || true
