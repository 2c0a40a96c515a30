#!/usr/bin/env bash
# Quick start: install, build dist/kerncap, then capture one kernel of the example app that ships
# with the project (test/apps/structs.cu) and replay it in a separate process.
# On a machine without an NVIDIA GPU it builds, says so, and stops there (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund --loglevel=error
bash scripts/build.sh
kc=dist/kerncap
if ! { [ -e /dev/nvidiactl ] || [ -e /dev/nvidia0 ]; }; then
  echo
  echo "kerncap is built: $kc ($($kc --version))."
  echo "This machine has no NVIDIA GPU, so capturing and replaying cannot run here: they need one."
  echo "On a GPU machine this script continues with: $kc run --kernel scale_jobs -- <example app>; $kc replay ..."
  echo "What runs here: the built-in sample capture (kerncap demo), inspected and checked."
  mkdir -p build
  $kc demo build/demo-capture --force
  $kc inspect build/demo-capture --verify
  exit 0
fi
mkdir -p build/demo
nvcc -O2 -lineinfo -arch=native -o build/demo/structs test/apps/structs.cu
$kc list -- build/demo/structs 3
$kc run --kernel scale_jobs --dispatch 1 --out build/demo/capture --force --source-root test/apps -- build/demo/structs 3
$kc inspect build/demo/capture
$kc replay build/demo/capture --iters 20
