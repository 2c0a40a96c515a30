/**
 * The CUDA library's `progress` file in its output folder (c/kc_snapshot.h): one line
 * "phase done total" (phase `before`, `after` or `fsync`; done and total in bytes of the memory
 * files being written), rewritten in place while the library writes the snapshot. `run` shows it
 * on stderr: redrawn in place about once a second on a terminal, else one line per phase.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { formatBytes } from "../cli/format.ts";

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
 * One line for the user: "writing the before state: 1.5 GiB of 4.0 GiB (37%)"; `phaseOnly`:
 * "writing the before state (4.0 GiB)".
 */
export function describeProgress(p: Progress, phaseOnly = false): string {
  if (p.phase === "fsync") return "flushing the memory files to disk";
  const what = p.phase === "before" ? "the before state" : p.phase === "after" ? "the after state" : p.phase;
  if (phaseOnly) return `writing ${what} (${formatBytes(p.total)})`;
  const pct = p.total > 0 ? ` (${Math.min(100, Math.floor((100 * p.done) / p.total))}%)` : "";
  return `writing ${what}: ${formatBytes(p.done)} of ${formatBytes(p.total)}${pct}`;
}

export interface ProgressWatch {
  /** Stop polling (ends a line drawn in place). */
  stop(): void;
}

/**
 * Poll DIR/progress every `intervalMs`. `live` (a terminal; default every 1000 ms): redraw one
 * line in place through `draw` ("\r", erase line) whenever it changed, ending the line at a phase
 * change and at stop. Otherwise (default every 250 ms, the library's own cadence, so that a short
 * phase is seen too) `say` gets one line per phase seen.
 */
export function watchProgress(dir: string, o: { live: boolean; draw: (s: string) => void; say: (line: string) => void; intervalMs?: number }): ProgressWatch {
  let last = "";
  let phase = "";
  let drawn = false;
  const tick = () => {
    let text: string;
    try {
      text = readFileSync(join(dir, "progress"), "utf8");
    } catch {
      return; // not written yet: the capture has not started
    }
    const p = parseProgress(text);
    if (!p || text === last) return;
    last = text;
    if (o.live) {
      if (drawn && p.phase !== phase) o.draw("\n");
      o.draw(`\r\x1b[K${describeProgress(p)}`);
      drawn = true;
    } else if (p.phase !== phase) o.say(describeProgress(p, true));
    phase = p.phase;
  };
  const timer = setInterval(tick, o.intervalMs ?? (o.live ? 1000 : 250));
  return {
    stop() {
      clearInterval(timer);
      if (drawn) o.draw("\n");
    },
  };
}
