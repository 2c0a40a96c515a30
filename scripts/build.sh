#!/usr/bin/env bash
# Build dist/kerncap: the C capture libraries first (embedded), then one Bun-compiled executable.
# The HSA library is embedded when scripts/build-hsa.sh found the ROCm headers (src/capture/lib.ts
# finds it in Bun.embeddedFiles); without them kerncap still builds, and `--runtime hsa` says so.
set -euo pipefail
cd "$(dirname "$0")/.."
BUN="${BUN:-node_modules/.bin/bun}"
bash scripts/build-c.sh
bash scripts/build-hsa.sh
embed=()
[ -f c/build/libkerncap_hsa.so ] && embed+=(c/build/libkerncap_hsa.so)
mkdir -p dist
# --bytecode: the bundle is stored compiled to JavaScriptCore bytecode, not parsed at each start (measured on a
# 2-core machine: `kerncap --version` 60-100 ms -> 20-30 ms, validate's start to its rebuild 110-130 ms -> 45-55 ms);
# bytecode needs the ESM output format named (main.ts awaits at the top level)
"$BUN" build --compile --bytecode --format=esm --no-compile-autoload-bunfig --no-compile-autoload-dotenv --minify-syntax --sourcemap=none src/cli/main.ts "${embed[@]}" --outfile dist/kerncap
echo "build: dist/kerncap ($(du -h dist/kerncap | cut -f1))"
