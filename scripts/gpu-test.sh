#!/usr/bin/env bash
# Everything that needs the GPU, on the device machine (one call, or split over several calls):
#  1. unpack the kerncap binary built here (.carry/kerncap.xz);
#  2. start building ggml (the real CUDA code base of test/gpu/cuda-repro.test.ts) and llm.c (the
#     second one, its own Makefile: test/gpu/llmc.test.ts) in the background;
#  3. GPU suites through the binary's own Bun (BUN_BE_BUN=1): capture/replay, Triton, graphs, …;
#  4. the snapshot benchmark and the kernel-time table (scripts/bench-timing.sh); once llm.c is
#     built, its suite (while ggml still builds); once ggml is built, the CUDA reproducer suite
#     and the edit-loop benchmarks (ggml, then llm.c), then the nvcc phase breakdown of the two
#     reproducers (scripts/nvcc-phases.sh). Logs and measurements go to $OUT (default
#     /tmp/kerncap-gpu-out). It does not check for a GPU itself: run it on the GPU node.
# Usage: scripts/gpu-test.sh [test-name-filter]
#   SUITES="test/gpu/export.test.ts …" replaces the list of step 3 (SUITES="" runs none of it);
#   LANES="a b;c d" runs each ;-separated group of suites in its own process at the same time,
#   before SUITES (suites that only judge, not time, share the GPU well; export, verdicts, tune,
#   profile and kernel-clock assert times within a few percent: SUITES, not a lane, else another lane's
#   kernels on the same GPU fail them);
#   SKIP_BENCH=1 (every benchmark), SKIP_CMAKE_BENCH=1, SKIP_SNAP=1, SKIP_TIMING=1, SKIP_GRAPHS_BENCH=1, SKIP_GGML=1, SKIP_LLMC=1,
#   SKIP_REPRO=1 (cuda-repro suite) leave parts out; SNAP_GIB (default 8) sizes the snapshot
#   benchmark; BUDGET_S (default 470) is the wall-clock budget the steps share (the suites of
#   step 3 get BUDGET_S - 120 s; a device call's own limit, 600 s, still ends the call).
# The whole suite takes more than one 10-minute device call: split it, e.g.
#   call 1 (the suites, ~560 s): SUITES="graphs verdicts watch processes multi capture-replay triton
#           session share scale" SKIP_GGML=1 SKIP_LLMC=1 SKIP_BENCH=1 SKIP_REPRO=1 BUDGET_S=720
#   call 2 (the builds, reproducer suites and benchmarks, ~420 s): SUITES="" SKIP_SNAP=1 BUDGET_S=590
#   (SUITES="multi scale" there adds those two files: ~510 s); the snapshot benchmark needs a call
#   of its own. The runs of 2026-12-01 are in the README's "Measured" section.
# (names may be given without test/gpu/ and .test.ts).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kerncap-gpu-out}"
mkdir -p "$OUT" dist
start=$(date +%s); budget="${BUDGET_S:-470}"
left() { echo $(( budget - ($(date +%s) - start) )); }
if [ -f .carry/kerncap.xz ]; then xz -dc .carry/kerncap.xz > dist/kerncap && chmod +x dist/kerncap; fi
{ nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee "$OUT/env.txt"
export KERNCAP_BIN="$PWD/dist/kerncap" KERNCAP_GPU_OUT="$OUT" PYTHONUNBUFFERED=1
if [ -z "${SKIP_GGML:-}" ] && [ -f .carry/ggml-src.tar.xz ]; then
  (JOBS=10 bash scripts/bench-edit-loop.sh --prepare > "$OUT/ggml-build.log" 2>&1; echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/ggml-build.log") &
  ggml_pid=$!
fi
if [ -z "${SKIP_LLMC:-}" ] && [ -f .carry/llmc-src.tar.xz ]; then
  # one nvcc compile-and-link line: about one core beside ggml's jobs
  (bash scripts/bench-edit-loop-llmc.sh --prepare > "$OUT/llmc-build.log" 2>&1; echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/llmc-build.log") &
  llmc_pid=$!
fi
filter="${1:-}"
t() { local lim=$1; shift; BUN_BE_BUN=1 timeout "$lim" dist/kerncap test --timeout 150000 ${filter:+-t "$filter"} "$@" 2>&1 | tee -a "$OUT/gpu-tests.log"; return "${PIPESTATUS[0]}"; }
suites=()
for s in ${SUITES-capture-replay session triton processes scale verdicts graphs share watch multi cmake nvtx progress}; do
  case "$s" in *.ts) suites+=("$s") ;; *) suites+=("test/gpu/$s.test.ts") ;; esac
done
rc=0
# LANES: groups of suites that run at the same time, one bun test process per group, before SUITES
# (which run one after the other: put the suites that time kernels or the loop there)
if [ -n "${LANES:-}" ]; then
  IFS=';' read -ra lanes <<< "$LANES"; lane_pids=(); i=0
  for lane in "${lanes[@]}"; do
    files=(); for s in $lane; do case "$s" in *.ts) files+=("$s") ;; *) files+=("test/gpu/$s.test.ts") ;; esac; done
    i=$((i + 1))
    ( BUN_BE_BUN=1 timeout $(( $(left) - 120 )) dist/kerncap test --timeout 150000 ${filter:+-t "$filter"} "${files[@]}" > "$OUT/lane$i.log" 2>&1 ) & lane_pids+=($!)
  done
  for j in "${!lane_pids[@]}"; do wait "${lane_pids[$j]}" || rc=1; cat "$OUT/lane$((j + 1)).log" >> "$OUT/gpu-tests.log"; done
  echo "lanes done after $(( $(date +%s) - start )) s, rc=$rc" | tee -a "$OUT/gpu-tests.log"
fi
if [ "${#suites[@]}" -gt 0 ]; then t $(( $(left) - 120 )) "${suites[@]}" || rc=1; fi
nobench() { [ -n "${SKIP_BENCH:-}" ]; }
nobench || [ -n "${SKIP_SNAP:-}" ] || timeout 200 bash scripts/bench-snapshot.sh "${SNAP_GIB:-8}" 2>&1 | tee -a "$OUT/bench.log"
# kernel time in the app vs replayed (targets: ≤ 10%, two replays ≤ 3%), a table in bench.log
nobench || [ -n "${SKIP_TIMING:-}" ] || timeout 150 bash scripts/bench-timing.sh 2>&1 | tee -a "$OUT/bench.log"
# graph-node capture against eager capture of the same kernel
nobench || [ -n "${SKIP_GRAPHS_BENCH:-}" ] || timeout 90 bash scripts/bench-graphs.sh 512 10 2>&1 | tee -a "$OUT/bench.log"
if [ -n "${llmc_pid:-}" ]; then
  echo "waiting for the llm.c build ($(left) s left)" | tee -a "$OUT/gpu-tests.log"
  wait "$llmc_pid"
  t $(( $(left) > 100 ? $(left) - 60 : 40 )) test/gpu/llmc.test.ts || rc=1
fi
if [ -n "${ggml_pid:-}" ]; then
  echo "waiting for the ggml build ($(left) s left)" | tee -a "$OUT/gpu-tests.log"
  ( sleep "$(( $(left) > 130 ? $(left) - 130 : 1 ))"; kill "$ggml_pid" 2>/dev/null; pkill -f ninja ) & waiter=$! # the node is the suite's own: every ninja there is this build's
  wait "$ggml_pid"; kill "$waiter" 2>/dev/null
fi
[ -n "${SKIP_REPRO:-}" ] || t $(( $(left) > 60 ? $(left) - 40 : 20 )) test/gpu/cuda-repro.test.ts || rc=1
nobench || [ "$(left)" -le 30 ] || timeout "$(( $(left) - 5 ))" bash scripts/bench-edit-loop.sh 2>&1 | tee -a "$OUT/bench.log"
# the CMake project of issue 25 (test/apps/cmake_umbrella, built by the cmake suite of step 3 when it ran)
nobench || [ -n "${SKIP_CMAKE_BENCH:-}" ] || [ "$(left)" -le 30 ] || timeout "$(( $(left) - 5 ))" bash scripts/bench-edit-loop-cmake.sh 2>&1 | tee -a "$OUT/bench.log"
# what each nvcc phase of the reproducers' rebuilds costs (what dominates --watch)
if ! nobench; then
  for c in "${TMPDIR:-/tmp}/kerncap-ggml/bench-capture" "${TMPDIR:-/tmp}/kerncap-llmc/bench-capture"; do
    [ -x "$c/build.sh" ] && timeout 60 bash scripts/nvcc-phases.sh "$c" "$(basename "$(dirname "$c")")" 2>&1 | tee -a "$OUT/bench.log"
  done
fi
echo "gpu-test.sh done after $(( $(date +%s) - start )) s, rc=$rc" | tee -a "$OUT/gpu-tests.log"
exit $rc
