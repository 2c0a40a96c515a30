/**
 * `kerncap eval DIR… CANDIDATE…` as library code: many candidate versions of one captured kernel,
 * each built in its own private copy of the reproducer and judged, on every input given, against
 * the app's after state and timed against the captured module.
 *
 * - Inputs: capture folders of one kernel (the same mangled name), a capture set (`run -c N`,
 *   src/format/capture-set.ts: every member), or several. A candidate is right only when it is
 *   right on all of them: each is reported per input, and its overall verdict is the worst.
 * - Builds: a pool of `jobs` (default: the CPU count) builds at once, each in its private copy
 *   under DIR/build/eval/ (src/eval/build.ts; the capture's own files are only read), confined as
 *   `kerncap mcp`'s validate is. Builds feed the GPU queue as they finish.
 * - GPU: check's worker pool (src/check/pool.ts: one `kerncap eval --worker` process per slot,
 *   `--gpus` × `--workers-per-gpu`), each keeping an input's memory resident and putting back only
 *   what a run wrote before the next candidate (src/eval/worker.ts). A worker whose kernel faulted
 *   is replaced; one whose launches run past the watchdog's bound (from the captured kernel time)
 *   is killed and replaced (timeout); one that dies under a candidate gives it `error` (E_WORKER),
 *   and the queue goes on.
 * - Records (src/format/eval-record.ts; summed up and ranked by src/eval/report.ts), one per candidate and input (one per candidate, input
 *   "(build)", no input's name, when it never reached a GPU: it did not build, or did not fit src/), stream as they finish: to `onRecord` (stdout's JSON
 *   Lines with --json) and to the results file (`--jsonl FILE`: appended and fsync'd, check's
 *   src/check/results.ts), which `--resume` continues (records of `error` are tried again, but a candidate's own fault) and
 *   `--merge` joins across `--shard K/N` runs (check's stable share by identity, src/check/shard.ts).
 */
import { availableParallelism } from "node:os";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { assertTmpdirUsable, privateTempFolder } from "../cache.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { StopSignals, signalExitCode } from "../process-group.ts";
import { drainQueue, workerCommand, type OpenRunner } from "../check/pool.ts";
import { workerArgv } from "../util/self-exec.ts";
import { RecordLog } from "../check/results.ts";
import { evalRunSubject, evalSubjects, staleWhy } from "../format/subject.ts";
import { shardOf, type Shard } from "../check/shard.ts";
import { assertOutputPath } from "../format/archive-common.ts";
import { assertRegularTree } from "../format/paths.ts";
import type { EvalOutcome, EvalRecord } from "../format/eval-record.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { PrunedCandidates } from "./pruned.ts";
import { TaskQueue } from "./task-queue.ts";
import { kernelCodeSha256 } from "../codeobj/kernel-code.ts";
import { buildCandidate, buildPool, builtFigures, type BuildOutcome, type BuildSettings, type CopyGate } from "./build.ts";
import { parseCandidates, type Candidate } from "./candidates.ts";
import { reproducerFiles } from "./reproducer-copy.ts";
import { candidateFolders, keptBuild, type CandidateFolders } from "./copies.ts";
import { BUILD_INPUT, EVAL_RECORDS, EVAL_SHARD_MARKER, recordKey, refuseSharedRecords, reportOf, unjudgedKind, type EvalReport } from "./report.ts";
import type { EvalSettings, EvalTask } from "./worker.ts";

export { copyName, EVAL_WORK_DIR } from "./copies.ts";
export { FIRST_LAUNCH_FLOOR_S, firstLaunchMs, TIMEOUT_FACTOR, TIMEOUT_FLOOR_S, WATCHDOG_MAX_MS, watchdogMs, type Watchdog } from "./watchdog.ts";
import { watchdogOf, type Watchdog } from "./watchdog.ts";

import { resolveInputs, verifyInputs, type EvalInput } from "./inputs.ts";
import { Recorder, type Pending } from "./recorder.ts";

export { resolveInputs, verifyInputs, type EvalInput };

export interface EvalOptions {
  /** Capture folders and capture sets (the inputs). */
  dirs: string[];
  /** Candidates as given (src/eval/candidates.ts parseCandidate), or made by a producer (kerncap tune: configCandidate, flagsCandidate). */
  candidates: (string | Candidate)[];
  settings: EvalSettings;
  build: BuildSettings;
  /** The results file (JSON Lines), for --resume and --merge. */
  jsonl?: string;
  resume: boolean;
  /** eval --build-only: every candidate built, none judged (no GPU worker started): a built one's record is verdict "built". */
  buildOnly?: boolean;
  shard?: Shard;
  /** One entry per GPU worker: its CUDA_VISIBLE_DEVICES (null: this process's). */
  slots: (string | null)[];
  /** --shared-timing: several workers on one GPU time at once (no timing windows: src/util/timing-window.ts). */
  sharedTiming?: boolean;
  /** Builds at once (default: the CPU count). */
  jobs?: number;
  /** The watchdog's floor (s; default TIMEOUT_FLOOR_S). */
  timeoutS?: number;
  /** --trust[=DIGEST]: build received captures' reproducers too (and, with confine, a frontend's whose build runs the edited source); a digest: only the files it names (src/format/trust.ts). */
  trust: boolean | string;
  /**
   * --confine (kerncap mcp's evaluate): a frontend whose build runs the edited source as code
   * (Triton: repro.py imports src/) is built only with --trust, as validate --confine refuses it.
   * CUDA builds are confined either way (src/eval/build.ts confinable).
   */
  confine?: boolean;
  /** Draw the status line in place (stderr is a terminal). */
  live: boolean;
  /** false: no progress line for a candidate's build record (compile-error, built …), which the caller says itself (kerncap tune's lines of each config's build). */
  buildLines?: boolean;
  /** The verb that runs this eval, as errors name it (default eval; kerncap tune). */
  verb?: string;
  /** How an interruption is said by the verb that runs this eval (kerncap tune: its configs, no --resume): what was done ("configs judged") and the hint; default eval's own. */
  interrupted?: { done: string; hint: string };
  /** How GPU workers are started (src/check/pool.ts workerCommand of `kerncap eval --worker`; the CPU tests give their own). */
  open: (say: (line: string) => void, watchdog: Watchdog, warm?: string, timingWindows?: string) => OpenRunner<EvalTask, EvalOutcome>;
  /** Each record as it is written (stdout's JSON Lines with --json). */
  onRecord?: (r: EvalRecord) => void;
  /** How a candidate is built (default src/eval/build.ts buildCandidate; the CPU tests give slow or failing ones). */
  buildWith?: (dir: string, m: Manifest, c: Candidate, dest: string) => Promise<BuildOutcome>;
  /** Where a candidate is built, inside the first input's capture folder (default EVAL_WORK_DIR/copyName(id); kerncap tune: build/tune/cuda-N). */
  buildDir?: (c: Candidate) => string;
  /** Each candidate's build as it ends, failed ones too (kerncap tune's lines and progress). */
  onBuild?: (c: Candidate, b: BuildOutcome) => void;
}

/**
 * The GPU workers of an eval: `kerncap eval --worker` processes of this same kerncap
 * (src/check/pool.ts workerCommand, src/util/self-exec.ts workerArgv), each with the watchdog's bound;
 * each line a worker prints on stderr goes to `say` through `clean` (untrusted text: a kernel's
 * printf). What `kerncap eval` and `kerncap tune` run their candidates on.
 */
export function evalWorkers(settings: EvalSettings, verbose: boolean, clean: (line: string) => string): EvalOptions["open"] {
  return (say, watchdog, warm, timingWindows) =>
    workerCommand(workerArgv("eval", verbose), { ...settings, warm, timingWindows }, (l) => say(clean(l)), {
      watchdog: watchdog.ms,
      firstLaunch: watchdog.firstLaunchMs,
      timedOut: watchdog.timedOut,
    });
}

/**
 * Run an evaluation (see the file's comment): the workflow of src/ops/eval.ts runEval, whose
 * `gate` (the trust gates of the first input's build) is asked once the candidates are known
 * good, before any build; what it returns, the gate of a candidate's private copy, is asked once
 * each copy is made, before its build (src/eval/build.ts BuildSettings.gate).
 * @throws KerncapError E_USAGE (inputs, a candidate path that does not exist, --resume without
 *   --jsonl, a config that changes a tile size without --grid; a candidate that does not fit, a
 *   config for a kernel that is not Triton's included, is its record's error, not a throw), E_FRONTEND (a
 *   frontend validate does not rebuild: HIP), E_UNSAFE_PATH (a link, FIFO or device under the first input's src/), the gates' (E_UNTRUSTED), E_TMPDIR (a TMPDIR kerncap refuses, said once before any build), E_RESULTS (a
 *   damaged results file on --resume), E_WORKER (every worker died), E_INTERRUPTED (exit 130/143:
 *   what finished is in the results file; --resume continues)
 */
export async function evalCandidates(o: EvalOptions, gate: (dir: string, m: Manifest) => CopyGate | void): Promise<EvalReport> {
  const t0 = performance.now();
  const inputs = resolveInputs(o.dirs);
  verifyInputs(inputs, o.settings.verify, o.verb ?? "eval");
  const home = inputs[0]!;
  // the reproducer every candidate's copy is made from: a link, FIFO or device under its src/ refused as validate refuses
  // it, before any build (a copy leaves links out: the candidates would build without what the link named; adversary 38)
  assertRegularTree(home.dir, "src");
  // and what each candidate's copy holds is within its bound, said once, before any build (adversary 89 #01)
  reproducerFiles(home.dir);
  const all = checkedCandidates(o, home);
  // the reproducer that is built is the first input's (the others are captures of the same kernel: inputs only)
  const copyGate = gate(home.dir, home.manifest) ?? undefined;
  const mine = o.shard ? all.filter((c) => shardOf(c.id, o.shard!.count) === o.shard!.index) : all;
  if (o.shard) log.info(`shard ${o.shard.index}/${o.shard.count}: ${mine.length} of ${all.length} candidates`);
  const shard = o.shard ? `${o.shard.index}/${o.shard.count}` : null;
  const { results, kept, pending, subjects } = openResults(o, mine, inputs, shard);
  // a shard given no candidate: its file says that it ran (--merge counts the shard), as no record can
  const runSubject = evalRunSubject(subjects);
  if (shard && !mine.length) results?.mark(EVAL_SHARD_MARKER, shard, runSubject);
  // every build makes its private folders in TMPDIR: one that kerncap refuses is said once, before any, as validate says it
  // (not as each candidate's error, with a --resume that cannot help)
  if (pending.length) {
    try {
      assertTmpdirUsable();
    } catch (e) {
      results?.close();
      throw e;
    }
  }
  const rec = new Recorder(o, mine, pending, results, { shard, subjects, runSubject });
  const watchdog = watchdogOf(o, inputs);
  const queue = new TaskQueue<EvalTask>();
  const stops = new StopSignals().install();
  const stopped = () => stops.signal !== null;
  // a confined eval keeps its copies only where it keeps its records (--jsonl: a --resume reuses its builds; kerncap mcp's evaluate keeps none)
  const folders = candidateFolders(
    home.dir,
    pending.map((p) => p.c),
    o.buildDir,
    Boolean(o.confine) && !o.jsonl,
  );
  rec.onJudged = folders.judged;
  // a private folder goes at a stop signal (a cancelled MCP evaluate), not only once the builds under way have ended, and at any exit
  const sweep = new StopSignals().install();
  sweep.onStop = () => {
    folders.dispose();
    queue.release();
  };
  process.on("exit", folders.dispose);
  const building = buildInto(queue, o, home, pending, { rec, stopped, folders, copyGate });
  let buildError: unknown;
  try {
    if (!o.buildOnly) await runOnWorkers(queue, o, rec, watchdog, stops, home.dir);
    queue.release(); // no worker takes more: a build waiting for room goes on (and its task is never judged: E_WORKER)
    buildError = await building;
  } finally {
    queue.release();
    stops.dispose();
    sweep.dispose();
    rec.progress.stop();
    results?.close();
    folders.dispose();
    process.off("exit", folders.dispose);
  }
  if (stops.signal) {
    throw new KerncapError(
      "E_INTERRUPTED",
      `interrupted: ${rec.finished} of ${pending.length} ${o.interrupted?.done ?? "candidates evaluated"}${o.jsonl ? `, their records in ${o.jsonl}` : ""}`,
      {
        hint:
          o.interrupted?.hint ??
          (o.jsonl ? "Run the same command with --resume to evaluate the rest." : "Run it again (with --jsonl FILE, an interrupted eval can be resumed)."),
        exitCode: signalExitCode(stops.signal),
      },
    );
  }
  if (buildError) throw buildError;
  const records = [...kept, ...rec.fresh];
  return reportOf(records, {
    dir: home.dir,
    inputs: inputs.map((i) => i.id),
    results: o.jsonl ? resolve(o.jsonl) : null,
    shard: o.shard ?? null,
    workers: o.buildOnly ? 0 : o.slots.length, // --build-only starts no GPU worker
    wall: (performance.now() - t0) / 1000,
  });
}

/**
 * The candidates of `o`, parsed, and held to what the first input's frontend can build: a
 * frontend validate rebuilds, a config only for a frontend whose tune builds one (Triton), --grid
 * with a config that changes the grid, --jsonl with --resume.
 * @throws KerncapError E_FRONTEND, E_USAGE (also a --jsonl file whose folder is missing: src/format/archive-common.ts assertOutputPath), E_IO
 */
function checkedCandidates(o: EvalOptions, home: EvalInput): Candidate[] {
  const m = home.manifest;
  if (!frontendOf(m).validates) {
    throw new KerncapError(
      "E_FRONTEND",
      `${home.dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap eval judges CUDA and Triton candidates only so far (as validate)`,
      {
        hint: "Rebuild a HIP reproducer with its build.sh and replay the capture with `kerncap replay` (the HSA backend).",
      },
    );
  }
  const candidates = frontendOf(m).tune?.candidates; // a frontend whose tune builds one config on its own (Triton)
  // a config for a frontend that builds none: that candidate's refusal (its record an error, E_CANDIDATE), as kerncap mcp's evaluate says it; the others are evaluated
  const all = parseCandidates(o.candidates).map((c) =>
    c.kind === "config" && !c.refused && !candidates
      ? {
          ...c,
          refused: {
            code: "E_CANDIDATE",
            reason: `candidate ${c.label} is a config, which needs a Triton capture; ${home.dir} is a ${m.kernel.frontend} capture, whose candidates are edited src/ folders, patches or replacement files`,
          },
        }
      : c,
  );
  const configs = all.filter((c) => c.kind === "config" && !c.refused); // a refused one is never built: its record says why
  const tiles = configs.filter((c) => candidates!.needsGrid(home.dir, c.config!));
  if (tiles.length && !o.build.grid) {
    throw new KerncapError("E_USAGE", `the config ${tiles[0]!.label} changes constexprs (tile sizes), so the launch grid changes with them: give --grid`, {
      hint: "An expression of the kernel's integer arguments and the config's values, as the app's grid lambda computes it, e.g. --grid 'cdiv(n, BLOCK), 1, 1'.",
    });
  }
  if (o.resume && !o.jsonl)
    throw new KerncapError("E_USAGE", "--resume continues the results file of --jsonl FILE", { hint: "Give the --jsonl FILE the interrupted eval wrote." });
  // a folder that is not there, or not writable: said as pack's -o says it, before any build
  if (o.jsonl) assertOutputPath(resolve(o.jsonl), "results file", "--jsonl");
  return all;
}

/**
 * The results file (--jsonl) opened, and what is left to do: the records kept from an earlier run
 * (--resume: those of this shard's candidates and these inputs, but errors, which are tried
 * again) and each candidate's inputs without one.
 * @throws KerncapError E_USAGE (--resume of a file of another shard), E_RESULTS (a damaged file)
 */
function openResults(
  o: EvalOptions,
  mine: Candidate[],
  inputs: EvalInput[],
  shard: string | null,
): { results?: RecordLog<EvalRecord>; kept: EvalRecord[]; pending: Pending[]; subjects: Map<string, string> } {
  // read back (--resume) or appended to: a file another user owns or may write is refused either way (adversary 29: an
  // attacker's world-writable file planted at the name got the victim's records, to read and change at will)
  if (o.jsonl)
    refuseSharedRecords(
      resolve(o.jsonl),
      o.resume ? "eval --resume would take its records as judged" : "its owner could read and change the records this eval appends",
    );
  // appended to (nu7 #2: a former run's file was moved to FILE.previous, and a third run's lost the first's records): its earlier records stay, said
  const existed = o.jsonl !== undefined && existsSync(o.jsonl);
  const opened = o.jsonl ? RecordLog.openKind(resolve(o.jsonl), EVAL_RECORDS, { resume: o.resume }) : undefined;
  // a last record a kill cut short: dropped from the file (this eval appends after the whole ones), said (adversary 35: silent)
  if (opened?.truncated && !o.resume) log.warn(`${o.jsonl}: its last line is not a whole record (an eval stopped while writing it): dropped`);
  if (opened?.earlier && !o.resume)
    log.info(
      `${o.jsonl} holds ${opened.earlier} record${opened.earlier > 1 ? "s" : ""} of earlier evals: this eval's are appended after them (--merge ranks them all; --resume would skip candidates they judged)`,
    );
  const results = opened?.log;
  const keptAll = opened?.kept ?? [];
  const began = keptAll[0]?.shard;
  if (o.resume && keptAll.length && began !== shard) {
    results?.close();
    const what = (s: string | null | undefined) => (s ? `--shard ${s}` : "every candidate (no --shard)");
    throw new KerncapError("E_USAGE", `${o.jsonl} holds an eval of ${what(began)}; this one is of ${what(shard)}`, {
      hint: `Resume with ${began ? `--shard ${began}` : "no --shard"}, or write another --jsonl file.`,
    });
  }
  const mineIds = new Set(mine.map((c) => c.id));
  const inputIds = new Set(inputs.map((i) => i.id));
  // what each input's records are judged on now (src/format/subject.ts; a build's: the first input's, whose src/ is built)
  const subjects = evalSubjects(inputs, BUILD_INPUT, o.settings);
  // an error is no finding about the candidate (a dead worker, no GPU): tried again, but for the candidate's own faults
  // (unjudgedKind "candidate": E_PATCH, E_CANDIDATE, E_NOT_SOURCE, E_PACK_NAME, E_CONFINED), which the same candidate on the
  // same subject meets again (a new user's finding: every --resume built it again and added its record once more); nor a
  // record of another subject (src/, the input or the options changed). A built record (--build-only) is done for another
  // --build-only, and no judgement for an eval that judges
  const notDone = (r: EvalRecord) => (r.verdict === "error" && unjudgedKind(r.code) !== "candidate") || (r.verdict === "built" && !o.buildOnly);
  const ours = keptAll.filter((r) => !notDone(r) && mineIds.has(r.candidate) && (r.input === BUILD_INPUT || inputIds.has(r.input)));
  const kept = ours.filter((r) => r.subject === subjects.get(r.input));
  const done = new Set(kept.map((r) => recordKey(r.candidate, r.input)));
  const builtFailed = new Set(kept.filter((r) => r.input === BUILD_INPUT).map((r) => r.candidate));
  // a run not made (an error on an input: the build had ended; a --build-only build) of this subject: its kept module is
  // judged, not built again (a config's grid is not recorded)
  const unrun = (r: EvalRecord) =>
    (r.verdict === "error" && r.input !== BUILD_INPUT && inputIds.has(r.input)) || (r.verdict === "built" && !o.buildOnly && r.input === BUILD_INPUT);
  const built = new Map(
    keptAll
      .filter((r) => unrun(r) && mineIds.has(r.candidate) && r.subject === subjects.get(r.input))
      .filter((r) => r.kind !== "config" && r.build.moduleSha256)
      .map((r) => [r.candidate, r.build]),
  );
  const pending = mine
    .map((c) => ({ c, inputs: builtFailed.has(c.id) ? [] : inputs.filter((i) => !done.has(recordKey(c.id, i.id))), built: built.get(c.id) }))
    .filter((p) => p.inputs.length);
  // a stale record is said only where it is judged again (nu7 #13: an older record of this subject stood for it, nothing
  // was judged, and the line said "judged again"): its candidate on that input pending (a build's: the candidate), once each
  const again = new Set(pending.flatMap((p) => [recordKey(p.c.id, BUILD_INPUT), ...p.inputs.map((i) => recordKey(p.c.id, i.id))]));
  const said = new Set<string>();
  for (const r of ours) {
    const k = recordKey(r.candidate, r.input);
    if (r.subject === subjects.get(r.input) || !again.has(k) || said.has(k)) continue;
    said.add(k);
    log.info(`${r.label} on ${r.input}: ${staleWhy(r.subject, "src/, the input or the run's options")}: judged again`);
  }
  if (o.resume)
    log.info(
      existed
        ? `resuming ${o.jsonl}: ${mine.length - pending.length} of ${mine.length} candidates already evaluated${truncatedNote(opened?.truncated)}`
        : `--resume: no results file ${o.jsonl} yet (a new one, or a mistyped path?): every candidate evaluated, its records written there`,
    );
  return { results, kept, pending, subjects };
}

/**
 * The copy a candidate was built in, where it is kept (DIR/build/eval/…: its build's log and
 * module), for its records; null in a private folder and for a candidate refused before or at its
 * build (verdict error: it did not fit, or its build was stopped as unsafe), whose copy is removed:
 * it held the capture's own src/ or the refused files, not a build to read (a new user's finding:
 * a 62 MB copy left behind, its record's `copy` misleading).
 */
function keptCopy(c: Candidate, b: BuildOutcome, folders: CandidateFolders): string | null {
  if (folders.private || c.refused) return null;
  if ("failed" in b && b.failed.verdict === "error") {
    rmSync(folders.dest(c), { recursive: true, force: true });
    return null;
  }
  return existsSync(folders.dest(c)) ? resolve(folders.dest(c)) : null;
}

/**
 * Build the pending candidates, `o.jobs` at once, each into its private copy (`dest`): a failed build
 * gives the candidate's one record (input BUILD_INPUT), a built one a GPU task per input left.
 * In a private folder (candidateFolders) a build starts only while the tasks waiting for the GPU
 * and the builds under way are fewer than jobs + workers: the modules kept there stay few
 * whatever the number of candidates. The queue ends when the builds do.
 * @returns the error that stopped the builds (E_INTERRUPTED, a build's own), undefined when none did
 */
async function buildInto(
  queue: TaskQueue<EvalTask>,
  o: EvalOptions,
  home: EvalInput,
  pending: Pending[],
  { rec, stopped, folders, copyGate }: { rec: Recorder; stopped: () => boolean; folders: CandidateFolders; copyGate?: CopyGate },
): Promise<unknown> {
  try {
    const buildWith = o.buildWith ?? (await candidateBuilder(o, home, pending, copyGate));
    const buildOne = async (c: Candidate, todo: EvalInput[], prior?: EvalRecord["build"]): Promise<void> => {
      if (stopped()) return;
      // --resume of a candidate whose runs were not made: the module its copy kept, where unchanged (built without a GPU,
      // judged with one; the digest is of the module the frontend's check passed when it was built); else built again, said
      const kept =
        prior && !c.refused ? (folders.private ? { why: "is not read: this eval builds in a private folder" } : keptBuild(folders.dest(c), prior)) : undefined;
      const again = kept && "built" in kept ? kept.built : undefined;
      if (again) log.info(`${rec.label(c.id)}: the module its earlier build kept is judged (${relative(resolve(home.dir), again.module)}, unchanged)`);
      else if (kept && "why" in kept)
        log.warn(
          `${rec.label(c.id)}: the module its earlier build kept (${join(folders.private ? "build/eval" : relative(resolve(home.dir), folders.dest(c)), prior!.module ?? "")}) ${kept.why}: built again`,
        );
      // a candidate refused before eval (kerncap mcp's evaluate: a path no candidate may write …): its record, nothing of it written or built
      const b: BuildOutcome = again
        ? { built: again }
        : c.refused
          ? { failed: { verdict: "error", code: c.refused.code, reason: c.refused.reason, seconds: 0 } }
          : folders.settle(c, await buildWith(home.dir, home.manifest, c, folders.dest(c)));
      if (stopped()) return;
      rec.copies.set(c.id, keptCopy(c, b, folders));
      o.onBuild?.(c, b);
      if ("failed" in b) {
        rec.builds.set(c.id, { seconds: b.failed.seconds, registers: null, stackFrameBytes: null, ...(b.failed.timedOut ? { timedOut: true as const } : {}) });
        rec.emit(
          rec.recordOf(
            {
              candidate: c.id,
              input: BUILD_INPUT,
              verdict: b.failed.verdict,
              reason: b.failed.reason,
              code: b.failed.code,
              ...(b.failed.diagnostics ? { diagnostics: b.failed.diagnostics } : {}),
              numerics: null,
              timing: null,
              runSeconds: 0,
              device: null,
            },
            null,
            null,
          ),
        );
        return;
      }
      // the module's digest: a harness tells candidates that built one kernel apart from those that did not (nu10 #15)
      const moduleSha256 = createHash("sha256").update(readFileSync(b.built.module)).digest("hex");
      // where --resume finds it again (a copy kept for the user: DIR/build/eval/…)
      const module = folders.private ? "" : relative(resolve(folders.dest(c)), resolve(b.built.module));
      const inCopy = module && !module.startsWith("..") && !isAbsolute(module);
      rec.builds.set(c.id, {
        seconds: b.built.seconds,
        ...builtFigures(b.built),
        moduleSha256,
        kernelSha256: kernelCodeSha256(b.built.module, home.manifest),
        ...(inCopy ? { module } : {}),
        ...(b.built.builder ? { builder: b.built.builder } : {}),
      });
      if (o.buildOnly) {
        // --build-only: the build is its record, nothing judged
        const none = { reason: null, code: null, numerics: null, timing: null, runSeconds: 0, device: null };
        rec.emit(rec.recordOf({ candidate: c.id, input: BUILD_INPUT, verdict: "built", ...none }, null, null));
        return;
      }
      for (const i of todo) queue.push({ candidate: c.id, input: i.id, dir: i.dir, module: b.built.module, ...(b.built.grid ? { grid: b.built.grid } : {}) });
    };
    const jobs = Math.max(1, o.jobs ?? availableParallelism());
    await buildPool(
      pending,
      jobs,
      async ({ c, inputs: todo, built }) => {
        // a private folder: no build runs far ahead of the GPU workers, so the modules waiting to be judged stay few (about jobs + workers)
        const held = folders.private && !c.refused;
        if (held) await queue.reserve(jobs + o.slots.length);
        try {
          await buildOne(c, todo, built);
        } finally {
          if (held) queue.unreserve();
        }
      },
      stopped,
    );
    return undefined;
  } catch (e) {
    return e; // E_INTERRUPTED: the stop signal ends the queue too
  } finally {
    queue.end();
  }
}

/** How eval builds a candidate (./build.ts buildCandidate), with the pruned TU's builds where the check found them fit (prunedBuilds). */
async function candidateBuilder(o: EvalOptions, home: EvalInput, pending: Pending[], copyGate?: CopyGate): Promise<NonNullable<EvalOptions["buildWith"]>> {
  const pruned = await prunedBuilds(o, home, pending);
  return (dir, mm, c, dest) =>
    buildCandidate(dir, mm, c, dest, { ...o.build, confine: o.confine, ...(copyGate ? { gate: copyGate } : {}), ...(pruned ? { pruned } : {}) });
}

/**
 * The candidates' builds from the pruned TU (./pruned.ts), where --pruned asks for them and some
 * candidate is a source edit (a tree, overlay, patch or file); undefined: build.sh builds them.
 * @throws KerncapError E_INTERRUPTED (a stop signal during the check)
 */
async function prunedBuilds(o: EvalOptions, home: EvalInput, pending: Pending[]): Promise<PrunedCandidates | undefined> {
  const sources = pending.filter(({ c }) => !c.refused && c.kind !== "flags" && c.kind !== "config").length;
  if (!o.build.fromPruned || o.build.fullBuild || !sources) return undefined;
  try {
    return await PrunedCandidates.prepare(home.dir, home.manifest, {
      candidates: sources,
      jobs: Math.max(1, o.jobs ?? availableParallelism()),
      force: o.build.force,
      ...(o.build.confinedBy ? { confinedBy: o.build.confinedBy } : {}),
    });
  } catch (e) {
    if (isKerncapError(e) && e.code === "E_INTERRUPTED") throw e;
    log.debug(`eval builds with build.sh: the pruned build's check failed (${e instanceof Error ? e.message : String(e)})`);
    return undefined;
  }
}

/** Judge the queue's tasks on the GPU workers (`o.slots`, started by `o.open`) as the builds feed it; a worker that dies gives its task `error` (E_WORKER). */
async function runOnWorkers(queue: TaskQueue<EvalTask>, o: EvalOptions, rec: Recorder, watchdog: Watchdog, stops: StopSignals, warm: string): Promise<void> {
  // several workers: their timed rounds take turns on each GPU, alone on it (src/util/timing-window.ts), unless --shared-timing
  const windows = o.slots.length > 1 && !o.sharedTiming ? privateTempFolder("kerncap-timing-") : undefined;
  try {
    await judgeOnWorkers(queue, o, rec, watchdog, stops, warm, windows);
  } finally {
    if (windows) rmSync(windows, { recursive: true, force: true });
  }
}

async function judgeOnWorkers(
  queue: TaskQueue<EvalTask>,
  o: EvalOptions,
  rec: Recorder,
  watchdog: Watchdog,
  stops: StopSignals,
  warm: string,
  windows?: string,
): Promise<void> {
  // a worker makes the first input resident as it starts (before its first task, or, replacing one ended by a fault or a
  // timeout, at once: the next task finds it ready)
  await drainQueue(
    queue,
    o.slots,
    o.open((l) => rec.progress.line(l), watchdog, warm, windows),
    {
      replaceAtOnce: true,
      onStart: (t, slot) => rec.progress.started(`${rec.label(t.candidate)} on ${t.input}`, slot),
      onOutcome: (x, slot) => rec.emit(rec.recordOf(x, slot, o.slots[slot] ?? null)),
      stopped: () => stops.signal !== null,
      onStop: (stop) => {
        stops.onStop = stop;
        stops.onKill = stop;
      },
      died: (t, reason): EvalOutcome => ({
        candidate: t.candidate,
        input: t.input,
        verdict: "error",
        reason,
        code: "E_WORKER",
        numerics: null,
        timing: null,
        runSeconds: 0,
        device: null,
      }),
      what: "candidate runs were not made",
    },
  );
}

function truncatedNote(t: boolean | undefined): string {
  return t ? " (a last record cut short by the interruption dropped)" : "";
}
