#!/usr/bin/env bash
# Where a CUDA reproducer's rebuild spends its time: runs its build.sh with `nvcc --time` (one warm
# build first, then the timed one) and prints each nvcc phase (preprocessing, cicc: the EDG front
# end and NVVM; ptxas) in ms; then, for a template slice, the same build with the line that
# instantiates the captured kernel taken out ("headers alone": what parsing the TU's headers costs
# before any code of the kernel is made); then the size of the preprocessed source. A diagnostic
# for the edit loop (issue 14: what dominates `validate --watch`), not a timed test.
# Usage: scripts/nvcc-phases.sh CAPTURE_DIR [LABEL]
set -euo pipefail
case "${1:-}" in ""|-h|--help) echo "usage: scripts/nvcc-phases.sh CAPTURE_DIR [LABEL]: each nvcc phase of the capture's build.sh (nvcc --time)" >&2; [ -n "${1:-}" ]; exit $? ;; esac
cap="$1"; label="${2:-$(basename "$cap")}"
[ -x "$cap/build.sh" ] || { echo "nvcc-phases: $cap/build.sh not found (a CUDA capture with a reproducer?)" >&2; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
# timed BUILD_SH LABEL: one `nvcc --time` build, one line of phases
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  EXTRA_FLAGS="--time $tmp/time.csv" bash "$1" "$tmp/k.cubin" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; return 2; }
  t1=$(date +%s.%N)
  # nvcc --time CSV: source file, phase name, inputs, output, arch, tool, metric, unit
  awk -F, -v label="$2" -v wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1000}')" '
    NR == 1 { next }
    { gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $(NF-1)); line = line sprintf(" %s %.0f ms;", $2, $(NF-1)) }
    END { printf "nvcc-phases %s: build.sh %s ms |%s\n", label, wall, line }' "$tmp/time.csv"
  rm -f "$tmp/time.csv"
}
bash "$cap/build.sh" "$tmp/warm.cubin" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 2; }
timed "$cap/build.sh" "$label"
grep '^kerncap:' "$tmp/err" | sed "s/^/nvcc-phases $label: /" || true
# the slice build.sh compiles (its `slice=` line), when it has one that instantiates the kernel
rel="$(sed -n 's|^slice="\$here/\(.*\)"$|\1|p' "$cap/build.sh" | head -1)"
if [ -n "$rel" ] && grep -q '^void\* kerncap_captured_kernel' "$cap/$rel"; then
  mkdir -p "$tmp/copy"; cp "$cap/build.sh" "$tmp/copy/"; cp -r "$cap/src" "$tmp/copy/"
  sed -i 's|^void\* kerncap_captured_kernel.*$||' "$tmp/copy/$rel"
  timed "$tmp/copy/build.sh" "$label headers alone (the slice without the kernel's instantiation)"
fi
# the same command with -E: the size of what cicc parses (the slice or TU with every header)
EXTRA_FLAGS="-E" bash "$cap/build.sh" "$tmp/pp.ii" >/dev/null 2>&1 &&
  echo "nvcc-phases $label: preprocessed $(wc -l <"$tmp/pp.ii") lines, $(wc -c <"$tmp/pp.ii") bytes" || true
