#!/usr/bin/env bash
# Per-launch overhead of the CUDA capture library on the counting path (`kerncap list`, and
# `kerncap run` whose --kernel matches no launch), against the application alone.
#
#   bash scripts/bench-launch-overhead.sh [BASELINE_LIB]
#
# Applications (APPS, default "cuda torch"):
#   cuda   an nvcc-built loop of LAUNCHES launches of an empty kernel (default 200000,
#          cudaDeviceSynchronize every SYNC_EVERY = 1000), timing its loop itself (steady_clock,
#          after a warm-up);
#   torch  TORCH_LAUNCHES (default 30000) tiny PyTorch launches (x.add_(1) on a one-element CUDA
#          tensor, a torch.cuda.synchronize every 1000), timing its loop itself (perf_counter,
#          after a warm-up); skipped with a message when python3 cannot import torch with CUDA.
# Each application runs bare, then under c/build/libkerncap_cuda.so (run scripts/build-c.sh
# first) in `list` mode and in `run` mode with no match, and, when a baseline library is given
# (argument, $BASELINE_LIB, or .carry/baseline/libkerncap_cuda.so when it exists: the library
# built before a change), under it in the same two modes. A library is injected as `kerncap
# run`/`list` injects it (src/capture/coexist.ts injectionEnv, src/env.ts captureLibraryEnv):
# CUDA_INJECTION64_PATH and LD_PRELOAD, KERNCAP_OUT (a fresh folder with kernel/ and memory/),
# KERNCAP_MODE, KERNCAP_CUPTI_PATH, and for `run` KERNCAP_KERNEL (a regex that matches no kernel)
# and KERNCAP_DISPATCH=0. Runs alternate bare, then each (library, mode), RUNS rounds (default 5).
# Prints each run, then per application and (library, mode) the median loop time, the overhead
# per launch in µs and the ratio to the bare median, with the targets: list <= 1.10, run <= 1.02.
# Needs an NVIDIA GPU, nvcc and libcupti; fails with a message when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHES="${LAUNCHES:-200000}"
SYNC_EVERY="${SYNC_EVERY:-1000}"
TORCH_LAUNCHES="${TORCH_LAUNCHES:-30000}"
RUNS="${RUNS:-5}"
APPS="${APPS:-cuda torch}"
base_lib="${1:-${BASELINE_LIB:-}}"
[ -z "$base_lib" ] && [ -f .carry/baseline/libkerncap_cuda.so ] && base_lib=.carry/baseline/libkerncap_cuda.so
new_lib=c/build/libkerncap_cuda.so
die() { echo "bench-launch-overhead: $*" >&2; exit 1; }

command -v nvcc >/dev/null || die "nvcc not found (put the CUDA toolkit's bin on PATH)"
[ -z "$base_lib" ] || [ -f "$base_lib" ] || die "no baseline library at $base_lib"
[ -f "$new_lib" ] || die "no $new_lib: run bash scripts/build-c.sh first"
new_lib=$(realpath "$new_lib")
[ -n "$base_lib" ] && base_lib=$(realpath "$base_lib")
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
cat >"$work/app.py" <<'EOF'
# argv[1] tiny launches (x.add_(1) on one element), a synchronize every 1000; prints the loop's ns.
import sys, time, torch
n = int(sys.argv[1])
x = torch.zeros(1, device="cuda")
for _ in range(1000):
    x.add_(1)
torch.cuda.synchronize()
t0 = time.perf_counter_ns()
for i in range(n):
    x.add_(1)
    if (i + 1) % 1000 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
print(time.perf_counter_ns() - t0)
EOF
apps=()
for a in $APPS; do
  case $a in
    cuda) nvcc -O2 -o "$work/app" "$work/app.cu" || die "nvcc could not compile the benchmark app"; apps+=(cuda) ;;
    torch)
      if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then apps+=(torch)
      else echo "bench-launch-overhead: python3 cannot import torch with CUDA here: the torch application is skipped"; fi ;;
    *) die "unknown application $a (APPS: cuda torch)" ;;
  esac
done
[ ${#apps[@]} -gt 0 ] || die "no application to run"

# app_cmd APP: the command line of an application
app_cmd() { case $1 in cuda) echo "$work/app $LAUNCHES $SYNC_EVERY" ;; torch) echo "python3 $work/app.py $TORCH_LAUNCHES" ;; esac; }
launches_of() { case $1 in cuda) echo "$LAUNCHES" ;; torch) echo "$TORCH_LAUNCHES" ;; esac; }

# run_one APP LIB MODE: the loop's ns (LIB empty: bare)
run_one() {
  local app=$1 lib=$2 mode=$3 out
  if [ -z "$lib" ]; then
    $(app_cmd "$app") || die "$app failed bare (no GPU?)"
    return
  fi
  out=$(mktemp -d "$work/out-XXXXXX")
  mkdir -p "$out/kernel" "$out/memory"
  local sel=()
  [ "$mode" = run ] && sel=(KERNCAP_MODE=capture KERNCAP_KERNEL='^kerncap_never_matches$' KERNCAP_DISPATCH=0) || sel=(KERNCAP_MODE=list)
  env CUDA_INJECTION64_PATH="$lib" LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" KERNCAP_OUT="$out" "${sel[@]}" \
    KERNCAP_CUPTI_PATH="$cupti" $(app_cmd "$app") || die "$app failed under $lib ($mode)"
  if compgen -G "$out/error.*.txt" >/dev/null; then die "the library failed under $lib ($mode): $(cat "$out"/error.*.txt)"; fi
  [ -e "$out/raw.json" ] && die "$lib ($mode) captured a launch: the --kernel regex was meant to match none"
  rm -rf "$out"
}

configs=("bare||" "now|$new_lib|list" "now|$new_lib|run")
[ -n "$base_lib" ] && configs+=("baseline|$base_lib|list" "baseline|$base_lib|run")
declare -A times
for app in "${apps[@]}"; do
  for ((r = 1; r <= RUNS; r++)); do
    for c in "${configs[@]}"; do
      IFS='|' read -r label lib mode <<<"$c"
      ns=$(run_one "$app" "$lib" "$mode")
      times[$app,$c]+="$ns "
      echo "$app round $r ($label${mode:+ $mode}): $(awk -v t="$ns" -v n="$(launches_of "$app")" 'BEGIN { printf "%.3f s, %.3f us/launch", t / 1e9, t / 1e3 / n }')"
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for app in "${apps[@]}"; do
  n=$(launches_of "$app")
  bare=$(median "${times[$app,bare||]}")
  echo "$app: medians of $RUNS runs, $n launches each"
  awk -v a="$bare" -v n="$n" 'BEGIN { printf "  bare                %.3f s  %.3f us/launch\n", a / 1e9, a / 1e3 / n }'
  for c in "${configs[@]:1}"; do
    IFS='|' read -r label lib mode <<<"$c"
    m=$(median "${times[$app,$c]}")
    target=$([ "$mode" = list ] && echo 1.10 || echo 1.02)
    awk -v a="$bare" -v m="$m" -v n="$n" -v l="$label $mode" -v t="$target" -v lib="$lib" 'BEGIN {
      r = m / a
      printf "  %-18s  %.3f s  %.3f us/launch  overhead %+.3f us/launch  ratio %.4f [target <= %s] %s  (%s)\n", l, m / 1e9, m / 1e3 / n, (m - a) / 1e3 / n, r, t, (r <= t + 0 ? "ok" : "OVER"), lib
    }'
  done
done
