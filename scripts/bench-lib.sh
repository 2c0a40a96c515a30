# Shared by the edit-loop benchmarks (sourced; needs $bin, the kerncap binary).
now() { date +%s.%N; }

# watch_save_to_verdict CAP FILE LOG: start `kerncap validate --watch CAP --json` (JSON Lines into
# LOG), wait for its first verdict (the unchanged reproducer), append a comment line to FILE (a
# source under CAP/src/), and time the write → the next line, polled every 10 ms (so ±15 ms).
# Ends the watch with SIGTERM (a background job of a non-interactive shell ignores SIGINT).
# Prints "SECONDS BUILD_SECONDS KERNCAP_SECONDS EVENT VERDICT": from the write to the line, the
# watch's build time, the watch's own save→verdict (from the last file event), the event and
# verdict of that line. Returns 1 when the watch ended or did not answer within 180 s.
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
  t0=$(now)
  echo "// kerncap bench watch edit $(date +%s%N)" >>"$file"
  if ! _wait_lines 2; then echo "[bench] the watch gave no line after the save: $(tail -5 "$log.stderr")" >&2; kill -TERM "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null; return 1; fi
  t1=$(now)
  kill -TERM "$wpid" 2>/dev/null
  wait "$wpid" 2>/dev/null || true
  line=$(sed -n 2p "$log")
  python3 - "$t0" "$t1" "$line" <<'PY'
import json, sys
t0, t1, doc = float(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
print(f"{t1 - t0:.3f} {doc.get('buildSeconds') or 0:.3f} {doc.get('saveToVerdictSeconds', 0):.3f} {doc.get('event')} {doc.get('verdict', '-')}")
PY
}
