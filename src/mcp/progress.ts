/**
 * Progress notifications of `kerncap mcp`'s long tools (run, validate, tune, evaluate, profile,
 * and every other tool that runs a verb), so that a client's request timeout (the TypeScript SDK's
 * 60 s by default) does not cut a call that is working: a client that sends `_meta.progressToken`
 * with its call and sets `resetTimeoutOnProgress` waits as long as notifications come.
 *
 * A notification goes out at each line of the tool child's stderr that counts finished work
 * (`[ 3/32] …`: check's and eval's progress lines) and, between them, every `intervalMs` (a
 * heartbeat carrying the child's last stderr line; while the call waits for a slot, what it waits
 * for, and once its child starts, that it runs). The progress value strictly increases, as the
 * protocol asks: k at the k-th finished item of N (total N once a count was seen), and
 * k + 1 − 1/(b + 1) after b heartbeats since (always below k + 1; k = 0 before the first).
 */
import type { ServerNotification } from "@modelcontextprotocol/sdk/types.js";

/** ms between heartbeats: well under a client's usual timeout (60 s), rare enough to be no load. */
export const PROGRESS_INTERVAL_MS = 5_000;

export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

/**
 * The sender of a call's progress, or undefined when the call asked for none (no progressToken).
 * `extra` is the request handler's (the SDK's RequestHandlerExtra).
 */
export function progressSender(
  meta: { progressToken?: string | number } | undefined,
  sendNotification: (n: ServerNotification) => Promise<void>,
): ((p: ProgressUpdate) => void) | undefined {
  const token = meta?.progressToken;
  if (token === undefined) return undefined;
  return (p) => void sendNotification({ method: "notifications/progress", params: { progressToken: token, ...p } }).catch(() => {});
}

const COUNT = /^\[\s*(\d+)\/(\d+)\]\s*(.*)$/;

/** One call's progress: fed the child's stderr lines; heartbeats while started. */
export class ToolProgress {
  private done = 0;
  private total: number | undefined;
  private beats = 0;
  private last = "";
  /** While the call waits for a slot: what its heartbeats say (asked at each, the place in line changing). */
  private waiting: (() => string) | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly send: (p: ProgressUpdate) => void,
    private readonly what: string,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  start(): this {
    this.timer = setInterval(() => this.beat(), this.intervalMs);
    this.timer.unref?.();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The call waits for a slot: heartbeats say `what()` (`queued: …`) until running(). */
  queued(what: () => string): void {
    this.waiting = what;
  }

  /** The call's child started: a heartbeat now, and each after it, says it runs (with the child's last line once there is one). */
  running(): void {
    if (!this.waiting) return;
    this.waiting = undefined;
    this.beat();
  }

  /** A line of the child's stderr. */
  line(text: string): void {
    const l = text.trim();
    if (!l) return;
    this.last = l.length > 200 ? `${l.slice(0, 200)}…` : l;
    const m = COUNT.exec(l);
    if (!m) return;
    const k = Number(m[1]);
    const n = Number(m[2]);
    if (k <= this.done) return;
    this.done = k;
    this.total = n;
    this.beats = 0;
    this.emit(`${k} of ${n} done: ${m[3]}`);
  }

  private beat(): void {
    this.beats++;
    this.emit(this.waiting ? `${this.what} ${this.waiting()}` : this.last ? `${this.what} running: ${this.last}` : `${this.what} running`);
  }

  private emit(message: string): void {
    this.send({ progress: this.done + 1 - 1 / (this.beats + 1), ...(this.total !== undefined ? { total: this.total } : {}), message });
  }
}
