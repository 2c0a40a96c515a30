#!/usr/bin/env bash
# kerncap eval against sequential kerncap validate, one run on the GPU node (about 5 minutes on
# an H200 with 16 cores):
#  1. captures: fma_loop of test/apps/verdicts.cu (CUDA, found by --source-root),
#     fused_add_relu of test/apps/triton_app.py (Triton) and, for the llmc batch, llm.c's
#     layernorm_forward_kernel6 (a code base's kernel: its Makefile's compile line, the 2nd launch of
#     the GPT-2 step of scripts/bench-edit-loop-llmc.sh, which prepares it), each with `kerncap run`;
#  2. N candidates of each (default 32; scripts/bench-eval.py writes them): CUDA, N-3 edited
#     copies of src/ that build and run (most match, a few mismatch); llm.c, N-3 edits of
#     layernorm_forward_kernel6 (unroll factors, cache hints; four change the result); Triton, N-3 configs of
#     compile options (num_warps × num_stages); and in each batch one edit that hangs (a loop that
#     never ends), one that faults (a store far outside any allocation), one that does not compile;
#  3. `kerncap eval CAP CANDIDATE… --gpus 0 --workers-per-gpu W --timeout T --jsonl …` against N
#     sequential `kerncap validate` processes on one copy of the capture into which each candidate's
#     edited file is copied in turn, as a user saves an edit (a config: pinned in its pinned.json);
#     a hung validate is stopped by `timeout` at
#     VALIDATE_TIMEOUT s and counted a timeout;
#  4. figures: candidates per minute of each, the ratio, the fraction of each's wall time the GPU
#     was busy (nvidia-smi's utilization.gpu sampled every 100 ms), and every eval verdict against
#     validate's verdict of the same candidate (match, mismatch, fault, timeout, compile-error,
#     layout-change).
# Figures in $KERNCAP_GPU_OUT/bench-eval.json (or the work folder), a summary on stdout.
# Usage: scripts/bench-eval.sh [N]   (WORKERS, default 4 workers on GPU 0; EVAL_TIMEOUT, default 5 s;
#        VALIDATE_TIMEOUT, default 20 s; EVAL_FLAGS, more words for eval, e.g. --pruned (its builds from
#        the pruned TU, off by default); BATCHES, default "cuda llmc triton-configs", "triton" adds
#        edits; llmc needs .carry/llmc-src.tar.xz, scripts/make-llmc-tarball.sh, else it is skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KERNCAP_BIN:-$PWD/dist/kerncap}"
n="${1:-32}"
workers="${WORKERS:-4}"
etimeout="${EVAL_TIMEOUT:-5}"
vtimeout="${VALIDATE_TIMEOUT:-20}"
# cuda: edits of fma_loop; llmc: edits of llm.c's layernorm_forward_kernel6; triton-configs: configs
# of fused_add_relu (and its three bad edits); triton: edits of it
batches="${BATCHES:-cuda llmc triton-configs}"
work="${TMPDIR:-/tmp}/kerncap-bench-eval"
out="${KERNCAP_GPU_OUT:-$work}"
unset BUN_BE_BUN
say() { echo "[bench-eval] $*"; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
# the binary built elsewhere (the GPU node has no Bun), as scripts/gpu-test.sh unpacks it
if [ -z "${KERNCAP_BIN:-}" ] && [ ! -x "$bin" ] && [ -f .carry/kerncap.xz ]; then mkdir -p dist && xz -dc .carry/kerncap.xz > "$bin" && chmod +x "$bin"; fi
[ -x "$bin" ] || bash scripts/build.sh >/dev/null
rm -rf "$work"; mkdir -p "$work" "$out"
export TRITON_CACHE_DIR="$work/triton-cache"
now() { date +%s.%N; }

# GPU utilization sampled every 100 ms into FILE until stop_sampling
start_sampling() { nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -i 0 -lms 100 >"$1" 2>/dev/null & sampler=$!; }
stop_sampling() { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }

nvcc -O2 -arch=sm_90 -o "$work/verdicts" test/apps/verdicts.cu
say "capturing"
"$bin" run --kernel "^fma_loop" --dispatch 1 --source-root test/apps --out "$work/cuda-cap" -- "$work/verdicts" fma >/dev/null 2>"$work/cuda-cap.err" || { say "CUDA capture failed: $(tail -3 "$work/cuda-cap.err")"; exit 1; }
"$bin" run --kernel "^fused_add_relu$" --dispatch 1 --out "$work/triton-cap" -- python3 test/apps/triton_app.py 3 20 >/dev/null 2>"$work/triton-cap.err" || { say "Triton capture failed: $(tail -3 "$work/triton-cap.err")"; exit 1; }
if [[ " $batches " == *" llmc "* ]]; then
  # llm.c built by its own Makefile (not timed), then its layernorm captured as the edit-loop benchmark does
  llmc="${KERNCAP_LLMC_WORK:-${TMPDIR:-/tmp}/kerncap-llmc}"
  if bash scripts/bench-edit-loop-llmc.sh --prepare && [ -x "$llmc/llm.c/train_gpt2cu" ]; then
    ldpath="$(cat "$llmc/ld-library-path" 2>/dev/null || true)"
    (cd "$llmc" && LD_LIBRARY_PATH="$ldpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" run --kernel layernorm_forward_kernel6 --dispatch 1 \
      --compile-commands "$llmc/make-n.txt" --source-root "$llmc/llm.c" --exit-after-capture --out "$work/llmc-cap" -- \
      "$llmc/llm.c/train_gpt2cu" -e d6 -i "$llmc/data/train_*.bin" -j "$llmc/data/val_*.bin" -b 4 -t 64 -x 1 -v 1000 -s 0 -m 1 -h 0) \
      >/dev/null 2>"$work/llmc-cap.err" || { say "llm.c capture failed: $(tail -3 "$work/llmc-cap.err")"; exit 1; }
  else
    say "llmc batch skipped: llm.c could not be prepared (.carry/llmc-src.tar.xz: scripts/make-llmc-tarball.sh)"
    batches="${batches//llmc/}"
  fi
fi

for fe in $batches; do
  python3 scripts/bench-eval.py candidates "$work/${fe%%-*}-cap" "$fe" "$n" "$work/cands-$fe"
done

for fe in $batches; do
  cap="$work/${fe%%-*}-cap"
  cands=("$work/cands-$fe"/*)
  configs=()
  if [ -f "$work/cands-$fe.configs" ]; then mapfile -t configs <"$work/cands-$fe.configs"; fi
  all=("${configs[@]}" "${cands[@]}")
  say "$fe: ${#all[@]} candidates: kerncap eval ($workers workers on GPU 0)"
  start_sampling "$work/$fe-eval.util"
  t0=$(now)
  set +e
  # shellcheck disable=SC2086
  "$bin" eval "$cap" "${all[@]}" --gpus 0 --workers-per-gpu "$workers" --timeout "$etimeout" ${EVAL_FLAGS:-} --jsonl "$work/$fe-eval.jsonl" --json >"$work/$fe-eval.json" 2>"$work/$fe-eval.log"
  echo $? >"$work/$fe-eval.rc"
  set -e
  t1=$(now)
  stop_sampling
  echo "$t0 $t1" >"$work/$fe-eval.span"
  say "$fe: eval $(python3 -c "print(round($t1 - $t0, 1))") s (exit $(cat "$work/$fe-eval.rc")); now ${#all[@]} sequential validate"
  # the validates: one copy of the capture; each candidate's edited file (or, for a config, its
  # compile options pinned in pinned.json) put in place in turn, as a user's edit loop would (a copy
  # is not the folder kerncap sealed as made here: its stock build.sh runs with --trust)
  cp -r "$cap" "$work/$fe-val"
  rel="$(cat "$work/cands-$fe.rel")"
  : >"$work/$fe-validate.tsv"
  start_sampling "$work/$fe-validate.util"
  t0=$(now)
  for c in "${all[@]}"; do
    if [ -d "$c" ]; then
      cp "$c/$rel" "$work/$fe-val/src/$rel"; label=$(basename "$c")
      [ ! -f "$cap/pinned.json" ] || cp "$cap/pinned.json" "$work/$fe-val/pinned.json"
    else
      cp "$cap/src/$rel" "$work/$fe-val/src/$rel"; label="$c"
      cp "$cap/pinned.json" "$work/$fe-val/pinned.json"
      python3 scripts/bench-eval.py pin "$work/$fe-val" "$c"
    fi
    set +e
    timeout -k 5 "$vtimeout" "$bin" validate "$work/$fe-val" --json --trust >"$work/$fe-val.out" 2>"$work/$fe-val.err"; rc=$?
    set -e
    printf '%s\t%s\t%s\n' "$label" "$rc" "$(tr -d '\n\t' <"$work/$fe-val.out")" >>"$work/$fe-validate.tsv"
  done
  t1=$(now)
  stop_sampling
  echo "$t0 $t1" >"$work/$fe-validate.span"
done

python3 scripts/bench-eval.py report "$work" "$n" "$workers" >"$out/bench-eval.json"
python3 - "$out/bench-eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for fe, x in r["batches"].items():
    print(f"[bench-eval] {fe}: eval {x['eval']['seconds']:.1f} s = {x['eval']['perMinute']:.1f}/min (GPU busy {x['eval']['gpuBusy']:.0%}), "
          f"validate {x['validate']['seconds']:.1f} s = {x['validate']['perMinute']:.1f}/min (GPU busy {x['validate']['gpuBusy']:.0%}): "
          f"{x['speedup']:.2f}x; verdicts equal {x['equal']}/{x['candidates']}" + (f"; differ: {x['differ']}" if x["differ"] else ""))
    print(f"[bench-eval] {fe}: eval verdicts {x['evalVerdicts']}")
    print(f"[bench-eval] {fe}: eval builds {x['builds']['builders']}, {x['builds']['seconds']:.1f} s of builds, {x['builds']['runSeconds']:.1f} s of candidate runs")
    tm = x["timing"]
    print(f"[bench-eval] {fe}: timed comparisons (eval / validate): {tm['eval']['compared']} / {tm['validate']['compared']}, median pairs {tm['eval']['medianPairs']} / {tm['validate']['medianPairs']}, "
          f"median s {tm['eval']['medianSeconds']} / {tm['validate']['medianSeconds']}, total s {tm['eval']['seconds']} / {tm['validate']['seconds']}, decided {tm['eval']['decided']} / {tm['validate']['decided']}, "
          f"detectable median {tm['eval']['medianDetectable']} / {tm['validate']['medianDetectable']}, max {tm['eval']['maxDetectable']} / {tm['validate']['maxDetectable']}; eval waited {tm['eval']['waitSeconds']} s for the GPU's timing window")
    t = x["timeline"]
    print(f"[bench-eval] {fe}: eval timeline: records at {t['firstRecord']} / {t['medianRecord']} / {t['lastRecord']} s (first / median / last), check {t['check']}, last three {t['last']}")
PY
say "figures in $out/bench-eval.json"
