/**
 * The check's progress on stderr, over the shared progress line (src/util/progress.ts): one line
 * per finished capture, "[  3/120] ok  1.01× [0.97–1.04]  12.3 µs  corpus/a  kernel"; on a
 * terminal also the status line redrawn in place below them (captures done of all, the time left,
 * the captures in flight), erased before each finished line and at the end. Off a terminal (CI
 * logs, Slurm output files) the finished lines, and once a minute the status line as a plain line
 * (the time left), nothing redrawn.
 */
import { recordLine } from "./report.ts";
import type { CheckRecord } from "../format/check-record.ts";
import { ProgressLine } from "../util/progress.ts";

export class CheckProgress {
  private done = 0;
  private readonly inFlight = new Map<number, string>();
  private readonly status: ProgressLine;

  constructor(
    private readonly total: number,
    o: { live: boolean; write: (s: string) => void; now?: () => number },
  ) {
    this.status = new ProgressLine("checking", total, {
      mode: o.live ? "live" : "lines",
      write: o.write,
      unit: { noun: "captures" },
      everyMs: 60_000,
      ...(o.now ? { now: o.now } : {}),
    });
  }

  /** A worker took a capture. */
  started(id: string, slot: number): void {
    this.inFlight.set(slot, id);
    this.status.update(this.done, this.inFlightText());
  }

  /** A capture finished: its line. */
  finished(r: CheckRecord, slot: number): void {
    this.inFlight.delete(slot);
    this.done++;
    const w = String(this.total).length;
    this.status.set(this.done, this.inFlightText());
    this.line(`[${String(this.done).padStart(w)}/${this.total}] ${recordLine(r)}`);
  }

  /** Any other line (a worker's warning), above the status line. */
  line(text: string): void {
    this.status.note(text);
  }

  /** Erase the status line for good. */
  stop(): void {
    this.inFlight.clear();
    this.status.end();
  }

  private inFlightText(): string {
    const ids = [...this.inFlight.values()];
    return ids.length ? `now ${ids.slice(0, 3).join(", ")}${ids.length > 3 ? ", …" : ""}` : "";
  }
}
