/**
 * One `kerncap validate` (a process per edit): rebuild the reproducer's edited kernel (the one
 * rebuild policy, ./rebuilder.ts), replay the rebuilt module on the captured memory and compare
 * with the app's after state. The build runs while the replay reserves the captured VAs, creates
 * the device context, verifies the checksums and restores the before state; the module is loaded
 * (after the frontend's check of it, before any launch) once the build is done. So the loop costs
 * about the build plus the launch and compare, not build + context + restore.
 */
import { isKerncapError, KerncapError } from "../errors.ts";
import type { OpenedCapture } from "../format/capture-dir.ts";
import { frontendOf } from "../frontends/index.ts";
import { replay, type ReplayOptions, type ReplayResult } from "../replay/engine.ts";
import { Rebuilder, type Rebuilt } from "./rebuilder.ts";

/** The replay result, with what the rebuild took and what the replay added after it. */
export interface ValidateResult extends ReplayResult {
  rebuild: Rebuilt;
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
}

/**
 * Rebuild and replay once.
 * @throws KerncapError E_FRONTEND (a frontend without validate: HIP), the rebuild's (E_BUILD,
 *   E_RDC, E_PARAM_LAYOUT …: reported before a replay error, which may come only from the lack of
 *   a module), the replay's; E_NO_GPU says that the rebuild succeeded (the edit compiles) when it did
 */
export async function validateOnce(c: OpenedCapture, o: ValidateOptions): Promise<ValidateResult> {
  const m = c.manifest;
  const fe = frontendOf(m);
  if (!fe.validates) {
    throw new KerncapError("E_FRONTEND", `${c.dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap validate supports CUDA and Triton captures only so far`, {
      hint: "Rebuild a HIP reproducer with its build.sh and replay the capture with `kerncap replay` (the HSA backend).",
    });
  }
  const t0 = performance.now();
  let builtAt = 0;
  const built = new Rebuilder(c.dir, m, fe, { quiet: o.quiet, force: o.force, fullBuild: o.fullBuild }).rebuildOnce().then((b) => {
    builtAt = performance.now();
    return b;
  });
  const modulePath = built.then((b) => b.module);
  // both are awaited below; a replay error that comes first must not leave them unhandled
  built.catch(() => {});
  modulePath.catch(() => {});
  let r: ReplayResult;
  try {
    r = await replay(c, { ...o.run, verify: true, modulePath, kernelName: m.kernel.name });
  } catch (e) {
    const b = await built; // a build error is the one to report (the replay may have failed only for lack of a module)
    // no GPU here: the edit still compiled, which is worth saying before the replay's error (the --json document says it too)
    if (isKerncapError(e) && e.code === "E_NO_GPU") {
      throw new KerncapError("E_NO_GPU", `${e.message} (the rebuild succeeded: ${b.module}, ${b.seconds.toFixed(2)} s; the replay needs a GPU)`, { hint: e.hint, exitCode: e.exitCode });
    }
    throw e;
  }
  const b = await built;
  return { ...r, rebuild: b, replaySeconds: (performance.now() - Math.max(builtAt, t0)) / 1000, wallSeconds: (performance.now() - t0) / 1000 };
}
