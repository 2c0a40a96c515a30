/**
 * The one rebuild policy of a capture's reproducer: build.sh, or the frontend's faster build
 * (Frontend.fastBuild; CUDA: the device-only build of the pruned TU, src/frontends/cuda/fast-build.ts)
 * once a build of the same source by both gave the kernel the same machine code (the frontend's
 * `differs`; CUDA: the kernel's .text bytes, register count, the sizes of its attributes, static
 * shared memory and parameter bank). One Rebuilder holds a capture's build state (the check, the
 * fast build's series) and is used once by `kerncap validate` and `kerncap check --rebuild`
 * (rebuildOnce, beside the replay: src/ops/rebuild-beside.ts startRebuild) and once per save by the watch
 * (rebuildSave, with checkBeside after a build by build.sh). Both run the frontend's
 * beforeBuild first (CUDA: a stale slice remade) and its checkRebuiltModule (checkRebuilt) before
 * anything launches the module. A fast build's module is written over build.sh's own output too
 * (FastBuilder.buildShModule: CUDA's build/kernel.cubin), so that the file the docs and the
 * reproducer's README name always holds the last rebuild's module.
 * Which build validate and each save use: ./pruned-check.ts. Beside a fast build, the frontend's check of what did not change
 * (CUDA: the slice is kerncap's) runs once its compiler runs, before build.sh starts; a source it changed: build.sh's build is the answer.
 */
import { chmodSync, readFileSync, rmSync } from "node:fs";
import { DeferredCheck } from "./deferred-check.ts";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { privateTempFolder } from "../cache.ts";
import type { Manifest } from "../format/manifest.ts";
import { assertRegularTree, mkdirInCapture, resolveInCapture } from "../format/paths.ts";
import { writeFileAtomic } from "../util/write-file.ts";
import { isKerncapError, passes } from "../errors.ts";
import { log } from "../log.ts";
import { TOOL_VERSION } from "../version.ts";
import { assertRebuildWritable, buildReproducer, BuildSuperseded, FastBuildUnavailable, type BuildOptions } from "../frontends/build.ts";
import { runsTrustedCopy } from "../format/staged-build.ts";
import type { FastBuilder, FastBuildOptions, FastBuildSeries, FastBuilt, FastBuildSteps, Frontend } from "../frontends/frontend.ts";
import {
  averaged,
  CHECK_FILE,
  chooseStrategy,
  PRUNED_DIR,
  readPrunedCheck,
  WATCH_MARGIN,
  WATCH_MIN_SAVES,
  writePrunedCheck,
  type BuildCosts,
  type PrunedCheck,
  type PrunedCheckFields,
  type Strategy,
} from "./pruned-check.ts";

/** The record of the check and the choice by measured cost: ./pruned-check.ts (imported from here by the tests and the callers). */
export { chooseStrategy, PRUNED_DIR, RACE_MIN_CPUS, readPrunedCheck, WATCH_MARGIN, WATCH_MIN_SAVES } from "./pruned-check.ts";
export type { BuildCosts, PrunedCheck, Strategy } from "./pruned-check.ts";

/** build.sh, or the frontend's fast build (CUDA: the device-only build of the pruned TU). */
export type Builder = "build.sh" | "pruned";

/** A rebuilt module, checked for launch; `steps`: the fast build's (rounded to ms). */
export interface Rebuilt {
  module: string;
  /** The rebuild's wall time (s). */
  seconds: number;
  builder: Builder;
  steps?: FastBuildSteps;
}

/**
 * The run options of a rebuilt module: its path (or the promise of it, while the build runs), the
 * captured kernel's name, and the frontend's reading of the launch the build needs
 * (Frontend.rebuiltLaunch: a Triton kernel compiled with other num_warps gets its block).
 */
export function rebuiltRun(
  fe: Frontend,
  m: Manifest,
  module: string | Promise<string>,
): { modulePath: string | Promise<string>; kernelName: string; launchOf: (p: string) => ReturnType<NonNullable<Frontend["rebuiltLaunch"]>> } {
  return { modulePath: module, kernelName: m.kernel.name, launchOf: (p) => fe.rebuiltLaunch?.(p, m) };
}

const roundSteps = (x: FastBuildSteps): FastBuildSteps => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, typeof v === "number" ? Math.round(v) : v]));

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e));

export interface RebuilderOptions {
  /** Keep build.sh's stderr out of the debug log. */
  quiet: boolean;
  /** Build even when the toolchain differs from the capture's (KERNCAP_FORCE=1 for build.sh). */
  force: boolean;
  /** build.sh only (--full-build). */
  fullBuild: boolean;
  /** The watch's: the check in memory, the fast builds' files in a temporary folder (removed by close). validate's: DIR/build/pruned. */
  watch?: boolean;
  /** validate: start build.sh only once the fast build is done (the tests: which builds first is then not a matter of load). */
  race?: boolean;
  /**
   * Build for this GPU architecture instead of the captured one (check --rebuild on a GPU of
   * another architecture: BuildOptions.targetArch). build.sh only: the fast build compiles for
   * the captured one, and its check against build.sh's would compare two architectures' code.
   */
  targetArch?: string;
  /**
   * validate --confine (kerncap mcp): the capture's manifest, for BuildOptions.confine. build.sh
   * only: the fast build's steps write no dependency list.
   */
  confine?: Manifest;
  /** What confines the build, for a refusal's message (BuildOptions.confinedBy): "validate --confine", "profile --build --confine". */
  confinedBy?: string;
  /** BuildOptions.userReadsMessages: a confined build of the user's command line (kerncap eval without --confine). */
  userReadsMessages?: boolean;
  /** What the next validates will build (the pruned check's outcome) said at debug level only: a check worker, whose next run is no validate (a new user's finding: the note once per capture). */
  quietStrategy?: boolean;
  /** BuildOptions.noteFor: whose build, said before build.sh's notes. */
  noteFor?: string;
  /** validate's strategy once checked (default: chooseStrategy by the measured costs; the tests fix one). */
  strategy?: Strategy;
  /** The CPU count the strategy is chosen for (default: availableParallelism; the tests give one). */
  cpus?: number;
  /** Called when a compiler runs as a child (build.sh started; a fast build's compile step): FastBuildOptions.onCompile. */
  onCompile?: () => void;
}

export class Rebuilder {
  readonly dir: string;
  private readonly fast: FastBuilder | undefined;
  private readonly work: string | undefined;
  /** The watch's check: undefined until it concluded; then whether saves use the fast build. */
  private fastEnabled: boolean | undefined;
  /** The watch's fast builds keep their analysis and last preprocessing between saves. */
  private series: FastBuildSeries | undefined;
  /** The watch's measured costs (s, averaged over its builds): build.sh's, and the fast build's on saves (not the check's cold one). */
  private watchCosts: { buildSh: number | null; pruned: number | null; prunedSaves: number } = { buildSh: null, pruned: null, prunedSaves: 0 };

  constructor(
    dir: string,
    private readonly m: Manifest,
    private readonly fe: Frontend,
    private readonly o: RebuilderOptions,
  ) {
    this.dir = resolve(dir); // build.sh runs inside the folder
    // a received capture's build runs the private copy of what was trusted: build.sh only (the fast build runs build.sh --dryrun and its plan from the folder)
    this.fast = o.fullBuild || o.targetArch || o.confine || runsTrustedCopy(this.dir) ? undefined : fe.fastBuild;
    if (this.fast) this.work = o.watch ? privateTempFolder("kerncap-fast-") : join(this.dir, PRUNED_DIR);
    if (this.fast && o.watch) this.series = this.fast.series();
  }

  /** Remove the watch's temporary work folder. */
  close(): void {
    if (this.o.watch && this.work) rmSync(this.work, { recursive: true, force: true });
  }

  private buildOptions(signal?: AbortSignal): BuildOptions {
    return {
      quiet: this.o.quiet,
      force: this.o.force,
      ...(signal ? { signal } : {}),
      // another architecture's module beside build/kernel.cubin, never over it: that file is the captured architecture's, which
      // `replay --against DIR/build/kernel.cubin` runs (a new user's finding: --arch sm_80 wrote an sm_80 cubin there)
      ...(this.o.targetArch ? { targetArch: this.o.targetArch, out: `build/${this.o.targetArch}/kernel.cubin` } : {}),
      ...(this.o.confine ? { confine: this.o.confine, confinedBy: this.o.confinedBy } : {}),
      ...(this.o.userReadsMessages ? { userReadsMessages: true } : {}),
      ...(this.o.noteFor ? { noteFor: this.o.noteFor } : {}),
      ...(this.fe.explainBuildFailure ? { explain: this.fe.explainBuildFailure } : {}),
    };
  }

  /** build.sh's rebuild; `announce`: call onCompile once it runs (not beside a fast build, whose own compile step says so). */
  private async buildSh(signal?: AbortSignal, announce = true, onCompile?: () => void): Promise<Rebuilt> {
    const built = buildReproducer(this.dir, this.buildOptions(signal));
    if (announce) this.o.onCompile?.(); // build.sh runs as a child from here on
    onCompile?.();
    return { ...(await built), builder: "build.sh" };
  }

  /** A fast build's options: FastBuildOptions. */
  private fastOptions(signal?: AbortSignal): FastBuildOptions {
    return { force: this.o.force, ...(signal ? { signal } : {}), ...(this.o.onCompile ? { onCompile: this.o.onCompile } : {}) };
  }

  /**
   * The frontend's check of a rebuilt module, before anything launches it (CUDA: cubin, kernel
   * present, parameter layout). rebuildOnce makes it; the watch, after rebuildSave, so that a
   * refused module's line still has the build time.
   * @throws KerncapError exit 2 (E_PARAM_LAYOUT, E_RDC, E_KERNEL_NOT_FOUND …)
   */
  checkRebuilt(b: Rebuilt): Rebuilt {
    if (this.checked.has(b)) return b; // checked already (before the fast build's comparison)
    // the module's code is looked at for the architecture it was built for
    const t = this.o.targetArch;
    this.fe.checkRebuiltModule?.(b.module, t ? { ...this.m, device: { ...this.m.device, arch: t } } : this.m);
    this.checked.add(b);
    return b;
  }
  private readonly checked = new WeakSet<Rebuilt>(); // the rebuilds checkRebuilt passed: each checked once

  /**
   * A fast build's module, written also as build.sh's own output (FastBuilder.buildShModule: CUDA's
   * build/kernel.cubin), whole (a temp file renamed over it) and through no link, so that the file
   * the docs and the reproducer's README name (`replay --against DIR/build/kernel.cubin`) always
   * holds the last rebuild's module, whichever build made it.
   * @throws KerncapError E_UNSAFE_PATH (a link at the name or in build/), E_IO
   */
  private published(r: Rebuilt): Rebuilt {
    const rel = this.fast!.buildShModule;
    const { path } = resolveInCapture(this.dir, rel);
    // a build output remade at every rebuild: no fsync (as build.sh's own, src/format/staged-build.ts collectBuild)
    writeFileAtomic(path, readFileSync(r.module), { sync: false, what: `the rebuilt module ${rel}`, root: this.dir, create: true });
    return r;
  }

  /** Whether the fast build gives the kernel build.sh's machine code, and the sizes for the message. */
  private compare(full: Rebuilt, f: FastBuilt): { differs: string | null; said: string } {
    const differs = this.fast!.differs(readFileSync(full.module), readFileSync(f.module), this.m.kernel.name);
    const lines = f.prune.lines();
    const said = differs
      ? `the pruned TU's build gives ${this.m.kernel.name} other machine code (${differs})`
      : `${lines.before} → ${lines.after} lines, device-only: ${f.seconds.toFixed(2)} s; build.sh ${full.seconds.toFixed(2)} s; the kernel's machine code is the same`;
    return { differs, said };
  }

  // ───────────────────────────── the watch: one rebuild per save ─────────────────────────────

  /**
   * One save's rebuild: the fast build once the check enabled it, else build.sh. A fast build
   * that fails is followed by build.sh's; when build.sh then succeeds, the fast build is not used
   * again (said once).
   * `o.quiet` (the watch's: until the burst of file events has been quiet): awaited before a
   * compiler starts (build.sh; a fast build's compile step, after its preprocessing and pruning).
   * `o.signal` (a later save): stops the build; it then throws BuildSuperseded, and nothing of
   * the rebuild policy changes (no build.sh instead, no cost measured). `o.onCompile`: called
   * when a compiler starts as a child (build.sh; a fast build's compile step; the watch starts
   * its run, the captured module's part, then).
   * @throws KerncapError from build.sh (E_BUILD, E_RDC …), E_INTERRUPTED; BuildSuperseded
   */
  async rebuildSave(o: { signal?: AbortSignal; quiet?: () => Promise<void>; onCompile?: () => void } = {}): Promise<Rebuilt> {
    const superseded = (e: unknown) => {
      if (o.signal?.aborted && !(isKerncapError(e) && e.code === "E_INTERRUPTED")) throw e instanceof BuildSuperseded ? e : new BuildSuperseded();
      throw e;
    };
    const quiet = async () => {
      await o.quiet?.();
      if (o.signal?.aborted) throw new BuildSuperseded();
    };
    assertRegularTree(this.dir, "src"); // as rebuildOnce
    const c = this.watchCosts;
    if (!this.fastEnabled) {
      await quiet(); // build.sh is one compiler from its start: nothing of it runs during the burst
      this.fe.beforeBuild?.(this.dir, this.m);
      const b = await this.buildSh(o.signal, true, o.onCompile).catch(superseded);
      c.buildSh = c.buildSh === null ? b.seconds : averaged(c.buildSh, b.seconds);
      return b;
    }
    this.fe.beforeBuild?.(this.dir, this.m);
    const t0 = performance.now();
    try {
      const fo = {
        force: this.o.force,
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.quiet ? { beforeCompile: quiet } : {}),
        ...(o.onCompile ? { onCompile: o.onCompile } : {}),
      };
      const f = await this.fast!.build(this.dir, this.work!, fo, this.series!);
      c.pruned = c.pruned === null ? f.seconds : averaged(c.pruned, f.seconds);
      c.prunedSaves++;
      if (c.buildSh !== null && c.prunedSaves >= WATCH_MIN_SAVES && c.pruned > WATCH_MARGIN * c.buildSh) {
        // measured on this machine: the fast build costs more than build.sh (a machine too small for its parallel steps, a TU pruning does not shrink)
        this.fastEnabled = false;
        log.info(`the pruned build takes ${c.pruned.toFixed(2)} s a save, build.sh ${c.buildSh.toFixed(2)} s: build.sh rebuilds the saves from now on`);
      }
      return this.published({ module: f.module, seconds: f.seconds, builder: "pruned", steps: roundSteps(f.steps) });
    } catch (e) {
      if (!(e instanceof FastBuildUnavailable)) return superseded(e);
      if (o.signal?.aborted) throw new BuildSuperseded(); // a step killed by the abort: no failure of the fast build's
      log.debug(`pruned build: ${e.message}; build.sh instead`);
      await quiet();
      const full = await this.buildSh(o.signal, true, o.onCompile).catch(superseded);
      this.fastEnabled = false;
      log.info(`the pruned TU did not build where build.sh did (${e.message}): build.sh rebuilds every save from now on`);
      return { ...full, seconds: (performance.now() - t0) / 1000 };
    }
  }

  /** Whether the watch still wants a check beside a build by build.sh (it has a fast build that no check concluded on). */
  wantsCheck(b: Rebuilt): boolean {
    return this.fast !== undefined && this.fastEnabled === undefined && b.builder === "build.sh";
  }

  /**
   * After a build by build.sh (the first, or a save's until one check concludes): the fast build
   * of the same text, enabled for the saves when it gives the kernel build.sh's machine code. Says
   * which it is, with both build times and the TU's size before and after pruning. `signal` (a
   * save came meanwhile) stops it without a conclusion.
   * @throws KerncapError E_INTERRUPTED (the watch is ending)
   */
  async checkBeside(full: Rebuilt, signal: AbortSignal): Promise<void> {
    if (!this.wantsCheck(full)) return;
    try {
      const f = await this.fast!.build(this.dir, this.work!, this.fastOptions(signal), this.series!);
      if (signal.aborted) return; // a save came: its build is checked instead
      // build.sh's module refused (a changed parameter list): nothing to compare, and its error comes with no note before it (nu9 #12); checked again at the next save
      if (!passes(() => this.checkRebuilt(full))) return;
      const { differs, said } = this.compare(full, f);
      this.fastEnabled = differs === null;
      this.watchCosts.buildSh ??= full.seconds;
      // the first pruned build preprocesses the whole TU; the saves' are incremental: timed, and given back to build.sh where slower (rebuildSave)
      const timed =
        f.seconds > full.seconds ? `; the saves' incremental builds are timed, and build.sh takes over after ${WATCH_MIN_SAVES} saves if they are slower` : "";
      log.info(differs ? `saves are rebuilt by build.sh: ${said}` : `saves are rebuilt from the pruned TU (${said}${timed})`);
    } catch (e) {
      if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw e;
      if (signal.aborted) return; // stopped for a save: checked again after it
      this.fastEnabled = false;
      // an optimization only: whatever went wrong, build.sh goes on rebuilding
      log.info(`saves are rebuilt by build.sh (no pruned build: ${messageOf(e)})`);
    }
  }

  // ───────────────────────────── validate: one rebuild per process ─────────────────────────────

  private writeCheck(c: PrunedCheckFields): void {
    writePrunedCheck(this.dir, c);
  }

  /**
   * validate's rebuild, by the record in DIR/build/pruned/check.json (see the top of this file).
   * @returns the module (DIR/build/kernel.cubin by build.sh, DIR/build/pruned/kernel.cubin by the pruned build, which is
   *   copied to DIR/build/kernel.cubin too: published), its build time (s), the builder
   * @throws KerncapError from build.sh (E_BUILD, E_RDC, E_NO_REPRODUCER, E_INTERRUPTED), the
   *   module check (E_PARAM_LAYOUT …) and E_INTERRUPTED from a fast build's step
   */
  async rebuildOnce(): Promise<Rebuilt> {
    assertRebuildWritable(this.dir); // before the pruned build's folder, not as a file inside it
    assertRegularTree(this.dir, "src"); // before the fast build too: no FIFO, device or link under src/ for a compiler to read
    const later = this.fe.beforeBuild?.(this.dir, this.m, { confined: Boolean(this.o.confine), defer: Boolean(this.fast) }) || undefined;
    try {
      return this.checkRebuilt(await (this.fast ? this.raceOrCheck(this.fast, new DeferredCheck(later)) : this.buildSh()));
    } catch (e) {
      // a failed rebuild leaves no earlier module where the docs say the last rebuild's is (nu12 #7: replay --against
      // timed the old kernel); build.sh removes its own OUTPUT before it compiles, a pruned build's published copy goes here
      if (this.fast && isKerncapError(e) && e.code !== "E_INTERRUPTED") rmSync(resolveInCapture(this.dir, this.fast.buildShModule).path, { force: true });
      throw e;
    }
  }

  /**
   * validate's rebuild by the pruned-build record (build/pruned/check.json): build.sh alone where
   * the pruned build was found to differ, else by the strategy the measured costs choose (build.sh
   * alone, the pruned build alone, or both raced), and the check of both where none concluded yet.
   */
  private async raceOrCheck(fast: FastBuilder, deferred: DeferredCheck): Promise<Rebuilt> {
    const work = mkdirInCapture(this.dir, PRUNED_DIR);
    chmodSync(work, 0o700); // its preprocessed TUs hold the text of every file the source included (a private one of yours, #included by an edit)
    const kernel = this.m.kernel.name;
    const check = readPrunedCheck(this.dir);
    const current = check && check.kernel === kernel && check.kerncap === TOOL_VERSION ? check : undefined;
    if (current && !current.same) {
      log.debug(`build.sh rebuilds: ${current.reason} (${join(work, CHECK_FILE)})`);
      deferred.changed();
      return this.buildSh();
    }
    let replanned: FastBuilt | undefined;
    let replannedFull: Rebuilt | undefined;
    const cpus = this.o.cpus ?? availableParallelism();
    const { costs, strategy } = current ? this.strategyOf(current, cpus) : { costs: undefined, strategy: undefined };
    if (current && costs && strategy !== "race")
      log.debug(
        `validate builds with ${strategy} alone: ${cpus} CPUs, measured build.sh ${costs.buildSh.toFixed(2)} s, pruned ${costs.pruned.toFixed(2)} s (${join(work, CHECK_FILE)})`,
      );
    if (current && costs && strategy === "build.sh") {
      deferred.changed();
      const b = await this.buildSh();
      this.writeCheck({ ...current, costs: { ...costs, buildSh: averaged(costs.buildSh, b.seconds) } });
      return b;
    }
    if (current && costs && strategy === "pruned") {
      const r = await this.prunedAlone(fast, work, current, costs, deferred);
      if ("module" in r) return r;
      ({ replanned, replannedFull } = r);
    } else if (current) {
      const r = await this.race(fast, work, current, costs, deferred);
      if ("module" in r) return r;
      ({ replanned, replannedFull } = r);
    }
    deferred.changed();
    return this.checkBoth(fast, work, cpus, replanned, replannedFull);
  }

  /**
   * The strategy a validate on `cpus` CPUs takes by a check that found the same machine code: by
   * its measured costs on this CPU count (else the check's own times), unless the options fix one.
   * The one decision: raceOrCheck's, and what checkBoth says the next validates will do.
   */
  private strategyOf(check: PrunedCheck, cpus: number): { costs: BuildCosts; strategy: Strategy } {
    const costs = check.costs?.cpus === cpus ? check.costs : { cpus, buildSh: check.buildShSeconds, pruned: check.prunedSeconds ?? Infinity };
    return { costs, strategy: this.o.strategy ?? chooseStrategy(costs, cpus) };
  }

  /**
   * validate's rebuild by both builds of the edit, side by side: the first that builds is the one
   * replayed (the fast one, when it is faster as it should be; build.sh's is never waited for
   * longer than it takes); `costs` (when measured) averaged with the winner's time.
   * @returns the rebuild, or the pruned build and build.sh's when build.sh's compile changed since the check (checked again)
   */
  private async race(
    fast: FastBuilder,
    work: string,
    current: PrunedCheck,
    costs: BuildCosts | undefined,
    deferred: DeferredCheck,
  ): Promise<Rebuilt | { replanned: FastBuilt; replannedFull: Rebuilt }> {
    const kernel = this.m.kernel.name;
    const series = fast.series(work); // the previous validate's preprocessing: the base of an incremental one
    const t0 = performance.now();
    const stopFast = new AbortController(),
      stopFull = new AbortController();
    // the deferred check once the fast build's compiler runs (or it ended without one), before build.sh starts
    const checked = Promise.withResolvers<void>();
    const settle = () => (deferred.settle(stopFast, stopFull), checked.resolve());
    const fastP = fast.build(this.dir, work, { ...this.fastOptions(stopFast.signal), onCompile: () => (this.o.onCompile?.(), settle()) }, series);
    fastP.then(settle, settle);
    // the replay's preparation (onCompile) waits for the fast build's compile step, not build.sh's start: begun beside the
    // fast build's preprocessing and pruning, its FFI calls held this thread while they waited (a fresh validate's
    // incremental preprocessing took 464 ms on the H200 where a watch's took 93-120); a fast build that fails says so too
    fastP.catch(() => this.o.onCompile?.());
    const full = () => this.buildSh(stopFull.signal, false);
    const fullP = this.o.race === false ? fastP.then(full, full) : checked.promise.then(full);
    type First =
      | { who: "pruned"; f: FastBuilt }
      | { who: "pruned-failed"; e: unknown }
      | { who: "build.sh"; b: Rebuilt }
      | { who: "build.sh-failed"; e: unknown };
    const fastR: Promise<First> = fastP.then(
      (f) => ({ who: "pruned" as const, f }),
      (e) => ({ who: "pruned-failed" as const, e }),
    );
    const fullR: Promise<First> = fullP.then(
      (b) => ({ who: "build.sh" as const, b }),
      (e) => ({ who: "build.sh-failed" as const, e }),
    );
    const stop = async (c: AbortController, p: Promise<First>) => {
      c.abort();
      await p;
    };
    let first = await Promise.race([fastR, fullR]);
    const changed = await Promise.resolve()
      .then(() => deferred.changed())
      .catch(async (e: unknown) => (await Promise.all([fastR, fullR]), Promise.reject(e))); // its error the answer, once both builds stopped
    if (changed) {
      const fr = (await stop(stopFast, fastR), await fastR);
      if (fr.who === "pruned-failed" && isKerncapError(fr.e) && fr.e.code === "E_INTERRUPTED") throw (await stop(stopFull, fullR), fr.e); // a stop signal
      series.save(work); // the check changed a source the fast build had begun with: build.sh's build, begun after it, is the answer
      const r = await fullR;
      if (r.who !== "build.sh") throw (r as { e: unknown }).e;
      return { ...r.b, seconds: (performance.now() - t0) / 1000 };
    }
    if (first.who === "build.sh-failed") {
      const e = first.e;
      if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw (await stop(stopFast, fastR), e);
      // only a host-code error fails build.sh and not the fast build (which has no host bodies): the fast build decides, as in the watch
      first = await fastR;
      if (first.who !== "pruned") throw e;
      log.warn(`build.sh fails where the pruned build (device code only) does not: ${messageOf(e).split("\n").slice(0, 4).join(" / ")}`);
    }
    if (first.who === "pruned") {
      const f = first.f;
      if (f.plan === current.plan) {
        await stop(stopFull, fullR);
        series.save(work);
        if (costs) this.writeCheck({ ...current, costs: { ...costs, pruned: averaged(costs.pruned, f.seconds) } });
        return this.published({ module: f.module, seconds: (performance.now() - t0) / 1000, builder: "pruned", steps: roundSteps(f.steps) });
      }
      log.info("build.sh's compile changed since the pruned build was checked: checking it again");
      series.save(work);
      const r = await fullR;
      if (r.who !== "build.sh") throw (r as { e: unknown }).e;
      return { replanned: f, replannedFull: r.b };
    } else if (first.who === "build.sh") {
      await stop(stopFast, fastR); // the fast build lost the race (its preprocessing, if done, is kept)
      series.save(work);
      if (costs) this.writeCheck({ ...current, costs: { ...costs, buildSh: averaged(costs.buildSh, first.b.seconds) } });
      log.debug("build.sh finished before the pruned build");
      return { ...first.b, seconds: (performance.now() - t0) / 1000 };
    } else {
      // the fast build failed: build.sh's outcome is the answer (a real compile error is its message)
      const e = first.e;
      series.save(work);
      if (!(e instanceof FastBuildUnavailable)) throw (await stop(stopFull, fullR), e);
      const r = await fullR;
      if (r.who !== "build.sh") throw (r as { e: unknown }).e;
      this.writeCheck({
        kernel,
        plan: current.plan,
        same: false,
        reason: `the pruned TU did not build where build.sh did (${e.message})`,
        buildShSeconds: r.b.seconds,
        prunedSeconds: null,
      });
      log.info(`the pruned TU did not build where build.sh did (${e.message}): build.sh rebuilds from now on (remove ${work} to check the pruned build again)`);
      return { ...r.b, seconds: (performance.now() - t0) / 1000 };
    }
  }

  /**
   * validate's rebuild by the pruned build alone (the strategy of a small machine when it is the
   * cheaper): its time averaged into the costs; build.sh's outcome when it cannot build (the
   * pruned build off from then on).
   * @returns the rebuild, or the pruned build and build.sh's when build.sh's compile changed since the check (checked again)
   */
  private async prunedAlone(
    fast: FastBuilder,
    work: string,
    current: PrunedCheck,
    costs: BuildCosts,
    deferred: DeferredCheck,
  ): Promise<Rebuilt | { replanned: FastBuilt; replannedFull: Rebuilt }> {
    const kernel = this.m.kernel.name;
    const series = fast.series(work);
    const t0 = performance.now();
    const stopFast = new AbortController();
    // the deferred check once the compiler runs (a source it changed: this build stopped, build.sh's the answer)
    const onCompile = () => (this.o.onCompile?.(), deferred.settle(stopFast));
    let f: FastBuilt | undefined;
    try {
      f = await fast.build(this.dir, work, { ...this.fastOptions(stopFast.signal), onCompile }, series);
    } catch (e) {
      series.save(work);
      if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw e; // a stop signal: no build.sh after it
      if (deferred.changed()) return this.buildSh();
      if (!(e instanceof FastBuildUnavailable)) throw e;
      // as in the race: build.sh's outcome is the answer (a real compile error is its message)
      const b = await this.buildSh();
      this.writeCheck({
        kernel,
        plan: current.plan,
        same: false,
        reason: `the pruned TU did not build where build.sh did (${e.message})`,
        buildShSeconds: b.seconds,
        prunedSeconds: null,
      });
      log.info(`the pruned TU did not build where build.sh did (${e.message}): build.sh rebuilds from now on (remove ${work} to check the pruned build again)`);
      return { ...b, seconds: (performance.now() - t0) / 1000 };
    }
    series.save(work);
    if (deferred.changed()) return this.buildSh(); // checked only now (no compiler ran): a changed source is built by build.sh
    if (f.plan === current.plan) {
      this.writeCheck({ ...current, costs: { ...costs, pruned: averaged(costs.pruned, f.seconds) } });
      return this.published({ module: f.module, seconds: f.seconds, builder: "pruned", steps: roundSteps(f.steps) });
    }
    log.info("build.sh's compile changed since the pruned build was checked: checking it again");
    return { replanned: f, replannedFull: await this.buildSh() };
  }

  /** The check: both builds of the same source, side by side (or those already made), and check.json written with their verdict and costs. @returns build.sh's rebuild */
  private async checkBoth(fast: FastBuilder, work: string, cpus: number, replanned?: FastBuilt, replannedFull?: Rebuilt): Promise<Rebuilt> {
    const kernel = this.m.kernel.name;
    const checkSeries = fast.series();
    // build.sh failing (a compile error, its time limit) ends the check: the pruned build beside it is stopped, never
    // left running on (its gcc -E of a header that includes itself ran on for minutes after validate said E_BUILD)
    const stop = new AbortController();
    const [full, pruned] = await Promise.allSettled([
      (replannedFull ? Promise.resolve(replannedFull) : this.buildSh()).catch((e: unknown) => {
        stop.abort();
        throw e;
      }),
      replanned ?? fast.build(this.dir, work, this.fastOptions(stop.signal), checkSeries),
    ]);
    if (!replanned) checkSeries.save(work);
    if (full.status === "rejected") throw full.reason;
    if (pruned.status === "rejected") {
      const e = pruned.reason;
      if (!(e instanceof FastBuildUnavailable)) throw e; // E_INTERRUPTED, a kerncap bug
      this.writeCheck({ kernel, plan: "", same: false, reason: `no pruned build: ${e.message}`, buildShSeconds: full.value.seconds, prunedSeconds: null });
      log.info(`validate rebuilds with build.sh (no pruned build: ${e.message})`);
      return full.value;
    }
    const f = pruned.value;
    // as in checkBeside: no record (the next validate checks again); the caller's checkRebuilt says why
    if (!passes(() => this.checkRebuilt(full.value))) return full.value;
    const { differs, said } = this.compare(full.value, f);
    const check = {
      kernel,
      plan: f.plan,
      same: differs === null,
      reason: differs && said,
      buildShSeconds: full.value.seconds,
      prunedSeconds: f.seconds,
      costs: { cpus, buildSh: full.value.seconds, pruned: f.seconds },
    };
    this.writeCheck(check);
    if (differs) log.info(`validate rebuilds with build.sh: ${said}`);
    else {
      // what the next validate will do: the decision it takes from this record (not a promise made before it)
      const next = this.strategyOf({ ...check, schema: "kerncap.pruned-check/1", kerncap: TOOL_VERSION, at: "" }, cpus).strategy;
      const say = (text: string) => (this.o.quietStrategy ? log.debug(text) : log.info(text));
      say(
        next === "race"
          ? `the next validates run build.sh and kerncap's pruned build (the kernel's part of the TU) side by side and replay the first that builds: both give the same machine code (${said})`
          : next === "pruned"
            ? `the next validates compile only the kernel's part of the TU (kerncap's pruned build): on ${cpus} CPUs faster than build.sh, and the same machine code (${said})`
            : `the next validates run build.sh alone: on ${cpus} CPUs kerncap's pruned build (the kernel's part of the TU) is no faster (${said})`,
      );
    }
    return full.value;
  }
}
