#!/usr/bin/env bash
# Per-launch overhead of the CUDA capture library, before and after a change, in one run.
#
#   bash scripts/bench-launch-overhead.sh [BASELINE_LIB]
#
# Compiles (nvcc) a tiny app that launches an empty kernel LAUNCHES times (default 200000,
# cudaDeviceSynchronize every SYNC_EVERY = 1000) and times its launch loop itself (steady_clock,
# after a warm-up). It runs (a) bare, (b) under BASELINE_LIB (argument, else $BASELINE_LIB, else
# .carry/baseline/libkerncap_cuda.so: the library built before the change), (c) under
# c/build/libkerncap_cuda.so (built now: run scripts/build-c.sh first), each library injected as
# `kerncap run` injects it (src/capture/coexist.ts injectionEnv, src/env.ts captureLibraryEnv):
# CUDA_INJECTION64_PATH and LD_PRELOAD, KERNCAP_OUT (a fresh folder with kernel/ and memory/),
# KERNCAP_MODE=capture, KERNCAP_DISPATCH=0, KERNCAP_CUPTI_PATH, and a --kernel regex that matches
# no kernel, so every launch goes through the callback and none is captured. Runs alternate
# a b c a b c … (RUNS rounds, default 5). Prints each run, the medians, the per-launch overhead in
# µs of (b) and (c) over (a), and the ratio (c)/(b) of the median loop times [target ≤ 1.02].
# Needs an NVIDIA GPU, nvcc and libcupti; fails with a message when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHES="${LAUNCHES:-200000}"
SYNC_EVERY="${SYNC_EVERY:-1000}"
RUNS="${RUNS:-5}"
base_lib="${1:-${BASELINE_LIB:-.carry/baseline/libkerncap_cuda.so}}"
new_lib=c/build/libkerncap_cuda.so
die() { echo "bench-launch-overhead: $*" >&2; exit 1; }

command -v nvcc >/dev/null || die "nvcc not found (put the CUDA toolkit's bin on PATH)"
[ -f "$base_lib" ] || die "no baseline library at $base_lib (give its path as the argument or BASELINE_LIB)"
[ -f "$new_lib" ] || die "no $new_lib: run bash scripts/build-c.sh first"
base_lib=$(realpath "$base_lib")
new_lib=$(realpath "$new_lib")
cuda_home="${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}"
cupti="${KERNCAP_CUPTI_PATH:-$(find -L "$cuda_home" \( -name 'libcupti.so' -o -name 'libcupti.so.[0-9]*' \) 2>/dev/null | sort | head -1)}"
[ -n "$cupti" ] && [ -f "$cupti" ] || die "libcupti not found under $cuda_home (set KERNCAP_CUPTI_PATH)"

work=$(mktemp -d "${TMPDIR:-/tmp}/kerncap-bench-launch-XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/app.cu" <<'EOF'
// LAUNCHES launches of an empty kernel, a cudaDeviceSynchronize every SYNC_EVERY; prints the loop's ns.
#include <chrono>
#include <cstdio>
#include <cstdlib>
__global__ void kc_bench_empty(int *p) { if (p) *p = 0; }
int main(int argc, char **argv) {
  long n = atol(argv[1]), every = atol(argv[2]);
  cudaError_t e = cudaFree(0);
  if (e != cudaSuccess) { fprintf(stderr, "no usable GPU: %s\n", cudaGetErrorString(e)); return 1; }
  for (int i = 0; i < 1000; i++) kc_bench_empty<<<1, 1>>>(nullptr); // warm-up: module load, first launches
  cudaDeviceSynchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) {
    kc_bench_empty<<<1, 1>>>(nullptr);
    if ((i + 1) % every == 0) cudaDeviceSynchronize();
  }
  e = cudaDeviceSynchronize();
  auto t1 = std::chrono::steady_clock::now();
  if (e != cudaSuccess) { fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(e)); return 1; }
  printf("%lld\n", (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  return 0;
}
EOF
nvcc -O2 -o "$work/app" "$work/app.cu" || die "nvcc could not compile the benchmark app"

# run_one KIND: the loop's ns, the app run bare (a) or under a library (b, c)
run_one() {
  local kind=$1 lib="" out
  case $kind in b) lib=$base_lib ;; c) lib=$new_lib ;; esac
  if [ -z "$lib" ]; then
    "$work/app" "$LAUNCHES" "$SYNC_EVERY" || die "the app failed bare (no GPU?)"
    return
  fi
  out=$(mktemp -d "$work/out-XXXXXX")
  mkdir -p "$out/kernel" "$out/memory"
  env CUDA_INJECTION64_PATH="$lib" LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" \
    KERNCAP_OUT="$out" KERNCAP_MODE=capture KERNCAP_KERNEL='^kerncap_never_matches$' KERNCAP_DISPATCH=0 \
    KERNCAP_CUPTI_PATH="$cupti" "$work/app" "$LAUNCHES" "$SYNC_EVERY" || die "the app failed under $lib"
  if compgen -G "$out/error.*.txt" >/dev/null; then die "the library failed under ($kind) $lib: $(cat "$out"/error.*.txt)"; fi
  [ -e "$out/raw.json" ] && die "($kind) captured a launch: the --kernel regex was meant to match none"
  rm -rf "$out"
}

declare -A times=([a]="" [b]="" [c]="")
for ((r = 1; r <= RUNS; r++)); do
  for k in a b c; do
    ns=$(run_one "$k")
    times[$k]+="$ns "
    echo "round $r ($k): $(awk -v t="$ns" -v n="$LAUNCHES" 'BEGIN { printf "%.3f s, %.3f us/launch", t / 1e9, t / 1e3 / n }')"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ma=$(median "${times[a]}")
mb=$(median "${times[b]}")
mc=$(median "${times[c]}")
awk -v a="$ma" -v b="$mb" -v c="$mc" -v n="$LAUNCHES" -v runs="$RUNS" -v base="$base_lib" -v new="$new_lib" 'BEGIN {
  printf "medians of %d runs, %d launches each:\n", runs, n
  printf "  (a) bare      %.3f s  %.3f us/launch\n", a / 1e9, a / 1e3 / n
  printf "  (b) baseline  %.3f s  %.3f us/launch  overhead %.3f us/launch  (%s)\n", b / 1e9, b / 1e3 / n, (b - a) / 1e3 / n, base
  printf "  (c) now       %.3f s  %.3f us/launch  overhead %.3f us/launch  (%s)\n", c / 1e9, c / 1e3 / n, (c - a) / 1e3 / n, new
  printf "ratio (c)/(b) = %.4f [target <= 1.02]\n", c / b
  if (b > a) printf "overhead ratio (c-a)/(b-a) = %.4f\n", (c - a) / (b - a)
}'
