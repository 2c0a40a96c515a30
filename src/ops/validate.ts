/**
 * `kerncap validate`'s workflow (the verb, src/cli/commands/validate.ts, parses and prints; MCP's
 * validate tool runs that verb with --confine in a child): the gates, in order (--multiset's
 * regions, a confined build of a capture that runs its source only with --trust, only the build
 * kerncap wrote when confined, a folder this user may write, a received capture's build.sh only
 * after --trust: src/ops/gates.ts), then the rebuild beside the replay (./rebuild-beside.ts),
 * the rebuilt kernel judged and timed interleaved against the captured module, inside the no-ASLR
 * retry (src/replay/aslr.ts); or, with watch, the resident watch (src/rebuild/watch.ts).
 *
 * One validate costs about the build plus the launches and compare, not build + context +
 * restore: the replay's set-up runs while the reproducer builds.
 */
import { rmSync } from "node:fs";
import { resolve } from "node:path";
import { folderInCapture } from "../format/paths.ts";
import { confinementFor, type Confinement } from "../frontends/sandbox.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { verifyFiles, type OpenedCapture } from "../format/capture-dir.ts";
import { frontendOf, regionTypesOf } from "../frontends/index.ts";
import { assertRebuildWritable } from "../frontends/build.ts";
import { rebuiltRun, type Rebuilt } from "../rebuild/rebuilder.ts";
import { checkWatchable, watchReproducer, type WatchEvent } from "../rebuild/watch.ts";
import { withAslrRetry } from "../replay/aslr.ts";
import { replayCompared, type ReplayOptions, type ReplayResult, type RunOptions } from "../replay/engine.ts";
import type { TimingComparison } from "../replay/stats.ts";
import { checkMultiset } from "../replay/tolerance-plan.ts";
import { judgingInEffect } from "../replay/judge-settings.ts";
import { NO_GPU_HINT } from "../native/libcuda-search.ts";
import { refuseUntrustedSource, requireRenderedBuild, requireTrustedBuild, runsTrustedCopy, trustChangedBuild } from "./gates.ts";
import { replayBeside, startRebuild } from "./rebuild-beside.ts";
import { describeResources, moduleFigures, moduleResources, type ModuleResources } from "../rebuild/resources.ts";
import { shellPath } from "../util/shell-quote.ts";
import { mark } from "../util/marks.ts";

export { describeResources, moduleResources, type ModuleResources };

/** The replay result, with what the rebuild took and what the replay added after it. */
/** A confined build's sandbox, said with its rebuild (--confine only: src/frontends/sandbox.ts). */
type ConfinedRebuild = { confinement?: Confinement };

export interface ValidateResult extends ReplayResult {
  rebuild: Rebuilt & ModuleResources & ConfinedRebuild;
  /** The rebuilt kernel's time against the captured module's, interleaved (null with fewer than MIN_PAIRS iters, or a faulting capture). */
  compare: TimingComparison | null;
  /** What the replay added after the build (module load, launches, compare; s). */
  replaySeconds: number;
  wallSeconds: number;
}

export interface ValidateOptions {
  /** The rebuilt kernel's run: timed launches, checked runs (--runs), tolerances, --flush-l2 (the timing's L2 state, the captured module's too). */
  run: Omit<ReplayOptions, "verify" | "modulePath" | "kernelName" | "regionTypes">;
  /** Check every restored memory chunk's kc64 (default true; --no-verify: false, as replay's). */
  verify?: boolean;
  /** Keep build.sh's stderr out of the debug log. */
  quiet: boolean;
  /** Rebuild even when the toolchain differs from the capture's (KERNCAP_FORCE=1 for build.sh, templates/triton/repro.py). */
  force: boolean;
  /** build.sh only (--full-build). */
  fullBuild: boolean;
  /** --confine (kerncap mcp): build.sh alone, refused when it reads outside the capture (src/frontends/confine.ts). */
  confine?: boolean;
  /** --build-only --arch sm_XX: build for another GPU architecture than the captured one (build.sh alone; RebuilderOptions.targetArch), its figures that architecture's. */
  targetArch?: string;
}

/** What `kerncap validate` was asked (its options, checked by the verb). */
export interface ValidateRequest extends ValidateOptions {
  /** --trust or --trust=DIGEST (src/format/trust.ts). */
  trust: boolean | string;
  /** --watch: rebuild and replay at each save under DIR/src/. */
  watch: boolean;
  /** --build-only: rebuild, no replay (no GPU): once, or at each save with watch. */
  buildOnly?: boolean;
  /** Where a retried command's stdout goes (the data channel: src/cli/args.ts dataStdio). */
  stdout: number | "inherit";
}

/** validate --build-only's result: the rebuild alone (no replay). */
export interface BuildOnlyResult {
  /** The capture folder (absolute), as validate's and replay's documents give it. */
  dir: string;
  /** "built": what eval calls a candidate built and not judged (validate's own verdicts are match, mismatch, …). */
  verdict: "built";
  kernel: string;
  /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
  symbol: string;
  /** The kernel's name demangled (the manifest's). */
  demangled: string;
  /** nvcc: a CUDA capture's, the nvcc its build.sh runs (src/frontends/build.ts buildShNvcc). */
  rebuild: Rebuilt & ModuleResources & ConfinedRebuild & { nvcc?: string; targetArch?: string };
  wallSeconds: number;
}

/** What validate's caller does with its results: print one (exit status back), or each watch event. */
export interface ValidateOutput {
  report(r: ValidateResult): number;
  /** --build-only's one result (exit status back). */
  built(r: BuildOnlyResult): number;
  emit(e: WatchEvent): void;
}

/**
 * validate's gates, in the order they are said (each before the rebuild and the GPU).
 * @throws KerncapError E_USAGE (a --multiset region the capture lacks, --confine with --watch),
 *   E_UNTRUSTED (a confined build that runs the capture's source without trust; a received
 *   capture without --trust), E_RENDERED (confined: a build kerncap did not write), E_READONLY
 */
export function validateGates(c: OpenedCapture, r: ValidateRequest): void {
  const { dir, manifest: m } = c;
  checkMultiset(dir, m, r.run.multiset); // a region the capture lacks: a usage error before the rebuild and the GPU
  if (r.confine && r.watch)
    throw new KerncapError("E_USAGE", "--confine and --watch do not go together", {
      hint: "--confine is for kerncap mcp's one-shot validate; leave it out with --watch.",
    });
  refuseUntrustedSource(m, r, () => ({
    message: `${dir} is a ${m.kernel.frontend} capture: its build imports the edited source under src/, which runs as code with your rights, so a confined validate (kerncap mcp) runs it only with --trust`,
    hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton edits run, or validate on the command line.",
  }));
  // confined (kerncap mcp): only the build kerncap wrote, or one the user trusted on the command line, before anything runs
  if (r.confine) requireRenderedBuild(dir, m);
  // a received capture's build.sh: shown and refused without --trust (confined, kerncap mcp: in the error itself, which is what its agent reads)
  assertRebuildWritable(dir); // a folder this user may not write: said before the trust question
  // the command to paste keeps --build-only (nu12 #19: pasted without it on a machine without a GPU, it built, then E_NO_GPU)
  requireTrustedBuild(dir, m, r.trust, { inMessage: r.confine, ...(r.buildOnly ? { command: `kerncap validate ${shellPath(dir)} --build-only` } : {}) });
  // --trust on the command line of a build.sh kerncap did not write: remembered, so that kerncap mcp runs it too
  // (a received capture's was recorded above, with the digest the user approved, not read again)
  if (!r.confine && r.trust && !runsTrustedCopy(dir)) trustChangedBuild(dir, m);
}

/**
 * `kerncap validate DIR`: the gates, then one rebuild and replay (report's exit status: 0 match,
 * 1 mismatch), or the watch (its exit status: 130/143 at a signal); a captured VA range taken by
 * this process's own mappings: the whole command once more without ASLR (src/replay/aslr.ts).
 * @throws what validateGates, validateOnce and the watch throw; E_CHECKSUM (--build-only: a capture file cut or altered, as the replay would find it)
 */
export async function validate(c: OpenedCapture, r: ValidateRequest, out: ValidateOutput): Promise<number> {
  validateGates(c, r);
  // no replay opens the capture's files then: checked here, as eval's and check's build-only runs do (nu #1: a cut
  // module built, exit 0, its captured registers silently missing)
  if (r.buildOnly) verifyFiles(c.dir, (r.verify ?? true) ? c.manifest : { ...c.manifest, files: [] });
  if (r.watch) {
    checkWatchable(c.dir, c.manifest); // AMD, a faulting launch, no reproducer: refused before any GPU work
    const watchOptions = { run: r.run, verify: r.verify ?? true, force: r.force, quiet: r.quiet, emit: out.emit, fastBuild: !r.fullBuild };
    if (r.buildOnly) return watchReproducer(c, { ...watchOptions, buildOnly: true }); // nothing is mapped: no ASLR retry
    return withAslrRetry(() => watchReproducer(c, watchOptions).catch(watchNeedsGpu), r.stdout);
  }
  if (r.buildOnly) return out.built(await buildOnce(c, r));
  // confined: build.sh alone, with the compiler's dependency list (the pruned build's steps write none)
  return withAslrRetry(async () => out.report(await validateOnce(c, r)), r.stdout);
}

/**
 * The watch's E_NO_GPU (the replay session opens before the first build is reported) with a hint
 * for --watch: it replays at each save, so it needs a GPU; plain validate still rebuilds once.
 * @throws always: `e`, E_NO_GPU with that hint
 */
function watchNeedsGpu(e: unknown): never {
  if (isKerncapError(e) && e.code === "E_NO_GPU")
    throw new KerncapError("E_NO_GPU", e.message, {
      hint: "--watch needs a GPU (it replays at each save); `kerncap validate DIR --watch --build-only` rebuilds at each save without one and says whether the kernel compiles, with its registers.",
      cause: e,
    });
  throw e;
}

/**
 * Rebuild once, no replay (validate --build-only; no GPU needed): the module, the build's time and
 * builder, the kernel's registers and stack frame beside the captured module's.
 * @throws KerncapError E_FRONTEND (a frontend without validate: HIP), the rebuild's (E_BUILD,
 *   E_RDC, E_PARAM_LAYOUT …)
 */
export async function buildOnce(c: OpenedCapture, o: ValidateOptions): Promise<BuildOnlyResult> {
  const m = c.manifest;
  refuseWithoutValidate(c);
  const t0 = performance.now();
  const archDir = o.targetArch && /^[a-z0-9_]+$/.test(o.targetArch) ? `build/${o.targetArch}` : undefined;
  const hadArchDir = archDir !== undefined && folderInCapture(c.dir, archDir) !== undefined;
  const b = await startRebuild(c.dir, m, {
    quiet: o.quiet,
    force: o.force,
    fullBuild: o.fullBuild,
    ...(o.confine ? { confine: m, confinedBy: "validate --confine" } : {}),
    ...(o.targetArch ? { targetArch: o.targetArch } : {}),
  }).built.catch((e: unknown) => {
    // an --arch the compiler does not know is the command line's fault, not the source's (a new user's finding: E_BUILD, "fix the compile error")
    if (o.targetArch && isKerncapError(e) && e.code === "E_BUILD" && /Unsupported gpu architecture/.test(e.message)) {
      // a usage error leaves nothing behind: the folder this build made for the refused architecture goes (a new user's finding)
      const made = archDir && !hadArchDir ? folderInCapture(c.dir, archDir) : undefined;
      if (made) rmSync(made, { recursive: true, force: true });
      throw new KerncapError("E_USAGE", `--arch ${o.targetArch}: the build's nvcc does not compile for it (nvcc fatal: Unsupported gpu architecture)`, {
        hint: "`nvcc --list-gpu-arch` lists the architectures this nvcc compiles for (compute_NN: give --arch sm_NN); NVCC=/path/to/nvcc picks another toolkit.",
        cause: e,
      });
    }
    throw e;
  });
  // another architecture's module: its figures read for that architecture (the captured module's beside it, as captured)
  const other = o.targetArch ? { ...moduleFigures(b.module, { ...m, device: { ...m.device, arch: o.targetArch } }), targetArch: o.targetArch } : {};
  return {
    dir: resolve(c.dir), // absolute, as every document gives the folder (a new user's finding: "./cap" as typed)
    verdict: "built",
    kernel: m.kernel.name,
    symbol: m.kernel.name,
    demangled: m.kernel.demangled || m.kernel.name,
    rebuild: { ...rebuildFacts(c, o, b), ...other },
    wallSeconds: (performance.now() - t0) / 1000,
  };
}

/**
 * A rebuild as validate reports it, in every document that says one (validate's and
 * --build-only's `rebuild`, E_NO_GPU's `error.details.rebuild`: nu10 #10, one had no nvcc): the
 * build (module, seconds, builder, steps), the kernel's figures beside the captured module's, a
 * confined build's sandbox, and the nvcc the build ran (a CUDA build.sh: NVCC or PATH's), said
 * with the toolkit the module names: comparing toolkits needs both.
 */
function rebuildFacts(c: OpenedCapture, o: ValidateOptions, b: Rebuilt): BuildOnlyResult["rebuild"] {
  const m = c.manifest;
  const compiler = frontendOf(m).buildCompiler?.(c.dir);
  return { ...b, ...moduleResources(c.dir, m, b.module), ...confinedBy(m, o), ...(compiler ? { nvcc: compiler } : {}) };
}

/** --confine: the sandbox the build ran in (`confinement`); nothing without. */
function confinedBy(m: OpenedCapture["manifest"], o: ValidateOptions): ConfinedRebuild {
  return o.confine ? { confinement: confinementFor(m.kernel.frontend) } : {};
}

/** @throws KerncapError E_FRONTEND for a capture whose frontend has no validate (HIP). */
function refuseWithoutValidate(c: OpenedCapture): void {
  const m = c.manifest;
  if (!frontendOf(m).validates) {
    throw new KerncapError(
      "E_FRONTEND",
      `${c.dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap validate supports CUDA and Triton captures only so far`,
      {
        hint: "Rebuild a HIP reproducer with its build.sh and replay the capture with `kerncap replay` (the HSA backend).",
      },
    );
  }
}

/**
 * What validate replays with: the captured module (the baseline: one checked run; the session is
 * opened with its verify) and the rebuilt kernel (the candidate: its checked runs, tolerances,
 * --flush-l2), timed interleaved in the candidate's timing (src/replay/session.ts runCompared);
 * --flush-l2 is given to both, so that both are timed from the same L2 state.
 * @param module the rebuilt module's path, or the promise of the build that writes it
 */
export function validateRuns(
  m: OpenedCapture["manifest"],
  o: ValidateOptions,
  module: string | Promise<string>,
): { baseline: ReplayOptions; candidate: RunOptions } {
  const regionTypes = regionTypesOf(m);
  return {
    baseline: { iters: o.run.iters, verify: o.verify ?? true, runs: 1, regionTypes, ...(o.run.flushL2 ? { flushL2: true } : {}) },
    candidate: { ...o.run, regionTypes, ...rebuiltRun(frontendOf(m), m, module) },
  };
}

/**
 * Rebuild and replay once (no gates: validate's, and tests').
 * @throws KerncapError E_FRONTEND (a frontend without validate: HIP), the rebuild's (E_BUILD,
 *   E_RDC, E_PARAM_LAYOUT …: reported before a replay error, which may come only from the lack of
 *   a module), the replay's; E_NO_GPU says that the rebuild succeeded (the kernel compiles) when it did
 */
export async function validateOnce(c: OpenedCapture, o: ValidateOptions): Promise<ValidateResult> {
  const m = c.manifest;
  refuseWithoutValidate(c);
  const t0 = performance.now();
  mark("validate: the rebuild and replay start");
  // damaged judging settings (E_CHECKSUM) said before the build, not after it (or never, without a GPU)
  judgingInEffect(c.dir, m, true);
  const rebuild = startRebuild(
    c.dir,
    m,
    {
      quiet: o.quiet,
      force: o.force,
      fullBuild: o.fullBuild,
      ...(o.confine ? { confine: m, confinedBy: "validate --confine" } : {}),
    },
    true,
  ); // the capture's build lock held until the replay loaded the module (replayBeside releases it)
  let r: ReplayResult;
  let compare: TimingComparison | null;
  try {
    // the rebuilt kernel judged, and timed interleaved against the captured module (checked while the build runs)
    const runs = validateRuns(m, o, rebuild.module);
    ({ candidate: r, compare } = await replayBeside(rebuild, () => replayCompared(c, runs.baseline, runs.candidate)));
  } catch (e) {
    // no GPU here: the edit still compiled, which is worth saying before the replay's error (the --json document says it too)
    if (isKerncapError(e) && e.code === "E_NO_GPU") {
      const b = await rebuild.built;
      const facts = rebuildFacts(c, o, b);
      const said = describeResources(facts);
      // the reproducer builds the kernel and what it uses (the slice or the pruned TU): host code after it is not compiled, so "the kernel", not "the file"
      log.success(`rebuilt ${b.module} in ${b.seconds.toFixed(2)} s: the kernel compiles${said ? `: ${said}` : ""}`);
      throw new KerncapError("E_NO_GPU", `the rebuild succeeded (${b.module}, ${b.seconds.toFixed(2)} s), but the replay needs a GPU: ${e.message}`, {
        // the same facts for --json and MCP readers (kerncap.error/1 error.details)
        details: { rebuild: facts },
        hint: `The kernel compiles. ${NO_GPU_HINT}`,
      });
    }
    throw e;
  }
  const b = await rebuild.built;
  mark("validate: the replay ended");
  return {
    ...r,
    compare,
    rebuild: rebuildFacts(c, o, b),
    replaySeconds: (performance.now() - Math.max(rebuild.builtAt(), t0)) / 1000,
    wallSeconds: (performance.now() - t0) / 1000,
  };
}
