/**
 * A capture's rebuild started beside its replay, the step `kerncap validate` and check's
 * per-capture work (--rebuild) share: once the build's compiler runs (build.sh started, or a fast
 * build's compile step: its preprocessing and pruning done on this thread), the replay reserves the
 * captured VAs, creates the device context, verifies the checksums, restores the before state and
 * checks the captured module beside it; the rebuilt module is loaded (after the frontend's check of it, before any
 * launch) once the build is done. When the replay fails, the build's error is the one reported
 * (the replay may have failed only for lack of a module).
 */
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { Rebuilder, type Rebuilt, type RebuilderOptions } from "../rebuild/rebuilder.ts";
import { buildLock } from "../util/build-lock.ts";
import { mark } from "../util/marks.ts";

/** A rebuild running beside a replay. */
export interface StartedRebuild {
  /** The rebuilt module, checked for launch (the build's error: the one to report). */
  built: Promise<Rebuilt>;
  /** Its path, for ReplayOptions.modulePath. */
  module: Promise<string>;
  /** When the build finished (performance.now(); 0 before). */
  builtAt(): number;
  /** Settles once a compiler runs as a child (RebuilderOptions.onCompile) or the build has ended. */
  compiling: Promise<void>;
  /** Let other kerncap processes build this capture again (its build lock); idempotent. replayBeside calls it once the replay is done with the module. */
  release(): void;
}

/**
 * Start a capture's rebuild (Rebuilder.rebuildOnce: the frontend's step before build.sh, the
 * build, the rebuilt module's check) to run beside its replay, once this process holds the
 * capture's build lock (src/util/build-lock.ts: another kerncap building it is waited for). Both
 * promises are marked handled: a replay error that comes first must not leave them unhandled; the
 * caller awaits `built` (replayBeside does). The lock is released when the build ends, or with
 * `hold`, by `release()` (replayBeside's, once the replay loaded the module: no other process
 * rebuilds it meanwhile); at the latest when the process exits. The trust gates are the caller's
 * (src/ops/gates.ts), said before this.
 */
export function startRebuild(dir: string, m: Manifest, o: Omit<RebuilderOptions, "watch" | "onCompile">, hold = false): StartedRebuild {
  let at = 0;
  const compiling = Promise.withResolvers<void>();
  const lock = buildLock(dir);
  const release = () =>
    void lock.then(
      (l) => l.release(),
      () => {},
    );
  const built = lock
    .then(() => new Rebuilder(dir, m, frontendOf(m), { ...o, onCompile: () => (mark("the compiler started"), compiling.resolve()) }).rebuildOnce())
    .then((b) => {
      at = performance.now();
      mark(`the build ended (${b.builder ?? "build"}: ${b.seconds.toFixed(3)} s)`);
      return b;
    });
  if (!hold) built.then(release, release);
  built.then(
    () => compiling.resolve(),
    () => compiling.resolve(),
  );
  const module = built.then((b) => b.module);
  built.catch(() => {});
  module.catch(() => {});
  return { built, module, builtAt: () => at, compiling: compiling.promise, release };
}

/**
 * Run `replay` beside `rebuild` (none: just run it). When it throws, the build's error is thrown
 * instead where the build failed; else the replay's error, once the build has ended.
 */
export async function replayBeside<T>(rebuild: StartedRebuild | undefined, replay: () => Promise<T>): Promise<T> {
  // the replay's preparation (cuInit, the context, the VA reservations, the restore) holds this
  // thread in FFI calls for 0.1-0.5 s: started beside a fast build's preprocessing and pruning
  // (JS work on the same thread), the two took turns and the build waited; from the compiler's
  // start on, the build is a child process and the preparation runs beside it
  if (rebuild) await rebuild.compiling;
  mark("the replay's preparation started");
  try {
    return await replay();
  } catch (e) {
    if (rebuild) await rebuild.built; // a build error is the one to report (the replay may have failed only for lack of a module)
    throw e;
  } finally {
    rebuild?.release();
  }
}
