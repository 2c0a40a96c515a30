/**
 * The workers of a check and the queue they drain (`--gpus 0,1,…`: one worker per entry, `0,0`
 * two on one GPU; without --gpus one worker on the GPUs this process sees). A worker is a
 * `kerncap check --worker` process of this same executable (src/util/self-exec.ts workerArgv) with its
 * own CUDA_VISIBLE_DEVICES, in its own process group (a Ctrl-C reaches kerncap, which stops
 * them: the captures in flight are not recorded, so --resume checks them again), started
 * without address-space randomization where setarch can (the captured VAs stay clear of the
 * worker's own mappings: src/replay/aslr.ts). Each worker takes the next capture when it is done
 * with one (a slow capture does not hold up the others).
 *
 * A worker that dies while checking a capture (a crash in the driver) gives that capture an error
 * outcome and is started again; after WORKER_RETRIES deaths in a row without a capture checked its
 * slot is given up, and when every slot is, the check fails (E_WORKER).
 *
 * The same pool serves `kerncap eval` (src/eval/eval.ts): workerCommand and drainQueue take any
 * task and outcome, tasks from a source that yields them as builds finish, and a watchdog that
 * kills a worker whose task runs past its bound (the task's outcome then comes from the runner:
 * TaskEnded).
 */
import type { Subprocess } from "bun";
import { selfEnv, workerArgv } from "../util/self-exec.ts";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { killGroup } from "../process-group.ts";
import { noAslrPrefix } from "../replay/aslr.ts";
import type { CaptureRef } from "./discover.ts";
import type { Outcome } from "../format/check-record.ts";
import type { CheckSettings } from "./runner.ts";
import { lines } from "./worker.ts";
import { boundedLines } from "../util/stream-text.ts";

/** A worker as the queue sees it: tasks T in, outcomes O out (check: a capture and its Outcome; eval: a candidate on one input). */
export interface Runner<T = CaptureRef, O = Outcome> {
  /** Check one capture. @throws Error when the worker died meanwhile; TaskEnded when the runner ended the task itself (its watchdog) */
  run(task: T): Promise<O>;
  /** End it now (the capture in flight is abandoned). */
  kill(): void;
  /** End it once idle (end of its input) and wait for it. */
  close(): Promise<void>;
  /** Whether it said, with its last outcome, that it ends (its device context went with a kernel fault): a new one takes the next capture. */
  retired?(): boolean;
}
export type OpenRunner<T = CaptureRef, O = Outcome> = (slot: number, gpu: string | null) => Runner<T, O>;

/**
 * A task's outcome decided by the runner rather than by the worker (eval's watchdog killed a hung
 * kernel's worker: the outcome is `timeout`): drain reports it, replaces the worker, and does not
 * count it as a death of the slot.
 */
export class TaskEnded<O> extends Error {
  constructor(readonly outcome: O) {
    super("the task was ended by its runner");
  }
}

/** Where the queue takes its tasks: a list, or a source that yields them as they become ready (eval's builds); undefined: no more. */
export type TaskSource<T> = T[] | { take(): Promise<T | undefined> };

const WORKER_RETRIES = 3;

/** `setarch … -R` where it works here (some containers refuse the personality change), else nothing. */
function noAslr(): string[] {
  const p = noAslrPrefix();
  return p && Bun.spawnSync([...p, "true"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0 ? p : [];
}

/**
 * Workers as child processes (`kerncap check --worker`).
 * @param say where each worker's stderr lines go, prefixed with its slot and GPU
 */
export function workerProcesses(settings: CheckSettings, say: (line: string) => void): OpenRunner {
  return workerCommand(workerArgv("check", log.level >= 4), settings, say);
}

/** workerCommand's watchdog: the bound of a task (ms), of its first launch (ms; undefined: none), and a task's outcome past either. */
interface WorkerWatchdog<T, O> {
  watchdog?: (t: T) => number;
  firstLaunch?: (t: T) => number | undefined;
  timedOut?: (t: T, ms: number, first?: boolean) => O;
}

/** The task a worker is running, with its watchdogs' timers (the whole task's, its first launch's). */
interface PendingTask<T, O> {
  task: T;
  resolve: (o: O) => void;
  reject: (e: Error) => void;
  timer?: ReturnType<typeof setTimeout>;
  launchTimer?: ReturnType<typeof setTimeout>;
}

function clearTimers(q: Pick<PendingTask<unknown, unknown>, "timer" | "launchTimer"> | undefined): void {
  if (q?.timer) clearTimeout(q.timer);
  if (q?.launchTimer) clearTimeout(q.launchTimer);
}

/**
 * A worker's line that only moves the watchdogs of its task `q` (workerCommand): waiting stops the
 * task's timer, started arms it (when not armed), launch begin arms the first launch's and end
 * stops it; `expire(q, ms, first)` runs when one runs out. False for any other line (an outcome).
 */
function watchdogLine<T, O>(
  line: { outcome?: unknown; started?: boolean; waiting?: boolean; launch?: string },
  q: PendingTask<T, O> | undefined,
  o: WorkerWatchdog<T, O>,
  expire: (q: PendingTask<T, O>, ms: number, first: boolean) => void,
): boolean {
  if (line.outcome !== undefined) return false;
  if (line.waiting === true) {
    // the worker waits for its GPU's timing window (src/util/timing-window.ts): not a hang; its next started arms the watchdog again
    if (q?.timer) clearTimeout(q.timer);
    if (q) q.timer = undefined;
    return true;
  }
  if (line.started === true) {
    // the worker is launching the kernel: the watchdog runs from here (a restore of many GiB before it is not a hang)
    if (q && o.watchdog && o.timedOut && !q.timer) {
      const ms = o.watchdog(q.task);
      q.timer = setTimeout(() => expire(q, ms, false), ms);
    }
    return true;
  }
  if (line.launch !== undefined) {
    // the candidate's first launch (begin … end): a hung kernel hangs there, and is killed at that launch's own bound
    if (q?.launchTimer) clearTimeout(q.launchTimer);
    if (q) q.launchTimer = undefined;
    const ms = q && o.timedOut && line.launch === "begin" ? o.firstLaunch?.(q.task) : undefined;
    if (q && ms !== undefined) q.launchTimer = setTimeout(() => expire(q, ms, true), ms);
    return true;
  }
  return false;
}

/**
 * Workers as child processes running `argv` (started without ASLR where setarch can), speaking
 * the protocol of src/check/worker.ts: settings, then one task a line in; one `{"outcome": O}` a
 * line out (`"retire": true`: it ends after it). A line `{"started": true}` before the outcome
 * arms `o.watchdog`: when the outcome has not come `watchdog(task)` ms later, the worker's group
 * is killed (SIGKILL) and the task ends as `o.timedOut(task, ms)` (TaskEnded). A line
 * `{"waiting": true}` (the worker waits for its GPU's timing window) stops the watchdog until the
 * next `{"started": true}`, which arms it again from its full bound. Lines `{"launch": "begin"}`
 * and `{"launch": "end"}` around the candidate's first launch arm and stop a second, shorter
 * watchdog, `o.firstLaunch(task)` ms (undefined: none), ending the task as `o.timedOut(task, ms,
 * true)`: a hung kernel hangs at its first launch, and is known hung long before the whole
 * judgement's bound.
 */
export function workerCommand<T, O>(argv: string[], settings: unknown, say: (line: string) => void, o: WorkerWatchdog<T, O> = {}): OpenRunner<T, O> {
  const prefix = noAslr();
  return (slot, gpu) => {
    const env = selfEnv();
    const p: Subprocess<"pipe", "pipe", "pipe"> = Bun.spawn([...prefix, ...argv], {
      env: { ...env, ...(gpu !== null ? { CUDA_VISIBLE_DEVICES: gpu } : {}) },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
    });
    const label = `[worker ${slot}${gpu !== null ? `, GPU ${gpu}` : ""}]`;
    const tail: string[] = [];
    void (async () => {
      // a worker's log lines (a kernel's printf among them, escaped): a line that never ends is said in pieces, not held whole
      for await (const l of boundedLines(p.stderr, 64 << 10)) {
        tail.push(l);
        if (tail.length > 5) tail.shift();
        say(`${label} ${l}`);
      }
    })();
    let pending: PendingTask<T, O> | undefined;
    /** End the pending task as timed out after `ms` (the worker's group killed). */
    const expire = (q: PendingTask<T, O>, ms: number, first: boolean) => {
      if (pending !== q) return;
      pending = undefined;
      retired = true;
      clearTimers(q);
      killGroup(p.pid, "SIGKILL");
      q.reject(new TaskEnded(o.timedOut!(q.task, ms, first)));
    };
    let retired = false;
    const out = lines(p.stdout);
    void (async () => {
      for await (const l of out) {
        const q = pending;
        let line: { outcome?: O; retire?: boolean; started?: boolean; waiting?: boolean; launch?: string };
        try {
          line = JSON.parse(l);
        } catch {
          line = {};
        }
        if (watchdogLine(line, q, o, expire)) continue;
        pending = undefined;
        clearTimers(q);
        if (line.outcome === undefined) {
          q?.reject(new Error(`${label} wrote a line that is not an outcome: ${l.slice(0, 200)}`));
          continue;
        }
        retired ||= line.retire === true;
        q?.resolve(line.outcome);
      }
      const code = await p.exited;
      clearTimers(pending);
      pending?.reject(new Error(`the worker process ended (${p.signalCode ?? `exit ${code}`})${tail.length ? `: ${tail.join(" / ")}` : ""}`));
      pending = undefined;
    })();
    p.stdin.write(JSON.stringify({ settings }) + "\n");
    p.stdin.flush();
    return {
      run: (task) =>
        new Promise<O>((resolve, reject) => {
          if (p.exitCode !== null || p.signalCode !== null)
            return reject(new Error(`the worker process had ended (${p.signalCode ?? `exit ${p.exitCode}`})${tail.length ? `: ${tail.join(" / ")}` : ""}`));
          pending = { task, resolve, reject };
          p.stdin.write(JSON.stringify({ task }) + "\n");
          p.stdin.flush();
        }),
      retired: () => retired,
      kill: () => killGroup(p.pid, "SIGTERM"),
      close: async () => {
        try {
          p.stdin.end();
        } catch {
          /* already gone */
        }
        const t = setTimeout(() => p.kill("SIGKILL"), 10_000);
        await p.exited;
        clearTimeout(t);
      },
    };
  };
}

/**
 * Drain `tasks` with one runner per slot (slots[i]: its CUDA_VISIBLE_DEVICES, null: inherited).
 * `stopped()` true (a signal came) ends the queue: runners are killed, their captures in flight
 * given to no one. `onStart`/`onOutcome` see each capture as a worker takes and finishes it.
 * @throws KerncapError E_WORKER when every slot's worker died WORKER_RETRIES times in a row
 */
export async function drain(
  tasks: CaptureRef[],
  slots: (string | null)[],
  open: OpenRunner,
  o: {
    onStart: (t: CaptureRef, slot: number) => void;
    onOutcome: (x: Outcome, slot: number) => void;
    stopped: () => boolean;
    onStop: (stop: () => void) => void;
  },
): Promise<void> {
  await drainQueue(tasks, slots, open, {
    ...o,
    died: (t, reason): Outcome => ({
      id: t.id,
      path: t.path,
      kernel: null,
      outcome: "error",
      verdict: null,
      numerics: null,
      reason,
      code: "E_WORKER",
      note: null,
      captured: null,
      device: null,
      rebuild: null,
      timing: null,
      seconds: 0,
      replaySeconds: 0,
      at: new Date().toISOString(),
    }),
    what: "captures were not checked",
  });
}

/**
 * drain for any task and outcome (check's captures, eval's candidates): `died(t, reason)` is the
 * outcome of a task whose worker died under it; a TaskEnded from a runner is that task's outcome
 * (its worker replaced, not counted as a death). Tasks come from a list or a source that yields
 * them as they become ready.
 * @throws KerncapError E_WORKER when every slot's worker died WORKER_RETRIES times in a row
 */
export async function drainQueue<T, O>(
  tasks: TaskSource<T>,
  slots: (string | null)[],
  open: OpenRunner<T, O>,
  o: {
    onStart: (t: T, slot: number) => void;
    onOutcome: (x: O, slot: number) => void;
    stopped: () => boolean;
    onStop: (stop: () => void) => void;
    died: (t: T, reason: string) => O;
    what: string;
    /**
     * Start a worker's replacement as soon as it ends (after a fault, a timeout, a death) rather
     * than when the slot takes its next task: its start (and what it prepares before its first task:
     * eval's resident input) overlaps the other workers' runs. A replacement that never got a task
     * is killed at the end rather than waited for. The first workers start with their first task:
     * started with the eval (or after its check) they took the CPUs from the builds (an H100 node,
     * llm.c, 32 candidates: builds 49.7 s of CPU time when the workers started at their first task,
     * 67.0 s after the check, 81.9 s at once) and the first result came no sooner.
     */
    replaceAtOnce?: boolean;
  },
): Promise<void> {
  let next = 0;
  let left = 0;
  const take = Array.isArray(tasks) ? async () => tasks[next++] : () => tasks.take();
  const runners = new Map<number, Runner<T, O>>();
  o.onStop(() => {
    for (const r of runners.values()) r.kill();
  });
  let lastDeath = "";
  const work = async (slot: number) => {
    let deaths = 0;
    let r: Runner<T, O> | undefined;
    // whether r has been given a task (a replacement that never was is killed at the end)
    let used = false;
    const start = () => {
      r = open(slot, slots[slot]!);
      used = false;
      runners.set(slot, r);
      return r;
    };
    while (!o.stopped() && deaths < WORKER_RETRIES) {
      const t = await take();
      if (t === undefined || o.stopped()) break;
      o.onStart(t, slot);
      try {
        const w = r ?? start();
        used = true;
        const x = await w.run(t);
        deaths = 0;
        if (!o.stopped()) o.onOutcome(x, slot);
        if (w.retired?.()) {
          await w.close();
          r = undefined;
        }
      } catch (e) {
        if (o.stopped()) break;
        if (e instanceof TaskEnded) {
          o.onOutcome(e.outcome as O, slot);
          r?.kill();
          await r?.close();
          r = undefined;
        } else {
          deaths++;
          lastDeath = (e as Error).message;
          o.onOutcome(o.died(t, lastDeath), slot);
          r = undefined;
        }
      }
      if (o.replaceAtOnce && r === undefined && !o.stopped() && deaths < WORKER_RETRIES) start();
    }
    runners.delete(slot);
    const last = r as Runner<T, O> | undefined;
    if (last && !used) last.kill();
    await last?.close();
    return deaths >= WORKER_RETRIES;
  };
  const gaveUp = await Promise.all(slots.map((_, i) => work(i)));
  if (!o.stopped() && gaveUp.every(Boolean)) {
    for (let t = await take(); t !== undefined; t = await take()) left++;
    if (left) {
      throw new KerncapError("E_WORKER", `every worker died ${WORKER_RETRIES} times in a row; ${left} ${o.what} (last: ${lastDeath})`, {
        hint: "Run with --verbose for the workers' logs; `kerncap doctor` checks the GPU and the driver; --resume continues once it is fixed.",
      });
    }
  }
}
