#!/usr/bin/env bash
# Edit-loop benchmark on a real CUDA code base (ggml, built with its own CMake/Ninja, sm_90):
#   (a) traditional: edit the kernel's source (ggml-cuda/mmq.cuh, where mul_mat_q is defined),
#       rebuild the application with its own build system, rerun it up to the kernel;
#   (b) kerncap: the same edit in the reproducer's copy, then `kerncap validate` (rebuild the
#       captured instantiation + replay + compare);
#   (c) `kerncap validate --watch`: from the save of the copy to the printed verdict line.
# Prints the three times and the ratios (targets: validate at least 50x, --watch at least 100x or 1.0 s), and the watch against its floor (the save's cicc + ptxas),
# then runs scripts/bench-edit-loop-llmc.sh, the same loops on llm.c (its own Makefile; skipped
# without its tarball; SKIP_LLMC=1 leaves it out). Needs a GPU, nvcc, cmake, ninja and
# the ggml tarball ($KERNCAP_GGML_TAR, default .carry/ggml-src.tar.xz). Reuses the build that
# test/gpu/cuda-repro.test.ts leaves in $KERNCAP_GGML_WORK (default $TMPDIR/kerncap-ggml);
# builds it first (not timed) when absent. `--prepare` only unpacks, configures and builds (no
# kerncap needed: a device call can pre-build ggml before the GPU suite). Exit 0 when it measured
# (or prepared), 2 when it could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
# the measure: ggml in a child (its skips and exits are its own), then llm.c
if [ "${1:-}" != "--prepare" ] && [ -z "${KERNCAP_BENCH_GGML_ONLY:-}" ]; then
  rc=0
  KERNCAP_BENCH_GGML_ONLY=1 bash scripts/bench-edit-loop.sh "$@" || rc=$?
  if [ -z "${SKIP_LLMC:-}" ]; then bash scripts/bench-edit-loop-llmc.sh || { r=$?; [ "$rc" -ne 0 ] || rc=$r; }; fi
  exit "$rc"
fi
root="$PWD"
bin="${KERNCAP_BIN:-$root/dist/kerncap}"
tar="${KERNCAP_GGML_TAR:-${KERNCAP_LLAMA_TAR:-$root/.carry/ggml-src.tar.xz}}"
work="${KERNCAP_GGML_WORK:-${TMPDIR:-/tmp}/kerncap-ggml}"
jobs="${JOBS:-16}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
unset BUN_BE_BUN
# shellcheck source=bench-lib.sh
. "$root/scripts/bench-lib.sh"

say() { echo "[bench-edit-loop] $*" >&2; }
if [ ! -e /dev/nvidiactl ] && [ ! -e /dev/nvidia0 ]; then say "skipped: no NVIDIA GPU"; exit 0; fi
prepare_only=""; [ "${1:-}" = "--prepare" ] && prepare_only=1
needs=("$tar" "$nvcc"); [ -n "$prepare_only" ] || needs+=("$bin")
for need in "${needs[@]}"; do [ -e "$need" ] || { say "skipped: $need not found"; exit 0; }; done
command -v cmake >/dev/null && command -v ninja >/dev/null || { say "skipped: cmake/ninja missing"; exit 0; }

src="$work/ggml"; build="$work/build"; app="$build/bin/test-backend-ops"
cap="$work/bench-capture"
app_args=(-o MUL_MAT -b CUDA0 -p "type_a=q4_0,type_b=f32,m=16,n=16,")
kernel='mul_mat_q<\(ggml_type\)2,'

mkdir -p "$work"
[ -f "$src/CMakeLists.txt" ] || tar -xJf "$tar" -C "$work"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON -DGGML_NATIVE=OFF -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_CUDA_COMPILER="$nvcc" >&2
fi
say "preparing (not timed): build test-backend-ops"
t_prep=$(now)
cmake --build "$build" -j"$jobs" --target test-backend-ops >&2
if [ -n "$prepare_only" ]; then say "prepared in $(awk -v a="$t_prep" -v b="$(now)" 'BEGIN{printf "%.0f", b-a}') s: $app"; exit 0; fi
if [ ! -f "$cap/kerncap.json" ]; then
  say "preparing (not timed): capture $kernel"
  "$bin" run --kernel "$kernel" --dispatch 0 --compile-commands "$build/compile_commands.json" --source-root "$src" \
    --exit-after-capture --force --out "$cap" -- "$app" "${app_args[@]}" >&2
fi
# the first validate (not the loop timed below): warms caches (nvcc, page cache) the same way for
# every loop, and checks the pruned TU's build against build.sh's side by side (src/rebuild/rebuilder.ts),
# made again here so that this run's timed validate uses a check this run made
rm -rf "$cap/build/pruned"
tv0=$(now)
"$bin" validate "$cap" --json >"$work/bench-validate-first.json"
tv1=$(now)

orig="$src/src/ggml-cuda/mmq.cuh"
copy="$cap/src/src/ggml-cuda/mmq.cuh"
[ -f "$copy" ] || { say "the capture has no reproducer copy of mmq.cuh ($copy)"; exit 2; }
cp "$orig" "$work/mmq.cuh.orig"; cp "$copy" "$work/mmq.cuh.copy"
restore() { cp "$work/mmq.cuh.orig" "$orig"; cp "$work/mmq.cuh.copy" "$copy"; }
trap restore EXIT
stamp="// kerncap bench edit $(date +%s)"

# (a) traditional loop
echo "$stamp" >> "$orig"
t0=$(now)
cmake --build "$build" -j"$jobs" --target test-backend-ops >"$work/bench-build.log" 2>&1
t1=$(now)
"$app" "${app_args[@]}" >"$work/bench-app.log" 2>&1
t2=$(now)
rebuilt=$(grep -c 'Building CUDA object' "$work/bench-build.log" || true)

# (b) kerncap validate after the same edit
echo "$stamp" >> "$copy"
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

# the process around kerncap's own wall (wallSeconds: from the rebuild's start to the verdict): the
# executable's start (kerncap --version, the fastest of 5), and the rest (options, gates, the device
# context's teardown, exit)
v_best=""
for _ in 1 2 3 4 5; do
  va=$(now); "$bin" --version >/dev/null; vb=$(now)
  v_best=$(awk -v a="$va" -v b="$vb" -v m="$v_best" 'BEGIN { d = b - a; print (m == "" || d < m) ? d : m }')
done
v_own=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wallSeconds"])' "$work/bench-validate.json" 2>/dev/null || echo 0)
awk -v s="$v_best" -v t3="$t3" -v t4="$t4" -v own="$v_own" 'BEGIN {
  printf "edit-loop: validate process %.2f s, kerncap'"'"'s own wall %.2f s: %.0f ms outside it; the executable'"'"'s start (kerncap --version) %.0f ms\n", t4 - t3, own, (t4 - t3 - own) * 1000, s * 1000
}' >&2

# (c) validate --watch: the same kind of save, timed from the write to the verdict line
cp "$work/mmq.cuh.copy" "$copy"
read -r w_s w_build w_own w_event w_verdict w_cc < <(watch_save_to_verdict "$cap" "$copy" "$work/bench-watch.jsonl") || { say "the watch measure failed"; exit 2; }

awk -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v t4="$t4" -v tv0="$tv0" -v tv1="$tv1" -v vbuilder="$vbuilder" -v n="$rebuilt" -v ws="$w_s" -v wb="$w_build" -v wo="$w_own" -v we="$w_event" -v wv="$w_verdict" -v wc="$w_cc" 'BEGIN {
  a = t2 - t0; b = t4 - t3
  printf "edit-loop: traditional %.1f s (rebuild %.1f s, %d CUDA TUs; rerun app %.1f s) | kerncap validate %.2f s (rebuilt by %s) | speed-up %.1fx (target 30x)\n", a, t1 - t0, n, t2 - t1, b, vbuilder == "pruned" ? "the pruned TU" : "build.sh", a / b
  printf "edit-loop: the first validate (build.sh and the pruned build side by side, not an edit of the loop) %.2f s: %.1fx\n", tv1 - tv0, a / (tv1 - tv0)
  printf "edit-loop: validate --watch %.2f s save→verdict (build %.2f s, watch says %.2f s; %s %s) | speed-up %.1fx (target 100x, ≤ 1.0 s)\n", ws, wb, wo, we, wv, a / ws
  if (wc > 0) printf "edit-loop: the floor, nvcc'"'"'s own cicc + ptxas of the pruned kernel in that save: %.2f s; save→verdict / floor %.2fx (kerncap'"'"'s part %.2f s)\n", wc, ws / wc, ws - wc
}'
grep -o '"verdict": *"[a-z]*"' "$work/bench-validate.json" | head -1 >&2 || true
