#!/usr/bin/env bash
# The test command: builds what the tests need (C capture libraries, once), runs every test with
# Bun, and ends with one line `N passed, N failed, N skipped`. GPU tests skip themselves (and are
# counted as skipped) where no NVIDIA GPU is present.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x node_modules/.bin/bun ] || npm ci --no-audit --no-fund --loglevel=error
bash scripts/build-c.sh >/dev/null || { echo "test.sh: building the CUDA capture library failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
bash scripts/build-hsa.sh >/dev/null 2>&1 || true
log=$(mktemp)
# every test's scratch folder (theirs, nvcc's, Python's) goes under one TMPDIR, removed at the end
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kerncap-tests-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# and the trust records of received captures (src/format/trust.ts) into a state folder of its own, not the user's
TMPDIR="$scratch" XDG_STATE_HOME="$scratch/state" node_modules/.bin/bun test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
pass=$(grep -Eo '^ *[0-9]+ pass$' "$log" | grep -Eo '[0-9]+' | tail -1)
fail=$(grep -Eo '^ *[0-9]+ fail$' "$log" | grep -Eo '[0-9]+' | tail -1)
skip=$(grep -Eo '^ *[0-9]+ skip$' "$log" | grep -Eo '[0-9]+' | tail -1)
rm -f "$log"
[ "$rc" -ne 0 ] && [ "${fail:-0}" = 0 ] && fail=1 # a crash before the summary is a failure
echo "${pass:-0} passed, ${fail:-0} failed, ${skip:-0} skipped"
exit "$rc"
