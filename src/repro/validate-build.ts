/**
 * The rebuild of `kerncap validate DIR` (one process per edit): build.sh, or, for a CUDA
 * reproducer whose pruned build was checked, the device-only build of the pruned TU
 * (src/repro/fast-build.ts) in DIR/build/pruned/.
 *
 * The check is the watch's (sameKernelCode: the kernel's .text bytes, register count, the sizes of
 * its attributes, static shared memory and parameter bank), made once: the first validate (or the
 * first after the plan of build.sh's compile changed, or after another kerncap version) runs
 * build.sh and the pruned build side by side on the same source and records in
 * DIR/build/pruned/check.json whether they gave the kernel the same machine code. It then reports
 * build.sh's module. The later validates run both again, side by side, and replay the first that
 * builds (the pruned one, from an incremental preprocessing: src/repro/incremental-pp.ts; never
 * later than build.sh's), stopping the other. A pruned build that fails leaves build.sh's outcome
 * (a real compile error is its message); when build.sh then succeeds, the record says the pruned
 * build is off, and build.sh rebuilds from then on. build.sh failing where the pruned build does
 * not (an error in host code, which the pruned TU does not compile) is said, and the pruned build's
 * verdict stands, as in the watch.
 * `--full-build` always uses build.sh and leaves the record as it is.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Manifest } from "../format/manifest.ts";
import { MANIFEST_MAX_BYTES, mkdirInCapture, readInCapture, writeInCapture } from "../format/paths.ts";
import { isKerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { TOOL_VERSION } from "../version.ts";
import { buildReproducer, type BuildOptions } from "./build.ts";
import { fastBuild, FastBuildState, FastBuildUnavailable, roundSteps, sameKernelCode, type FastBuilt } from "./fast-build.ts";
import type { Builder } from "./watch.ts";
import { frontendOf } from "../frontends/index.ts";

/** validate's work folder for the pruned build, under the capture folder. */
export const PRUNED_DIR = "build/pruned";
const CHECK_FILE = "check.json";

/** DIR/build/pruned/check.json: the outcome of the side-by-side build. */
export interface PrunedCheck {
  schema: "kerncap.pruned-check/1";
  /** The kerncap that made it (another version prunes differently: checked again). */
  kerncap: string;
  /** The kernel (mangled) whose machine code was compared. */
  kernel: string;
  /** planHash of the compile it holds for (src/repro/fast-build.ts). */
  plan: string;
  /** The pruned build gave the kernel build.sh's machine code (and has not failed where build.sh built since). */
  same: boolean;
  /** Why not, when not. */
  reason: string | null;
  /** When it was made (ISO 8601), and the two build times then (s). */
  at: string;
  buildShSeconds: number;
  prunedSeconds: number | null;
}

/** What validate rebuilt, with which builder; `steps`: the pruned build's (ms). */
export interface ValidateBuilt {
  module: string;
  seconds: number;
  builder: Builder;
  steps?: FastBuilt["steps"];
}

export function readPrunedCheck(dir: string): PrunedCheck | undefined {
  try {
    const c = JSON.parse(readInCapture(dir, `${PRUNED_DIR}/${CHECK_FILE}`, MANIFEST_MAX_BYTES)?.toString("utf8") ?? "null");
    return c?.schema === "kerncap.pruned-check/1" ? c : undefined;
  } catch {
    return undefined;
  }
}

function writePrunedCheck(dir: string, c: Omit<PrunedCheck, "schema" | "kerncap" | "at">): void {
  const doc: PrunedCheck = { schema: "kerncap.pruned-check/1", kerncap: TOOL_VERSION, at: new Date().toISOString(), ...c };
  writeInCapture(dir, `${PRUNED_DIR}/${CHECK_FILE}`, JSON.stringify(doc, null, 2) + "\n");
}

const viaBuildSh = async (dir: string, o: BuildOptions): Promise<ValidateBuilt> => ({ ...(await buildReproducer(dir, o)), builder: "build.sh" });

/**
 * Rebuild the reproducer in `dir` for validate.
 * @param o.fullBuild build.sh only (--full-build)
 * @returns the module (DIR/build/kernel.cubin by build.sh, DIR/build/pruned/kernel.cubin by the pruned build), its build time (s), the builder
 * @throws KerncapError from build.sh (E_BUILD, E_RDC, E_NO_REPRODUCER, E_INTERRUPTED) and
 *   E_INTERRUPTED from a pruned build's step
 */
export async function buildForValidate(dirArg: string, m: Manifest, o: BuildOptions & { fullBuild: boolean; race?: boolean }): Promise<ValidateBuilt> {
  const dir = resolve(dirArg);
  if (m.kernel.frontend !== "cuda" || o.fullBuild) return viaBuildSh(dir, o);
  const work = mkdirInCapture(dir, PRUNED_DIR);
  const kernel = m.kernel.name;
  const check = readPrunedCheck(dir);
  const current = check && check.kernel === kernel && check.kerncap === TOOL_VERSION ? check : undefined;
  if (current && !current.same) {
    log.debug(`build.sh rebuilds: ${current.reason} (${join(work, CHECK_FILE)})`);
    return viaBuildSh(dir, o);
  }
  let replanned: FastBuilt | undefined;
  let replannedFull: ValidateBuilt | undefined;
  if (current) {
    // both builds of the edit, side by side: the first that builds is the one replayed (the pruned
    // one, when it is faster as it should be; build.sh's is never waited for longer than it takes)
    const state = FastBuildState.load(work); // the previous validate's preprocessing: the base of an incremental one
    const t0 = performance.now();
    const stopFast = new AbortController(), stopFull = new AbortController();
    const fastP = fastBuild(dir, work, { force: o.force, signal: stopFast.signal }, state);
    // race: false (the tests) starts build.sh only once the pruned build is done
    const fullP = o.race === false ? fastP.then(() => viaBuildSh(dir, { ...o, signal: stopFull.signal }), () => viaBuildSh(dir, { ...o, signal: stopFull.signal })) : viaBuildSh(dir, { ...o, signal: stopFull.signal });
    type First = { who: "pruned"; f: FastBuilt } | { who: "pruned-failed"; e: unknown } | { who: "build.sh"; b: ValidateBuilt } | { who: "build.sh-failed"; e: unknown };
    const fastR: Promise<First> = fastP.then((f) => ({ who: "pruned" as const, f }), (e) => ({ who: "pruned-failed" as const, e }));
    const fullR: Promise<First> = fullP.then((b) => ({ who: "build.sh" as const, b }), (e) => ({ who: "build.sh-failed" as const, e }));
    const stop = async (c: AbortController, p: Promise<First>) => {
      c.abort();
      await p;
    };
    let first = await Promise.race([fastR, fullR]);
    if (first.who === "build.sh-failed") {
      const e = first.e;
      if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw (await stop(stopFast, fastR), e);
      // only a host-code error fails build.sh and not the pruned build (which has no host bodies): the pruned build decides, as in the watch
      first = await fastR;
      if (first.who !== "pruned") throw e;
      log.warn(`build.sh fails where the pruned build (device code only) does not: ${e instanceof Error ? e.message.split("\n").slice(0, 4).join(" / ") : String(e)}`);
    }
    if (first.who === "pruned") {
      const f = first.f;
      if (f.plan === current.plan) {
        await stop(stopFull, fullR);
        state.save(work);
        return { module: f.module, seconds: (performance.now() - t0) / 1000, builder: "pruned", steps: roundSteps(f.steps) };
      }
      log.info("build.sh's compile changed since the pruned build was checked: checking it again");
      replanned = f;
      state.save(work);
      const r = await fullR;
      if (r.who !== "build.sh") throw (r as { e: unknown }).e;
      replannedFull = r.b;
    } else if (first.who === "build.sh") {
      await stop(stopFast, fastR); // the pruned build lost the race (its preprocessing, if done, is kept)
      state.save(work);
      log.debug("build.sh finished before the pruned build");
      return { ...first.b, seconds: (performance.now() - t0) / 1000 };
    } else {
      // the pruned build failed: build.sh's outcome is the answer (a real compile error is its message)
      const e = first.e;
      state.save(work);
      if (!(e instanceof FastBuildUnavailable)) throw (await stop(stopFull, fullR), e);
      const r = await fullR;
      if (r.who !== "build.sh") throw (r as { e: unknown }).e;
      const b = { ...r.b, seconds: (performance.now() - t0) / 1000 };
      writePrunedCheck(dir, { kernel, plan: current.plan, same: false, reason: `the pruned TU did not build where build.sh did (${e.message})`, buildShSeconds: r.b.seconds, prunedSeconds: null });
      log.info(`the pruned TU did not build where build.sh did (${e.message}): build.sh rebuilds from now on (remove ${work} to check the pruned build again)`);
      return b;
    }
  }
  // the check: both builds of the same source, side by side
  const checkState = new FastBuildState();
  const [full, pruned] = await Promise.allSettled([replannedFull ?? viaBuildSh(dir, o), replanned ?? fastBuild(dir, work, { force: o.force }, checkState)]);
  if (!replanned) checkState.save(work);
  if (full.status === "rejected") throw full.reason;
  if (pruned.status === "rejected") {
    const e = pruned.reason;
    if (!(e instanceof FastBuildUnavailable)) throw e; // E_INTERRUPTED, a kerncap bug
    writePrunedCheck(dir, { kernel, plan: "", same: false, reason: `no pruned build: ${e.message}`, buildShSeconds: full.value.seconds, prunedSeconds: null });
    log.info(`validate rebuilds with build.sh (no pruned build: ${e.message})`);
    return full.value;
  }
  const f = pruned.value;
  const differs = sameKernelCode(readFileSync(full.value.module), readFileSync(f.module), kernel);
  writePrunedCheck(dir, { kernel, plan: f.plan, same: differs === null, reason: differs && `the pruned TU's build gives the kernel other machine code (${differs})`, buildShSeconds: full.value.seconds, prunedSeconds: f.seconds });
  const lines = f.prune.lines();
  if (differs) log.info(`validate rebuilds with build.sh: the pruned TU's build gives ${kernel} other machine code (${differs})`);
  else log.info(`the next validates compile the pruned TU (${lines.before} → ${lines.after} lines, device-only: ${f.seconds.toFixed(2)} s; build.sh ${full.value.seconds.toFixed(2)} s; the kernel's machine code is the same)`);
  return full.value;
}

/**
 * validate's rebuild as it runs beside the replay (validate, check --rebuild): the frontend's step
 * before build.sh (CUDA: a slice remade), buildForValidate, then the rebuilt module's check before
 * anything launches (CUDA: the parameter layout, exit 2). `module` is for ReplayOptions.modulePath;
 * both promises are marked handled (a replay error that comes first must not leave them
 * unhandled): the caller awaits `built` for the build's error and outcome.
 * @returns the build, its module, and when the build finished (performance.now(), 0 before)
 */
export function startRebuild(dir: string, m: Manifest, o: BuildOptions & { fullBuild: boolean }): { built: Promise<ValidateBuilt>; module: Promise<string>; builtAt: () => number } {
  const fe = frontendOf(m);
  let at = 0;
  const built = (async () => {
    fe.beforeBuild?.(dir, m);
    const b = await buildForValidate(dir, m, o);
    at = performance.now();
    // the module's code is looked at for the architecture it was built for
    fe.checkRebuiltModule?.(b.module, o.targetArch ? { ...m, device: { ...m.device, arch: o.targetArch } } : m);
    return b;
  })();
  const module = built.then((b) => b.module);
  built.catch(() => {});
  module.catch(() => {});
  return { built, module, builtAt: () => at };
}
