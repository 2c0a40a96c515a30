#!/usr/bin/env bash
# Edit-loop benchmark on a CMake CUDA project: by default test/apps/cmake_umbrella (a
# kernels library whose kernel templates live in src/kernels/*.cuh, reached from each TU through
# src/umbrella.cuh; Unix Makefiles, the include folders in a response file; the heaviest TU holds a
# sweep of 32 GEMM shapes), or another CMake project named by the variables below. The kernel: its
# Nth launch, captured with `--compile-commands BUILD_DIR --source-root SRC`.
#   (a) traditional: edit the header in the project, the project's own incremental
#       `cmake --build BUILD -j N`, rerun the program;
#   (b) `kerncap validate` after the same edit in the reproducer's copy;
#   (c) `kerncap validate --watch`: from the save to the printed verdict line.
# Prints the three times and the ratios against the targets (validate >= 10x, watch >= 20x).
#   KERNCAP_CMAKE_PROJECT    source folder (default test/apps/cmake_umbrella)
#   KERNCAP_CMAKE_KERNEL     --kernel regex (default 'sgemm_tiled<128')
#   KERNCAP_CMAKE_DISPATCH   --dispatch (default 0)
#   KERNCAP_CMAKE_HEADER     the file edited, relative to the source folder (default src/kernels/tiled_gemm.cuh)
#   KERNCAP_CMAKE_APP        the program, relative to the build folder (default umbrella_app)
#   KERNCAP_CMAKE_ARGS       its arguments, split at spaces (default 2)
#   KERNCAP_CMAKE_CONFIGURE  more configure arguments, split at spaces (default none)
#   KERNCAP_CMAKE_GENERATOR  (default "Unix Makefiles", the generator of the report: its response files)
#   KERNCAP_CMAKE_JOBS       cmake --build -j (default nproc)
#   KERNCAP_CMAKE_WORK       work folder (default $TMPDIR/kerncap-cmake; the build is WORK/build-<project name>),
#                            shared with test/gpu/cmake.test.ts
# Needs a GPU, nvcc, cmake, python3 (and for (b), (c) the kerncap binary, $KERNCAP_BIN). `--prepare`
# only configures (CMAKE_EXPORT_COMPILE_COMMANDS=ON, sm_90) and builds (build-seconds). Exit 0 when
# it measured (or prepared, or skipped), 2 when it could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bin="${KERNCAP_BIN:-$root/dist/kerncap}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
src="$(cd "${KERNCAP_CMAKE_PROJECT:-$root/test/apps/cmake_umbrella}" && pwd)"
kernel="${KERNCAP_CMAKE_KERNEL:-sgemm_tiled<128}"
dispatch="${KERNCAP_CMAKE_DISPATCH:-0}"
header="${KERNCAP_CMAKE_HEADER:-src/kernels/tiled_gemm.cuh}"
read -r -a app_args <<<"${KERNCAP_CMAKE_ARGS:-2}"
read -r -a configure_args <<<"${KERNCAP_CMAKE_CONFIGURE:-}"
generator="${KERNCAP_CMAKE_GENERATOR:-Unix Makefiles}"
jobs="${KERNCAP_CMAKE_JOBS:-$(nproc)}"
work="${KERNCAP_CMAKE_WORK:-${TMPDIR:-/tmp}/kerncap-cmake}"
build="$work/build-$(basename "$src")"
app="$build/${KERNCAP_CMAKE_APP:-umbrella_app}"
cap="$work/bench-capture-$(basename "$src")"
unset BUN_BE_BUN
# shellcheck source=bench-lib.sh
. "$root/scripts/bench-lib.sh"

say() { echo "[bench-edit-loop-cmake] $*" >&2; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
prepare_only=""; [ "${1:-}" = "--prepare" ] && prepare_only=1
needs=("$nvcc" "$src/CMakeLists.txt" "$src/$header"); [ -n "$prepare_only" ] || needs+=("$bin")
for need in "${needs[@]}"; do [ -e "$need" ] || { say "skipped: $need not found"; exit 0; }; done
command -v cmake >/dev/null && command -v python3 >/dev/null || { say "skipped: cmake/python3 missing"; exit 0; }

mkdir -p "$work"
if [ ! -x "$app" ] || [ -n "$prepare_only" ]; then
  say "preparing (not timed in the loop): configure and build $src in $build"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_CUDA_COMPILER=$nvcc" "${configure_args[@]}" >"$work/configure.log" 2>&1 \
      || { tail -30 "$work/configure.log" >&2; say "configure failed"; exit 2; }
  fi
  t_prep=$(now)
  cmake --build "$build" -j "$jobs" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; say "build failed"; exit 2; }
  awk -v a="$t_prep" -v b="$(now)" 'BEGIN{printf "%.2f\n", b-a}' >"$work/build-seconds"
  [ -x "$app" ] || { say "the build made no $app (KERNCAP_CMAKE_APP)"; exit 2; }
  say "built in $(cat "$work/build-seconds") s: $app"
fi
[ -z "$prepare_only" ] || exit 0

if [ ! -f "$cap/kerncap.json" ]; then
  say "preparing (not timed): capture $kernel"
  (cd "$work" && "$bin" run --kernel "$kernel" --dispatch "$dispatch" --compile-commands "$build" --source-root "$src" \
    --exit-after-capture --force --out "$cap" -- "$app" "${app_args[@]}" >&2)
fi
copy="$cap/src/$header"
[ -f "$copy" ] || { say "the capture has no reproducer copy of $header ($copy): see manifest.source.cuda in $cap/kerncap.json"; exit 2; }
# the first validate (not timed below) warms nvcc and the page cache the same way for every loop
# and makes the pruned build's side-by-side check (src/rebuild/rebuilder.ts)
rm -rf "$cap/build/pruned"
"$bin" validate "$cap" --json >"$work/bench-validate-first.json"

orig="$src/$header"
cp "$orig" "$work/header.orig"; cp "$copy" "$work/header.copy"
restore() { cp "$work/header.orig" "$orig"; cp "$work/header.copy" "$copy"; }
trap restore EXIT
stamp="// kerncap bench edit $(date +%s)"

# (a) traditional loop: the project's own incremental build after the header edit, then the program
echo "$stamp" >>"$orig"
t0=$(now)
cmake --build "$build" -j "$jobs" >"$work/bench-build.log" 2>&1
t1=$(now)
(cd "$work" && "$app" "${app_args[@]}" >"$work/bench-app.log" 2>&1)
t2=$(now)
rebuilt=$(grep -c 'Building [A-Z+]* object' "$work/bench-build.log" || true) # both generators print it per object

# (b) kerncap validate after the same edit
echo "$stamp" >>"$copy"
t3=$(now)
"$bin" validate "$cap" --json >"$work/bench-validate.json"
t4=$(now)
vbuild=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rebuild"]["seconds"])' "$work/bench-validate.json")
vbuilder=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rebuild"].get("builder", "build.sh"))' "$work/bench-validate.json")
verdict=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$work/bench-validate.json")

# (c) validate --watch: save -> verdict
cp "$work/header.copy" "$copy"
read -r w_s w_build w_own w_event w_verdict w_cc < <(watch_save_to_verdict "$cap" "$copy" "$work/bench-watch.jsonl") || { say "the watch measure failed"; exit 2; }

awk -v name="$(basename "$src") $kernel" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v t4="$t4" -v rebuilt="$rebuilt" -v jobs="$jobs" -v vb="$vbuild" -v vbuilder="$vbuilder" -v verdict="$verdict" \
  -v ws="$w_s" -v wb="$w_build" -v wo="$w_own" -v we="$w_event" -v wv="$w_verdict" 'BEGIN {
  a = t2 - t0; b = t4 - t3
  printf "edit-loop cmake (%s): traditional %.2f s (cmake --build -j%d %.2f s, %d objects rebuilt; rerun %.2f s) | kerncap validate %.2f s (%s build %.2f s; %s) | validate --watch %.2f s save->verdict (build %.2f s, watch says %.2f s; %s %s)\n", name, a, jobs, t1 - t0, rebuilt, t2 - t1, b, (vbuilder == "pruned" ? "pruned TU" : "build.sh"), vb, verdict, ws, wb, wo, we, wv
  printf "edit-loop cmake: speed-up %.1fx validate (target >= 10x: %s), %.1fx watch (target >= 20x: %s)\n", a / b, (a / b >= 10 ? "met" : "not met"), a / ws, (a / ws >= 20 ? "met" : "not met")
}'
