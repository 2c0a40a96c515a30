#!/usr/bin/env bash
# Install the ROCm packages Debian ships (ROCm 5.2 on Debian 12): hipcc (clang with AMDGPU
# targets), the HSA runtime headers and library, and the HIP runtime headers. Idempotent: does
# nothing when everything is already there. Quiet unless something fails.
set -euo pipefail

pkgs=(hipcc libhsa-runtime-dev libamdhip64-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-rocm: already installed (${pkgs[*]})"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-rocm: apt-get failed for: ${missing[*]}" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
echo "install-rocm: installed ${missing[*]}"
