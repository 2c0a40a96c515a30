#!/usr/bin/env bash
# The test command: builds what the tests need (C capture libraries, once), runs every test with
# Bun, type-checks the code (tsc --noEmit: one test, only when no test files are named), and ends
# with one line `N passed, N failed, N skipped`. GPU tests skip themselves (and are
# counted as skipped) where no NVIDIA GPU is present.
set -uo pipefail
cd "$(dirname "$0")/.."
# SIGTERM/SIGINT stop the run at once: each step runs in a process group of its own (setsid),
# waited for in the background (bash runs a trap only between commands, so a step in the
# foreground would go on until it ended); the trap ends that whole group (bun, its test processes,
# tee, a compiler), then the EXIT trap removes the temporary files. What of the group is still
# there 3 s after SIGTERM is killed (bun test finishes its running test first, and its test
# processes may ignore TERM): nothing keeps writing into the folder being removed
run=
stop() {
  if [ -n "$run" ]; then
    kill -TERM -- "-$run" 2>/dev/null
    for _ in $(seq 30); do kill -0 -- "-$run" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$run" 2>/dev/null
    wait "$run" 2>/dev/null
  fi
  echo "test.sh: stopped by SIG$1" >&2
  exit "$2"
}
trap 'stop TERM 143' TERM
trap 'stop INT 130' INT
# run a command as a process group of its own and wait for it; its exit status
group() {
  setsid -w "$@" &
  run=$!
  wait "$run"
  local rc=$?
  run=
  return "$rc"
}
[ -x node_modules/.bin/bun ] || group npm ci --no-audit --no-fund --loglevel=error
group bash scripts/build-c.sh >/dev/null || { echo "test.sh: building the CUDA capture library failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
group bash scripts/build-hsa.sh >/dev/null 2>&1 || true
log=$(mktemp)
# every test's scratch folder (theirs, nvcc's, Python's) goes under one TMPDIR, removed at the end (and at a signal)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kerncap-tests-XXXXXX")
trap 'rm -rf "$scratch" "$log"' EXIT
# and the trust records of received captures (src/format/trust-records.ts) into a state folder of its own, not the user's
TMPDIR="$scratch" XDG_STATE_HOME="$scratch/state" group bash -c 'set -o pipefail; node_modules/.bin/bun test --timeout 60000 "$@" 2>&1 | tee "$0"' "$log" "$@"
rc=$?
pass=$(grep -Eo '^ *[0-9]+ pass$' "$log" | grep -Eo '[0-9]+' | tail -1)
fail=$(grep -Eo '^ *[0-9]+ fail$' "$log" | grep -Eo '[0-9]+' | tail -1)
skip=$(grep -Eo '^ *[0-9]+ skip$' "$log" | grep -Eo '[0-9]+' | tail -1)
[ "$rc" -ne 0 ] && [ "${fail:-0}" = 0 ] && fail=1 # a crash before the summary is a failure
pass=${pass:-0} fail=${fail:-0} skip=${skip:-0}
# the whole suite also type-checks the code (tsc --noEmit, tsconfig.json), counted as one test
if [ $# -eq 0 ]; then
  if [ -x node_modules/.bin/tsc ]; then
    if group node_modules/.bin/tsc --noEmit -p .; then
      pass=$((pass + 1))
    else
      echo "test.sh: tsc --noEmit found type errors (above)"
      fail=$((fail + 1))
      [ "$rc" -eq 0 ] && rc=1
    fi
  else
    echo "test.sh: node_modules/.bin/tsc missing (npm ci installs it): type check skipped"
    skip=$((skip + 1))
  fi
  # the formatter (Biome, biome.json): the TypeScript and JSON as scripts/format.sh writes them, counted as one test
  if [ -x node_modules/.bin/biome ]; then
    if group bash scripts/format.sh --check; then
      pass=$((pass + 1))
    else
      echo "test.sh: files not formatted (above): run bash scripts/format.sh"
      fail=$((fail + 1))
      [ "$rc" -eq 0 ] && rc=1
    fi
  else
    echo "test.sh: node_modules/.bin/biome missing (npm ci installs it): format check skipped"
    skip=$((skip + 1))
  fi
fi
echo "${pass} passed, ${fail} failed, ${skip} skipped"
exit "$rc"
