#!/usr/bin/env bash
# Everything that needs the GPU, in one call on the device machine: unpack the kerncap binary
# built here (.carry/kerncap.xz), run the GPU test suite through the binary's own Bun
# (BUN_BE_BUN=1), then the benchmarks. Logs and measurements go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kerncap-gpu-out}"
mkdir -p "$OUT" dist
if [ -f .carry/kerncap.xz ]; then xz -dc .carry/kerncap.xz > dist/kerncap && chmod +x dist/kerncap; fi
{ nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee "$OUT/env.txt"
export KERNCAP_BIN="$PWD/dist/kerncap" KERNCAP_GPU_OUT="$OUT" PYTHONUNBUFFERED=1
filter="${1:-}"
BUN_BE_BUN=1 timeout 480 dist/kerncap test --timeout 150000 ${filter:+-t "$filter"} test/gpu 2>&1 | tee "$OUT/gpu-tests.log"
rc=${PIPESTATUS[0]}
for b in scripts/bench-*.sh; do
  [ -f "$b" ] && [ -z "${SKIP_BENCH:-}" ] && timeout 120 bash "$b" 2>&1 | tee -a "$OUT/bench.log"
done
exit $rc
