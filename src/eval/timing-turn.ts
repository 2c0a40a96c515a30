/**
 * One GPU's timing turn among an eval's workers (several `kerncap eval --worker` processes on one
 * GPU, `--workers-per-gpu N`): a worker times its candidate against the captured module only while
 * no other worker on that GPU times, so that the timed launches of one do not share the GPU with
 * those of another (contexts of several processes take turns on a GPU: a timed launch caught in
 * another context's time slice reads the other's work as its own). The rest of a judgement (the
 * input's restore, module loads, checked runs) still overlaps. Each undecided comparison under
 * four workers otherwise took its whole extra budget (src/replay/stats.ts COMPARE_SECONDS).
 *
 * The turn is an flock(2) on `DIR/turn-<GPU>.lock`, DIR a private folder the eval makes (mode
 * 0700) and names in its workers' settings; GPU is the worker's CUDA_VISIBLE_DEVICES. The kernel
 * releases it when its holder exits however it ends (a hung kernel's worker killed by the
 * watchdog). While a worker waits for its turn its watchdog is paused: it says `{"waiting": true}`
 * on the protocol, then `{"started": true}` once it has the turn (src/check/pool.ts workerCommand).
 */
import { closeSync, constants, openSync } from "node:fs";
import { join } from "node:path";
import { log } from "../log.ts";
import { libc } from "../native/libc.ts";

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

/** Take the turn: returns its release. Blocks (the worker has nothing else to do meanwhile). */
export type TimingTurn = () => () => void;

/**
 * The timing turn of this process's GPU in `dir` (see the file's comment), or undefined where it
 * cannot be had (no such folder, no libc): the worker then times without one, as before.
 * @param waiting called before a wait for the turn; `turn` once it is this worker's after a wait
 */
export function timingTurn(dir: string, waiting: () => void, turn: () => void, gpu = process.env.CUDA_VISIBLE_DEVICES ?? "all"): TimingTurn | undefined {
  const key = gpu.replace(/[^A-Za-z0-9,-]/g, "_").slice(0, 100) || "all";
  let fd: number;
  let flock: (fd: number, op: number) => number;
  try {
    flock = libc().flock;
    fd = openSync(join(dir, `turn-${key}.lock`), constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  } catch (e) {
    log.debug(`no timing turn (${e instanceof Error ? e.message : String(e)}): timed without one`);
    return undefined;
  }
  process.once("exit", () => closeSync(fd));
  return () => {
    if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
      waiting();
      const t0 = performance.now();
      flock(fd, LOCK_EX);
      log.debug(`waited ${((performance.now() - t0) / 1000).toFixed(2)} s for the GPU's timing turn`);
      turn();
    }
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      flock(fd, LOCK_UN);
    };
  };
}
