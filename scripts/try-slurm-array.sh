#!/usr/bin/env bash
# The Slurm job array of docs/check.md, run without Slurm: no scheduler is installed on the GPU
# node, so this shell stands in for `sbatch --array=0-(N-1)`: it takes the job script from the
# doc as it is written (its first ```bash block under "### Slurm job array"), puts a scratch
# folder where the doc says /shared, and runs the script once per array task, one after another,
# with the variables Slurm sets for a task (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT,
# SLURM_ARRAY_JOB_ID, CUDA_VISIBLE_DEVICES of the task's GPUs: here 0). The first baseline is made
# as the doc says (a check with --write-baseline). Then the doc's merge command joins the shards:
# the merged JUnit must hold every capture once, and the exit must be 0.
# What it does not try: Slurm itself (scheduling, --gpus-per-node, requeue): scripts/slurm-one-node.sh
# submits the same script to a real one-node Slurm where slurm-wlm is installed.
# Usage: scripts/try-slurm-array.sh CORPUS_DIR [TASKS]   (default TASKS 4)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
corpus="${1:?usage: scripts/try-slurm-array.sh CORPUS_DIR [TASKS]}"
tasks="${2:-4}"
work="${TMPDIR:-/tmp}/kerncap-slurm"
unset BUN_BE_BUN
say() { echo "[slurm-array] $*"; }
rm -rf "$work"; mkdir -p "$work/shared" "$work/bin"
cp -r "$corpus" "$work/shared/corpus"
ln -s "$bin" "$work/bin/kerncap" # the doc calls `kerncap` from PATH
export PATH="$work/bin:$PATH"
# the job script, from the doc
python3 - docs/check.md "$work/job.sh" "$work/merge.sh" "$work/shared" <<'PY'
import re, sys
doc, job, merge, shared = sys.argv[1:]
text = open(doc).read()
sec = text[text.index("### Slurm job array"):]
blocks = re.findall(r"```bash\n(.*?)```", sec, re.S)
open(job, "w").write(blocks[0].replace("/shared", shared))
open(merge, "w").write("set -euo pipefail\n" + blocks[1].replace("/shared", shared).replace("$JOB", "$SLURM_ARRAY_JOB_ID"))
PY
grep -q -- '--shard "$K/$N"' "$work/job.sh" || { say "the doc's job script has no --shard \"\$K/\$N\" line"; exit 1; }
n=$(find "$work/shared/corpus" -mindepth 1 -maxdepth 1 -type d | wc -l)
say "$n captures, $tasks array tasks; the first baseline as the doc says (--write-baseline)"
kerncap check "$work/shared/corpus" --results "$work/first" --write-baseline "$work/shared/corpus-baseline.json" --iters 10 >/dev/null 2>"$work/first.log" || { say "first check failed: $(tail -3 "$work/first.log")"; exit 1; }
t0=$(date +%s.%N)
for k in $(seq 0 $((tasks - 1))); do
  SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$tasks SLURM_ARRAY_JOB_ID=4242 CUDA_VISIBLE_DEVICES=0 \
    bash "$work/job.sh" >"$work/check-$k.log" 2>&1 || say "task $k exited $? ($(tail -2 "$work/check-$k.log"))"
done
t1=$(date +%s.%N)
set +e
SLURM_ARRAY_JOB_ID=4242 bash "$work/merge.sh" >"$work/merge.log" 2>&1; rc=$?
set -e
python3 - "$work" "$n" "$tasks" "$rc" "$t0" "$t1" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
work, n, tasks, rc, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
root = f"{work}/shared/check-4242"
shards = sorted(glob.glob(f"{root}/shard-*.xml"))
per = [int(ET.parse(p).getroot().get("tests", 0)) for p in shards]
allx = f"{root}/all.xml"
merged = ET.parse(allx).getroot() if os.path.exists(allx) else None
names = [tc.get("name") for tc in merged.iter("testcase")] if merged is not None else []
ok = merged is not None and len(names) == n and len(set(names)) == n and sum(per) == n and rc == 0
print(f"[slurm-array] {tasks} tasks in {t1 - t0:.1f} s, shard sizes {per} (sum {sum(per)}), merged JUnit {len(names)} test cases ({len(set(names))} distinct) of {n} captures, merge exit {rc}: {'OK' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
