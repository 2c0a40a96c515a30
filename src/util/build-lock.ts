/**
 * The lock of a capture's build folder: one kerncap process at a time rebuilds a capture (build.sh
 * writes DIR/build/kernel.cubin, the pruned build DIR/build/pruned/…, each removed and written again
 * by every rebuild) and loads what it built. Five `validate --build-only` started at once on one
 * capture shared the pruned build's preprocessed TU: one compiler read another's half-written file
 * and never ended, others found build/kernel.cubin removed or truncated (adversary 35). An flock(2)
 * on DIR/build/.kerncap-build.lock (created 0600, O_NOFOLLOW, in the folder opened without
 * following a link): the kernel releases it when its holder exits, however it ends (SIGKILL too,
 * and before the process is reaped), so a lock is never left behind. A process that finds it held
 * waits, polling, and says once which process holds it.
 */
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { libc } from "../native/libc.ts";
import { fdPath, openDirWalk } from "./write-file.ts";
import { log } from "../log.ts";
import { KerncapError } from "../errors.ts";

/** The lock file in a capture's build/ (pack leaves build/ out; kerncap clean asks it too). */
export const BUILD_LOCK = ".kerncap-build.lock";

const LOCK_EX = 2;
const LOCK_NB = 4;
const LOCK_UN = 8;

/** A held lock; release() is idempotent. */
export interface BuildLock {
  release(): void;
}

const NONE: BuildLock = { release() {} };

/**
 * The lock file `name`'s fd, opened (made where missing, unless `create` is false) in DIR/build, or
 * undefined where it cannot be (a read-only capture, no build/: the build says its own error).
 * Something else at its name (a link, dangling or not, a folder, a FIFO) is E_UNSAFE_PATH, unless
 * `lenient` (clean, which removes build/ whole): a lock that could not be taken would otherwise be
 * skipped without a word (adversary 36: a folder at its name let clean remove a build under way).
 * @throws KerncapError E_UNSAFE_PATH
 */
function openLock(dir: string, name: string, create = true, lenient = false): number | undefined {
  let build: number;
  try {
    build = openDirWalk(dir, ["build"], { create }).fd;
  } catch {
    return undefined;
  }
  let fd: number | undefined;
  let odd = false;
  try {
    // libuv opens with O_CLOEXEC: build.sh and its compilers do not inherit the lock
    fd = openSync(fdPath(build, name), constants.O_RDWR | (create ? constants.O_CREAT : 0) | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  } catch (e) {
    odd = ["ELOOP", "EISDIR", "ENXIO", "ENOTDIR"].includes((e as NodeJS.ErrnoException).code ?? "");
  } finally {
    closeSync(build);
  }
  if (fd !== undefined && fstatSync(fd).isFile()) return fd;
  if (fd !== undefined) {
    closeSync(fd);
    odd = true;
  }
  if (!odd || lenient) return undefined;
  throw new KerncapError("E_UNSAFE_PATH", `${join(dir, "build", name)} is not a regular file: kerncap's lock of this capture cannot be taken there`, {
    hint: `Remove it (rm -r ${join(dir, "build", name)}, or kerncap clean ${dir}), then run this again.`,
  });
}

/** flock(fd, op) through libc; -1 where it failed (EWOULDBLOCK: held), or where libc cannot be loaded (treated as taken: no lock here). */
function flock(fd: number, op: number): number {
  try {
    return libc().flock(fd, op);
  } catch {
    return 0;
  }
}

/**
 * Try to take the build lock of the capture `dir` once: the lock, or undefined while another
 * process holds it (`holder`: the pid it wrote). Where the lock file cannot be made (a read-only
 * capture, no libc; with `create` false, where there is none yet), or where the file is not this
 * user's alone (another user's could be held by them forever), a no-op lock: nothing to serialize,
 * the build reports its own error.
 */
export function tryBuildLock(dir: string, o: { create?: boolean; lenient?: boolean; name?: string } = {}): { lock?: BuildLock; holder?: number } {
  const fd = openLock(dir, o.name ?? BUILD_LOCK, o.create ?? true, o.lenient ?? false);
  if (fd === undefined) return { lock: NONE };
  // a lock file another user made (in a build/ others may write) is not taken: its maker could hold it and keep every
  // build of the capture waiting; such a capture's builds are not serialized (its other checks still hold)
  const st = fstatSync(fd);
  const uid = process.geteuid?.();
  if ((uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) {
    closeSync(fd);
    return { lock: NONE };
  }
  if (flock(fd, LOCK_EX | LOCK_NB) !== 0) {
    let holder: number | undefined;
    try {
      holder = Number(readFileSync(fdPath(fd), "utf8").trim()) || undefined;
    } catch {
      holder = undefined;
    }
    closeSync(fd);
    return { holder };
  }
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${process.pid}\n`, 0);
  } catch {
    /* the pid is only for the message of a process that waits */
  }
  let held = true;
  return {
    lock: {
      release() {
        if (!held) return;
        held = false;
        flock(fd, LOCK_UN);
        closeSync(fd);
      },
    },
  };
}

/**
 * Take the build lock of the capture `dir`, waiting (polling every `pollMs`) while another kerncap
 * process holds it; said once at the info level, naming the holder's pid.
 * @throws KerncapError E_INTERRUPTED when `signal` aborts while waiting
 */
export async function buildLock(dir: string, signal?: AbortSignal, pollMs = 50): Promise<BuildLock> {
  let said = false;
  for (;;) {
    const got = tryBuildLock(dir);
    if (got.lock) return got.lock;
    if (!said) {
      said = true;
      log.info(`waiting for another kerncap process${got.holder ? ` (pid ${got.holder})` : ""} that is building this capture (${BUILD_LOCK} in its build/)`);
    }
    if (signal?.aborted) throw new KerncapError("E_INTERRUPTED", "stopped while waiting for another kerncap build of this capture", { exitCode: 130 });
    await Bun.sleep(pollMs);
  }
}

/** The lock file of `kerncap judge`'s read, merge and write of the judging settings (in build/, kerncap's own folder, which pack leaves out). */
export const JUDGE_LOCK = ".kerncap-judge.lock";

/**
 * Hold the lock `name` (a 0600 file of this user's in `dir`/build: tryBuildLock) while `f` reads,
 * changes and writes one of the capture's files: two `kerncap judge` at once each read the stored
 * settings, added theirs and wrote, and one's setting was lost though both said it was stored
 * (adversary 35). A file of the user's own: another user who may only read the folder cannot hold
 * it (adversary 36 starved judge through an flock on the folder itself). A holder that does not
 * let go within `waitMs` (ms) is E_BUSY; the kernel lets go of a lock whose holder ended. Waiting
 * sleeps this thread (the holders keep it for milliseconds). Where no lock can be made (a
 * read-only capture), `f` runs alone: its writes say their own error.
 * @throws KerncapError E_BUSY, E_UNSAFE_PATH (something else at the lock's name), and what `f` throws
 */
export function withCaptureLock<T>(dir: string, name: string, what: string, f: () => T, waitMs = 30_000): T {
  const until = Date.now() + waitMs;
  for (;;) {
    const got = tryBuildLock(dir, { name });
    if (got.lock) {
      try {
        return f();
      } finally {
        got.lock.release();
      }
    }
    if (Date.now() > until)
      throw new KerncapError(
        "E_BUSY",
        `another kerncap process${got.holder ? ` (pid ${got.holder})` : ""} kept ${dir} for ${Math.round(waitMs / 1000)} s while ${what}`,
        {
          hint: "Wait for the other kerncap command on this capture to end (ps -ef | grep kerncap), then run this one again.",
        },
      );
    Bun.sleepSync(10);
  }
}
