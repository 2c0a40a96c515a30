#!/usr/bin/env bash
# Graph-capture overhead (issue 11), one run on a GPU: test/apps/graphs.cu in its bench mode
# launches `scale` over MIB MiB (default 1024) REPS times (default 10), eagerly or as the one
# kernel node of a stream-captured graph. Times, each the best of 3: the app alone, then
# `kerncap run` capturing the last launch eagerly and from the graph (where kerncap also saves the
# graph's starting state, runs the node's ancestors, and puts the state back); prints the seconds,
# each capture's cost over the app alone, and the graph capture's cost against the eager one.
# Usage: scripts/bench-graphs.sh [MIB] [REPS]   (KERNCAP_BIN: the kerncap binary, default dist/kerncap)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
mib="${1:-1024}"
reps="${2:-10}"
work="${TMPDIR:-/tmp}/kerncap-bench-graphs"
unset BUN_BE_BUN
say() { echo "[bench-graphs] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
rm -rf "$work"; mkdir -p "$work"
nvcc -O2 -arch=sm_90 -o "$work/graphs" test/apps/graphs.cu
now() { date +%s.%N; }
# best of 3 wall-clock seconds of a command (its output to $work/last.log)
best() {
  local b=""
  for _ in 1 2 3; do
    local t0 t1
    t0=$(now); "$@" > "$work/last.log" 2>&1 || { cat "$work/last.log"; say "failed: $*"; exit 1; }; t1=$(now)
    b=$(awk -v a="$t0" -v c="$t1" -v b="$b" 'BEGIN{d=c-a; if (b=="" || d<b) b=d; printf "%.3f", b}')
  done
  echo "$b"
}
last=$((reps - 1))
app_e=$(best "$work/graphs" bench eager "$reps" "$mib")
app_g=$(best "$work/graphs" bench graph "$reps" "$mib")
cap_e=$(best "$bin" run --kernel '^_Z5scalePffi$' --dispatch "$last" --out "$work/eager" --force -- "$work/graphs" bench eager "$reps" "$mib")
cap_g=$(best "$bin" run --kernel '^_Z5scalePffi$' --dispatch "$last" --out "$work/graph" --force -- "$work/graphs" bench graph "$reps" "$mib")
grep -q '"graph"' "$work/graph/kerncap.json" || { say "the graph run did not capture from the graph"; exit 1; }
awk -v ae="$app_e" -v ag="$app_g" -v ce="$cap_e" -v cg="$cap_g" -v mib="$mib" -v reps="$reps" 'BEGIN{
  oe = ce - ae; og = cg - ag
  printf "[bench-graphs] scale over %d MiB, %d launches, capture of the last (best of 3 runs each)\n", mib, reps
  printf "  app alone:        eager %.3f s   graph %.3f s\n", ae, ag
  printf "  kerncap run:      eager %.3f s   graph %.3f s\n", ce, cg
  printf "  run / app:        eager %.2fx    graph %.2fx\n", ce / ae, cg / ag
  printf "  capture overhead: eager %.3f s   graph %.3f s   graph / eager %.2fx\n", oe, og, (oe > 0 ? og / oe : 0)
}'
