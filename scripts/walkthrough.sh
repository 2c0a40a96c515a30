#!/usr/bin/env bash
# The walkthrough of docs/walkthrough.md, recorded on a GPU machine: each verb run on the example
# application test/apps/structs.cu (list, run, inspect, replay, an edit and validate, validate
# --watch with one save, tune, profile, check twice over a corpus of two captures, and list by
# NVTX range on test/apps/nvtx_ranges.cu), its command and real output (stdout and stderr, long
# outputs shortened in the middle) written as Markdown with the date, the commit, the GPU and the
# toolkit. Run it on the GPU node, then commit what it wrote as docs/walkthrough.md.
# The binary: $KERNCAP_BIN, else .carry/kerncap.xz unpacked to dist/kerncap (as scripts/gpu-test.sh
# does), else dist/kerncap. The commit: $KERNCAP_COMMIT, else `git rev-parse` where .git
# is, else "not recorded". Writes $OUT/walkthrough.md (default /tmp/kerncap-walkthrough) and the
# scratch folder's captures under $OUT/work. Needs nvcc and, for `profile`, ncu.
# Usage: OUT=/tmp/wt KERNCAP_COMMIT=$(git rev-parse --short HEAD) bash scripts/walkthrough.sh
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
OUT="${OUT:-/tmp/kerncap-walkthrough}"
mkdir -p "$OUT"
# the GPU first: where there is none nothing is written but $OUT (the carried binary over dist/kerncap was: a
# CPU test run replaced the user's freshly built dist/kerncap with .carry's older one)
if ! { [ -e /dev/nvidiactl ] || [ -e /dev/nvidia0 ]; }; then echo "walkthrough: no NVIDIA GPU here; run it on the GPU node" >&2; exit 2; fi
if [ -z "${KERNCAP_BIN:-}" ] && [ -f .carry/kerncap.xz ]; then mkdir -p dist && xz -dc .carry/kerncap.xz > dist/kerncap && chmod +x dist/kerncap; fi
kc="${KERNCAP_BIN:-$repo/dist/kerncap}"
unset BUN_BE_BUN
if [ ! -x "$kc" ]; then echo "walkthrough: no kerncap binary at $kc (scripts/build.sh builds it)" >&2; exit 2; fi
work="$OUT/work"
rm -rf "$work"; mkdir -p "$work"
md="$OUT/walkthrough.md"
commit="${KERNCAP_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "not recorded")}"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
nvccv=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
# what kerncap prints at a terminal's width, without colour codes, for the file
export NO_COLOR=1 COLUMNS=120

# `kerncap` in the commands shown: the binary's path left out
shown() { sed -e "s#$kc#kerncap#g" -e "s#$work/##g" -e "s#$work#.#g" -e "s#$repo/##g"; }
# at most 60 lines: the first 45 and the last 12 of a longer output
shorten() { awk '{ l[NR] = $0 } END { if (NR <= 60) { for (i = 1; i <= NR; i++) print l[i] } else { for (i = 1; i <= 45; i++) print l[i]; print "… (" NR - 57 " lines left out) …"; for (i = NR - 11; i <= NR; i++) print l[i] } }'; }
# step "what it shows" command…: run in $work, write the command and its output
step() {
  local what="$1"; shift
  echo "[walkthrough] $*" | shown >&2
  local t0=$(date +%s.%N)
  (cd "$work" && "$@") > "$work/.out" 2>&1
  local rc=$? t1=$(date +%s.%N)
  {
    echo
    echo "$what"
    echo
    echo '```console'
    echo "\$ $*" | shown
    shorten < "$work/.out" | shown
    echo '```'
    echo "<sub>exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s</sub>"
  } >> "$md"
  return 0
}

{
  echo "# Walkthrough"
  echo
  echo "What kerncap prints for each verb, recorded by \`scripts/walkthrough.sh\` on $(date -u +%Y-%m-%d) at"
  echo "$(date -u +%H:%M) UTC: commit $commit, $("$kc" --version 2>/dev/null | head -1), GPU ${gpu:-unknown}, CUDA ${nvccv:-unknown}."
  echo "The application is \`test/apps/structs.cu\` (a kernel reading an array of structs of device"
  echo "pointers, and a templated in-place axpy); every command runs in a scratch folder. Outputs"
  echo "longer than 60 lines are shortened in the middle."
} > "$md"

nvcc -O2 -lineinfo -arch=native -o "$work/structs" test/apps/structs.cu || { echo "walkthrough: nvcc failed" >&2; exit 1; }
nvcc -O2 -arch=native -o "$work/nvtx_ranges" test/apps/nvtx_ranges.cu -ldl || echo "walkthrough: nvtx_ranges did not build; its step is left out" >&2

echo -e "\n## Find the kernel: \`list\`" >> "$md"
step "Every kernel the application launches, with its launch count, last grid and block, and module:" "$kc" list -- ./structs 3

echo -e "\n## Capture one launch: \`run\`" >> "$md"
step "The second launch of \`scale_jobs\` (\`--dispatch 1\`), with its source found under \`test/apps\` for the reproducer:" \
  "$kc" run --kernel scale_jobs --dispatch 1 --source-root "$repo/test/apps" --out cap -- ./structs 3
step "What was captured:" "$kc" inspect cap

echo -e "\n## Replay it: \`replay\`" >> "$md"
step "The launch again at the captured addresses, judged against the application's after state, and timed:" "$kc" replay cap --iters 20

echo -e "\n## Edit the kernel and check the edit: \`validate\`" >> "$md"
cp "$work/cap/src/structs.cu" "$work/structs.orig.cu"
sed -i 's/job.out\[i\] = job.in\[i\] \* job.scale/job.out[i] = __ldg(\&job.in[i]) * job.scale/' "$work/cap/src/structs.cu"
{
  echo
  echo "The edit (loads through the read-only data cache), in \`cap/src/structs.cu\`:"
  echo
  echo '```diff'
  diff -u "$work/structs.orig.cu" "$work/cap/src/structs.cu" | sed -e "s#$work/##g" | tail -n +3
  echo '```'
} >> "$md"
step "Rebuild with the captured flags, replay on the captured memory, judge, and time against the captured module:" "$kc" validate cap

echo -e "\n## Keep it running: \`validate --watch\`" >> "$md"
(cd "$work" && exec "$kc" validate --watch cap) > "$work/watch.out" 2>&1 &
wpid=$!
verdicts() { grep -c '^\[[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\] ' "$work/watch.out" 2>/dev/null || true; }
waitfor() { local n=$1 i; for i in $(seq 1 240); do [ "$(verdicts)" -ge "$n" ] && return 0; kill -0 "$wpid" 2>/dev/null || return 1; sleep 0.5; done; return 1; }
waitfor 1; sleep 1
cp "$work/structs.orig.cu" "$work/cap/src/structs.cu" # one save: the edit taken back
waitfor 2
kill -INT "$wpid" 2>/dev/null; wait "$wpid"; wrc=$?
{
  echo
  echo "One process keeps the memory on the GPU; the first verdict, then one per save (here one save, the edit taken back), then Ctrl-C:"
  echo
  echo '```console'
  echo "\$ kerncap validate --watch cap"
  shorten < "$work/watch.out" | shown
  echo "^C"
  echo '```'
  echo "<sub>exit $wrc</sub>"
} >> "$md"

echo -e "\n## Try configurations: \`tune\`" >> "$md"
step "Register limits built through the reproducer's build.sh, each judged and timed interleaved on the captured memory:" "$kc" tune cap --maxrregcount 32,64,128

echo -e "\n## Profile the captured launch: \`profile\`" >> "$md"
if command -v ncu >/dev/null; then
  step "Nsight Compute on the replayed launch only:" "$kc" profile cap
else
  echo -e "\n(ncu is not on this machine's PATH: left out.)" >> "$md"
fi

echo -e "\n## A corpus as a regression suite: \`check\`" >> "$md"
mkdir -p "$work/corpus"
(cd "$work" && "$kc" run --kernel axpy_inplace --out corpus/axpy -- ./structs 3 > /dev/null 2>&1)
cp -r "$work/cap" "$work/corpus/scale_jobs"
step "The first check records each capture's time as the baseline:" "$kc" check corpus
step "A later check judges each capture and times it against that baseline:" "$kc" check corpus
step "The same, one row per kernel (\`--print-summary\`, as ncu's):" "$kc" check corpus --print-summary per-kernel

if [ -x "$work/nvtx_ranges" ]; then
  echo -e "\n## Only the launches inside an NVTX range: \`list --nvtx-include\`" >> "$md"
  step "Every launch of \`test/apps/nvtx_ranges.cu\` (one kernel, \`mark\`, launched in and out of NVTX ranges):" "$kc" list -- ./nvtx_ranges
  step "The same launches by the NVTX ranges open at each (\`--print-summary per-nvtx\`): the names to select by:" "$kc" list --print-summary per-nvtx -- ./nvtx_ranges
  step "Only those inside push/pop range A, at any depth (ncu's syntax):" "$kc" list --nvtx --nvtx-include A/ -- ./nvtx_ranges
fi

echo "[walkthrough] wrote $md" >&2
