#!/usr/bin/env bash
# Build the HSA capture library c/build/libkerncap_hsa.so with gcc against the ROCm headers in
# /usr/include/hsa (Debian: libhsa-runtime-dev; scripts/install-rocm.sh installs it). No ROCm
# library is linked: the runtime loads the library through HSA_TOOLS_LIB and hands over its API
# table. Sources: c/hsa/kerncap_hsa.c and the units it shares with the CUDA library (c/common/units,
# the list scripts/build-c.sh compiles too); -fvisibility=hidden: only OnLoad and OnUnload are exported
# (test/cpu/c-hsa.test.ts). Exits 0 with a message and writes nothing when the headers
# are missing.
# Environment: HSA_INCLUDE (default /usr/include), CC (default gcc).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
inc="${HSA_INCLUDE:-/usr/include}"
if [ ! -f "$inc/hsa/hsa.h" ] || [ ! -f "$inc/hsa/hsa_ext_amd.h" ]; then
  echo "build-hsa: $inc/hsa/hsa.h not found; skipping libkerncap_hsa.so (run scripts/install-rocm.sh)"
  exit 0
fi
mkdir -p "$root/c/build"
common=()
for u in $(sed -e 's/#.*//' "$root/c/common/units"); do common+=("$root/c/common/$u.c"); done
"${CC:-gcc}" -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror \
  -Wno-missing-field-initializers \
  -include "$root/c/common/kc_glibc.h" -I"$inc" -I"$root/c/hsa" -I"$root/c/common" \
  -o "$root/c/build/libkerncap_hsa.so" "$root/c/hsa/kerncap_hsa.c" "${common[@]}" \
  -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0
echo "build-hsa: built c/build/libkerncap_hsa.so"
