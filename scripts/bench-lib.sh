# Shared by the edit-loop benchmarks (sourced; needs $bin, the kerncap binary).
now() { date +%s.%N; }

# watch_save_to_verdict CAP FILE LOG: start `kerncap validate --watch CAP --json` (JSON Lines into
# LOG), wait for its first verdict (the unchanged reproducer), append a comment line to FILE (a
# source under CAP/src/), and time the write → the next line, polled every 10 ms (so ±15 ms).
# Ends the watch with SIGTERM (a background job of a non-interactive shell ignores SIGINT).
# Prints "SECONDS BUILD_SECONDS KERNCAP_SECONDS EVENT VERDICT COMPILE_SECONDS": from the write to
# the line, the watch's build time, the watch's own save→verdict (from the last file event), the
# event and verdict of that line, and the compiler's own part of the build (a CUDA fast build's
# cicc + ptxas, buildSteps.compileMs: the floor of a save; 0 when the build does not say): the median of WATCH_SAVES saves (default 3; each is also printed on stderr). Returns 1 when the watch ended or did not answer within 180 s.
watch_save_to_verdict() {
  local cap=$1 file=$2 log=$3 wpid t0 t1 line
  : >"$log"
  "$bin" validate --watch "$cap" --json >"$log" 2>"$log.stderr" &
  wpid=$!
  _wait_lines() { # N: until LOG has N lines
    local t=$SECONDS
    while [ "$(wc -l <"$log")" -lt "$1" ]; do
      kill -0 "$wpid" 2>/dev/null || return 1
      [ $((SECONDS - t)) -lt 180 ] || return 1
      sleep 0.01
    done
  }
  if ! _wait_lines 1; then echo "[bench] the watch gave no first line: $(tail -5 "$log.stderr")" >&2; kill -TERM "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; return 1; fi
  sleep 0.5 # the file watcher starts right after the first line
  # a CUDA watch then tries its pruned build (src/frontends/cuda/fast-build.ts): the saves come after it says which builder it uses
  local t=$SECONDS
  while ! grep -q "saves are rebuilt" "$log.stderr" 2>/dev/null && [ $((SECONDS - t)) -lt 30 ] && grep -q '"frontend": *"cuda"' "$cap/kerncap.json" 2>/dev/null; do sleep 0.05; done
  grep -h "saves are rebuilt" "$log.stderr" | sed 's/^/[bench] watch: /' >&2 || true
  # WATCH_SAVES saves (default 3), one at a time; the median of their save→verdict is reported
  local k times=()
  for k in $(seq 1 "${WATCH_SAVES:-3}"); do
    t0=$(now)
    echo "// kerncap bench watch edit $(date +%s%N)" >>"$file"
    if ! _wait_lines $((k + 1)); then echo "[bench] the watch gave no line after save $k: $(tail -5 "$log.stderr")" >&2; kill -TERM "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; return 1; fi
    t1=$(now)
    times+=("$t0:$t1")
    sleep 0.3
  done
  kill -TERM "$wpid" 2>/dev/null
  wait "$wpid" 2>/dev/null || true
  python3 - "$log" "${times[@]}" <<'PY'
import json, sys, statistics
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
rows = []
for (span, doc) in zip(sys.argv[2:], docs):
    t0, t1 = map(float, span.split(":"))
    steps = doc.get("buildSteps")
    ph = doc.get("phases") or {}
    rows.append((t1 - t0, doc.get("buildSeconds") or 0, doc.get("saveToVerdictSeconds", 0), doc.get("event"), doc.get("verdict", "-"), doc.get("builder", "-"),
                 " ".join(f"{k[:-2]} {v} ms" if k.endswith("Ms") else f"{k} {v}" for k, v in steps.items()) if steps else "",
                 " ".join(f"{k[:-7]} {v:.3f} s" for k, v in ph.items()),
                 ((steps or {}).get("compileMs") or 0) / 1000))
for r in rows: print(f"[bench] watch save: {r[0]:.3f} s (build {r[1]:.3f} s by {r[5]}{': ' + r[6] if r[6] else ''}; watch says {r[2]:.3f} s{' = ' + r[7] if r[7] else ''}; {r[3]} {r[4]})", file=sys.stderr)
mid = sorted(rows)[len(rows) // 2]
print(f"{mid[0]:.3f} {mid[1]:.3f} {mid[2]:.3f} {mid[3]} {mid[4]} {mid[8]:.3f}")
PY
}
