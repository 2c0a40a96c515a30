/**
 * `kerncap tune`'s configs judged by `kerncap eval`'s machinery (src/eval/eval.ts runEval): tune
 * makes the candidates (src/eval/candidates.ts configCandidate for a Triton config, flagsCandidate
 * for a CUDA config's nvcc words), eval builds them in its build pool, judges and times each on a
 * GPU worker against the captured module (src/replay/stats.ts, the one compare), and tune makes
 * its rows from eval's records: one build pool, one worker pool, one compare for both verbs.
 *
 * Each config is timed interleaved with the captured module in its own judgement (`iters`
 * rounds, no adaptive extension: every config timed alike), so a row's speedup and its "vs app"
 * verdict are the comparison of that config with the captured module on the same memory in the
 * same rounds. The captured module's row takes the median of its medians over the judgements, and
 * its verdict from its own check in each (mismatch when one said so).
 */
import { join } from "node:path";
import { isErrorCode } from "../error-codes.ts";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { evalCandidates, evalWorkers, type EvalOptions } from "../eval/eval.ts";
import { BUILD_INPUT } from "../eval/report.ts";
import type { BuildOutcome } from "../eval/build.ts";
import type { Candidate } from "../eval/candidates.ts";
import type { EvalSettings } from "../eval/worker.ts";
import type { EvalRecord } from "../format/eval-record.ts";
import { log } from "../log.ts";
import { median } from "../replay/compare.ts";
import { configCandidate, flagsCandidate } from "../eval/candidates.ts";
import type { TuneBuilt, TuneEvaluate, TuneRow, TuneRunOptions } from "../frontends/tune.ts";

/** One config of a tune and the candidate that is built and judged for it. */
export interface TuneCandidate<C> {
  config: C;
  candidate: Candidate;
}

export interface TuneEvalOptions extends TuneRunOptions {
  /** tune --confine (kerncap mcp): CUDA flags builds confined (src/eval/build.ts BuildSettings.confine); a Triton capture refused without trust (as eval --confine). */
  confine?: boolean;
  /** A Triton config's launch grid expression (--grid, or the formula tune inferred). */
  grid?: string;
  /** Where a candidate is built (default: eval's private copy). */
  buildDir?: (c: Candidate) => string;
  /** Each config's build as it ends (tune's lines). */
  onBuild?: (c: Candidate, b: BuildOutcome) => void;
  /** The CPU tests' fakes: how candidates are built and how GPU workers start, the watchdog's floor (s). */
  fakes?: Partial<Pick<EvalOptions, "open" | "buildWith" | "timeoutS">>;
}

/** What eval found of each config, and of the captured module. */
export interface TuneEvaluation {
  /** By candidate id: its build's outcome (absent: not built, an interrupted tune) and its record on the capture (absent: it never reached a GPU). */
  builds: Map<string, BuildOutcome>;
  records: Map<string, EvalRecord>;
  /** The captured module: its verdict in its own checks, and the median of its medians (µs; null: no config was timed). */
  captured: { verdict: "match" | "mismatch" | null; medianUs: number | null };
  /** Wall time (s): until the last build ended; after it, until the last judgement ended. */
  seconds: { compile: number; replay: number };
  /** --build-only: the configs were built, none judged (a built config's row is built). */
  buildOnly: boolean;
}

/**
 * A confined build (tune --confine: kerncap mcp) that read a file outside the capture ends the
 * tune, as a confined validate's does: the sources are refused, not one config.
 * @throws KerncapError E_CONFINED with the first such build's message
 */
export function refuseConfined(failed: { code: string; reason: string }[]): void {
  const c = failed.find((f) => f.code === "E_CONFINED");
  if (c)
    throw new KerncapError("E_CONFINED", c.reason, {
      hint: "Edit the sources so that they name only files of the capture and the toolchain; kerncap mcp builds nothing else.",
    });
}

/** The lines of a build error worth a table row: the compiler's `error` lines (at most 3), else the last 3. */
export function shortError(message: string): string {
  const lines = message
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const errs = lines.slice(1).filter((l) => /\berror\b/i.test(l));
  return (errs.length ? errs.slice(0, 3) : lines.slice(-3)).join(" / ");
}

/** The most configs an error's message lists one by one (a sweep of hundreds: the rest counted). */
const BUILDS_SAID_MAX = 32;

/**
 * Each config's build outcome for an error's message, `LABEL: built (N registers/thread)`,
 * `LABEL: compile-error (the compiler's first error lines)` or `LABEL: not built`, `; `-separated;
 * past BUILDS_SAID_MAX configs, the rest counted.
 */
export function buildsSaid(list: { candidate: Candidate }[], builds: Map<string, BuildOutcome>): string {
  const said = list.slice(0, BUILDS_SAID_MAX).map(({ candidate: c }) => {
    const b = builds.get(c.id);
    if (!b) return `${c.label}: not built`;
    if ("failed" in b) return `${c.label}: ${b.failed.verdict} (${shortError(b.failed.reason)})`;
    return `${c.label}: built${b.built.registers !== null ? ` (${b.built.registers} registers/thread)` : ""}`;
  });
  const more = list.length - said.length;
  return `${said.join("; ")}${more > 0 ? `; and ${more} more config${more === 1 ? "" : "s"}` : ""}`;
}

/** One config's build in an error's details (kerncap.error/1 `error.details.configs`). */
export interface ConfigBuild {
  config: string;
  build: "built" | "not built" | BuildOutcomeVerdict;
  /** Registers per thread of a built config, where the build says. */
  registers?: number;
  /** The compiler's first error lines (shortError) of a config that did not build. */
  error?: string;
}
type BuildOutcomeVerdict = Extract<BuildOutcome, { failed: unknown }>["failed"]["verdict"];

/** Every config's build outcome, structured (the same facts as buildsSaid, all configs): an error's details for --json and MCP readers. */
export function configBuilds(list: { candidate: Candidate }[], builds: Map<string, BuildOutcome>): { configs: ConfigBuild[] } {
  return {
    configs: list.map(({ candidate: c }) => {
      const b = builds.get(c.id);
      if (!b) return { config: c.label, build: "not built" as const };
      if ("failed" in b) return { config: c.label, build: b.failed.verdict, error: shortError(b.failed.reason) };
      return { config: c.label, build: "built" as const, ...(b.built.registers !== null ? { registers: b.built.registers } : {}) };
    }),
  };
}

/**
 * What every config of a tune is judged and timed with on eval's GPU worker (src/eval/worker.ts
 * EvalSettings): `iters` rounds and no more (every config timed alike), --flush-l2, and the
 * judging options (--atol, --rtol, --dtype, --multiset) as validate judges a rebuild.
 */
export function tuneSettings(o: TuneRunOptions): EvalSettings {
  const tolerance = Object.fromEntries(
    Object.entries({ atol: o.atol, rtol: o.rtol, dtype: o.dtype, dtypes: o.dtypes, multiset: o.multiset }).filter(([, x]) => x !== undefined),
  ) as EvalSettings["tolerance"];
  return { iters: o.iters, verify: true, tolerance, ...(o.flushL2 ? { flushL2: true } : {}), compareBudgetSeconds: 0 };
}

/**
 * Build, judge and time tune's candidates on the capture `dir` through runEval, one GPU worker on
 * this process's GPUs.
 * @throws KerncapError the eval's (E_INTERRUPTED …); E_CONFINED (refuseConfined); E_BUILD when no config built; the workers'
 *   error when no config could be judged on the GPU (E_NO_GPU on a machine without one: every
 *   build's outcome said before)
 */
export async function evaluateTune<C>(dir: string, list: TuneCandidate<C>[], o: TuneEvalOptions): Promise<TuneEvaluation> {
  const t0 = performance.now();
  let lastBuild = t0;
  const builds = new Map<string, BuildOutcome>();
  let done = 0;
  o.onBuilt?.(0, list.length);
  const settings = tuneSettings(o);
  // the trust gate is tune's, asked before its first build (src/ops/tune.ts): none here
  const report = await evalCandidates(
    {
      dirs: [dir],
      candidates: list.map((x) => x.candidate),
      settings,
      build: { force: o.force ?? false, confinedBy: "tune --confine", ...(o.grid ? { grid: o.grid } : {}) },
      resume: false,
      ...(o.buildOnly ? { buildOnly: true } : {}),
      slots: [null],
      ...(o.jobs !== undefined ? { jobs: o.jobs } : {}),
      trust: o.trust ?? false,
      ...(o.confine ? { confine: true } : {}),
      live: false,
      buildLines: false, // each config's build is said by its frontend's tune (its line as the build ends)
      // said in tune's words: its configs, and no --jsonl or --resume (tune has neither: an interrupted tune is run again)
      verb: "tune",
      interrupted: { done: "configs judged", hint: "Nothing was kept: run the same kerncap tune again (or with fewer configs)." },
      open: evalWorkers(settings, log.level >= 4, (l) => escapeForTerminal(l, { oneLine: true })),
      ...o.fakes,
      ...(o.buildDir ? { buildDir: o.buildDir } : {}),
      onBuild: (c, b) => {
        builds.set(c.id, b);
        lastBuild = performance.now();
        o.onBuild?.(c, b);
        o.onBuilt?.(++done, list.length);
      },
    },
    () => {},
  );
  const records = new Map(report.records.filter((r) => r.input !== BUILD_INPUT).map((r) => [r.candidate, r]));
  // no config built: nothing to judge or time beside the captured module
  const failed = [...builds.values()].flatMap((b) => ("failed" in b ? [b.failed] : []));
  refuseConfined(failed);
  if (list.length && failed.length === list.length) {
    // each config's build in the error itself: under --json and MCP no "lines above" reach the reader
    throw new KerncapError("E_BUILD", `none of the ${list.length} configs built: ${buildsSaid(list, builds)}`, {
      details: configBuilds(list, builds),
      hint: "The message lists each config's build outcome with the compiler's first error lines; check that the capture's own build works (kerncap validate DIR, or MCP's validate), then tune again.",
    });
  }
  // no config judged on a GPU, only errors (no GPU, a driver that refuses): the tune has no result; the first error is why
  const judged = [...records.values()];
  if (judged.length && judged.every((r) => r.verdict === "error")) {
    const first = judged[0]!;
    // the builds' outcomes in the error itself: under --json and MCP no "lines above" reach the reader
    throw new KerncapError(
      first.code && isErrorCode(first.code) ? first.code : "E_WORKER",
      `${first.reason ?? "no config could be judged on the GPU"}\nthe configs' builds: ${buildsSaid(list, builds)}`,
      {
        hint: "Run tune on a machine with the capture's GPU (kerncap doctor says what this one lacks); the message lists how each config built.",
        details: configBuilds(list, builds),
      },
    );
  }
  const baselines = judged.flatMap((r) => (r.timing ? [r.timing.baselineMedianUs] : []));
  const verdicts = judged.flatMap((r) => (r.baseline ? [r.baseline] : []));
  const end = performance.now();
  return {
    builds,
    records,
    captured: { verdict: verdicts.includes("mismatch") ? "mismatch" : verdicts.length ? "match" : null, medianUs: baselines.length ? median(baselines) : null },
    seconds: { compile: (lastBuild - t0) / 1000, replay: o.buildOnly ? 0 : (end - lastBuild) / 1000 },
    buildOnly: o.buildOnly ?? false,
  };
}

/**
 * A config's row from eval's outcome: compile-error (its build failed: `error` the compiler's
 * error lines), match (its median µs and speedup against the captured module from the same
 * rounds, and the compare's verdict), mismatch, or launch-error (fault, timeout, a worker's error,
 * or never run); with --build-only, built (nothing judged). `label` is the table's config column.
 */
export function rowOf<C>(config: C, label: string, c: Candidate, e: TuneEvaluation): TuneRow<C> {
  const b = e.builds.get(c.id);
  const base = { config, label, captured: false };
  if (b && "failed" in b) return { ...base, verdict: "compile-error", medianUs: null, speedup: null, error: shortError(b.failed.reason) };
  if (e.buildOnly)
    return b
      ? { ...base, verdict: "built", medianUs: null, speedup: null }
      : { ...base, verdict: "launch-error", medianUs: null, speedup: null, error: "not built" };
  const r = e.records.get(c.id);
  if (!r) return { ...base, verdict: "launch-error", medianUs: null, speedup: null, error: "not run" };
  if (r.verdict === "match" || r.verdict === "mismatch") {
    const t = r.timing;
    return {
      ...base,
      verdict: r.verdict,
      medianUs: t ? t.candidateMedianUs : null,
      speedup: t ? t.speedup : null,
      ...(t ? { vsApp: { verdict: t.verdict, ...(t.decided !== undefined ? { decided: t.decided } : {}), text: t.text } } : {}),
      ...(r.verdict === "mismatch" && r.reason ? { error: r.reason } : {}),
    };
  }
  return { ...base, verdict: "launch-error", medianUs: null, speedup: null, error: `${r.verdict}: ${r.reason ?? r.code ?? ""}` };
}

/** The captured module's row (the baseline: speedup 1), `verdict` launch-error when no config reached the GPU to judge it beside. */
export function capturedRow<C>(config: C, label: string, e: TuneEvaluation): TuneRow<C> {
  // --build-only: the app's module as captured, judged by no one
  if (e.buildOnly) return { config, label, captured: true, verdict: "built", medianUs: null, speedup: null };
  const v = e.captured.verdict;
  if (v === null)
    return {
      config,
      label,
      captured: true,
      verdict: "launch-error",
      medianUs: null,
      speedup: null,
      error: "not run: no config reached the GPU to be judged beside it",
    };
  return { config, label, captured: true, verdict: v, medianUs: e.captured.medianUs, speedup: e.captured.medianUs !== null ? 1 : null };
}

/** A build's outcome as tune reports it. */
function builtOf(b: BuildOutcome): TuneBuilt {
  return "failed" in b ? { error: shortError(b.failed.reason) } : { module: b.built.module, seconds: b.built.seconds, registers: b.built.registers };
}

/**
 * The frontends' sweeps' way into eval's machinery (src/frontends/tune.ts TuneEvaluate, handed
 * to Frontend.tune by src/ops/tune.ts): each item's candidate made (configCandidate,
 * flagsCandidate), built, judged and timed by evaluateTune, its row made by rowOf. `fakes`: the
 * CPU tests' builds and workers.
 * @throws KerncapError as evaluateTune
 */
export function tuneEvaluator(fakes?: TuneEvalOptions["fakes"]): TuneEvaluate {
  return async (dir, items, o) => {
    const list = items.map((x) => ({
      config: x.config,
      candidate: x.spec.kind === "config" ? configCandidate(x.spec.config, x.label) : flagsCandidate(x.label, x.spec.flags),
    }));
    const index = new Map(list.map((x, i) => [x.candidate.id, i]));
    const dirs = new Map(items.flatMap((x, i) => (x.spec.kind === "flags" && x.spec.buildDir ? [[list[i]!.candidate.id, x.spec.buildDir] as const] : [])));
    const { onBuild, ...rest } = o;
    const e = await evaluateTune(dir, list, {
      ...rest,
      // kept under DIR/build/tune for the user; confined (kerncap mcp), each removed once judged (src/eval/copies.ts)
      ...(dirs.size ? { buildDir: (c: Candidate) => dirs.get(c.id) ?? join(dir, "build", "tune", c.id.replace(/[^\w.-]/g, "_")) } : {}),
      ...(onBuild ? { onBuild: (c: Candidate, b: BuildOutcome) => onBuild(index.get(c.id)!, builtOf(b)) } : {}),
      ...(fakes ? { fakes } : {}),
    });
    return {
      rows: items.map((x, i) => rowOf(x.config, x.label, list[i]!.candidate, e)),
      captured: (config, label) => capturedRow(config, label, e),
      built: list.map((x) => {
        const b = e.builds.get(x.candidate.id);
        return b ? builtOf(b) : undefined;
      }),
      seconds: e.seconds,
    };
  };
}
