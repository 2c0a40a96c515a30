/**
 * One `kerncap validate` (a process per edit): rebuild the reproducer's edited kernel (the one
 * rebuild policy, ./rebuilder.ts), replay the rebuilt module on the captured memory, compare with
 * the app's after state and time it interleaved against the captured module. The build runs while
 * the replay reserves the captured VAs, creates the device context, verifies the checksums,
 * restores the before state and checks the captured module; the rebuilt module is loaded (after
 * the frontend's check of it, before any launch) once the build is done. So the loop costs about
 * the build plus the launches and compare, not build + context + restore. `kerncap check
 * --rebuild` starts its rebuild the same way (startRebuild).
 */
import { isKerncapError, KerncapError } from "../errors.ts";
import type { OpenedCapture } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { replayCompared, type ReplayOptions, type ReplayResult } from "../replay/engine.ts";
import type { TimingComparison } from "../replay/stats.ts";
import { Rebuilder, rebuiltRun, type Rebuilt, type RebuilderOptions } from "./rebuilder.ts";

/** The replay result, with what the rebuild took and what the replay added after it. */
export interface ValidateResult extends ReplayResult {
  rebuild: Rebuilt;
  /** The rebuilt kernel's time against the captured module's, interleaved (null with fewer than MIN_PAIRS iters, or a faulting capture). */
  compare: TimingComparison | null;
  /** What the replay added after the build (module load, launches, compare; s). */
  replaySeconds: number;
  wallSeconds: number;
}

export interface ValidateOptions {
  run: Omit<ReplayOptions, "verify" | "modulePath" | "kernelName">;
  /** Keep build.sh's stderr out of the debug log. */
  quiet: boolean;
  /** Rebuild even when the toolchain differs from the capture's (KERNCAP_FORCE=1 for build.sh, templates/triton/repro.py). */
  force: boolean;
  /** build.sh only (--full-build). */
  fullBuild: boolean;
  /** --confine (kerncap mcp): build.sh alone, refused when it reads outside the capture (src/frontends/confine.ts). */
  confine?: boolean;
}

/** A rebuild running beside a replay. */
export interface StartedRebuild {
  /** The rebuilt module, checked for launch (the build's error: the one to report). */
  built: Promise<Rebuilt>;
  /** Its path, for ReplayOptions.modulePath. */
  module: Promise<string>;
  /** When the build finished (performance.now(); 0 before). */
  builtAt(): number;
}

/**
 * Start a capture's rebuild (Rebuilder.rebuildOnce: the frontend's step before build.sh, the
 * build, the rebuilt module's check) to run beside its replay. Both promises are marked handled:
 * a replay error that comes first must not leave them unhandled; the caller awaits `built`.
 */
export function startRebuild(dir: string, m: Manifest, o: Omit<RebuilderOptions, "watch">): StartedRebuild {
  let at = 0;
  const built = new Rebuilder(dir, m, frontendOf(m), o).rebuildOnce().then((b) => {
    at = performance.now();
    return b;
  });
  const module = built.then((b) => b.module);
  built.catch(() => {});
  module.catch(() => {});
  return { built, module, builtAt: () => at };
}

/**
 * Rebuild and replay once.
 * @throws KerncapError E_FRONTEND (a frontend without validate: HIP), the rebuild's (E_BUILD,
 *   E_RDC, E_PARAM_LAYOUT …: reported before a replay error, which may come only from the lack of
 *   a module), the replay's; E_NO_GPU says that the rebuild succeeded (the edit compiles) when it did
 */
export async function validateOnce(c: OpenedCapture, o: ValidateOptions): Promise<ValidateResult> {
  const m = c.manifest;
  if (!frontendOf(m).validates) {
    throw new KerncapError("E_FRONTEND", `${c.dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap validate supports CUDA and Triton captures only so far`, {
      hint: "Rebuild a HIP reproducer with its build.sh and replay the capture with `kerncap replay` (the HSA backend).",
    });
  }
  const t0 = performance.now();
  const rebuild = startRebuild(c.dir, m, { quiet: o.quiet, force: o.force, fullBuild: o.fullBuild, ...(o.confine ? { confine: m } : {}) });
  let r: ReplayResult;
  let compare: TimingComparison | null;
  try {
    // the rebuilt kernel judged, and timed interleaved against the captured module (checked while the build runs)
    ({ candidate: r, compare } = await replayCompared(c, { iters: o.run.iters, verify: true, runs: 1 }, { ...o.run, ...rebuiltRun(frontendOf(m), m, rebuild.module) }));
  } catch (e) {
    const b = await rebuild.built; // a build error is the one to report (the replay may have failed only for lack of a module)
    // no GPU here: the edit still compiled, which is worth saying before the replay's error (the --json document says it too)
    if (isKerncapError(e) && e.code === "E_NO_GPU") {
      throw new KerncapError("E_NO_GPU", `${e.message} (the rebuild succeeded: ${b.module}, ${b.seconds.toFixed(2)} s; the replay needs a GPU)`, { hint: e.hint, exitCode: e.exitCode });
    }
    throw e;
  }
  const b = await rebuild.built;
  return { ...r, compare, rebuild: b, replaySeconds: (performance.now() - Math.max(rebuild.builtAt(), t0)) / 1000, wallSeconds: (performance.now() - t0) / 1000 };
}
