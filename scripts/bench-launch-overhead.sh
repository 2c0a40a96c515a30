#!/usr/bin/env bash
# Per-launch overhead of the CUDA capture library on the counting path (`kerncap list`, and
# `kerncap run` whose --kernel matches no launch), against the application alone.
#
#   bash scripts/bench-launch-overhead.sh [BASELINE_LIB]
#   BASELINE_LIBS="a/libkerncap_cuda.so b/libkerncap_cuda.so" bash scripts/bench-launch-overhead.sh
#
# Applications (APPS, default "cuda torch"):
#   cuda   an nvcc-built loop of LAUNCHES launches of an empty kernel (default 200000,
#          cudaDeviceSynchronize every SYNC_EVERY = 1000), timing its loop itself (steady_clock,
#          after a warm-up);
#   torch  TORCH_LAUNCHES (default 30000) tiny PyTorch launches (x.add_(1) on a one-element CUDA
#          tensor, a torch.cuda.synchronize every 1000), timing its loop itself (perf_counter,
#          after a warm-up); skipped with a message when python3 cannot import torch with CUDA.
# Each application runs bare, then under c/build/libkerncap_cuda.so ("now"; run scripts/build-c.sh
# first) in each of MODES (default "list run": `list`, and `run` with no match), and under each
# baseline library in the same modes: BASELINE_LIBS (several, space-separated), else the argument,
# $BASELINE_LIB, or .carry/baseline/libkerncap_cuda.so when it exists (the library built before a
# change). A baseline is labelled by its folder's name (.carry/base89/libkerncap_cuda.so: base89).
# A library is injected as `kerncap run`/`list` injects it (src/capture/coexist.ts injectionEnv,
# src/env.ts captureLibraryEnv): CUDA_INJECTION64_PATH and LD_PRELOAD, KERNCAP_OUT (a fresh folder
# with kernel/ and memory/), KERNCAP_MODE, KERNCAP_CUPTI_PATH, and for `run` KERNCAP_KERNEL (a regex
# that matches no kernel) and KERNCAP_DISPATCH=0.
# FLOORS (default "launch list run"; "" for none) adds CUPTI's own floor, injected the same way: an
# injection library whose CUPTI callback does nothing (c/test/cupti_floor.c), with the launch
# callbacks enabled ("launch"), exactly the callbacks the library enables in `list` or in `run`
# ("list", "run": c/cuda/kc_callbacks.h), every driver API callback ("driver") or none ("none").
# The library's own work in a mode is its figure minus that mode's floor.
# PIN (default none): a CPU list for taskset; every run, bare included, is pinned to it (the
# scheduler moving the launching thread between cores is one source of the rounds' spread).
# Rounds: RUNS (default 5); each round runs every configuration once, bare included, starting one
# further along the list each round (so no configuration always follows the same one). BUDGET_S
# (default 0: none): no round starts once the rounds so far (of every application) plus one more
# would pass it (the figures then say how many rounds they hold). The last line gives the seconds
# the runs took (one run is about 1 s of loop plus CUDA's start: RUNS x configurations runs).
# Prints each run, then per application and configuration the median loop time, the overhead per
# launch in µs, the ratio of the medians to the bare median, the ratio of the fastest rounds, and the median (min-max) of the
# per-round ratios (each run over the same round's bare run: the drift of the machine between
# rounds cancels), with the targets: list <= 1.10, run <= 1.02. Needs an NVIDIA GPU, nvcc, gcc
# and libcupti; fails with a message when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHES="${LAUNCHES:-200000}"
SYNC_EVERY="${SYNC_EVERY:-1000}"
TORCH_LAUNCHES="${TORCH_LAUNCHES:-30000}"
RUNS="${RUNS:-5}"
APPS="${APPS:-cuda torch}"
MODES="${MODES:-list run}"
FLOORS="${FLOORS-launch list run}"
PIN="${PIN:-}"
BUDGET_S="${BUDGET_S:-0}"
read -r -a base_libs <<<"${BASELINE_LIBS:-${1:-${BASELINE_LIB:-}}}"
[ ${#base_libs[@]} -eq 0 ] && [ -f .carry/baseline/libkerncap_cuda.so ] && base_libs=(.carry/baseline/libkerncap_cuda.so)
new_lib=c/build/libkerncap_cuda.so
die() { echo "bench-launch-overhead: $*" >&2; exit 1; }

command -v nvcc >/dev/null || die "nvcc not found (put the CUDA toolkit's bin on PATH)"
command -v gcc >/dev/null || die "gcc not found (it builds the CUPTI floor library)"
for l in "${base_libs[@]}"; do [ -f "$l" ] || die "no baseline library at $l"; done
[ -f "$new_lib" ] || die "no $new_lib: run bash scripts/build-c.sh first"
for m in $MODES; do case $m in list | run) ;; *) die "unknown mode $m (MODES: list run)" ;; esac; done
for f in $FLOORS; do case $f in launch | list | run | driver | none) ;; *) die "unknown floor $f (FLOORS: launch list run driver none)" ;; esac; done
pin=()
if [ -n "$PIN" ]; then
  command -v taskset >/dev/null || die "PIN=$PIN needs taskset (util-linux)"
  taskset -c "$PIN" true || die "taskset -c $PIN failed: PIN is a CPU list such as 2 or 2,3"
  pin=(taskset -c "$PIN")
fi
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
if [ -n "$FLOORS" ]; then
  inc=()
  for d in "$cuda_home/include" "$cuda_home/extras/CUPTI/include" "$cuda_home"/targets/*/include; do [ -d "$d" ] && inc+=("-I$d"); done
  gcc -O2 -shared -fPIC -Ic/cuda "${inc[@]}" -o "$work/libcupti_floor.so" c/test/cupti_floor.c -ldl || die "gcc could not build c/test/cupti_floor.c (the CUPTI headers: set CUDA_HOME)"
fi
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

# run_one APP LIB MODE: the loop's ns (LIB empty: bare; MODE floor-X: the CUPTI floor library, KC_FLOOR=X)
run_one() {
  local app=$1 lib=$2 mode=$3 out
  if [ -z "$lib" ]; then
    "${pin[@]}" $(app_cmd "$app") || die "$app failed bare (no GPU?)"
    return
  fi
  out=$(mktemp -d "$work/out-XXXXXX")
  mkdir -p "$out/kernel" "$out/memory"
  local sel=()
  case $mode in
    run) sel=(KERNCAP_MODE=capture KERNCAP_KERNEL='^kerncap_never_matches$' KERNCAP_DISPATCH=0) ;;
    list) sel=(KERNCAP_MODE=list) ;;
    floor-*) sel=(KC_FLOOR="${mode#floor-}") ;;
  esac
  "${pin[@]}" env CUDA_INJECTION64_PATH="$lib" LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" KERNCAP_OUT="$out" "${sel[@]}" \
    KERNCAP_CUPTI_PATH="$cupti" $(app_cmd "$app") || die "$app failed under $lib ($mode)"
  if compgen -G "$out/error.*.txt" >/dev/null; then die "the library failed under $lib ($mode): $(cat "$out"/error.*.txt)"; fi
  [ -e "$out/raw.json" ] && die "$lib ($mode) captured a launch: the --kernel regex was meant to match none"
  case $mode in list | run) compgen -G "$out/kernels.*.json" >/dev/null || die "$lib ($mode) wrote no census: was it injected?" ;; esac
  rm -rf "$out"
}

# configurations: "label|lib|mode"; bare first
configs=("bare||")
libs=("now|$new_lib")
declare -A seen=([now]=1)
for l in "${base_libs[@]}"; do
  label=$(basename "$(dirname "$(realpath "$l")")")
  [ -n "${seen[$label]:-}" ] && label="$label-${#libs[@]}"
  seen[$label]=1
  libs+=("$label|$(realpath "$l")")
done
for m in $MODES; do
  for x in "${libs[@]}"; do configs+=("${x%%|*}|${x#*|}|$m"); done
done
for f in $FLOORS; do configs+=("cupti|$work/libcupti_floor.so|floor-$f"); done
n=${#configs[@]}
declare -A times ratios
rounds=0
t_start=$(date +%s.%N)
for app in "${apps[@]}"; do
  for ((r = 1; r <= RUNS; r++)); do
    t_round=$(date +%s.%N)
    declare -A this=()
    for ((j = 0; j < n; j++)); do
      c=${configs[$(((j + r - 1) % n))]}
      IFS='|' read -r label lib mode <<<"$c"
      ns=$(run_one "$app" "$lib" "$mode")
      this[$c]=$ns
      times[$app,$c]+="$ns "
      echo "$app round $r ($label${mode:+ $mode}): $(awk -v t="$ns" -v n="$(launches_of "$app")" 'BEGIN { printf "%.3f s, %.3f us/launch", t / 1e9, t / 1e3 / n }')"
    done
    for c in "${configs[@]:1}"; do ratios[$app,$c]+="$(awk -v a="${this[bare||]}" -v m="${this[$c]}" 'BEGIN { printf "%.5f", m / a }') "; done
    unset this
    rounds=$r
    now=$(date +%s.%N)
    if [ "$BUDGET_S" != 0 ] && [ "$r" -lt "$RUNS" ] &&
      awk -v s="$t_start" -v t="$t_round" -v e="$now" -v b="$BUDGET_S" 'BEGIN { exit !(e - s + (e - t) > b) }'; then
      echo "bench-launch-overhead: $app stops after $r of $RUNS rounds (BUDGET_S=$BUDGET_S: another round would pass it)"
      break
    fi
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for app in "${apps[@]}"; do
  nl=$(launches_of "$app")
  k=$(wc -w <<<"${times[$app,bare||]}")
  bare=$(median "${times[$app,bare||]}")
  echo "$app: medians of $k rounds, $nl launches each"
  awk -v a="$bare" -v n="$nl" 'BEGIN { printf "  %-24s %.3f s  %.3f us/launch\n", "bare", a / 1e9, a / 1e3 / n }'
  for c in "${configs[@]:1}"; do
    IFS='|' read -r label lib mode <<<"$c"
    m=$(median "${times[$app,$c]}")
    pr=$(median "${ratios[$app,$c]}")
    lo=$(tr ' ' '\n' <<<"${ratios[$app,$c]}" | grep . | sort -g | head -1)
    hi=$(tr ' ' '\n' <<<"${ratios[$app,$c]}" | grep . | sort -g | tail -1)
    case $mode in list) target=1.10 ;; run) target=1.02 ;; *) target= ;; esac
    fast=$(tr ' ' '\n' <<<"${times[$app,$c]}" | grep . | sort -g | head -1)
    fast_bare=$(tr ' ' '\n' <<<"${times[$app,bare||]}" | grep . | sort -g | head -1)
    awk -v a="$bare" -v m="$m" -v n="$nl" -v l="$label $mode" -v t="$target" -v pr="$pr" -v lo="$lo" -v hi="$hi" -v lib="$lib" -v f="$fast" -v fb="$fast_bare" 'BEGIN {
      r = m / a
      verdict = t == "" ? "" : sprintf(" [target <= %s] %s", t, (r <= t + 0 ? "ok" : "OVER"))
      printf "  %-24s %.3f s  %.3f us/launch  overhead %+.3f us/launch  ratio %.4f  per-round ratio %.4f (%.4f-%.4f)  fastest rounds %.4f%s  (%s)\n", l, m / 1e9, m / 1e3 / n, (m - a) / 1e3 / n, r, pr, lo, hi, f / fb, verdict, lib
    }'
  done
  # the library's own work in a mode: its figure over CUPTI's floor with the same callbacks enabled
  for mode in list run; do
    fl="cupti|$work/libcupti_floor.so|floor-$mode"
    [ -n "${times[$app,$fl]:-}" ] && [ -n "${times[$app,now|$new_lib|$mode]:-}" ] || continue
    awk -v m="$(median "${times[$app,now|$new_lib|$mode]}")" -v f="$(median "${times[$app,$fl]}")" -v n="$nl" -v mode="$mode" 'BEGIN {
      printf "  %s, the library over CUPTI'"'"'s floor with the same callbacks: %+.3f us/launch, ratio %.4f\n", mode, (m - f) / 1e3 / n, m / f
    }'
  done
done
awk -v s="$t_start" -v e="$(date +%s.%N)" 'BEGIN { printf "bench-launch-overhead: %.0f s of runs\n", e - s }'
