/**
 * The workers of a check and the queue they drain (`--gpus 0,1,…`: one worker per entry, `0,0`
 * two on one GPU; without --gpus one worker on the GPUs this process sees). A worker is a
 * `kerncap check --worker` process of this same executable (src/doctor.ts selfCommand) with its
 * own CUDA_VISIBLE_DEVICES, in its own process group (a Ctrl-C reaches kerncap, which stops
 * them: the captures in flight are not recorded, so --resume checks them again), started
 * without address-space randomization where setarch can (the captured VAs stay clear of the
 * worker's own mappings: src/replay/aslr.ts). Each worker takes the next capture when it is done
 * with one (a slow capture does not hold up the others).
 *
 * A worker that dies while checking a capture (a crash in the driver) gives that capture an error
 * outcome and is started again; after WORKER_RETRIES deaths in a row without a capture checked its
 * slot is given up, and when every slot is, the check fails (E_WORKER).
 */
import type { Subprocess } from "bun";
import { selfCommand } from "../doctor.ts";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { noAslrPrefix } from "../replay/aslr.ts";
import type { CaptureRef } from "./discover.ts";
import type { Outcome } from "../format/check-record.ts";
import type { CheckSettings } from "./runner.ts";
import { lines } from "./worker.ts";

/** A worker as the queue sees it. */
export interface Runner {
  /** Check one capture. @throws Error when the worker died meanwhile */
  run(task: CaptureRef): Promise<Outcome>;
  /** End it now (the capture in flight is abandoned). */
  kill(): void;
  /** End it once idle (end of its input) and wait for it. */
  close(): Promise<void>;
  /** Whether it said, with its last outcome, that it ends (its device context went with a kernel fault): a new one takes the next capture. */
  retired?(): boolean;
}
export type OpenRunner = (slot: number, gpu: string | null) => Runner;

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
  const prefix = noAslr();
  return (slot, gpu) => {
    const { BUN_BE_BUN: _, ...env } = process.env;
    const p: Subprocess<"pipe", "pipe", "pipe"> = Bun.spawn([...prefix, ...selfCommand(), "check", "--worker", ...(log.level >= 4 ? ["--verbose"] : [])], {
      env: { ...env, ...(gpu !== null ? { CUDA_VISIBLE_DEVICES: gpu } : {}) },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
    });
    const label = `[worker ${slot}${gpu !== null ? `, GPU ${gpu}` : ""}]`;
    const tail: string[] = [];
    void (async () => {
      for await (const l of lines(p.stderr)) {
        tail.push(l);
        if (tail.length > 5) tail.shift();
        say(`${label} ${l}`);
      }
    })();
    let pending: { resolve: (o: Outcome) => void; reject: (e: Error) => void } | undefined;
    let retired = false;
    const out = lines(p.stdout);
    void (async () => {
      for await (const l of out) {
        const q = pending;
        pending = undefined;
        try {
          const line = JSON.parse(l) as { outcome: Outcome; retire?: boolean };
          retired ||= line.retire === true;
          q?.resolve(line.outcome);
        } catch {
          q?.reject(new Error(`${label} wrote a line that is not an outcome: ${l.slice(0, 200)}`));
        }
      }
      const code = await p.exited;
      pending?.reject(new Error(`the worker process ended (${p.signalCode ?? `exit ${code}`})${tail.length ? `: ${tail.join(" / ")}` : ""}`));
      pending = undefined;
    })();
    p.stdin.write(JSON.stringify({ settings }) + "\n");
    p.stdin.flush();
    return {
      run: (task) =>
        new Promise<Outcome>((resolve, reject) => {
          if (p.exitCode !== null || p.signalCode !== null) return reject(new Error(`the worker process had ended (${p.signalCode ?? `exit ${p.exitCode}`})${tail.length ? `: ${tail.join(" / ")}` : ""}`));
          pending = { resolve, reject };
          p.stdin.write(JSON.stringify({ task }) + "\n");
          p.stdin.flush();
        }),
      retired: () => retired,
      kill: () => p.kill("SIGTERM"),
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
  o: { onStart: (t: CaptureRef, slot: number) => void; onOutcome: (x: Outcome, slot: number) => void; stopped: () => boolean; onStop: (stop: () => void) => void },
): Promise<void> {
  let next = 0;
  const runners = new Map<number, Runner>();
  o.onStop(() => {
    for (const r of runners.values()) r.kill();
  });
  let lastDeath = "";
  const work = async (slot: number) => {
    let deaths = 0;
    let r: Runner | undefined;
    while (next < tasks.length && !o.stopped() && deaths < WORKER_RETRIES) {
      const t = tasks[next++]!;
      o.onStart(t, slot);
      try {
        r ??= open(slot, slots[slot]!);
        runners.set(slot, r);
        const x = await r.run(t);
        deaths = 0;
        if (!o.stopped()) o.onOutcome(x, slot);
        if (r.retired?.()) {
          await r.close();
          r = undefined;
        }
      } catch (e) {
        if (o.stopped()) break;
        deaths++;
        lastDeath = (e as Error).message;
        o.onOutcome({ id: t.id, path: t.path, kernel: null, outcome: "error", verdict: null, numerics: null, reason: lastDeath, code: "E_WORKER", note: null, captured: null, device: null, rebuild: null, timing: null, seconds: 0, replaySeconds: 0, at: new Date().toISOString() }, slot);
        r = undefined;
      }
    }
    runners.delete(slot);
    await r?.close();
    return deaths >= WORKER_RETRIES;
  };
  const gaveUp = await Promise.all(slots.map((_, i) => work(i)));
  if (next < tasks.length && !o.stopped() && gaveUp.every(Boolean)) {
    throw new KerncapError("E_WORKER", `every worker died ${WORKER_RETRIES} times in a row; ${tasks.length - next} captures were not checked (last: ${lastDeath})`, {
      hint: "Run with --verbose for the workers' logs; `kerncap doctor` checks the GPU and the driver; --resume continues once it is fixed.",
    });
  }
}
