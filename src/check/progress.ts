/**
 * The check's progress on stderr, as `run` shows a capture's (src/capture/progress.ts): one line
 * per finished capture, "[  3/120] ok  1.01× [0.97–1.04]  12.3 µs  corpus/a  kernel"; on a
 * terminal also a status line redrawn in place below them (the captures in flight), erased before
 * each finished line and at the end. Off a terminal (CI logs, Slurm output files) only the
 * finished lines, nothing redrawn.
 */
import { recordLine } from "./report.ts";
import { escapeForTerminal } from "../escape.ts";
import type { CheckRecord } from "../format/check-record.ts";

export class CheckProgress {
  private done = 0;
  private drawn = false;
  private readonly inFlight = new Map<number, string>();

  constructor(
    private readonly total: number,
    private readonly o: { live: boolean; write: (s: string) => void },
  ) {}

  /** A worker took a capture. */
  started(id: string, slot: number): void {
    this.inFlight.set(slot, id);
    this.redraw();
  }

  /** A capture finished: its line. */
  finished(r: CheckRecord, slot: number): void {
    this.inFlight.delete(slot);
    this.done++;
    const w = String(this.total).length;
    this.line(`[${String(this.done).padStart(w)}/${this.total}] ${recordLine(r)}`);
  }

  /** Any other line (a worker's warning), above the status line. */
  line(text: string): void {
    this.erase();
    this.o.write(escapeForTerminal(text).replace(/\n?$/, "\n"));
    this.redraw();
  }

  /** Erase the status line for good. */
  stop(): void {
    this.inFlight.clear();
    this.erase();
  }

  private erase(): void {
    if (this.drawn) this.o.write("\r\x1b[K");
    this.drawn = false;
  }

  private redraw(): void {
    if (!this.o.live || this.inFlight.size === 0) return;
    const ids = [...this.inFlight.values()];
    this.erase();
    this.o.write(`checking ${this.done + 1}${ids.length > 1 ? `–${this.done + ids.length}` : ""} of ${this.total}: ${ids.slice(0, 3).map((id) => escapeForTerminal(id, { oneLine: true })).join(", ")}${ids.length > 3 ? ", …" : ""}`);
    this.drawn = true;
  }
}
