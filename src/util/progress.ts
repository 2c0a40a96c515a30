/**
 * The one progress display of long tasks (tune's builds, pack, unpack, inspect --verify, check):
 * done/total, the percentage and an estimate of the time left, on stderr.
 *
 * - `live` (stderr is a terminal): one line redrawn in place ("\r", erase to end of line), at most
 *   every `redrawMs`, erased at the end so that the verb's own output follows on a clean line;
 *   a `note` (a finished capture's line, a warning) is written above it.
 * - `lines` (stderr is a file or a pipe: CI logs, Slurm output files): nothing is redrawn; one
 *   plain line every `everyMs` (default 10 s) while the task runs, so that a short task prints
 *   nothing and a long one shows it is alive and when it should end.
 * - `off` (`--json`, or nothing to show): nothing; the verb's data alone.
 *
 * The estimate is the rate so far applied to what is left: (total − done) × elapsed / done, said
 * once a second has passed and something is done ("about 40 s left"). The clock and the writer
 * are parameters, so tests drive it with a fake clock and a fake terminal. Labels, details and
 * notes may hold names from captures and archives: escaped for the terminal (src/escape.ts), the
 * progress line on one line.
 */
import { escapeForTerminal } from "../escape.ts";
import { formatBytes } from "./format.ts";

export type ProgressMode = "live" | "lines" | "off";

/**
 * The mode for a verb: off under --json (stdout carries the document; stderr stays free of
 * chatter for the scripts that read it), live on a terminal, plain lines otherwise.
 * `isTTY`: process.stderr.isTTY.
 */
export function progressMode(o: { json?: boolean; isTTY?: boolean }): ProgressMode {
  if (o.json) return "off";
  return o.isTTY ? "live" : "lines";
}

/** What done and total count: bytes (1.5 GiB of 4.0 GiB) or things ("3 of 16 configs"). */
export type ProgressUnit = "bytes" | { noun: string };

export interface ProgressOptions {
  mode: ProgressMode;
  /** Where the text goes: stderr (process.stderr.write). */
  write: (text: string) => void;
  unit: ProgressUnit;
  /** Monotonic milliseconds (performance.now). */
  now?: () => number;
  /** `lines`: one line at most this often (ms). Default 10 000. */
  everyMs?: number;
  /** `live`: one redraw at most this often (ms). Default 200. */
  redrawMs?: number;
}

/** "12 s", "3 min 5 s", "1 h 02 min" from milliseconds. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

/**
 * Milliseconds left at the rate so far, or undefined while it cannot be told (nothing done yet,
 * less than a second elapsed, or nothing left to do).
 */
export function etaMs(done: number, total: number, elapsedMs: number): number | undefined {
  if (done <= 0 || elapsedMs < 1000 || total <= 0 || done >= total) return undefined;
  return ((total - done) * elapsedMs) / done;
}

/** "packing cap: 1.5 GiB of 4.0 GiB (37%), about 12 s left" (and `detail` after a semicolon). */
export function describeProgressLine(label: string, done: number, total: number, unit: ProgressUnit, elapsedMs: number, detail?: string): string {
  const amount = unit === "bytes" ? `${formatBytes(done)} of ${formatBytes(total)}` : `${done} of ${total} ${unit.noun}`;
  const pct = total > 0 ? ` (${Math.min(100, Math.floor((100 * done) / total))}%)` : "";
  const eta = etaMs(done, total, elapsedMs);
  return `${label}: ${amount}${pct}${eta === undefined ? "" : `, about ${formatDuration(eta)} left`}${detail ? `; ${detail}` : ""}`;
}

/** One task's progress (see the file's comment). */
export class ProgressLine {
  private done = 0;
  private detail: string | undefined;
  private start: number;
  private lastDraw = -Infinity;
  private lastLine: number;
  private drawn = false;
  private readonly now: () => number;

  constructor(
    private label: string,
    private total: number,
    private readonly o: ProgressOptions,
  ) {
    this.now = o.now ?? (() => performance.now());
    this.start = this.now();
    this.lastLine = this.start;
  }

  /** The amount done so far (absolute), and optionally what is in flight. */
  update(done: number, detail?: string): void {
    this.set(done, detail);
    this.show(false);
  }

  /** As update, without drawing: for a note that follows at once (it draws the line anew). */
  set(done: number, detail?: string): void {
    this.done = done;
    if (detail !== undefined) this.detail = detail || undefined;
  }

  /** One more thing done (or `n`). */
  advance(n = 1, detail?: string): void {
    this.update(this.done + n, detail);
  }

  /** A new phase of the same task (checking, then packing): its own label, total and clock. */
  phase(label: string, total: number): void {
    this.erase();
    this.label = label;
    this.total = total;
    this.done = 0;
    this.detail = undefined;
    this.start = this.now();
    this.lastLine = this.start;
    this.lastDraw = -Infinity;
  }

  /** A line of its own above the progress line (a finished item, a warning), in every mode but off. */
  note(text: string): void {
    if (this.o.mode === "off") return;
    this.erase();
    this.o.write(escapeForTerminal(text).replace(/\n?$/, "\n"));
    this.show(true);
  }

  /** The task ended: the live line is erased (the verb's output follows). */
  end(): void {
    this.erase();
  }

  /** The text of the progress line now. */
  text(): string {
    return describeProgressLine(this.label, this.done, this.total, this.o.unit, this.now() - this.start, this.detail);
  }

  private show(force: boolean): void {
    const t = this.now();
    if (this.o.mode === "live") {
      if (!force && t - this.lastDraw < (this.o.redrawMs ?? 200)) return;
      this.lastDraw = t;
      this.o.write(`\r\x1b[K${escapeForTerminal(this.text(), { oneLine: true })}`);
      this.drawn = true;
    } else if (this.o.mode === "lines") {
      if (t - this.lastLine < (this.o.everyMs ?? 10_000)) return;
      this.lastLine = t;
      this.o.write(escapeForTerminal(this.text(), { oneLine: true }) + "\n");
    }
  }

  private erase(): void {
    if (this.drawn) this.o.write("\r\x1b[K");
    this.drawn = false;
  }
}

/** A ProgressLine on this process's stderr, its mode from --json and whether stderr is a terminal. */
export function stderrProgress(label: string, total: number, unit: ProgressUnit, json: boolean): ProgressLine {
  return new ProgressLine(label, total, { mode: progressMode({ json, isTTY: process.stderr.isTTY }), write: (s) => void process.stderr.write(s), unit });
}
