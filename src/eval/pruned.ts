/**
 * kerncap eval's candidates built from the pruned TU: the frontend's fast build
 * (Frontend.fastBuild; CUDA: the device-only build of the pruned TU,
 * src/frontends/cuda/fast-build.ts) run confined as the candidates' build.sh builds are
 * (src/frontends/confined-steps.ts), used only once a check gave the kernel build.sh's machine
 * code, and only where it was the cheaper build.
 *
 * The check (PrunedCandidates.prepare), before the first candidate's build: validate's record of
 * the capture (build/pruned/check.json, src/rebuild/pruned-check.ts) where it is current, found
 * the same machine code and the pruned build the cheaper; else both builds of the capture's own
 * source side by side in a private copy, compared by the frontend's `differs`. Its outcome is kept
 * for the process (kerncap mcp's evaluate calls, one after the other). Each candidate's fast
 * build must make the plan the check held for (the plan hash is written with the folder's path
 * as $DIR, so a copy's compares with the capture's); a candidate whose fast build fails is built
 * by its confined build.sh, which gives the verdict and the compiler's message (a step past the
 * time limit excepted: FastBuildTimedOut); one that makes another plan turns the pruned builds
 * off for the rest.
 * One pruner's analysis is shared by all candidates (FastBuilder.series's `sharing`).
 * A received capture's candidates (built from the private copy of the bytes the user trusted),
 * and a frontend with no fast build or no confinement (Triton), build by build.sh alone.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import { isKerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { assertRegularTree } from "../format/paths.ts";
import { runsTrustedCopy } from "../format/staged-build.ts";
import { buildReproducer, FastBuildUnavailable } from "../frontends/build.ts";
import { confinedStepsFor, FastBuildTimedOut, prepareConfinedFast } from "../frontends/confined-steps.ts";
import type { FastBuilder, FastBuildSeries, FastBuilt, Frontend } from "../frontends/frontend.ts";
import { frontendOf } from "../frontends/index.ts";
import { log } from "../log.ts";
import { plural } from "../util/format.ts";
import { PRUNED_DIR, readPrunedCheck } from "../rebuild/pruned-check.ts";
import { TOOL_VERSION } from "../version.ts";
import { copyReproducer } from "./reproducer-copy.ts";

/** What a check concluded for a capture folder (by its real path and kernel), for this process. */
const checked = new Map<string, { plan: string; series: FastBuildSeries } | { off: string }>();

/** A candidate's fast build: its module, or a step past the confined build's time limit. */
export type PrunedBuild = { module: string; seconds: number } | { timedOut: { seconds: number; set: boolean } };

export class PrunedCandidates {
  private constructor(
    /** The capture folder (its src/ is what a candidate's edits are told against). */
    private readonly dir: string,
    private readonly m: Manifest,
    private readonly fast: FastBuilder,
    private readonly fe: Frontend,
    /** The plan hash the check held for (FastBuilt.plan). */
    readonly plan: string,
    private readonly shared: FastBuildSeries,
    private readonly force: boolean,
    /** The check's key in `checked` (the capture's real path and kernel). */
    private readonly key: string,
  ) {}

  /** Set once a candidate's pruned build made another plan than the check's: build.sh builds the rest. */
  private off = false;

  /**
   * The pruned builds of the candidates of the capture `dir` (manifest `m`), or undefined where
   * they are not used (said at debug level, or as info where the check found other machine code).
   * @throws KerncapError E_INTERRUPTED (a stop signal during the check's builds)
   */
  static async prepare(
    dir: string,
    m: Manifest,
    o: { force: boolean; confinedBy?: string; candidates: number; jobs: number },
  ): Promise<PrunedCandidates | undefined> {
    const fe = frontendOf(m);
    const fast = fe.fastBuild;
    if (!fast || m.source?.cuda === undefined) return undefined; // no fast build, or no build to confine (Triton's)
    // a received capture whose build the trust gate let run (src/ops/gates.ts): only build.sh runs, from the trusted bytes
    if (runsTrustedCopy(dir)) return void log.debug("eval builds with build.sh: a received capture's trusted build runs as trusted");
    const key = `${realpathSync(dir)}\0${m.kernel.name}`;
    const known = checked.get(key);
    if (known && "off" in known) return void log.debug(`eval builds with build.sh: ${known.off}`);
    if (known) return new PrunedCandidates(dir, m, fast, fe, known.plan, known.series, o.force, key);
    // a check of its own costs about one build.sh build beside a pruned one: repaid only by a few rounds of candidates'
    // builds (fewer, and build.sh alone is as fast: a 2-core machine is never slower than build.sh), unless validate's record spares it
    const record = validateRecord(dir, m);
    if (!record && o.candidates < FEW_ROUNDS * o.jobs)
      return void log.debug(
        `eval builds with build.sh: ${plural(o.candidates, "candidate")} on ${plural(o.jobs, "build job")} do not repay a check of the pruned build`,
      );
    const copy = join(privateTempFolder("kerncap-eval-check-"), "capture");
    try {
      const r = await check(dir, copy, m, fast, record, o);
      checked.set(key, r);
      if ("off" in r) return void log.debug(`eval builds with build.sh: ${r.off}`);
      return new PrunedCandidates(dir, m, fast, fe, r.plan, r.series, o.force, key);
    } finally {
      rmSync(join(copy, ".."), { recursive: true, force: true });
    }
  }

  /**
   * One candidate's confined fast build in its private copy `dest` (made by the caller, its
   * candidate applied): the module, a step past the time limit, or undefined where build.sh must
   * build it (the fast build failed, read outside, or made another plan than the check's).
   * @throws KerncapError E_INTERRUPTED
   */
  async build(dest: string): Promise<PrunedBuild | undefined> {
    if (this.off) return undefined;
    try {
      assertRegularTree(dest, "src");
      prepareConfinedFast(dest, this.m);
      const unfit = prunedUnfit(this.dir, dest, this.fe.generatedSources?.(this.m) ?? []);
      if (unfit) return void log.debug(`${dest}: ${unfit}: build.sh builds it`);
      const f = await confinedFast(dest, this.m, this.fast, this.fast.series(undefined, this.shared), this.force);
      if (f.plan !== this.plan) {
        // build.sh's compile is not the one checked (another kerncap wrote the record, a changed build.sh): build.sh for the rest
        this.off = true;
        checked.set(this.key, { off: "the pruned build's plan is not the one checked" });
        return void log.info(`the candidates' pruned builds compile otherwise than the check's: build.sh builds them`);
      }
      this.fe.checkRebuiltModule?.(f.module, this.m);
      log.debug(
        `${dest}: pruned build ${f.seconds.toFixed(2)} s (${Object.entries(f.steps)
          .map(([k, v]) => `${k} ${typeof v === "number" ? Math.round(v) : v}`)
          .join(", ")})`,
      );
      return { module: f.module, seconds: f.seconds };
    } catch (e) {
      if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw e;
      if (e instanceof FastBuildTimedOut) return { timedOut: e.limit };
      log.debug(`${dest}: no pruned build (${e instanceof Error ? e.message : String(e)}): build.sh builds it`);
      return undefined;
    }
  }
}

/** Where a candidate's sources are read for prunedUnfit: at most this many files of at most this many bytes (past them: build.sh). */
const SCREEN_FILES = 4096;
const SCREEN_BYTES = 8 << 20;

/**
 * Why a candidate's sources (the copy `dest`'s src/) are not built from the pruned TU, or
 * undefined: the pruned TU takes out what the kernel's code does not name (host-only function
 * bodies, unused declarations, what line markers place in system headers), and two things in a
 * source can make that change the kernel's meaning or hide an error (adversary 37):
 * - a `#line` directive or a GNU line marker (`# 1 "/usr/include/stdio.h" 1 3`): the text after it
 *   reads as another file, a system header's, whose unused declarations the pruner drops;
 * - a `friend` declaration the capture's own sources do not have (in a file the candidate changed
 *   or added): a host function's body that instantiates a template with a friend can change what
 *   a constant expression in the kernel evaluates to (stateful template metaprogramming).
 * Either is built by build.sh, whose outcome is the verdict. The files kerncap generates from
 * others (`generated`, relative to src/: CUDA's slice, made anew from its TU, with kerncap's own
 * #line directives) are not read: their source is.
 */
export function prunedUnfit(capture: string, dest: string, generated: readonly string[]): string | undefined {
  const files: string[] = [];
  try {
    for (const rel of readdirSync(join(dest, "src"), { recursive: true, encoding: "utf8" })) {
      if (files.length >= SCREEN_FILES) return `src/ holds more than ${SCREEN_FILES} files`;
      if (lstatSync(join(dest, "src", rel)).isFile()) files.push(rel);
    }
  } catch (e) {
    return `src/ could not be read (${e instanceof Error ? e.message : String(e)})`;
  }
  const friends = (t: string) => (t.match(/\bfriend\b/g) ?? []).length;
  const made = new Set(generated.map((g) => g.replace(/^src\//, "")));
  for (const rel of files.filter((f) => !made.has(f))) {
    const p = join(dest, "src", rel);
    if (statSync(p).size > SCREEN_BYTES) return `src/${rel} is past ${SCREEN_BYTES >> 20} MiB`;
    const text = readFileSync(p, "latin1");
    if (/^[ \t]*#[ \t]*(?:line\b|\d)/m.test(text)) return `src/${rel} holds a #line directive or a line marker`;
    let before: string | undefined;
    try {
      before = readFileSync(join(capture, "src", rel), "latin1");
    } catch {
      before = undefined; // a file the candidate added
    }
    if (before !== text && friends(text) > (before === undefined ? 0 : friends(before))) return `src/${rel} declares a friend its capture's source does not`;
  }
  return undefined;
}

/** One confined fast build of the folder `dir` into its build/pruned (0700: its preprocessed TU holds the text of every file the source included). */
async function confinedFast(dir: string, m: Manifest, fast: FastBuilder, series: FastBuildSeries, force: boolean, signal?: AbortSignal): Promise<FastBuilt> {
  const work = join(dir, PRUNED_DIR);
  mkdirSync(work, { recursive: true, mode: 0o700 });
  chmodSync(work, 0o700);
  return fast.build(dir, work, { force, confined: confinedStepsFor(dir, m), ...(signal ? { signal } : {}) }, series);
}

/** Rounds of `jobs` candidates' builds below which eval runs no check of its own (build.sh builds them). */
const FEW_ROUNDS = 2;

/**
 * validate's record of the capture (build/pruned/check.json) where it is current (this kerncap, this
 * kernel): the pruned build unfit (off), or fit and the cheaper there (the plan it holds for, each
 * candidate's plan held to it); undefined where there is none of use.
 */
function validateRecord(dir: string, m: Manifest): { off: string } | { plan: string; at: string } | undefined {
  // validate's record holds for another compile than the candidates' (CUDA: a prefix slice, where they compile the whole TU)
  if (frontendOf(m).confinedCompilesOtherwise?.(m)) return undefined;
  const rec = readPrunedCheck(dir);
  const current = rec && rec.kernel === m.kernel.name && rec.kerncap === TOOL_VERSION ? rec : undefined;
  if (!current) return undefined;
  if (!current.same) return { off: `validate's check found the pruned build unfit (${current.reason})` };
  const cheaper = (current.costs?.pruned ?? current.prunedSeconds ?? Infinity) < (current.costs?.buildSh ?? current.buildShSeconds);
  return current.plan && cheaper ? { plan: current.plan, at: current.at } : undefined;
}

/**
 * The check of the capture `dir`: validate's record where it is current and found the pruned build
 * fit (or unfit) and cheaper, else both builds of the capture's own source in the private copy
 * `copy`, compared.
 */
async function check(
  dir: string,
  copy: string,
  m: Manifest,
  fast: FastBuilder,
  record: ReturnType<typeof validateRecord>,
  o: { force: boolean; confinedBy?: string },
): Promise<{ plan: string; series: FastBuildSeries } | { off: string }> {
  const series = fast.series();
  if (record && "off" in record) return record;
  if (record) {
    log.info(
      `eval builds the candidates from the pruned TU (device code only), as validate's check of ${record.at} found it gives the kernel build.sh's machine code`,
    );
    return { plan: record.plan, series };
  }
  copyReproducer(dir, copy);
  const interrupted = (e: unknown) => isKerncapError(e) && e.code === "E_INTERRUPTED";
  try {
    prepareConfinedFast(copy, m);
  } catch (e) {
    return { off: `the capture's own source is refused for a confined build (${e instanceof Error ? e.message : String(e)})` };
  }
  const stop = new AbortController();
  const fastP = confinedFast(copy, m, fast, series, o.force, stop.signal).catch((e: unknown) => {
    throw interrupted(e) ? e : new FastBuildUnavailable(e instanceof Error ? e.message : String(e));
  });
  const [full, pruned] = await Promise.allSettled([
    buildReproducer(copy, { quiet: true, force: o.force, confine: m, confinedBy: o.confinedBy ?? "kerncap eval" }).catch((e: unknown) => {
      stop.abort();
      throw e;
    }),
    fastP,
  ]);
  for (const r of [full, pruned]) if (r.status === "rejected" && interrupted(r.reason)) throw r.reason;
  if (full.status === "rejected") return { off: `build.sh does not build the capture's own source (${(full.reason as Error).message ?? full.reason})` };
  if (pruned.status === "rejected") return { off: `no pruned build of the capture's own source (${(pruned.reason as Error).message ?? pruned.reason})` };
  const differs = fast.differs(readFileSync(full.value.module), readFileSync(pruned.value.module), m.kernel.name);
  if (differs) {
    log.info(`eval builds the candidates with build.sh: the pruned TU gives the kernel other machine code (${differs})`);
    return { off: differs };
  }
  if (pruned.value.seconds >= full.value.seconds)
    return { off: `the pruned build took ${pruned.value.seconds.toFixed(2)} s, build.sh ${full.value.seconds.toFixed(2)} s: no cheaper here` };
  log.info(
    `eval builds the candidates from the pruned TU (device code only; its machine code for the kernel is build.sh's: ${pruned.value.seconds.toFixed(2)} s against ${full.value.seconds.toFixed(2)} s)`,
  );
  return { plan: pruned.value.plan, series };
}
