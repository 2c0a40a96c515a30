/**
 * The CUDA library's `progress` file in its output folder (c/cuda/kc_snapshot.h): one line
 * "phase done total" (phase `before`, `after` or `fsync`; done and total in bytes of the memory
 * files being written), rewritten in place while the library writes the snapshot. `run` shows it
 * on stderr as every long task shows its progress (src/util/progress.ts): redrawn in place about
 * once a second on a terminal; else a line when a phase starts and one every few seconds while it
 * runs (done/total, the time left); nothing under --json.
 */
import { escapeForTerminal } from "../escape.ts";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { formatBytes } from "../util/format.ts";
import { describeProgressLine } from "../util/progress.ts";

export interface Progress {
  phase: string;
  /** Bytes written so far in this phase. */
  done: number;
  /** Bytes this phase writes. */
  total: number;
}

/** The progress line, or undefined for an absent, empty or malformed one. */
export function parseProgress(text: string): Progress | undefined {
  const m = /^(\w+) (\d+) (\d+)\s*$/.exec(text.split("\n")[0] ?? "");
  return m ? { phase: m[1]!, done: Number(m[2]), total: Number(m[3]) } : undefined;
}

/**
 * One line for the user, the shared progress line's (src/util/progress.ts): "writing the before
 * state: 1.5 GiB of 4.0 GiB (37%), about 20 s left" (the estimate once `elapsedMs` of the phase
 * passed a second); `phaseOnly`: "writing the before state (4.0 GiB)".
 */
export function describeProgress(p: Progress, phaseOnly = false, elapsedMs = 0): string {
  if (p.phase === "fsync") return "flushing the memory files to disk";
  const what = p.phase === "before" ? "the before state" : p.phase === "after" ? "the after state" : p.phase;
  if (phaseOnly) return `writing ${what} (${formatBytes(p.total)})`;
  return describeProgressLine(`writing ${what}`, p.done, p.total, "bytes", elapsedMs);
}

export interface ProgressWatch {
  /** Stop polling (ends a line drawn in place). */
  stop(): void;
}

/** A plain progress line of the snapshot at most this often (ms) when stderr is not a terminal: a
 * snapshot takes seconds to a minute (48 GiB: 29 s, docs/benchmarks.md), where the 10 s of the
 * other verbs would say little. */
export const SNAPSHOT_LINE_EVERY_MS = 2000;

/**
 * Poll DIR/progress every `intervalMs`. `live` (a terminal; default every 1000 ms): redraw one
 * line in place through `draw` ("\r", erase line) whenever it changed, ending the line at a phase
 * change and at stop. Otherwise (default every 250 ms, the library's own cadence, so that a short
 * phase is seen too) `say` gets one line per phase seen and, while a phase runs, one line with its
 * done/total and the time left every `everyMs` (default SNAPSHOT_LINE_EVERY_MS).
 */
export function watchProgress(
  dir: string,
  o: { live: boolean; draw: (s: string) => void; say: (line: string) => void; intervalMs?: number; everyMs?: number; now?: () => number },
): ProgressWatch {
  const now = o.now ?? (() => performance.now());
  const everyMs = o.everyMs ?? SNAPSHOT_LINE_EVERY_MS;
  let last = "";
  let phase = "";
  let phaseStart = now();
  let lastSaid = now();
  let drawn = false;
  const tick = () => {
    const file = newestProgressFile(dir);
    if (!file) return; // not written yet: the capture has not started
    let text: string;
    try {
      text = readFileSync(file.path, "utf8");
    } catch {
      return; // renamed away between the listing and the read
    }
    const p = parseProgress(text);
    const key = `${file.label}\0${text}`;
    if (!p || key === last) return;
    last = key;
    const label = file.label ? `${file.label}: ` : "";
    const ph = `${file.label}\0${p.phase}`;
    if (ph !== phase) phaseStart = now(); // the estimate is the rate of this phase
    if (o.live) {
      if (drawn && ph !== phase) o.draw("\n");
      o.draw(`\r\x1b[K${escapeForTerminal(label + describeProgress(p, false, now() - phaseStart), { oneLine: true })}`); // the progress file's text: no escape of its own reaches the terminal
      drawn = true;
    } else if (ph !== phase) {
      o.say(label + describeProgress(p, true));
      lastSaid = now();
    } else if (now() - lastSaid >= everyMs && p.phase !== "fsync" && p.done < p.total) {
      o.say(label + describeProgress(p, false, now() - phaseStart));
      lastSaid = now();
    }
    phase = ph;
  };
  const timer = setInterval(tick, o.intervalMs ?? (o.live ? 1000 : 250));
  return {
    stop() {
      clearInterval(timer);
      if (drawn) o.draw("\n");
    },
  };
}

/**
 * The progress file being written now: DIR/progress (one capture) or, in a run with several
 * targets (--kernel A --kernel B, --capture-all), the most recently modified
 * DIR/captures/<n>/progress (labelled "capture <n>"). Undefined when none exists yet.
 */
function newestProgressFile(dir: string): { path: string; label: string } | undefined {
  const found: { path: string; label: string; mtimeMs: number }[] = [];
  const consider = (path: string, label: string) => {
    try {
      found.push({ path, label, mtimeMs: statSync(path).mtimeMs });
    } catch {
      /* absent */
    }
  };
  consider(join(dir, "progress"), "");
  let subs: string[] = [];
  try {
    subs = readdirSync(join(dir, "captures"));
  } catch {
    /* a single-target run */
  }
  for (const n of subs) consider(join(dir, "captures", n, "progress"), `capture ${n}`);
  found.sort((a, b) => b.mtimeMs - a.mtimeMs);
  return found[0];
}
