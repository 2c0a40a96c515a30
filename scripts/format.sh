#!/usr/bin/env bash
# Formats the TypeScript and JSON of the repository with Biome (biome.json: 2-space indent, lines up
# to 160 characters, double quotes; formatting only, no lint rules). `--check` changes nothing: it
# lists the files that are not formatted and exits 1 when there are any (what a CI step runs).
# Other arguments (files or folders) narrow what is formatted; by default biome.json's `files.includes`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/biome ] || npm ci --no-audit --no-fund --loglevel=error
if [ "${1:-}" = "--check" ]; then
  shift
  exec node_modules/.bin/biome format --max-diagnostics=20 "${@:-.}"
fi
exec node_modules/.bin/biome format --write "${@:-.}"
