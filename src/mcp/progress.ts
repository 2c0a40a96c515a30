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
 *
 * A call that must wait for a slot says so at once ("queued: …", not first at the next heartbeat:
 * a client timeout under the interval would cut it). evaluate's child (kerncap eval --json) prints
 * each finished candidate's record on stdout: each such line goes out at once as a notification of
 * its own whose params' `_meta` holds it whole (`{"kerncap/record": <kerncap.eval-record/1>}`), its
 * progress a step as a heartbeat's, so a client learns each verdict as it comes (and keeps those
 * finished before a cancel or a timeout).
 */
import type { ServerNotification } from "@modelcontextprotocol/sdk/types.js";
import { documentId } from "../format/documents.ts";

/** ms between heartbeats: well under a client's usual timeout (60 s), rare enough to be no load. */
export const PROGRESS_INTERVAL_MS = 5_000;

export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
  /** evaluate's finished candidate: its record (RECORD_META_KEY). */
  _meta?: Record<string, unknown>;
}

/** The key of the notification params' `_meta` that carries a finished candidate's eval record. */
export const RECORD_META_KEY = "kerncap/record";
/** The schema id an eval record line carries, first in its line (src/cli/args.ts printJsonLine). */
const EVAL_RECORD_ID = documentId("eval-record");
const EVAL_RECORD_START = `{"schema":${JSON.stringify(EVAL_RECORD_ID)}`;

/** The longest progressToken the server echoes (characters). */
const MAX_TOKEN = 256;

/**
 * The sender of a call's progress, or undefined when the call asked for none (no progressToken) or
 * gave one longer than MAX_TOKEN.
 * `extra` is the request handler's (the SDK's RequestHandlerExtra).
 */
export function progressSender(
  meta: { progressToken?: string | number } | undefined,
  sendNotification: (n: ServerNotification) => Promise<void>,
): ((p: ProgressUpdate) => void) | undefined {
  const token = meta?.progressToken;
  if (token === undefined) return undefined;
  // every notification carries the token: one of megabytes, echoed for each candidate, took the server to 5.7 GB
  // (adversary 62); a client's token is an id (the SDK's are small integers), so a long one gets no progress
  if (typeof token === "string" && token.length > MAX_TOKEN) return undefined;
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

  /**
   * The count of items the call will finish, known before the child says it (evaluate: its
   * candidates), so that a record's notification before the first count line carries a total too;
   * a count line's own N replaces it.
   */
  expectTotal(n: number): void {
    if (this.total === undefined && Number.isSafeInteger(n) && n > 0) this.total = n;
  }

  /** The call waits for a slot: said at once, and heartbeats say `what()` (`queued: …`) until running(). */
  queued(what: () => string): void {
    this.waiting = what;
    this.beat();
  }

  /**
   * A line of the child's stdout: an eval record (kerncap eval --json's lines before its document)
   * goes out at once in `_meta` (RECORD_META_KEY), its message the candidate's label, verdict and code.
   */
  stdoutLine(text: string): void {
    if (!text.startsWith(EVAL_RECORD_START)) return; // printJsonLine puts the schema first; the last line is the document
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(text);
    } catch {
      return;
    }
    if (r.schema !== EVAL_RECORD_ID) return;
    this.beats++;
    const what = [r.verdict, r.code].filter((x) => typeof x === "string").join(" ");
    this.emit(`${this.what}: ${String(r.label)} on ${String(r.input)}: ${what}`, { [RECORD_META_KEY]: r });
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

  private emit(message: string, meta?: Record<string, unknown>): void {
    this.send({
      progress: this.done + 1 - 1 / (this.beats + 1),
      ...(this.total !== undefined ? { total: this.total } : {}),
      message,
      ...(meta ? { _meta: meta } : {}),
    });
  }
}
