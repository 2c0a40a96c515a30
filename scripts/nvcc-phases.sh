#!/usr/bin/env bash
# Where a CUDA reproducer's rebuild spends its time: runs its build.sh with `nvcc --time` (one warm
# build first, then the timed one) and prints each nvcc phase (preprocessing, cicc's front end and
# NVVM, ptxas, fatbinary) in ms, then the size of the preprocessed source. A diagnostic for the
# edit loop (issue 14: what dominates `validate --watch`), not a timed test.
# Usage: scripts/nvcc-phases.sh CAPTURE_DIR [LABEL]
set -euo pipefail
cap="$1"; label="${2:-$(basename "$cap")}"
[ -x "$cap/build.sh" ] || { echo "nvcc-phases: $cap/build.sh not found (a CUDA capture with a reproducer?)" >&2; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
bash "$cap/build.sh" "$tmp/warm.cubin" >/dev/null 2>"$tmp/warm.err" || { cat "$tmp/warm.err" >&2; exit 2; }
t0=$(date +%s.%N)
EXTRA_FLAGS="--time $tmp/time.csv" bash "$cap/build.sh" "$tmp/k.cubin" >/dev/null 2>"$tmp/err"
t1=$(date +%s.%N)
# nvcc --time CSV: source file, phase name, arch, tool, metric, unit (one row per phase)
awk -F, -v label="$label" -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1000}')" '
  NR == 1 { next }
  { gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $(NF-1)); phase[n++] = $2 ": " $(NF-1) " ms" }
  END { printf "nvcc-phases %s: build.sh %s ms |", label, wall; for (i = 0; i < n; i++) printf " %s;", phase[i]; printf "\n" }' "$tmp/time.csv"
grep '^kerncap:' "$tmp/err" | sed "s/^/nvcc-phases $label: /" || true
# the same command with -E: the size of what cicc parses (the slice or TU with every header)
EXTRA_FLAGS="-E" bash "$cap/build.sh" "$tmp/pp.ii" >/dev/null 2>&1 &&
  echo "nvcc-phases $label: preprocessed $(wc -l <"$tmp/pp.ii") lines, $(wc -c <"$tmp/pp.ii") bytes" || true
