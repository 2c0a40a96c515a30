/**
 * The device-only rebuild `kerncap validate --watch` uses for a CUDA reproducer after its first
 * build (issue 14): the compile build.sh would run, taken apart and given less to parse.
 *
 * `EXTRA_FLAGS=--dryrun build.sh` makes nvcc print the commands it would run (nvcc --dryrun: a
 * shell script of `#$ ` lines: environment settings, then gcc -E with the device-side defines,
 * cicc, ptxas for `-cubin -arch=sm_XX`; the plan: ./fast-plan.ts). A fast build runs those commands itself, with the
 * preprocessed TU (the file cicc reads) pruned to the declarations the kernel's code needs
 * (src/frontends/cuda/prune/) in between. The plan is made again at every build (a few tens of ms), so
 * whatever build.sh decides at that moment (the slice or the whole TU, EXTRA_FLAGS, NVCC) is what
 * is compiled. A compile that is not exactly those three steps (relocatable device code and its
 * device link, several architectures, -G …) has no fast build: build.sh runs as usual.
 *
 * The watch trusts the pruned build only after its first one gave the kernel the same machine
 * code (the bytes of its .text section) as build.sh's own build; a pruned build that fails is
 * followed by build.sh's (which reports a real compile error as usual).
 */
import { lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { writeFileAtomic } from "../../util/write-file.ts";
import { dirname, join, resolve } from "node:path";
import { parseElf } from "../../codeobj/elf.ts";
import { buildChildEnv, reproducerBuildEnv } from "../../env.ts";
import { isPlainPath } from "../../util/shell-quote.ts";
import { BuildSuperseded, buildTimeout, FastBuildUnavailable, runBuildCommand } from "../build.ts";
import { DevicePruner, type PruneState } from "./prune/cache.ts";
import { loadPruneState, PRUNE_STATE_FILE, savePruneState } from "./prune/persist.ts";
import type { PruneResult } from "./prune/policy.ts";
import type { ConfinedSteps, FastBuildOptions, FastBuilt as FastBuiltBase } from "../frontend.ts";
import { assemble, parseBase, planIncremental, stripMacroLines, verifyAssembled, type ParsedBase, type PpBase } from "./incremental-pp.ts";
import { pragmaOnceKnown, rememberPragmaOnce } from "./pragma-once.ts";
import { stateSeal, userResultsKey } from "../../format/state-seal.ts";
import { folderSpellings, planFor, planHash, SCRATCH, type FastPlan } from "./fast-plan.ts";
import { log } from "../../log.ts";
import { isKerncapError } from "../../errors.ts";

/** The plan of a fast build: ./fast-plan.ts (imported from here by the tests). */
export { parseDryrun, planHash, type FastPlan } from "./fast-plan.ts";

export interface FastBuilt extends FastBuiltBase {
  module: string;
  /** sha256 of the plan's commands (planHash): what a check of the pruned build against build.sh's holds for. */
  plan: string;
  /** Wall time of the whole fast build (s), and of its steps (ms). */
  seconds: number;
  steps: BuildSteps;
  prune: PruneResult;
}

/**
 * The steps of a fast build (ms): build.sh --dryrun (0 when the plan was reused); the
 * preprocessing until the TU that was compiled was there (incremental: the synthetic TU's, else
 * the whole TU's gcc -E); the pruning; cicc and ptxas (after the preprocessing that was
 * compiled); the whole TU's gcc -E, which always runs (beside an incremental one, to verify it).
 */
export type BuildSteps = {
  planMs: number;
  preprocessMs: number;
  pruneMs: number;
  compileMs: number;
  /** The wait before the compile for the burst of file events to be quiet (FastBuildOptions.beforeCompile: the watch's), after the preprocessing and pruning. */
  quietWaitMs?: number;
  incremental?: boolean;
  fullPreprocessMs?: number;
};

/**
 * What a series of fast builds of one reproducer keeps between builds: the pruner's analysis
 * (src/frontends/cuda/prune/ DevicePruner) and the last whole-TU preprocessing with the sources it was
 * made from (the base of the next incremental one: src/frontends/cuda/incremental-pp.ts).
 */
export class FastBuildState {
  pruner = new DevicePruner();
  base: (PpBase & { parsed?: ParsedBase }) | undefined;
  /** Incremental preprocessings in a row that did not give the whole TU's output (3: not tried again in this series). */
  misses = 0;
  /** Why the last build did not preprocess incrementally (for the debug log and the tests), or null when it did. */
  lastMiss: string | null = null;
  /** ms of each step of the last incremental preprocessing, in order (load: FastBuildState.load's read of the base; for the debug log and scripts/bench-incremental.ts). */
  trace: Record<string, number> = {};
  /** Whether the work folder's full.cpp1.ii holds base.text: false from the start of a whole-TU gcc -E until its output is read (a build stopped meanwhile, validate's race lost, left another text there). */
  baseOnDisk = true;
  /** The pruner state the work folder's prune-state.bin holds (loaded or saved): saved again only when the pruner has another. */
  private prunerOnDisk: PruneState | undefined;
  /** The work folder whose prune-state.bin this series reads and writes (validate's; none for a watch, which keeps its pruner in memory). */
  private work: string | undefined;
  private prunerPending = false;

  /** Give the pruner the analysis the work folder kept (once; ./prune/persist.ts): what it reads before its first prune. */
  restorePruner(): void {
    if (!this.prunerPending || !this.work) return;
    this.prunerPending = false;
    const ps = loadPruneState(join(this.work, PRUNE_STATE_FILE));
    if ("reason" in ps) log.debug(`the pruner starts cold: ${join(this.work, PRUNE_STATE_FILE)}: ${ps.reason}`);
    else this.pruner.state = this.prunerOnDisk = ps;
  }

  /**
   * A watch's: parse the new base now, while cicc runs as a child (the next save's incremental
   * preprocessing starts from it: 15-40 ms less between a save and its compile). validate's next
   * process parses the base it reads; this one's thread prepares the replay meanwhile.
   */
  parseAhead(): void {
    if (this.work || !this.base || this.base.parsed) return;
    try {
      this.base.parsed = parseBase(this.base.text);
    } catch {
      // not a -dD output gcc's markers explain: the next speculation says so (lastMiss)
    }
  }

  /** Prune with the analysis kept so far (restorePruner first). */
  prune(text: string): PruneResult {
    this.restorePruner();
    return this.pruner.prune(text);
  }

  /** Write the pruner's analysis into the work folder when it changed: called while cicc runs (the JS thread waits for it then), and by save. */
  keepPruner(): void {
    const ps = this.pruner.state;
    if (!this.work || !ps || ps === this.prunerOnDisk) return;
    try {
      savePruneState(join(this.work, PRUNE_STATE_FILE), ps, this.prunerOnDisk);
      this.prunerOnDisk = ps;
    } catch (e) {
      log.debug(`the pruner's analysis is not kept: ${e instanceof Error ? e.message : String(e)}`); // an optimization: the next validate prunes cold
    }
  }

  /** A new series that shares `other`'s pruner (its analysis of the declarations: kerncap eval's candidates of one TU), or a fresh one. */
  static sharing(other?: FastBuildState): FastBuildState {
    const st = new FastBuildState();
    if (other) st.pruner = other.pruner;
    return st;
  }

  /**
   * The state a work folder keeps for the next process (validate: one per edit): the base of
   * the incremental preprocessing (the whole TU's -dD output, `full.cpp1.ii`, and the sources it
   * was made from, `base-sources.json`, and which of its headers have `#pragma once`,
   * `pragma-once.json`), and the pruner's analysis of the last text it pruned
   * (`prune-state.bin`, ./prune/persist.ts: ignored unless whole, this user's, this kerncap's).
   */
  static load(work: string): FastBuildState {
    const t0 = performance.now();
    const st = new FastBuildState();
    st.work = work;
    st.prunerPending = true; // read when first needed: while the incremental preprocessing's gcc -E runs
    try {
      // taken back only as sealed for this folder by this user's kerncap (src/format/state-seal.ts): it is compiled in place of the sources
      const user = userResultsKey();
      // regular files only (a FIFO planted in a handed-over build/ would hold the read): checked before any is opened
      if (![...BASE_FILES, BASE_SEAL].every((f) => lstatSync(join(work, f), { throwIfNoEntry: false })?.isFile())) throw new Error("not whole");
      const parts = BASE_FILES.map((f) => readFileSync(join(work, f)));
      const seal = JSON.parse(readFileSync(join(work, BASE_SEAL), "utf8"))?.auth;
      if (!user || typeof seal !== "string" || seal !== stateSeal(BASE_SCHEMA, work, parts, user)) throw new Error("not sealed");
      const [text, sources, once] = parts.map((b) => b.toString("latin1"));
      st.base = { text: text!, sources: new Map(Object.entries(JSON.parse(sources!) as Record<string, string>)) };
      rememberPragmaOnce(JSON.parse(once!));
    } catch {
      // no base yet (or a partial one): the next build preprocesses the whole TU; no answers kept: the headers are read
    }
    st.trace.load = performance.now() - t0;
    return st;
  }

  save(work: string): void {
    const f = join(work, BASE_SOURCES);
    if (this.base) {
      // a whole-TU gcc -E stopped midway wrote part of another text there: the base's own text back, so that text and sources agree
      const text = Buffer.from(this.base.text, "latin1");
      const sources = Buffer.from(JSON.stringify(Object.fromEntries(this.base.sources)), "latin1");
      const once = Buffer.from(JSON.stringify(pragmaOnceKnown()), "latin1");
      rmSync(join(work, BASE_SEAL), { force: true }); // unsealed while its files are written
      if (!this.baseOnDisk) writeFileAtomic(join(work, BASE_FILES[0]), text, SCRATCH);
      writeFileAtomic(f, sources, SCRATCH);
      writeFileAtomic(join(work, ONCE_FILE), once, SCRATCH);
      const user = userResultsKey();
      if (user) writeFileAtomic(join(work, BASE_SEAL), JSON.stringify({ auth: stateSeal(BASE_SCHEMA, work, [text, sources, once], user) }), SCRATCH);
      this.baseOnDisk = true;
    } else rmSync(f, { force: true });
    this.work ??= work;
    this.keepPruner();
  }
}

/** The sources the work folder's full.cpp1.ii was preprocessed from (FastBuildState.load/save). */
const BASE_SOURCES = "base-sources.json";
/** Which headers of the TU have `#pragma once` (by path, size, mtime: ./incremental-pp.ts pragmaOnceKnown), for the next process's incremental preprocessing. */
const ONCE_FILE = "pragma-once.json";
/** The base's files, in the order their seal hashes them, and the seal (src/format/state-seal.ts). */
const BASE_FILES = ["full.cpp1.ii", BASE_SOURCES, ONCE_FILE] as const;
const BASE_SEAL = "base-seal.json";
const BASE_SCHEMA = "kerncap.fast-base/1";

/**
 * The largest file a step may write (KiB; ulimit -f): 1 GiB, where a real TU's preprocessed text is a
 * few MB (ggml's mmq: 4.4 MB). A header that includes itself twice per level made gcc -E write 900 MB
 * in a minute, unbounded (adversary 29): past it the step fails (SIGXFSZ) and build.sh's outcome stands.
 */
const STEP_FILE_KIB = 1 << 20;

/**
 * One step in its own process group (a stop signal: E_INTERRUPTED, not a reason to run build.sh),
 * under STEP_FILE_KIB and KERNCAP_BUILD_TIMEOUT's wall-clock limit where it is set (build.sh's own).
 */
const sh = (script: string, cwd: string, env: Record<string, string | undefined>, signal?: AbortSignal, confined?: ConfinedSteps) => {
  if (confined) return confined.run(["bash", "-c", script], cwd, env, signal); // the confined build's own limits and sandbox
  const limit = buildTimeout(false); // kerncap's own environment, where the user sets it
  const bounded = `ulimit -f ${STEP_FILE_KIB}\n${script}`;
  return runBuildCommand(limit ? ["timeout", "-k", "5", String(limit.seconds), "bash", "-c", bounded] : ["bash", "-c", bounded], cwd, env, signal);
};

/**
 * Why sources (path → text) are not built from the pruned TU, or undefined: one declares a friend.
 * The pruned TU drops host-only bodies, and one that instantiates a template defining a friend can
 * change what a constant expression in the kernel evaluates to (stateful metaprogramming), so
 * such a TU is built by build.sh, as eval's candidates are (src/eval/pruned.ts); a check made on
 * one text of it would not hold for the next (adversary 57: an agent's second edit, a host body,
 * changed the kernel while the pruned build went on matching the capture).
 */
export function friendIn(sources: ReadonlyMap<string, string>): string | undefined {
  for (const [path, text] of sources)
    if (/\bfriend\b/.test(text)) return `${path} declares a friend (a host body the pruned TU leaves out could change the kernel)`;
  return undefined;
}

/** The texts of the reproducer's sources under `src` (absolute path → text; dot entries and files over 8 MiB left out). */
function readSources(srcArg: string): Map<string, string> {
  const src = resolve(srcArg);
  const out = new Map<string, string>();
  let names: string[];
  try {
    names = readdirSync(src, { recursive: true, encoding: "utf8" });
  } catch {
    return out;
  }
  for (const rel of names) {
    if (rel.split("/").some((part) => part.startsWith("."))) continue;
    const p = join(src, rel);
    try {
      const st = statSync(p);
      if (st.isFile() && st.size <= 8 << 20) out.set(p, readFileSync(p, "latin1"));
    } catch {
      // gone meanwhile: the next save says so
    }
  }
  return out;
}

/** nvcc's gcc -E with -dD (every #define and #undef in place: the macro table the next incremental preprocessing starts from). */
const withMacros = (preprocess: string) => preprocess.replace(/ -E /, " -E -dD ");

/**
 * Plan (build.sh under --dryrun) and run a fast build of the reproducer in `dir`.
 * @param work a folder of the caller's (its files are overwritten at each build)
 * @param pruner keeps what did not change between builds (src/frontends/cuda/prune/ DevicePruner)
 * @returns the module built and the time of each step
 * @throws FastBuildUnavailable with the reason (no plan, a step failed: the caller runs build.sh);
 *   BuildSuperseded (`o.signal` aborted: its steps were killed and awaited, `state` keeps the base it had);
 *   KerncapError E_INTERRUPTED (a stop signal during a step)
 */
export async function fastBuild(dirArg: string, work: string, o: FastBuildOptions, state: FastBuildState = new FastBuildState()): Promise<FastBuilt> {
  try {
    return await fastBuildSteps(dirArg, work, o, state);
  } catch (e) {
    // a step the caller's abort killed fails as a failed step would: said as what it is (no build.sh instead)
    if (o.signal?.aborted && !(isKerncapError(e) && e.code === "E_INTERRUPTED")) throw e instanceof BuildSuperseded ? e : new BuildSuperseded();
    throw e;
  }
}

/** fastBuild's steps. */
async function fastBuildSteps(dirArg: string, work: string, o: FastBuildOptions, state: FastBuildState): Promise<FastBuilt> {
  const dir = resolve(dirArg);
  // the plan's steps are nvcc's --dryrun lines, run by bash as written: a folder name with shell syntax would be code there
  for (const p of [dir, work])
    if (!isPlainPath(p)) throw new FastBuildUnavailable(`${JSON.stringify(p)} holds characters a shell reads as syntax; build.sh builds it`);
  mkdirSync(work, { recursive: true });
  const env = buildChildEnv(reproducerBuildEnv(o), [dir, realpathSync(dir)]); // no loader or Python path entry inside the capture, none empty or relative
  const t0 = performance.now();
  const plan = await planFor(dir, work, env, o.signal, o.confined);
  const t1 = performance.now();
  const envLines = `${plan.env.join("\n")}\nexport PATH LD_LIBRARY_PATH`;
  rmSync(plan.cubin, { force: true });
  const sources = readSources(join(dir, "src")); // before gcc reads them: the base of the next build is never newer than its text
  const friend = friendIn(sources);
  if (friend) throw new FastBuildUnavailable(friend);
  if (o.confined) return confinedSteps(dir, plan, envLines, env, o, o.confined, state, t0, t1);
  const preprocess = withMacros(plan.preprocess);
  state.trace.readSources = performance.now() - t1;
  state.baseOnDisk = false; // gcc -E writes plan.fullTU from now on
  const full = sh(`set -e\n${envLines}\n${preprocess}`, dir, env, o.signal);
  full.catch(() => {});
  const spec = await speculate(dir, plan, state, sources, preprocess, envLines, env, o.signal, o.onCompile, o.beforeCompile).catch(async (e) => {
    if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw e;
    if (e instanceof BuildSuperseded) throw (await full.catch(() => {}), e); // the whole TU's gcc -E (killed by the same abort) ended before the next build writes there
    state.lastMiss = `the incremental preprocessing failed: ${e instanceof Error ? e.message : String(e)}`; // a file it could not write …: the whole TU's output is compiled
    return undefined;
  });
  const pp = await full;
  const tFull = performance.now();
  if (pp.code !== 0) {
    spec?.abort.abort();
    await spec?.compile.catch(() => {});
    if (o.signal?.aborted) throw new BuildSuperseded(); // killed, not failed: the base stays (its text and sources agree)
    state.base = undefined;
    throw new FastBuildUnavailable(`the preprocessor failed: ${pp.err.trim().split("\n").slice(-3).join(" / ")}`);
  }
  const fullText = readFileSync(plan.fullTU, "latin1");
  state.base = { text: fullText, sources };
  state.baseOnDisk = true;
  const done = (
    cc: { code: number; err: string },
    steps: Omit<BuildSteps, "planMs" | "fullPreprocessMs" | "compileMs">,
    compiledFrom: number,
    prune: PruneResult,
  ): FastBuilt => {
    if (cc.code !== 0)
      throw new FastBuildUnavailable(
        `the pruned TU does not compile: ${cc.err
          .trim()
          .split("\n")
          .filter((l) => /error/.test(l))
          .slice(0, 3)
          .join(" / ")}`,
      );
    const t4 = performance.now();
    return {
      module: plan.cubin,
      plan: planHash(plan, dir),
      seconds: (t4 - t0) / 1000,
      // the incremental path's own steps too (FastBuildState.trace: parseBaseMs, restorePrunerMs …), for the benchmarks' breakdown
      steps: { planMs: t1 - t0, ...traceSteps(state), ...steps, compileMs: t4 - compiledFrom, fullPreprocessMs: tFull - t1 },
      prune,
    };
  };
  if (spec) {
    const differs = verifyAssembled(spec.assembled, fullText);
    if (!differs) {
      state.misses = 0;
      state.lastMiss = null;
      state.parseAhead();
      return done(await spec.compile, { preprocessMs: spec.ppMs, pruneMs: spec.pruneMs, incremental: true }, spec.compiledFrom, spec.prune);
    }
    spec.abort.abort();
    await spec.compile.catch(() => {});
    state.misses++;
    state.lastMiss = `its output differs from the whole TU's: ${differs}`;
    log.debug(`incremental preprocessing (${spec.from}): ${state.lastMiss}; the whole TU's output is compiled`);
  }
  const pruned = state.prune(stripMacroLines(fullText));
  writeFileAtomic(plan.prunedTU, Buffer.from(pruned.text, "latin1"), { ...SCRATCH, root: dir });
  const tq = performance.now();
  await o.beforeCompile?.();
  if (o.signal?.aborted) throw new BuildSuperseded();
  const t3 = performance.now();
  const cc = sh(`set -e\n${envLines}\n${plan.compile}`, dir, env, o.signal);
  o.onCompile?.();
  state.keepPruner();
  state.parseAhead();
  return done(await cc, { preprocessMs: tFull - t1, pruneMs: tq - tFull, quietWaitMs: t3 - tq, incremental: false }, t3, pruned);
}

/**
 * The largest preprocessed TU a confined fast build prunes (bytes), and the most statements and
 * blocks in it (`;`, `{`, `}`): the pruner runs in kerncap's own process, whose memory the confined
 * build's limits do not bound, and its analysis takes about 0.7 GB per million of them (adversary
 * 37: a 2.3 KB candidate whose macros expand to millions of `;` took 9.9 GB). Real TUs lie far
 * below both (ggml's mmq: 4.4 MB; one with cub's headers: 10.7 MB, 0.16 million); a candidate's TU
 * past either is left to build.sh, which runs as a child under the confined build's limits.
 */
const CONFINED_TU_MAX = 32 << 20;
const CONFINED_TU_STATEMENTS = 1_000_000;

/** The count of `;`, `{` and `}` in `text`, up to `cap` (then cap + 1). */
export function statements(text: string, cap: number): number {
  let n = 0;
  for (let i = 0; i < text.length && n <= cap; i++) {
    const c = text.charCodeAt(i);
    if (c === 59 || c === 123 || c === 125) n++;
  }
  return n;
}

/**
 * `text` (a preprocessed TU) with the folder `dir`'s path, as given and resolved, written as a
 * placeholder of the same length (`/kkk…`): the line markers and `__FILE__` strings of copies of
 * one capture at paths of one length (kerncap eval's DIR/build/eval/<16 hex>) then read alike, so
 * the pruner shared by the candidates reuses its analysis of the text before the first edited
 * line (a cold prune of a TU with cub's headers: 0.4-0.9 s; warm: 50-80 ms). cicc reads no file a
 * line marker names; the kernel's machine code does not depend on them (the check compares it).
 */
function withPlaceholderPaths(text: string, dir: string): string {
  return folderSpellings(dir).reduce((t, p) => (p.length > 1 ? t.split(p).join(`/${"k".repeat(p.length - 1)}`) : t), text);
}

/**
 * A confined fast build's steps (FastBuildOptions.confined: kerncap eval's candidates): the whole
 * TU's gcc -E with a dependency list (`-MD -MF`), judged before its text is read; pruned; cicc and
 * ptxas. Every step under `confined.run`; no incremental preprocessing (each candidate is its own
 * copy, built once).
 * @throws FastBuildUnavailable (a step failed, the TU read a file outside or is past CONFINED_TU_MAX), BuildSuperseded, E_INTERRUPTED
 */
async function confinedSteps(
  dir: string,
  plan: FastPlan,
  envLines: string,
  env: Record<string, string | undefined>,
  o: FastBuildOptions,
  confined: ConfinedSteps,
  state: FastBuildState,
  t0: number,
  t1: number,
): Promise<FastBuilt> {
  const deps = join(dirname(plan.fullTU), "pp-deps.d");
  rmSync(deps, { force: true });
  const quoted = `"${deps.replace(/(["\\$`])/g, "\\$1")}"`;
  const pp = await sh(`set -e\n${envLines}\n${plan.preprocess} -MD -MF ${quoted}`, dir, env, o.signal, confined);
  if (o.signal?.aborted) throw new BuildSuperseded();
  if (pp.code !== 0) throw new FastBuildUnavailable(`the preprocessor failed (exit ${pp.code})`); // its messages are build.sh's to give, confined
  let listed: string;
  try {
    listed = readFileSync(deps, "utf8");
  } catch {
    throw new FastBuildUnavailable("the preprocessor wrote no dependency list");
  }
  if (confined.outside(listed).length) throw new FastBuildUnavailable("the TU read a file outside what a confined build may read");
  if (statSync(plan.fullTU).size > CONFINED_TU_MAX) throw new FastBuildUnavailable(`the preprocessed TU is past ${CONFINED_TU_MAX >> 20} MiB`);
  const text = readFileSync(plan.fullTU, "latin1");
  if (statements(text, CONFINED_TU_STATEMENTS) > CONFINED_TU_STATEMENTS)
    throw new FastBuildUnavailable(`the preprocessed TU holds more than ${CONFINED_TU_STATEMENTS} statements and blocks`);
  const tFull = performance.now();
  const pruned = state.prune(withPlaceholderPaths(text, dir));
  writeFileAtomic(plan.prunedTU, Buffer.from(pruned.text, "latin1"), { ...SCRATCH, root: dir });
  const t3 = performance.now();
  const cc = await sh(`set -e\n${envLines}\n${plan.compile}`, dir, env, o.signal, confined);
  if (o.signal?.aborted) throw new BuildSuperseded();
  if (cc.code !== 0) throw new FastBuildUnavailable(`the pruned TU does not compile (exit ${cc.code})`);
  const t4 = performance.now();
  return {
    module: plan.cubin,
    plan: planHash(plan, dir),
    seconds: (t4 - t0) / 1000,
    steps: { planMs: t1 - t0, preprocessMs: tFull - t1, pruneMs: t3 - tFull, compileMs: t4 - t3, incremental: false },
    prune: pruned,
  };
}

/** FastBuildState.trace as build steps (`<step>Ms`): those of this build's incremental preprocessing, none when it had none. */
const traceSteps = (state: FastBuildState): Record<string, number> =>
  state.lastMiss === null ? Object.fromEntries(Object.entries(state.trace).map(([k, v]) => [`${k}Ms`, v])) : {};

interface Speculation {
  assembled: { text: string; prefix: string };
  prune: PruneResult;
  compile: Promise<{ code: number; err: string }>;
  abort: AbortController;
  /** ms from the plan to the synthetic TU's output, of the pruning; when the compile started (performance.now()). */
  ppMs: number;
  pruneMs: number;
  compiledFrom: number;
  /** The file and line it started from (for the log). */
  from: string;
}

/**
 * The incremental preprocessing of one changed source (src/frontends/cuda/incremental-pp.ts), pruned and
 * compiled at once, while the whole TU's gcc -E runs; undefined when there is no base, more or
 * fewer than one source changed, or the change cannot be cut (state.lastMiss says why).
 */
async function speculate(
  dir: string,
  plan: FastPlan,
  state: FastBuildState,
  sources: Map<string, string>,
  preprocess: string,
  envLines: string,
  env: Record<string, string | undefined>,
  signal?: AbortSignal,
  onCompile?: () => void,
  beforeCompile?: () => Promise<void>,
): Promise<Speculation | undefined> {
  const t0 = performance.now();
  let tm = t0;
  const mark = (step: string) => {
    const now = performance.now();
    state.trace[step] = now - tm;
    tm = now;
  };
  const base = state.base;
  const miss = (why: string) => {
    state.lastMiss = why;
    return undefined;
  };
  if (!base) return miss("no previous preprocessing");
  if (state.misses >= 3) return miss("off after 3 misses in a row");
  if (/ -P /.test(preprocess)) return miss("gcc -E -P writes no line markers");
  if ([...base.sources.keys()].some((p) => !sources.has(p))) return miss("a source was removed");
  let ip: ReturnType<typeof planIncremental>;
  try {
    base.parsed ??= parseBase(base.text);
    mark("parseBase");
    // the changed sources that the TU read (a TU copy that kerncap's slice was remade from is not one)
    const read = new Set(base.parsed.entries.map((e) => resolve(dir, e.file))); // build.sh names its sources src/… from the capture's folder
    const changed = [...sources].filter(([p, t]) => base.sources.get(p) !== t && read.has(p)).map(([p]) => p);
    if (changed.length !== 1) return miss(`${changed.length} sources of the TU changed`);
    const file = changed[0]!;
    mark("changed");
    ip = planIncremental(base.parsed, file, base.sources.get(file)!, sources.get(file)!, (p) => sources.get(p) ?? readFileSync(p, "latin1"), dir);
    mark("planIncremental");
  } catch (e) {
    return miss(`the previous output cannot be read: ${e instanceof Error ? e.message : String(e)}`);
  }
  if ("reason" in ip) return miss(ip.reason);
  const synthOut = join(dirname(plan.fullTU), "synth.cpp1.ii");
  const quoted = (p: string) => `"${p.replace(/(["\\$`])/g, "\\$1")}"`;
  const src = plan.source;
  let cmd = preprocess.replace(/\s-include\s+("[^"]*"|\S+)/g, "");
  cmd = cmd.includes(quoted(src)) ? cmd.split(quoted(src)).join(quoted(ip.primary)) : cmd.split(` ${src} `).join(` ${quoted(ip.primary)} `);
  cmd = cmd.split(quoted(plan.fullTU)).join(quoted(synthOut));
  if (!cmd.includes(quoted(ip.primary)) || !cmd.includes(quoted(synthOut)))
    return miss("the preprocessor's command does not name its source and output as expected");
  let r: { code: number; err: string };
  try {
    for (const [p, text] of ip.files) writeFileAtomic(resolve(dir, p), Buffer.from(text, "latin1"), { ...SCRATCH, root: dir });
    const synth = sh(`set -e\n${envLines}\n${cmd}`, dir, env, signal);
    mark("startGccE");
    state.restorePruner();
    mark("restorePruner");
    r = await synth;
    mark("awaitGccE");
  } finally {
    for (const p of ip.files.keys()) rmSync(resolve(dir, p), { force: true });
  }
  if (signal?.aborted) throw new BuildSuperseded();
  if (r.code !== 0) return miss(`the synthetic TU does not preprocess: ${r.err.trim().split("\n").slice(-2).join(" / ")}`);
  const assembled = assemble(base.parsed, ip.cut, readFileSync(synthOut, "latin1"));
  if (!assembled) return miss("no sentinel in the synthetic TU's output");
  mark("assemble");
  const t1 = performance.now();
  const pruned = state.prune(stripMacroLines(assembled.text));
  mark("pruneText");
  writeFileAtomic(plan.prunedTU, Buffer.from(pruned.text, "latin1"), SCRATCH);
  mark("writePruned");
  const t2 = performance.now();
  await beforeCompile?.();
  mark("quietWait");
  if (signal?.aborted) throw new BuildSuperseded();
  const t3 = performance.now();
  const abort = new AbortController();
  signal?.addEventListener("abort", () => abort.abort());
  const compile = sh(`set -e\n${envLines}\n${plan.compile}`, dir, env, abort.signal);
  compile.catch(() => {});
  onCompile?.();
  state.keepPruner();
  return { assembled, prune: pruned, compile, abort, ppMs: t1 - t0, pruneMs: t2 - t1, compiledFrom: t3, from: `${ip.file}:${ip.fromLine}` };
}

/**
 * Whether two cubins give `kernel` the same machine code: the bytes of its `.text.<kernel>`
 * section (relocations aside: a cubin's text refers to other symbols through relocation entries,
 * which are compared by count), its register count, and the sizes of its `.nv.info.<kernel>`
 * attributes, static shared memory and parameter bank.
 * @returns null when they match, else what differs (a sentence)
 */
export function sameKernelCode(a: Uint8Array, b: Uint8Array, kernel: string): string | null {
  const ea = parseElf(a),
    eb = parseElf(b);
  const name = `.text.${kernel}`;
  const sa = ea.section(name),
    sb = eb.section(name);
  if (!sa || !sb) return `no ${name} section in the ${!sa ? "full" : "pruned"} build`;
  const ba = ea.sectionBytes(sa),
    bb = eb.sectionBytes(sb);
  if (ba.length !== bb.length) return `${name} is ${ba.length} bytes in the full build, ${bb.length} in the pruned one`;
  for (let i = 0; i < ba.length; i++) if (ba[i] !== bb[i]) return `${name} differs at byte ${i}`;
  const rel = (e: typeof ea) => e.sections.filter((s) => s.name === `.rel${name}` || s.name === `.rela${name}`).reduce((n, s) => n + s.size, 0);
  if (rel(ea) !== rel(eb)) return `${name}'s relocations differ`;
  // what the launch needs besides the code: registers (the text section's sh_info), the sizes of
  // the kernel's attributes (.nv.info.<kernel>: their bytes hold symbol indices, which a pruned
  // symbol table renumbers), of its static shared memory and of its parameter bank
  // a cubin text section's sh_info: the register count in its top byte, the kernel's symbol index below (which a pruned symbol table changes)
  if (sa.info >>> 24 !== sb.info >>> 24) return `${name}'s register count differs (${sa.info >>> 24} / ${sb.info >>> 24})`;
  for (const side of [`.nv.info.${kernel}`, `.nv.shared.${kernel}`, `.nv.constant0.${kernel}`]) {
    const xa = ea.section(side),
      xb = eb.section(side);
    if (!xa !== !xb || (xa && xb && xa.size !== xb.size)) return `${side} differs in size`;
  }
  return null;
}
