#!/usr/bin/env bash
# Build dist/kerncap: the C capture library first (embedded), then one Bun-compiled executable.
set -euo pipefail
cd "$(dirname "$0")/.."
BUN="${BUN:-node_modules/.bin/bun}"
bash scripts/build-c.sh
mkdir -p dist
"$BUN" build --compile --minify-syntax --sourcemap=none src/cli/main.ts --outfile dist/kerncap
echo "build: dist/kerncap ($(du -h dist/kerncap | cut -f1))"
