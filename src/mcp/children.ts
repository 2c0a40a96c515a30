/**
 * The MCP server's tool children: each tool that runs a verb runs this same kerncap in a child
 * process with --json (src/util/self-exec.ts): every capture, replay and validate gets a fresh
 * process (its own CUDA context and VA space, as on the command line), and the tool returns the
 * verb's JSON document (`schema: "kerncap.<verb>/N"`) as structured content and as text. A verb
 * that exits 2 returns its error document with isError; a mismatch (exit 1) is a result, not an
 * error.
 *
 * Each child runs in its own process group (it forwards to its own children's groups: the
 * application, build.sh); ToolChildren ends a group (SIGTERM, SIGKILL TOOL_GRACE_MS later) when
 * its call is cancelled, when the transport closes and at kerncap mcp's own SIGINT/SIGTERM.
 */
import { jsonText } from "../escape.ts";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Subprocess } from "bun";
import { existsSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { isKerncapError, KerncapError, systemError } from "../errors.ts";
import { jsonDocument } from "../format/documents.ts";
import { killGroup, PARENT_PID_VAR, type StopSignal } from "../process-group.ts";
import { selfCommand, selfEnv } from "../util/self-exec.ts";
import { readCapped, tailLines } from "../util/stream-text.ts";
import type { ToolProgress } from "./progress.ts";
import { toolText, withToolHint } from "./tool-hints.ts";

/** Tool children at once unless `kerncap mcp --jobs` says otherwise: half the cores, at least 2, at most 8. */
export const MCP_DEFAULT_JOBS = Math.max(2, Math.min(8, Math.floor(availableParallelism() / 2)));

/** ms between the signal to a tool child's group and SIGKILL (longer than the child's own grace for its children: 5 s). */
const TOOL_GRACE_MS = 10_000;

/**
 * A tool's result: `doc` as structuredContent, and as the text a client shows, written as
 * `--json` writes it (jsonText: C1 controls, bidi overrides and line separators as \uNNNN, not raw:
 * adversary 74); `extra` a second text part.
 */
export function result(doc: Record<string, unknown>, isError = false, extra?: string): CallToolResult {
  return {
    content: [{ type: "text", text: jsonText(doc, 2) }, ...(extra ? [{ type: "text" as const, text: extra }] : [])],
    structuredContent: doc,
    isError,
  };
}

export function errorResult(e: unknown): CallToolResult {
  const k = isKerncapError(e) ? e : (systemError(e) ?? new KerncapError("E_INTERNAL", `internal error: ${(e as Error).message}`));
  return result(
    jsonDocument("error", { error: { code: k.code, message: k.message, hint: k.hint ?? null, ...(k.details ? { details: k.details } : {}) } }),
    true,
  );
}

/**
 * The tool children running now, each the leader of its own process group (spawned detached).
 * `stop` sends a group its first signal (later ones are ignored: a second signal would make the
 * child kill its own children at once) and SIGKILL after TOOL_GRACE_MS; `settled` waits for all.
 */
export class ToolChildren {
  private running = new Map<number, { exited: Promise<unknown>; stopped: boolean; timer?: ReturnType<typeof setTimeout> }>();
  /** Tool calls holding a slot now, and the calls waiting for one (first come, first served). */
  private busy = 0;
  private waiting: (() => void)[] = [];

  /**
   * @param jobs how many tool children may run at once (default MCP_DEFAULT_JOBS): an agent that
   *   sends 40 validate calls at once gets them run `jobs` at a time, the rest queued, not 40
   *   compilers and 40 CUDA contexts
   */
  constructor(readonly jobs = MCP_DEFAULT_JOBS) {
    if (!Number.isInteger(jobs) || jobs < 1) throw new KerncapError("E_USAGE", `--jobs must be a whole number of at least 1, not ${jobs}`);
  }

  /**
   * Wait for a slot (a call queued behind `jobs` running ones); `onQueued` is told once when the
   * call has to wait: its place in line then, and `place()`, its place now (1: next).
   * @returns the function that gives the slot back (call it once)
   * @throws KerncapError E_INTERRUPTED when `signal` aborts while the call waits
   */
  async slot(signal?: AbortSignal, onQueued?: (ahead: number, place: () => number) => void): Promise<() => void> {
    if (this.busy >= this.jobs) {
      let me: (() => void) | undefined;
      // place() before the call is in line (onQueued says it at once): behind every waiting one
      onQueued?.(this.busy + this.waiting.length - this.jobs + 1, () => (me ? this.waiting.indexOf(me) + 1 : this.waiting.length + 1));
      await new Promise<void>((res, rej) => {
        const go = () => {
          signal?.removeEventListener("abort", cancel);
          res();
        };
        const cancel = () => {
          this.waiting = this.waiting.filter((w) => w !== go);
          rej(new KerncapError("E_INTERRUPTED", "the tool call was cancelled while it waited for a free slot"));
        };
        if (signal?.aborted) return cancel();
        signal?.addEventListener("abort", cancel, { once: true });
        me = go;
        this.waiting.push(go);
      });
    } else this.busy++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.waiting.shift();
      if (next)
        next(); // the slot passes on: busy stays
      else this.busy--;
    };
  }

  /** Track p until it exits. */
  add(p: Subprocess): void {
    const c = { exited: p.exited, stopped: false } as { exited: Promise<unknown>; stopped: boolean; timer?: ReturnType<typeof setTimeout> };
    this.running.set(p.pid, c);
    void p.exited.finally(() => {
      if (c.timer) clearTimeout(c.timer);
      this.running.delete(p.pid);
    });
  }

  /** End one child's group (pid: the child's), or every group when pid is undefined. */
  stop(sig: StopSignal, pid?: number): void {
    for (const [id, c] of this.running) {
      if ((pid !== undefined && id !== pid) || c.stopped) continue;
      c.stopped = true;
      killGroup(id, sig);
      c.timer = setTimeout(() => killGroup(id, "SIGKILL"), TOOL_GRACE_MS);
      c.timer.unref?.();
    }
  }

  /** SIGKILL every group now (a second signal to kerncap mcp). */
  kill(): void {
    for (const id of this.running.keys()) killGroup(id, "SIGKILL");
  }

  get size(): number {
    return this.running.size;
  }

  /** Resolves when every child running now has exited. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running.values()].map((c) => c.exited));
  }
}

/** The working folder a tool child runs in. @throws KerncapError E_USAGE when it is not a folder */
function toolCwd(cwd: string | undefined): string {
  if (cwd === undefined) return process.cwd();
  const d = resolve(cwd);
  if (!existsSync(d) || !statSync(d).isDirectory())
    throw new KerncapError("E_USAGE", `cwd ${d} ${existsSync(d) ? "is not a folder" : "does not exist"}`, {
      hint: "Give an existing folder as cwd (the application's working folder), or leave cwd out.",
    });
  return d;
}

/**
 * Run `kerncap ARGV` (a child process, its own process group, tracked in `children` and ended
 * when `signal` aborts) and return its JSON document (a verb that streams JSON Lines, eval: its
 * last line); stderr's tail goes along on failure. `progress` gets every stderr line as it comes
 * and heartbeats while the child runs (./progress.ts). `prepare`, called once the call holds its
 * slot (never while it waits), gives the arguments that follow ARGV: what it writes (evaluate's
 * candidates) is held only by calls that run, not by every call in line (adversary 62: 60 queued
 * evaluate calls held 974 000 inodes).
 * @throws KerncapError E_USAGE (cwd), E_TOOL when kerncap cannot be started; what `prepare` throws
 */
export async function runVerb(
  argv: string[],
  cwd: string | undefined,
  children: ToolChildren,
  signal?: AbortSignal,
  progress?: ToolProgress,
  prepare?: () => string[],
): Promise<CallToolResult> {
  const env = { ...selfEnv(), [PARENT_PID_VAR]: String(process.pid) }; // the child ends with this server, even at its kill -9 (endWithParent)
  const dir = toolCwd(cwd);
  if (signal?.aborted) throw new KerncapError("E_INTERRUPTED", `kerncap ${argv[0]} was cancelled before it started`);
  progress?.start(); // heartbeats also while the call waits for a slot: a client must not time out in the queue
  try {
    const running = `${children.jobs} tool call${children.jobs > 1 ? "s" : ""} running`;
    const release = await children.slot(signal, (_ahead, place) => progress?.queued(() => `queued: ${running}, this one is number ${place()} in line`));
    progress?.running(); // a call that waited: its heartbeats say it runs now, not that it is queued
    try {
      const cmd = [...selfCommand(), ...argv, ...(prepare?.() ?? [])];
      return await spawnVerb(argv, cmd, dir, env, children, signal, progress);
    } finally {
      release();
    }
  } finally {
    progress?.stop();
  }
}

/** runVerb's child, once it holds a slot. */
async function spawnVerb(
  argv: string[],
  cmd: string[],
  dir: string,
  env: Record<string, string | undefined>,
  children: ToolChildren,
  signal?: AbortSignal,
  progress?: ToolProgress,
): Promise<CallToolResult> {
  if (signal?.aborted) throw new KerncapError("E_INTERRUPTED", `kerncap ${argv[0]} was cancelled before it started`);
  let p: Subprocess<"ignore", "pipe", "pipe">;
  try {
    p = Bun.spawn(cmd, { cwd: dir, env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  } catch (e) {
    // E2BIG: the caller's arguments are past the kernel's limit on a command line, not a broken installation
    if ((e as NodeJS.ErrnoException).code === "E2BIG" || /E2BIG|argument list too long/i.test(String((e as Error).message))) {
      const longest = Math.max(...argv.map((a) => Buffer.byteLength(a)));
      throw new KerncapError("E_USAGE", `the arguments of ${argv[0]} are too long for a command line (the longest has ${longest} bytes)`, {
        hint: "Give shorter arguments (a path, a kernel pattern); file contents go through edit_file.",
      });
    }
    throw new KerncapError("E_TOOL", `cannot start kerncap ${argv[0]} (${cmd[0]}) in ${dir}: ${(e as Error).message}`, {
      hint: "Check the kerncap installation (kerncap doctor); the MCP server runs its verbs with the same executable.",
    });
  }
  children.add(p);
  const cancel = () => children.stop("SIGTERM", p.pid);
  signal?.addEventListener("abort", cancel, { once: true });
  let out: string, err: string, code: number;
  let cut = false;
  try {
    // held with bounds (adversary 63: a build's messages without end, read whole): stdout up to CHILD_STDOUT_MAX (past it
    // the child is stopped), of eval's JSON Lines the last ones, of stderr the last CHILD_STDERR_TAIL
    const over = () => {
      cut = true;
      children.stop("SIGTERM", p.pid);
    };
    const stdout =
      progress && argv[0] === "eval"
        ? tailLines(p.stdout, CHILD_STDOUT_MAX, (l) => progress.stdoutLine(l)) // eval's records, each as it finishes, in the notifications' _meta (./progress.ts stdoutLine)
        : readCapped(p.stdout, CHILD_STDOUT_MAX, over).then((c) => c.text);
    [out, err, code] = await Promise.all([stdout, tailLines(p.stderr, CHILD_STDERR_TAIL, progress && ((l) => progress.line(l))), p.exited]);
  } finally {
    signal?.removeEventListener("abort", cancel);
  }
  if (cut) return errorResult(new KerncapError("E_TOOL", `kerncap ${argv[0]} wrote more than ${CHILD_STDOUT_MAX >> 20} MiB to its stdout: stopped`));
  let doc: Record<string, unknown>;
  try {
    doc = lastDocument(out);
  } catch {
    return errorResult(
      new KerncapError("E_INTERNAL", `kerncap ${argv[0]} printed no JSON document (exit ${code}): ${err.trim().split("\n").slice(-5).join(" | ")}`),
    );
  }
  // a trust refusal's stderr is the received build's files, printed for a person: their text is the sender's, nothing
  // for an agent to act on (the document's details say what was refused and the digest; nu15: the tail of build.sh)
  const code_ = (doc.error as { code?: unknown } | undefined)?.code;
  const trustRefusal = code_ === "E_UNTRUSTED" || code_ === "E_TRUST_CHANGED";
  const tail = err.trim() && !trustRefusal ? `stderr (last lines):\n${toolText(err.trim().split("\n").slice(-40).join("\n"))}` : undefined;
  // the verb's advice in the tools' words (no --build-only, --resume or doctor for an agent: nu89 #2)
  return result(withToolHint(argv, doc), code === 2 || code > 2, code >= 2 ? tail : undefined);
}

/** The most bytes of a tool child's stdout (its JSON document) the server holds: past it the child is stopped, E_TOOL. */
const CHILD_STDOUT_MAX = 64 << 20;
/** The most of a tool child's stderr the server holds: its last 1 MiB (a failure shows its last 40 lines). */
const CHILD_STDERR_TAIL = 1 << 20;

/** The verb's JSON document: stdout whole, or its last line when it streams JSON Lines (eval --json). @throws SyntaxError when neither is JSON */
function lastDocument(out: string): Record<string, unknown> {
  try {
    return JSON.parse(out);
  } catch (e) {
    const last = out.trim().split("\n").pop();
    if (!last) throw e;
    return JSON.parse(last);
  }
}
