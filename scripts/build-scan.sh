#!/usr/bin/env bash
# Rebuild c/cuda/kc_scan.fatbin (committed, so that building kerncap needs no nvcc) from c/cuda/kc_scan.cu:
# SASS for sm_90 (the H200) and PTX for compute_75, which the driver JIT-compiles on any other GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc -fatbin -O3 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75 \
  -o c/cuda/kc_scan.fatbin.tmp c/cuda/kc_scan.cu
mv c/cuda/kc_scan.fatbin.tmp c/cuda/kc_scan.fatbin
echo "build-scan: c/cuda/kc_scan.fatbin ($(stat -c %s c/cuda/kc_scan.fatbin) bytes)"
