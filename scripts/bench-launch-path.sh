#!/usr/bin/env bash
# CPU cost of the CUDA capture library's launch path, without a GPU: ns per launch of its CUPTI
# callback (API entry and exit of a cuLaunchKernel), for one or more builds of the library.
#
#   bash scripts/bench-launch-path.sh [LIB...]      (default: c/build/libkerncap_cuda.so)
#
# c/test/launch_main.c calls the library's callback the way CUPTI would, over a stand-in libcuda
# and libcupti (c/test/fake_cuda.c), LAUNCHES times (default 2000000) cycling over three kernels
# with PyTorch- and Triton-like names (the mangled ones over 100 bytes), after a warm-up. Modes:
# `list` (KERNCAP_MODE=list) and `run` with a --kernel regex that matches none (KERNCAP_MODE=capture),
# the counting path both. Each (library, mode) runs ROUNDS times (default 5), alternating; prints
# each round and the median ns per launch. The figure includes the driver program's own loop
# (building the callback's arguments: a few ns), which the first line measures alone: the same
# loop under c/test/cupti_floor.c, whose callback does nothing (FLOOR=0 leaves it out). Needs gcc
# and the CUDA headers (no driver).
set -euo pipefail
cd "$(dirname "$0")/.."
LAUNCHES="${LAUNCHES:-2000000}"
ROUNDS="${ROUNDS:-5}"
libs=("$@")
[ ${#libs[@]} -gt 0 ] || libs=(c/build/libkerncap_cuda.so)
die() { echo "bench-launch-path: $*" >&2; exit 1; }
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
inc=()
for d in "$CUDA_HOME/include" "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME"/targets/*/include; do
  [ -d "$d" ] && inc+=("-I$d")
done
for l in "${libs[@]}"; do [ -f "$l" ] || die "no library at $l (bash scripts/build-c.sh builds c/build/libkerncap_cuda.so)"; done

work=$(mktemp -d "${TMPDIR:-/tmp}/kerncap-bench-path-XXXXXX")
trap 'rm -rf "$work"' EXIT
gcc -O2 -shared -fPIC -DFAKE_LIBCUDA -o "$work/libcuda.so.1" c/test/fake_cuda.c || die "gcc failed (c/test/fake_cuda.c)"
gcc -O2 -shared -fPIC -DFAKE_LIBCUPTI -o "$work/libcupti.so" c/test/fake_cuda.c
gcc -O2 "${inc[@]}" -o "$work/launch_main" c/test/launch_main.c -L"$work" -l:libcupti.so -Wl,-rpath,"$work" -ldl ||
  die "gcc failed (c/test/launch_main.c; the CUDA headers: set CUDA_HOME)"
if [ "${FLOOR:-1}" != 0 ]; then
  mkdir -p "$work/floor"
  gcc -O2 -shared -fPIC -Ic/cuda "${inc[@]}" -o "$work/floor/libcupti_floor.so" c/test/cupti_floor.c -ldl || die "gcc failed (c/test/cupti_floor.c)"
  libs=("$work/floor/libcupti_floor.so" "${libs[@]}")
fi

names=(
  _ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_
  _ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_EEvS4_RKT_EUliE_EEviT1_
  triton_poi_fused_add_mul_0
)

# one_run LIB MODE: ns per launch
one_run() {
  local out
  out=$(mktemp -d "$work/out-XXXXXX")
  mkdir -p "$out/kernel" "$out/memory"
  env LD_LIBRARY_PATH="$work" KERNCAP_OUT="$out" KERNCAP_MODE="$2" KERNCAP_KERNEL='^kerncap_never_matches$' \
    KERNCAP_CUPTI_PATH="$work/libcupti.so" "$work/launch_main" "$(realpath "$1")" bench "$LAUNCHES" "${names[@]}" || die "the driver failed under $1"
  if compgen -G "$out/error.*.txt" >/dev/null; then die "the library failed under $1: $(cat "$out"/error.*.txt)"; fi
  rm -rf "$out"
}

declare -A t
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in list capture; do
    for i in "${!libs[@]}"; do
      ns=$(one_run "${libs[$i]}" "$mode")
      t[$i,$mode]+="$ns "
      echo "round $r: ${libs[$i]} ${mode/capture/run (no match)}: $ns ns/launch"
    done
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "medians of $ROUNDS rounds, $LAUNCHES launches each (ns per launch, callback entry + exit):"
for i in "${!libs[@]}"; do
  printf "  %-60s list %8s   run (no match) %8s\n" "${libs[$i]}" "$(median "${t[$i,list]}")" "$(median "${t[$i,capture]}")"
done
