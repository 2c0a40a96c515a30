#!/usr/bin/env bash
# Edit-loop benchmark on a second real CUDA code base with its own build system: llm.c
# (karpathy/llm.c: train_gpt2.cu is one translation unit, its kernels are in llmc/*.cuh headers,
# built by its own Makefile as one nvcc compile-and-link line). The kernel: layernorm_forward_kernel6
# (llmc/layernorm.cuh, not a template; the one the forward pass launches on an H200), the 2nd
# launch of a GPT-2 d6 model (initialized from the descriptor, random token shards made here).
#   (a) traditional: edit llmc/layernorm.cuh, `make train_gpt2cu` (the target is .PHONY: the whole
#       TU, host and device, and the link), rerun the program for one step (the kernel runs in its
#       first forward pass);
#   (b) `kerncap validate` after the same edit in the reproducer's copy (build.sh compiles the
#       slice: train_gpt2.cu up to its #include of layernorm.cuh; replay + compare);
#   (c) `kerncap validate --watch`: from the save to the printed verdict line.
# Prints the three times, the ratios, and what dominates each loop. Needs a GPU, nvcc (with cuBLAS),
# make, python3 and the tarball ($KERNCAP_LLMC_TAR, default .carry/llmc-src.tar.xz, made by
# scripts/make-llmc-tarball.sh). Works in $KERNCAP_LLMC_WORK (default $TMPDIR/kerncap-llmc),
# shared with test/gpu/llmc.test.ts. `--prepare` only unpacks, writes the token shards and the
# make dry run (make-n.txt: the flags kerncap reads, --compile-commands), builds (build-seconds)
# and records the library path the program needs (ld-library-path); no kerncap needed, so it can
# run in the background before the GPU suites. Exit 0 when it measured (or prepared, or skipped), 2
# when it could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bin="${KERNCAP_BIN:-$root/dist/kerncap}"
tar="${KERNCAP_LLMC_TAR:-$root/.carry/llmc-src.tar.xz}"
work="${KERNCAP_LLMC_WORK:-${TMPDIR:-/tmp}/kerncap-llmc}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
unset BUN_BE_BUN
# shellcheck source=bench-lib.sh
. "$root/scripts/bench-lib.sh"

say() { echo "[bench-edit-loop-llmc] $*" >&2; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
prepare_only=""; [ "${1:-}" = "--prepare" ] && prepare_only=1
needs=("$tar" "$nvcc"); [ -n "$prepare_only" ] || needs+=("$bin")
for need in "${needs[@]}"; do [ -e "$need" ] || { say "skipped: $need not found"; exit 0; }; done
command -v make >/dev/null && command -v python3 >/dev/null || { say "skipped: make/python3 missing"; exit 0; }

src="$work/llm.c"; app="$src/train_gpt2cu"; data="$work/data"; cap="$work/bench-capture"
# the Makefile's own switches: one GPU without NCCL/MPI, no cuDNN, sm_90 (the H200's; stated, not
# queried from nvidia-smi, so that the dry run and the build agree)
make_args=(train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 "NVCC=$nvcc")
# one optimizer step of a 6-layer GPT-2 (C=384) from the d6 descriptor, B=4, T=64; val at step 0
# (one batch), no sampling, no HellaSwag, no logs
app_args=(-e d6 -i "$data/train_*.bin" -j "$data/val_*.bin" -b 4 -t 64 -x 1 -v 1000 -s 0 -m 1 -h 0)
kernel='layernorm_forward_kernel6'

mkdir -p "$work"
[ -f "$src/Makefile" ] || tar -xJf "$tar" -C "$work"
if [ ! -f "$data/val_000000.bin" ]; then
  # llmc/dataloader.h's shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens
  python3 - "$data" <<'PY'
import array, os, random, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
rng = random.Random(20240520)
for name, n in (("train_000000.bin", 65536), ("val_000000.bin", 16384)):
    header = array.array("i", [0] * 256)
    header[0], header[1], header[2] = 20240520, 1, n
    tokens = array.array("H", (rng.randrange(50257) for _ in range(n)))
    tmp = os.path.join(d, name + ".part")
    with open(tmp, "wb") as f:
        header.tofile(f)
        tokens.tofile(f)
    os.replace(tmp, os.path.join(d, name))
PY
fi
# the link wants libnvidia-ml.so (-lnvidia-ml): a driver install may have only libnvidia-ml.so.1
libdir="$work/lib"; mkdir -p "$libdir"
ldc="$(command -v ldconfig || echo /sbin/ldconfig)"
if ! "$ldc" -p 2>/dev/null | grep 'libnvidia-ml\.so ' >/dev/null; then
  so1="$("$ldc" -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')"
  [ -n "$so1" ] || so1="$(ls "$(dirname "$(dirname "$nvcc")")"/lib64/stubs/libnvidia-ml.so "$(dirname "$(dirname "$nvcc")")"/targets/*/lib/stubs/libnvidia-ml.so 2>/dev/null | head -1 || true)"
  [ -n "$so1" ] && ln -sf "$so1" "$libdir/libnvidia-ml.so"
fi
export LIBRARY_PATH="$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}"

if [ ! -x "$app" ] || [ -n "$prepare_only" ]; then
  say "preparing (not timed in the loop): make ${make_args[*]}"
  (cd "$src" && make -n -B "${make_args[@]}" >"$work/make-n.txt" 2>/dev/null)
  t_prep=$(now)
  (cd "$src" && make "${make_args[@]}" >"$work/build.log" 2>&1) || { tail -30 "$work/build.log" >&2; say "make failed"; exit 2; }
  awk -v a="$t_prep" -v b="$(now)" 'BEGIN{printf "%.2f\n", b-a}' >"$work/build-seconds"
  # the program's shared libraries (cuBLAS) where the loader would not find them
  ldpath=""
  if ldd "$app" 2>&1 | grep 'not found' >/dev/null; then ldpath="$(dirname "$(dirname "$nvcc")")/lib64"; fi
  echo "$ldpath" >"$work/ld-library-path"
  say "built in $(cat "$work/build-seconds") s: $app"
fi
ldpath="$(cat "$work/ld-library-path" 2>/dev/null || true)"
[ -z "$ldpath" ] || export LD_LIBRARY_PATH="$ldpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -z "$prepare_only" ] || exit 0

if [ ! -f "$cap/kerncap.json" ]; then
  say "preparing (not timed): capture $kernel"
  (cd "$work" && "$bin" run --kernel "$kernel" --dispatch 1 --compile-commands "$work/make-n.txt" --source-root "$src" \
    --exit-after-capture --force --out "$cap" -- "$app" "${app_args[@]}" >&2)
fi
# the first validate (not the loop timed below): warms caches (nvcc, page cache) the same way for
# every loop, and checks the pruned TU's build against build.sh's side by side (src/rebuild/rebuilder.ts),
# made again here so that this run's timed validate uses a check this run made
rm -rf "$cap/build/pruned"
tv0=$(now)
"$bin" validate "$cap" --json >"$work/bench-validate-first.json"
tv1=$(now)

orig="$src/llmc/layernorm.cuh"
copy="$cap/src/llmc/layernorm.cuh"
[ -f "$copy" ] || { say "the capture has no reproducer copy of layernorm.cuh ($copy)"; exit 2; }
cp "$orig" "$work/layernorm.cuh.orig"; cp "$copy" "$work/layernorm.cuh.copy"
restore() { cp "$work/layernorm.cuh.orig" "$orig"; cp "$work/layernorm.cuh.copy" "$copy"; }
trap restore EXIT
stamp="// kerncap bench edit $(date +%s)"

# (a) traditional loop
echo "$stamp" >>"$orig"
t0=$(now)
(cd "$src" && make "${make_args[@]}" >"$work/bench-build.log" 2>&1)
t1=$(now)
(cd "$work" && "$app" "${app_args[@]}" >"$work/bench-app.log" 2>&1)
t2=$(now)

# (b) kerncap validate after the same edit
echo "$stamp" >>"$copy"
t3=$(now)
# its phases' marks (src/util/marks.ts: ms since the process started) printed after it
KERNCAP_VERBOSE=1 "$bin" validate "$cap" --json >"$work/bench-validate.json" 2>"$work/bench-validate.stderr"
t4=$(now)
sed -n 's/.*\(t+[0-9]* ms: .*\)/[bench] timed validate: \1/p' "$work/bench-validate.stderr" >&2
vbuilder=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rebuild"].get("builder", "build.sh"))' "$work/bench-validate.json")
python3 - "$work/bench-validate-first.json" "$work/bench-validate.json" <<'PY' >&2 || true
import json, sys
for name, f in zip(["first validate", "timed validate"], sys.argv[1:]):
    d = json.load(open(f))
    print(f"[bench] {name}: rebuild {json.dumps(d['rebuild'])}; replay after the build {d['replaySeconds']:.3f} s; wall {d['wallSeconds']:.3f} s")
    # where the replay's preparation went (it runs beside the compiler and holds kerncap's thread: a
    # preparation longer than the compile delays the build's end, src/ops/rebuild-beside.ts)
    rs, rv, ck, mo = d.get("restore", {}), d.get("reserve", {}), d.get("check", {}), d.get("module", {})
    print(f"[bench] {name}: replay phases: reserve {rv.get('seconds', 0):.3f} s, restore {rs.get('seconds', 0):.3f} s ({rs.get('storedBytes', 0) / 2**20:.1f} MiB stored, pinned {rs.get('hostRegistered')}), verify {ck.get('verifySeconds', 0):.3f} s, module wait {mo.get('waitSeconds', 0):.3f} s, load {mo.get('loadSeconds', 0):.3f} s, compare {ck.get('compareSeconds', 0):.3f} s")
PY
vbuild=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rebuild"]["seconds"])' "$work/bench-validate.json")

# (c) validate --watch: save → verdict line
cp "$work/layernorm.cuh.copy" "$copy"
read -r w_s w_build w_own w_event w_verdict w_cc < <(watch_save_to_verdict "$cap" "$copy" "$work/bench-watch.jsonl") || { say "the watch measure failed"; exit 2; }

awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v t4="$t4" -v tv0="$tv0" -v tv1="$tv1" -v vbuilder="$vbuilder" -v vb="$vbuild" -v ws="$w_s" -v wb="$w_build" -v wo="$w_own" -v we="$w_event" -v wv="$w_verdict" 'BEGIN {
  a = t2 - t0; b = t4 - t3
  printf "edit-loop llm.c (%s): traditional %.1f s (make %.1f s, rerun to the kernel %.1f s) | kerncap validate %.2f s (%s build %.2f s; the first validate, with the side-by-side check, %.2f s) | validate --watch %.2f s save→verdict (build %.2f s, watch says %.2f s; %s %s) | speed-up %.1fx validate, %.1fx watch\n", "layernorm_forward_kernel6", a, t1 - t0, t2 - t1, b, vbuilder == "pruned" ? "pruned TU" : "build.sh", vb, tv1 - tv0, ws, wb, wo, we, wv, a / b, a / ws
  printf "edit-loop llm.c: what dominates: traditional: %s; validate: %s; watch: %s\n", \
    (t1 - t0 > t2 - t1 ? sprintf("the Makefile rebuild (%.0f%%: nvcc of all of train_gpt2.cu, host code and its 26 kernels, then the link)", 100 * (t1 - t0) / a) : sprintf("the rerun (%.0f%%: program start, model init, cuBLAS, data)", 100 * (t2 - t1) / a)), \
    (vb > b - vb ? sprintf("the %s build (%.0f%%); the rest is the process, context, restore and compare", vbuilder == "pruned" ? "pruned TU" : "slice", 100 * vb / b) : sprintf("the process start, context, restore and compare (%.0f%%); the build %.2f s", 100 * (b - vb) / b, vb)), \
    sprintf("the rebuild (%.0f%%: the pruned TU when the watch could use it, else the slice); the rest (%.2f s) is debounce, module load, launches, compare", 100 * wb / ws, ws - wb)
}'
grep -o '"verdict": *"[a-z]*"' "$work/bench-validate.json" | head -1 >&2 || true
