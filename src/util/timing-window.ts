/**
 * The timing window of one GPU shared by several kerncap processes (eval's GPU workers, each its
 * own CUDA context): while one times a comparison, nothing else of the others runs on the GPU;
 * their restores, loads and checked runs share the GPU with each other (a shared flock), their
 * timed rounds take turns (an exclusive one). Kernels of different contexts on one GPU are
 * time-sliced: on an H100 node, a timed comparison of an llm.c candidate took 0.41–0.46 s with 4
 * workers timing at once, against 0.042 s in a lone validate, and its interval widened to ±21% with
 * 8 (docs/benchmarks.md, 871ce8d); a turn for the timed rounds alone (071880f) left the others'
 * restores and checked runs beside them, and the comparisons of a 309 µs kernel took their whole
 * budget, one after the other. A hung candidate's first launch holds the shared window until eval's
 * watchdog kills its worker (src/eval/watchdog.ts firstLaunchMs): the others' timed rounds wait
 * meanwhile (their watchdogs paused).
 *
 * One flock(2) per GPU on a file in the eval's private folder (src/cache.ts privateTempFolder:
 * this user's, mode 0700), opened by each worker itself (an flock belongs to an open file
 * description: an inherited fd would be one lock shared by all). The kernel lets go of a lock whose
 * holder ended, however it ended (a worker killed by the watchdog mid-comparison): a lock is
 * never left behind. Waiting polls (LOCK_NB) and yields to the event loop, so the worker's protocol
 * lines go out while it waits. A process waiting to time holds a turnstile that the shared holders
 * pass through (fileTimingWindow): new shared holders wait behind it.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync } from "node:fs";
import { join } from "node:path";
import { libc } from "../native/libc.ts";

const LOCK_SH = 1;
const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

/**
 * Timing on one GPU: share() for the GPU work that is not timed (restores, checked runs), which
 * other processes' such work may overlap; enter() for the timed rounds, which nothing of the
 * window's other processes overlaps; leave() gives either back (idempotent). A process in the
 * shared window that enters lets go of it first, then waits as any other.
 */
export interface TimingWindow {
  /**
   * Wait until no other process of the window times on this GPU, then hold the window shared.
   * `waiting` is called once, before the first wait, when the window is held by another.
   * @returns seconds waited (0 when the window was free)
   */
  share(waiting?: () => void): Promise<number>;
  /**
   * Wait until no other process of the window holds it (shared or to time), then hold it alone.
   * `waiting` as share's.
   * @returns seconds waited (0 when the window was free)
   */
  enter(waiting?: () => void): Promise<number>;
  leave(): void;
}

/** The file name of GPU `gpu`'s window in the folder (the worker's CUDA_VISIBLE_DEVICES; "default" where none is set). */
export function timingWindowFile(folder: string, gpu: string | undefined): string {
  const id = gpu !== undefined && /^\d+$/.test(gpu) ? String(Number(gpu)) : (gpu ?? ""); // 00 is device 0
  const safe = id.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "default";
  return join(folder, `timing-${safe}.lock`);
}

/** An open lock file of this user's (0600, made where missing, not followed when a link), or undefined. */
function openLockFile(path: string): number | undefined {
  try {
    const f = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
    const st = fstatSync(f);
    const uid = process.geteuid?.();
    if (!st.isFile() || (uid !== undefined && st.uid !== uid)) {
      closeSync(f);
      return undefined;
    }
    return f;
  } catch {
    return undefined;
  }
}

/** flock(fd, op) through libc; 0 (taken) where libc cannot be loaded: no lock, nothing serialized. */
function flock(fd: number, op: number): number {
  try {
    return libc().flock(fd, op);
  } catch {
    return 0;
  }
}

/**
 * The window whose lock is the file `path`, with a turnstile beside it (`path`.turn): a process
 * that waits to time holds the turnstile, which every process passes through before it takes the
 * window shared, so that a comparison waits only for the shared holders already there, never for
 * new ones arriving behind it (a writer-preferring readers–writer lock). A shared holder that
 * enters lets go of its shared lock first (holding it while waiting for the turnstile would wait
 * for itself). A file that cannot be opened or locked (no libc, a link, another user's file) gives
 * no window: the comparisons run unserialized, as before windows existed, and say nothing.
 * @param pollMs how often a waiting process tries again (ms)
 */
export function fileTimingWindow(path: string, pollMs = 1): TimingWindow {
  let fds: { lock: number; turn: number } | null | undefined;
  const open = () => {
    if (fds !== undefined) return fds;
    const lock = openLockFile(path);
    const turn = lock === undefined ? undefined : openLockFile(`${path}.turn`);
    if (lock !== undefined && turn === undefined) closeSync(lock);
    return (fds = lock !== undefined && turn !== undefined ? { lock, turn } : null);
  };
  let held: "shared" | "alone" | undefined;
  const take = async (mode: "shared" | "alone", waiting?: () => void): Promise<number> => {
    const f = open();
    if (held === mode || !f) return 0;
    if (held === "shared") flock(f.lock, LOCK_UN);
    held = undefined;
    const t0 = performance.now();
    let said = false;
    const wait = async () => {
      if (!said) {
        said = true;
        waiting?.();
      }
      await Bun.sleep(pollMs);
    };
    for (;;) {
      // the turnstile: a process waiting to time holds it
      while (flock(f.turn, LOCK_EX | LOCK_NB) !== 0) await wait();
      if (mode === "shared") {
        flock(f.turn, LOCK_UN);
        if (flock(f.lock, LOCK_SH | LOCK_NB) === 0) break;
        await wait();
        continue;
      }
      while (flock(f.lock, LOCK_EX | LOCK_NB) !== 0) await wait();
      flock(f.turn, LOCK_UN);
      break;
    }
    held = mode;
    return said ? (performance.now() - t0) / 1000 : 0;
  };
  return {
    share: (waiting) => take("shared", waiting),
    enter: (waiting) => take("alone", waiting),
    leave() {
      if (held === undefined || !fds) return;
      held = undefined;
      flock(fds.lock, LOCK_UN);
    },
  };
}

const ofThisProcess = new Map<string, TimingWindow | undefined>();
/**
 * The window of this process's GPU (its CUDA_VISIBLE_DEVICES, as a worker was started with) in the
 * folder `folder`: one per folder and process (an flock belongs to its open file description).
 * undefined (no window, nothing made) where `folder` is not a private folder of this user's (a
 * folder, not a link, of the effective user, no bit for group or others: what the parent's
 * privateTempFolder makes): a worker started by hand with settings naming another folder writes
 * nothing there (adversary 75). No folder (one worker, or `--shared-timing`): undefined.
 */
export function gpuTimingWindow(folder: string | undefined): TimingWindow | undefined {
  if (folder === undefined) return undefined;
  if (!ofThisProcess.has(folder)) {
    let mine = false;
    try {
      const st = lstatSync(folder);
      const uid = process.geteuid?.();
      mine = st.isDirectory() && (uid === undefined || st.uid === uid) && (st.mode & 0o077) === 0;
    } catch {
      mine = false;
    }
    ofThisProcess.set(folder, mine ? fileTimingWindow(timingWindowFile(folder, process.env.CUDA_VISIBLE_DEVICES)) : undefined);
  }
  return ofThisProcess.get(folder);
}

/**
 * `f` run with the window `w` held shared (no window: `f` alone), left after it however it ends
 * (`f` may enter it to time, and leave).
 */
export async function inSharedWindow<T>(w: TimingWindow | undefined, f: () => Promise<T>): Promise<T> {
  await w?.share();
  try {
    return await f();
  } finally {
    w?.leave();
  }
}
