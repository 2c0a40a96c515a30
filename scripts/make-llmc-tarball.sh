#!/usr/bin/env bash
# Make the llm.c source tarball that test/gpu/llmc.test.ts and scripts/bench-edit-loop-llmc.sh
# unpack on the GPU node (never committed: .carry/ is ignored by git).
# Usage: scripts/make-llmc-tarball.sh [LLMC_GIT_DIR] [OUT]
#   LLMC_GIT_DIR: a clone (or bare mirror) of karpathy/llm.c (default /work/.mirror/karpathy+llm.c/repo)
#   OUT: default .carry/llmc-src.tar.xz
# Takes HEAD's Makefile, LICENSE, README.md, the CUDA programs (train/test/profile_gpt2.cu) and
# llmc/ (no dev/, doc/, scripts/, data). One change for CUDA 13, marked in the file: the toolkit's
# cudaMemAdvise takes a cudaMemLocation where CUDA 12 took a device id (llmc/cuda_utils.cuh,
# cudaMallocConditionallyManaged's out-of-memory fallback; never reached in the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
git_dir="${1:-/work/.mirror/karpathy+llm.c/repo}"
out="${2:-.carry/llmc-src.tar.xz}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/llm.c" "$(dirname "$out")"
git -C "$git_dir" archive HEAD Makefile LICENSE README.md train_gpt2.cu test_gpt2.cu profile_gpt2.cu llmc | tar -x -C "$tmp/llm.c"
f="$tmp/llm.c/llmc/cuda_utils.cuh"
old='        cudaCheck_(cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId), file, line);'
grep -qF "$old" "$f" || { echo "make-llmc-tarball: the cudaMemAdvise line is not in $f (llm.c changed?)" >&2; exit 2; }
OLD="$old" perl -0pi -e 's/\Q$ENV{OLD}\E/#if CUDART_VERSION >= 13000 \/\/ kerncap: CUDA 13 cudaMemAdvise takes a cudaMemLocation\n        cudaMemLocation host_location = {};\n        host_location.type = cudaMemLocationTypeHost;\n        cudaCheck_(cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, host_location), file, line);\n#else\n$ENV{OLD}\n#endif/' "$f"
git -C "$git_dir" rev-parse HEAD > "$tmp/llm.c/KERNCAP-SOURCE-COMMIT"
tar -C "$tmp" -cJf "$out" llm.c
echo "$out ($(du -k "$out" | cut -f1) KiB, llm.c $(cut -c1-12 "$tmp/llm.c/KERNCAP-SOURCE-COMMIT"))"
