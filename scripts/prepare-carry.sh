#!/usr/bin/env bash
# Make the source tarballs the GPU node unpacks (it has no internet): .carry/ggml-src.tar.xz
# (test/gpu/cuda-repro.test.ts, scripts/bench-edit-loop.sh, bench-eval.sh) and
# .carry/llmc-src.tar.xz (test/gpu/llmc.test.ts, scripts/bench-edit-loop-llmc.sh, made by
# scripts/make-llmc-tarball.sh). Never committed: .carry/ is ignored by git.
# Usage: scripts/prepare-carry.sh [GGML_GIT_DIR] [LLMC_GIT_DIR]
#   GGML_GIT_DIR: a clone (or bare mirror) of ggml-org/ggml (default /work/.mirror/ggml-org+ggml/repo)
#   LLMC_GIT_DIR: a clone of karpathy/llm.c (default /work/.mirror/karpathy+llm.c/repo)
# The ggml tarball unpacks to ggml/ (what the scripts look for: ggml/CMakeLists.txt) and holds only
# what `cmake -DGGML_CUDA=ON -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF` and the
# test-backend-ops target read: the top-level CMake files, cmake/, include/, tests/, and of src/
# its own files, the CPU backend and the CUDA backend (the other backends are added only when
# their GGML_<NAME> option is on). ggml/KERNCAP-SOURCE-COMMIT names the commit.
# The device call carries .carry/ whole (64 MiB at most, with .carry/kerncap.xz): the sizes are
# printed, and the script fails when the three together pass 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
ggml_git="${1:-/work/.mirror/ggml-org+ggml/repo}"
llmc_git="${2:-/work/.mirror/karpathy+llm.c/repo}"
mkdir -p .carry
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ggml: src/'s own files (no subfolder but ggml-cpu and ggml-cuda)
mkdir -p "$tmp/ggml"
src_files=$(git -C "$ggml_git" ls-tree --name-only HEAD src/ | while read -r p; do
  [ "$(git -C "$ggml_git" cat-file -t "HEAD:$p")" = blob ] && echo "$p"; done)
# shellcheck disable=SC2086
git -C "$ggml_git" archive HEAD CMakeLists.txt LICENSE ggml.pc.in cmake include tests $src_files src/ggml-cpu src/ggml-cuda | tar -x -C "$tmp/ggml"
git -C "$ggml_git" rev-parse HEAD > "$tmp/ggml/KERNCAP-SOURCE-COMMIT"
[ -f "$tmp/ggml/src/ggml-cuda/mmq.cuh" ] || { echo "prepare-carry: $ggml_git has no src/ggml-cuda/mmq.cuh (the benchmarks' kernel): not ggml?" >&2; exit 2; }
tar -C "$tmp" -cJf .carry/ggml-src.tar.xz ggml
echo "ggml $(cut -c1-12 "$tmp/ggml/KERNCAP-SOURCE-COMMIT"): .carry/ggml-src.tar.xz $(du -k .carry/ggml-src.tar.xz | cut -f1) KiB"

bash scripts/make-llmc-tarball.sh "$llmc_git" .carry/llmc-src.tar.xz

total=$(du -ck .carry/ggml-src.tar.xz .carry/llmc-src.tar.xz $( [ -f .carry/kerncap.xz ] && echo .carry/kerncap.xz) | tail -1 | cut -f1)
echo ".carry: $total KiB in all$( [ -f .carry/kerncap.xz ] || echo " (no kerncap.xz yet: scripts/build.sh and xz -9 dist/kerncap > .carry/kerncap.xz add about 40 MB)")"
[ "$total" -le $((60 * 1024)) ] || { echo "prepare-carry: .carry holds $total KiB, past the 60 MiB the device call may carry" >&2; exit 2; }
