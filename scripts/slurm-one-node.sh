#!/usr/bin/env bash
# docs/check.md's Slurm job array, submitted to a real Slurm: a one-node cluster started here
# (Debian's slurm-wlm: slurmctld + slurmd, authenticated by munge; `apt-get install slurm-wlm
# munge`), private to this run: its own munge key and socket, its own ports, state and logs under
# one scratch folder, the daemons stopped at the end. The job script is the doc's own (its first
# ```bash block under "### Slurm job array", with /shared put in the scratch folder), submitted
# with `sbatch --array=0-(TASKS-1)` (command-line options override its #SBATCH lines: the
# array's size, a log per task), then waited for until it leaves the queue (a task held after a
# failed launch ends the run with slurmd's error). The node declares SLURM_GPUS generic resources (gres gpu, empty files of its own) so
# the script's `--gpus-per-node` can be met on a machine without GPUs. Then the doc's merge
# command joins the shards' results into one JUnit report, which must hold every capture once.
# On a CPU machine each capture's record is an error (E_NO_GPU) or, with --rebuild, its build;
# on a GPU node, replays.
#
# Usage: scripts/slurm-one-node.sh CORPUS_DIR [TASKS]   (default TASKS 2)
# Environment: KERNCAP_BIN (default dist/kerncap), SLURM_GPUS (gres count, default 4),
#   KEEP=1 (leave the scratch folder and print its path).
# Exit: 0 when the merged report holds every capture once, 1 otherwise, 77 when Slurm or munge
# is not installed (a test's "skipped").
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
corpus="$(realpath "${1:?usage: scripts/slurm-one-node.sh CORPUS_DIR [TASKS]}")"
tasks="${2:-2}"
bin="$(realpath "${KERNCAP_BIN:-dist/kerncap}")"
say() { echo "[slurm] $*"; }
for t in slurmctld slurmd munged sbatch scontrol squeue; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || { say "$t not installed (apt-get install slurm-wlm munge)"; exit 77; }
done
export PATH="/usr/sbin:$PATH"
[ -x "$bin" ] || { say "no kerncap executable at $bin (bash scripts/build.sh, or KERNCAP_BIN)"; exit 2; }
# under /tmp whatever TMPDIR says: slurmd's and slurmstepd's Unix sockets live in it, and a socket
# path is at most 108 bytes (a test's nested TMPDIR made "launch failed requeued held")
work="$(mktemp -d /tmp/kcslurm.XXXXXX)"
chmod 755 "$work"
host="$(hostname -s)"
# ports of our own, so that another cluster on this machine (or a second run) is not disturbed
port=$((20000 + RANDOM % 20000))
pids=()
cleanup() {
  [ -f "$work/conf/slurm.conf" ] && SLURM_CONF="$work/conf/slurm.conf" scontrol shutdown >/dev/null 2>&1 || true
  for f in "$work/run/slurmd.pid" "$work/run/slurmctld.pid" "$work/run/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 0.5
  if [ "${KEEP:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
mkdir -p "$work"/{conf,run,state,spool,log,munge,shared,bin}
chmod 700 "$work/munge"

# munge: a key of our own, its socket in the scratch folder (as root it needs --force)
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
force=(); [ "$(id -u)" = 0 ] && force=(--force)
munged "${force[@]}" --key-file="$work/munge/munge.key" --socket="$work/run/munge.socket" \
  --pid-file="$work/run/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed"
user="$(id -un)"
cpus="$(nproc)"
cat >"$work/conf/slurm.conf" <<EOF
ClusterName=kerncap-test
SlurmctldHost=$host
SlurmUser=$user
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$work/run/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$host CPUs=$cpus Gres=gpu:${SLURM_GPUS:-4} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
# the GPUs as device files of our own (empty files: Slurm only names them in CUDA_VISIBLE_DEVICES;
# a count-only gres/gpu was reported as 0 by this slurmd, 22.05)
gpus="${SLURM_GPUS:-4}"
mkdir -p "$work/dev"
for i in $(seq 0 $((gpus - 1))); do : >"$work/dev/gpu$i"; done
printf "AutoDetect=off\nNodeName=%s Name=gpu File=%s/dev/gpu[0-%d]\n" "$host" "$work" $((gpus - 1)) >"$work/conf/gres.conf"
# no cgroup.conf: proctrack/linuxproc and task/none use no cgroup
export SLURM_CONF="$work/conf/slurm.conf"
t0=$(date +%s.%N)
slurmctld -f "$SLURM_CONF" || { say "slurmctld did not start: $(tail -5 "$work/log/slurmctld.log" 2>/dev/null)"; exit 1; }
slurmd -f "$SLURM_CONF" || { say "slurmd did not start: $(tail -5 "$work/log/slurmd.log" 2>/dev/null)"; exit 1; }
for _ in $(seq 1 60); do
  state="$(sinfo -h -n "$host" -o %t 2>/dev/null || true)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || { say "the node did not come up (state '${state:-none}'): $(tail -5 "$work/log/slurmd.log" 2>/dev/null) / $(tail -5 "$work/log/slurmctld.log" 2>/dev/null)"; exit 1; }
t1=$(date +%s.%N)
say "one-node cluster up on $host ($cpus CPUs, gres gpu:${SLURM_GPUS:-4}, ports $port-$((port + 1))) in $(python3 -c "print(f'{$t1 - $t0:.1f}')") s"

# the corpus and kerncap where the doc's script looks (/shared, kerncap on PATH)
cp -r "$corpus" "$work/shared/corpus"
ln -s "$bin" "$work/bin/kerncap"
python3 - docs/check.md "$work/job.sh" "$work/merge.sh" "$work/shared" <<'PY'
import re, sys
doc, job, merge, shared = sys.argv[1:]
text = open(doc).read()
sec = text[text.index("### Slurm job array"):]
blocks = re.findall(r"```bash\n(.*?)```", sec, re.S)
open(job, "w").write(blocks[0].replace("/shared", shared))
open(merge, "w").write("set -euo pipefail\n" + blocks[1].replace("/shared", shared))
PY
grep -q -- '--shard "$K/$N"' "$work/job.sh" || { say "the doc's job script has no --shard \"\$K/\$N\" line"; exit 1; }
n=$(find "$work/shared/corpus" -mindepth 1 -maxdepth 1 -type d | wc -l)
# the first baseline, as the doc says: a check of the whole corpus with --write-baseline
PATH="$work/bin:$PATH" kerncap check "$work/shared/corpus" --results "$work/first" --write-baseline "$work/shared/corpus-baseline.json" --iters 10 >/dev/null 2>"$work/first.log" || true
if [ ! -f "$work/shared/corpus-baseline.json" ]; then
  # without a GPU no capture is timed, and check writes no baseline of none: the job runs without --baseline, said
  grep -q "no capture of this run was timed" "$work/first.log" || { say "the first check wrote no baseline: $(tail -3 "$work/first.log")"; exit 1; }
  sed -i '/--baseline /d' "$work/job.sh"
  say "no GPU: the first check timed no capture and wrote no baseline (as check does); the job script runs without --baseline"
fi
say "$n captures, $tasks array tasks: sbatch --array=0-$((tasks - 1)) the doc's job script"
t2=$(date +%s.%N)
job="$(cd "$work" && PATH="$work/bin:$PATH" sbatch --parsable --array=0-$((tasks - 1)) --output="$work/check-%a.log" --export=ALL job.sh)"
job="${job%%;*}"
# until the array leaves the queue; a task that cannot start (held after a failed launch) ends the run
for _ in $(seq 1 ${SLURM_WAIT_S:-300}); do
  q="$(squeue -h -j "$job" -o '%T %r' 2>/dev/null || true)"
  [ -z "$q" ] && break
  if grep -q "held" <<<"$q"; then
    say "the array's tasks could not start ($q): $(grep -i error "$work/log/slurmd.log" | grep -v -i pmix | tail -3)"
    scancel "$job" 2>/dev/null || true
    exit 1
  fi
  sleep 1
done
[ -z "$q" ] || { say "the array job $job did not finish in ${SLURM_WAIT_S:-300} s ($q)"; scancel "$job" 2>/dev/null || true; exit 1; }
t3=$(date +%s.%N)
say "array job $job left the queue in $(python3 -c "print(f'{$t3 - $t2:.1f}')") s"
set +e
JOB="$job" PATH="$work/bin:$PATH" bash "$work/merge.sh" >"$work/merge.log" 2>&1
mrc=$?
set -e
python3 - "$work" "$job" "$n" "$tasks" "$mrc" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
work, job, n, tasks, mrc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
root = f"{work}/shared/check-{job}"
shards = sorted(glob.glob(f"{root}/shard-*.xml"))
per = [int(ET.parse(p).getroot().get("tests", 0)) for p in shards]
allx = f"{root}/all.xml"
merged = ET.parse(allx).getroot() if os.path.exists(allx) else None
cases = list(merged.iter("testcase")) if merged is not None else []
names = [f"{tc.get('classname')}.{tc.get('name')}" for tc in cases]
kinds = sorted({(c.tag, c.get("type")) for tc in cases for c in tc if c.tag in ("failure", "error", "skipped")})
ok = merged is not None and len(shards) == tasks and len(names) == n and len(set(names)) == n and sum(per) == n
print(f"[slurm] {len(shards)} shard reports of {tasks} tasks, sizes {per} (sum {sum(per)}); merged JUnit {len(names)} test cases ({len(set(names))} distinct) of {n} captures, outcomes {kinds or 'all passed'}, merge exit {mrc}: {'OK' if ok else 'FAILED'}")
if not ok:
    for f in sorted(glob.glob(f"{work}/check-*.log")) + [f"{work}/merge.log"]:
        print(f"--- {f}\n" + open(f).read()[-1500:])
sys.exit(0 if ok else 1)
PY
