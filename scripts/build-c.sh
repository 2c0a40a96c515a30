#!/usr/bin/env bash
# Build the CUDA capture library c/build/libkerncap_cuda.so with gcc against the CUDA headers.
# CUDA headers: $CUDA_HOME/include, else /usr/local/cuda/include. No link against libcuda/libcupti:
# both are dlopen'ed at run time inside the application.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
inc=()
for d in "$CUDA_HOME/include" "$CUDA_HOME/extras/CUPTI/include" "$CUDA_HOME"/targets/*/include; do
  [ -d "$d" ] && inc+=("-I$d")
done
if [ ! -f "$CUDA_HOME/include/cupti.h" ] && ! ls "$CUDA_HOME"/targets/*/include/cupti.h >/dev/null 2>&1 && [ ! -f "$CUDA_HOME/extras/CUPTI/include/cupti.h" ]; then
  echo "build-c: cupti.h not found under $CUDA_HOME (set CUDA_HOME to a CUDA toolkit)" >&2
  exit 1
fi
mkdir -p c/build
out=c/build/libkerncap_cuda.so
gcc -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -fPIC -shared -fvisibility=hidden \
  "${inc[@]}" -o "$out.tmp" c/kerncap_cuda.c -ldl -lpthread
mv "$out.tmp" "$out"
echo "build-c: $out"
