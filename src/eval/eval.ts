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
 * - Records (src/format/eval-record.ts), one per candidate and input (one per candidate, input
 *   "(build)", when it never reached a GPU), stream as they finish: to `onRecord` (stdout's JSON
 *   Lines with --json) and to the results file (`--jsonl FILE`: appended and fsync'd, check's
 *   src/check/results.ts), which `--resume` continues (records of `error` are tried again) and
 *   `--merge` joins across `--shard K/N` runs (check's stable share by identity, src/check/shard.ts).
 */
import { availableParallelism } from "node:os";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { log } from "../log.ts";
import { StopSignals, signalExitCode } from "../process-group.ts";
import { drainQueue, workerCommand, type OpenRunner } from "../check/pool.ts";
import { workerArgv } from "../util/self-exec.ts";
import { CheckProgress } from "../check/progress.ts";
import { parseRecords, RecordLog, type RecordKind } from "../check/results.ts";
import { shardOf, type Shard } from "../check/shard.ts";
import { openCapture } from "../format/capture-dir.ts";
import { readCaptureSet } from "../format/capture-set.ts";
import { mkdirInCapture } from "../format/paths.ts";
import { documentId } from "../format/documents.ts";
import { EVAL_VERDICTS, EvalRecord, type EvalOutcome, type EvalVerdict } from "../format/eval-record.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { buildCandidate, buildPool, type BuildOutcome, type BuildSettings } from "./build.ts";
import { parseCandidates, type Candidate } from "./candidates.ts";
import { meanSpeedup } from "./timing.ts";
import type { EvalSettings, EvalTask } from "./worker.ts";

/** The input of a candidate that never reached a GPU (its build's record). */
export const BUILD_INPUT = "(build)";

/** The watchdog's floor (s): no bound is shorter, however short the captured kernel. */
export const TIMEOUT_FLOOR_S = 10;
/** The watchdog allows this many times the captured kernel time for every launch a judgement makes. */
export const TIMEOUT_FACTOR = 100;

/** Where the private copies go, under the first input's capture folder. */
export const EVAL_WORK_DIR = "build/eval";

export interface EvalInput {
  id: string;
  dir: string;
  manifest: Manifest;
}

/** The watchdog of the GPU workers (src/check/pool.ts workerCommand). */
export interface Watchdog {
  ms: (t: EvalTask) => number;
  timedOut: (t: EvalTask, ms: number) => EvalOutcome;
}

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
  shard?: Shard;
  /** One entry per GPU worker: its CUDA_VISIBLE_DEVICES (null: this process's). */
  slots: (string | null)[];
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
  /** How GPU workers are started (src/check/pool.ts workerCommand of `kerncap eval --worker`; the CPU tests give their own). */
  open: (say: (line: string) => void, watchdog: Watchdog) => OpenRunner<EvalTask, EvalOutcome>;
  /** Each record as it is written (stdout's JSON Lines with --json). */
  onRecord?: (r: EvalRecord) => void;
  /** How a candidate is built (default src/eval/build.ts buildCandidate; the CPU tests give slow or failing ones). */
  buildWith?: (dir: string, m: Manifest, c: Candidate, dest: string) => Promise<BuildOutcome>;
  /** Where a candidate is built, inside the first input's capture folder (default EVAL_WORK_DIR/copyName(id); kerncap tune: build/tune/cuda-N). */
  buildDir?: (c: Candidate) => string;
  /** Each candidate's build as it ends, failed ones too (kerncap tune's lines and progress). */
  onBuild?: (c: Candidate, b: BuildOutcome) => void;
}

/** One candidate over every input. */
export interface CandidateSummary {
  candidate: string;
  label: string;
  kind: Candidate["kind"];
  /** match only when it matched on every input; else the worst of its inputs' verdicts (VERDICT_ORDER). */
  verdict: EvalVerdict;
  inputs: { input: string; verdict: EvalVerdict }[];
  /** Geometric mean over the inputs of the captured median / this median (above 1: faster), and the extremes of the inputs' intervals; null unless it matched everywhere with a comparison. */
  speedup: number | null;
  low: number | null;
  high: number | null;
  registers: number | null;
  stackFrameBytes: number | null;
  /** The first input's reason that made it not a match. */
  reason: string | null;
  /** 1 for the fastest matching candidate; null when it does not match. */
  rank: number | null;
}

export interface EvalReport {
  dir: string;
  inputs: string[];
  results: string | null;
  shard: Shard | null;
  workers: number;
  /** Ranked: the matching candidates fastest first, then the rest by verdict (VERDICT_ORDER). */
  candidates: CandidateSummary[];
  records: EvalRecord[];
  summary: Record<EvalVerdict, number> & { candidates: number };
  /** wall: the whole evaluation; build: the builds' wall times summed; run: the GPU runs' summed. */
  seconds: { wall: number; build: number; run: number };
  /** 2 when a candidate could not be judged (error), else 0 (the verdicts are the result). */
  exitCode: number;
}

/** Worst first: a candidate's overall verdict is the first of its inputs' in this order. */
export const VERDICT_ORDER: readonly EvalVerdict[] = ["compile-error", "layout-change", "fault", "timeout", "mismatch", "error", "match"];

export const EVAL_RECORDS: RecordKind<EvalRecord> = {
  schema: documentId("eval-record"),
  record: EvalRecord,
  what: "the eval's results file",
  hint: "The results file was altered or is not kerncap eval's; give another --jsonl file, or remove it to evaluate every candidate again.",
};

/**
 * The inputs: each folder a capture, or a capture set's members; all of one kernel.
 * @throws KerncapError E_USAGE (no capture there, two kernels, two inputs of one identity), the manifest's errors
 */
export function resolveInputs(dirs: string[]): EvalInput[] {
  const out: EvalInput[] = [];
  for (const d of dirs) {
    const dir = resolve(d);
    if (!existsSync(dir) || !statSync(dir).isDirectory())
      throw new KerncapError("E_USAGE", `${dir} is not a folder`, { hint: "Give capture folders (kerncap run --out) or a capture set's folder (run -c N)." });
    const set = existsSync(join(dir, "kerncap.json")) ? undefined : readCaptureSet(dir);
    if (set)
      for (const c of set.captures) out.push({ id: `${basename(dir)}/${c.dir}`, dir: join(dir, c.dir), manifest: openCapture(join(dir, c.dir)).manifest });
    else out.push({ id: basename(dir), dir, manifest: openCapture(dir).manifest });
  }
  const first = out[0]!;
  for (const i of out) {
    if (i.manifest.kernel.name !== first.manifest.kernel.name) {
      throw new KerncapError(
        "E_USAGE",
        `${i.dir} is a capture of ${i.manifest.kernel.demangled || i.manifest.kernel.name}, ${first.dir} of ${first.manifest.kernel.demangled || first.manifest.kernel.name}: the inputs of an eval are captures of one kernel`,
        { hint: "Give captures of the same kernel (its launches in a capture set from run -c N, or from several runs)." },
      );
    }
  }
  const ids = new Set<string>();
  for (const i of out) {
    if (ids.has(i.id))
      throw new KerncapError("E_USAGE", `two inputs are named ${i.id}`, { hint: "Give each capture folder once (inputs are named by their folder's name)." });
    ids.add(i.id);
  }
  return out;
}

/**
 * The watchdog's bound for one candidate on an input (ms): TIMEOUT_FACTOR × the captured kernel
 * time (manifest timing.app_launch_us) for each launch of a judgement (the captured module's
 * checked one, the candidate's checked ones, 2 × iters timed, warm-ups), plus the time to put the
 * input's memory back at 1 GB/s (bytes the regions hold), never below `floorS`.
 */
export function watchdogMs(m: Manifest, s: EvalSettings, floorS: number): number {
  const appUs = m.timing?.app_launch_us ?? 0;
  const launches = 1 + (s.runs ?? 8) + 2 * s.iters + 4;
  const restoreMs = m.regions.reduce((a, r) => a + r.size, 0) / 1e6;
  return Math.round(Math.max(floorS * 1000, (TIMEOUT_FACTOR * appUs * launches) / 1000) + restoreMs);
}

/**
 * The GPU workers of an eval: `kerncap eval --worker` processes of this same kerncap
 * (src/check/pool.ts workerCommand, src/util/self-exec.ts workerArgv), each with the watchdog's bound;
 * each line a worker prints on stderr goes to `say` through `clean` (untrusted text: a kernel's
 * printf). What `kerncap eval` and `kerncap tune` run their candidates on.
 */
export function evalWorkers(settings: EvalSettings, verbose: boolean, clean: (line: string) => string): EvalOptions["open"] {
  return (say, watchdog) => workerCommand(workerArgv("eval", verbose), settings, (l) => say(clean(l)), { watchdog: watchdog.ms, timedOut: watchdog.timedOut });
}

/** A queue the builds push into and the GPU workers take from; take() waits until a task comes or end(). */
class TaskQueue<T> {
  private items: T[] = [];
  private waiting: ((t: T | undefined) => void)[] = [];
  private ended = false;
  push(t: T): void {
    const w = this.waiting.shift();
    if (w) w(t);
    else this.items.push(t);
  }
  end(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w(undefined);
  }
  take(): Promise<T | undefined> {
    if (this.items.length) return Promise.resolve(this.items.shift());
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((res) => this.waiting.push(res));
  }
}

const key = (candidate: string, input: string) => `${candidate}\u0000${input}`;

/** A candidate's private copy's folder name under EVAL_WORK_DIR: 16 hex digits of its identity's SHA-256 (two candidates of one content under two names get two copies). */
export function copyName(id: string): string {
  return new Bun.CryptoHasher("sha256").update(id).digest("hex").slice(0, 16);
}

/**
 * Run an evaluation (see the file's comment): the workflow of src/ops/eval.ts runEval, whose
 * `gate` (the trust gates of the first input's build) is asked once the candidates are known
 * good, before any build.
 * @throws KerncapError E_USAGE (inputs, candidates, --resume without --jsonl, a config for a
 *   kernel that is not Triton's, or one that changes a tile size without --grid), E_FRONTEND (a
 *   frontend validate does not rebuild: HIP), the gate's (E_UNTRUSTED), E_RESULTS (a
 *   damaged results file on --resume), E_WORKER (every worker died), E_INTERRUPTED (exit 130/143:
 *   what finished is in the results file; --resume continues)
 */
export async function evalCandidates(o: EvalOptions, gate: (dir: string, m: Manifest) => void): Promise<EvalReport> {
  const t0 = performance.now();
  const inputs = resolveInputs(o.dirs);
  const home = inputs[0]!;
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
  const all = parseCandidates(o.candidates);
  const candidates = frontendOf(m).tune?.candidates; // a frontend whose tune builds one config on its own (Triton)
  if (all.some((c) => c.kind === "config") && !candidates) {
    throw new KerncapError(
      "E_USAGE",
      `a config candidate (${all.find((c) => c.kind === "config")!.label}) needs a Triton capture; ${home.dir} is a ${m.kernel.frontend} capture`,
      { hint: "Give a CUDA kernel's candidates as edited src/ folders, patches or replacement files (kerncap tune sweeps CUDA macros and flags)." },
    );
  }
  const configs = all.filter((c) => c.kind === "config");
  const tiles = configs.filter((c) => candidates!.needsGrid(home.dir, c.config!));
  if (tiles.length && !o.build.grid) {
    throw new KerncapError("E_USAGE", `the config ${tiles[0]!.label} changes constexprs (tile sizes), so the launch grid changes with them: give --grid`, {
      hint: "An expression of the kernel's integer arguments and the config's values, as the app's grid lambda computes it, e.g. --grid 'cdiv(n, BLOCK), 1, 1'.",
    });
  }
  if (o.resume && !o.jsonl)
    throw new KerncapError("E_USAGE", "--resume continues the results file of --jsonl FILE", { hint: "Give the --jsonl FILE the interrupted eval wrote." });
  // the reproducer that is built is the first input's (the others are captures of the same kernel: inputs only)
  gate(home.dir, m);
  const mine = o.shard ? all.filter((c) => shardOf(c.id, o.shard!.count) === o.shard!.index) : all;
  if (o.shard) log.info(`shard ${o.shard.index}/${o.shard.count}: ${mine.length} of ${all.length} candidates`);
  const shard = o.shard ? `${o.shard.index}/${o.shard.count}` : null;

  const opened = o.jsonl ? RecordLog.openKind(resolve(o.jsonl), EVAL_RECORDS, { resume: o.resume, previous: `${resolve(o.jsonl)}.previous` }) : undefined;
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
  // an error is no finding about the candidate (a dead worker, no GPU): tried again
  const kept = keptAll.filter((r) => r.verdict !== "error" && mineIds.has(r.candidate) && (r.input === BUILD_INPUT || inputIds.has(r.input)));
  const done = new Set(kept.map((r) => key(r.candidate, r.input)));
  const builtFailed = new Set(kept.filter((r) => r.input === BUILD_INPUT).map((r) => r.candidate));
  const pending = mine
    .map((c) => ({ c, inputs: builtFailed.has(c.id) ? [] : inputs.filter((i) => !done.has(key(c.id, i.id))) }))
    .filter((p) => p.inputs.length);
  if (o.resume)
    log.info(`resuming ${o.jsonl}: ${mine.length - pending.length} of ${mine.length} candidates already evaluated${truncatedNote(opened?.truncated)}`);

  const fresh: EvalRecord[] = [];
  const progress = new CheckProgress(pending.length, { live: o.live, write: (s) => void process.stderr.write(s) });
  const byId = new Map(mine.map((c) => [c.id, c]));
  const builds = new Map<string, { seconds: number; registers: number | null; stackFrameBytes: number | null }>();
  const left = new Map(pending.map((p) => [p.c.id, p.inputs.length]));
  let finished = 0;
  const emit = (r: EvalRecord) => {
    results?.append(r);
    fresh.push(r);
    o.onRecord?.(r);
    const n = r.input === BUILD_INPUT ? 0 : (left.get(r.candidate) ?? 1) - 1;
    left.set(r.candidate, n);
    if (n === 0) finished++;
    const w = String(pending.length).length;
    progress.line(`[${String(finished).padStart(w)}/${pending.length}] ${recordLine(r)}`);
  };
  const recordOf = (x: EvalOutcome, worker: number | null, gpu: string | null): EvalRecord => {
    const c = byId.get(x.candidate)!;
    const b = builds.get(c.id) ?? { seconds: 0, registers: null, stackFrameBytes: null };
    return { ...x, label: c.label, kind: c.kind, build: b, worker, gpu, shard, at: new Date().toISOString() };
  };

  const floorS = o.timeoutS ?? TIMEOUT_FLOOR_S;
  const manifests = new Map(inputs.map((i) => [i.id, i.manifest]));
  const watchdog: Watchdog = {
    ms: (t) => watchdogMs(manifests.get(t.input)!, o.settings, floorS),
    timedOut: (t, ms) => ({
      candidate: t.candidate,
      input: t.input,
      verdict: "timeout",
      reason: `its launches ran past ${(ms / 1000).toFixed(1)} s (${TIMEOUT_FACTOR}× the captured kernel time per launch, at least ${floorS} s): killed with its worker`,
      code: "E_TIMEOUT",
      numerics: null,
      timing: null,
      runSeconds: ms / 1000,
      device: null,
    }),
  };
  const queue = new TaskQueue<EvalTask>();
  const stops = new StopSignals().install();
  const stopped = () => stops.signal !== null;
  // the private copies' folder, made inside the capture with no link followed (a build/ that is a link out of a received capture writes nothing there)
  const work = pending.length && !o.buildDir ? mkdirInCapture(home.dir, EVAL_WORK_DIR) : join(home.dir, EVAL_WORK_DIR);
  const buildWith =
    o.buildWith ?? ((dir: string, mm: Manifest, c: Candidate, dest: string) => buildCandidate(dir, mm, c, dest, { ...o.build, confine: o.confine }));
  const jobs = Math.max(1, o.jobs ?? availableParallelism());
  let buildError: unknown;
  const building = (async () => {
    try {
      await buildPool(
        pending,
        jobs,
        async ({ c, inputs: todo }) => {
          const b = await buildWith(home.dir, m, c, o.buildDir?.(c) ?? join(work, copyName(c.id)));
          if (stopped()) return;
          o.onBuild?.(c, b);
          if ("failed" in b) {
            builds.set(c.id, { seconds: b.failed.seconds, registers: null, stackFrameBytes: null });
            emit(
              recordOf(
                {
                  candidate: c.id,
                  input: BUILD_INPUT,
                  verdict: b.failed.verdict,
                  reason: b.failed.reason,
                  code: b.failed.code,
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
          builds.set(c.id, { seconds: b.built.seconds, registers: b.built.registers, stackFrameBytes: b.built.stackFrameBytes });
          for (const i of todo)
            queue.push({ candidate: c.id, input: i.id, dir: i.dir, module: b.built.module, ...(b.built.grid ? { grid: b.built.grid } : {}) });
        },
        stopped,
      );
    } catch (e) {
      buildError = e; // E_INTERRUPTED: the stop signal ends the queue too
    } finally {
      queue.end();
    }
  })();
  try {
    await drainQueue(
      queue,
      o.slots,
      o.open((l) => progress.line(l), watchdog),
      {
        onStart: (t, slot) => progress.started(`${byId.get(t.candidate)?.label ?? t.candidate} on ${t.input}`, slot),
        onOutcome: (x, slot) => emit(recordOf(x, slot, o.slots[slot] ?? null)),
        stopped,
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
    await building;
  } finally {
    stops.dispose();
    progress.stop();
    results?.close();
  }
  if (stops.signal) {
    throw new KerncapError(
      "E_INTERRUPTED",
      `interrupted: ${finished} of ${pending.length} candidates evaluated${o.jsonl ? `, their records in ${o.jsonl}` : ""}`,
      {
        hint: o.jsonl ? "Run the same command with --resume to evaluate the rest." : "Run it again (with --jsonl FILE, an interrupted eval can be resumed).",
        exitCode: signalExitCode(stops.signal),
      },
    );
  }
  if (buildError) throw buildError;
  const records = [...kept, ...fresh];
  return reportOf(records, {
    dir: home.dir,
    inputs: inputs.map((i) => i.id),
    results: o.jsonl ? resolve(o.jsonl) : null,
    shard: o.shard ?? null,
    workers: o.slots.length,
    wall: (performance.now() - t0) / 1000,
  });
}

function truncatedNote(t: boolean | undefined): string {
  return t ? " (a last record cut short by the interruption dropped)" : "";
}

/** A name or message on one line of a terminal (src/escape.ts: a candidate's name and a compiler's message are untrusted text). */
const one = (s: string) => escapeForTerminal(s, { oneLine: true });

/** A reason in one line: a compiler's message by its first error line (its first line says only that the build failed), escaped. */
export function shortReason(reason: string | null, max = 160): string {
  const lines = (reason ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const err = lines.slice(1).find((l) => /\berror\b/i.test(l));
  return one((err ?? lines[0] ?? "").slice(0, max));
}

/** One record as a progress line: "match  1.07× [1.05–1.09]  label  input". */
export function recordLine(r: EvalRecord): string {
  const t = r.timing ? `${r.timing.speedup.toFixed(2)}× [${r.timing.low.toFixed(2)}–${r.timing.high.toFixed(2)}]` : "";
  const why = r.verdict === "match" ? "" : `  ${shortReason(r.reason)}`;
  return `${r.verdict.padEnd(13)} ${t.padEnd(20)} ${one(r.label)}  ${one(r.input)}${why}`;
}

/**
 * The candidates' summaries from their records (a candidate's later record of one input replaces
 * an earlier one), ranked (see EvalReport.candidates).
 */
export function summarize(records: EvalRecord[]): CandidateSummary[] {
  const by = new Map<string, EvalRecord[]>();
  for (const r of records) {
    const list = by.get(r.candidate) ?? [];
    const i = list.findIndex((x) => x.input === r.input);
    if (i >= 0) list[i] = r;
    else list.push(r);
    by.set(r.candidate, list);
  }
  const out: CandidateSummary[] = [];
  for (const [candidate, rs] of by) {
    const worst = VERDICT_ORDER.find((v) => rs.some((r) => r.verdict === v))!;
    const bad = rs.find((r) => r.verdict === worst && worst !== "match");
    const sp = worst === "match" ? meanSpeedup(rs.map((r) => r.timing?.speedup)) : undefined;
    const withBuild = rs.find((r) => r.build.registers !== null) ?? rs[0]!;
    out.push({
      candidate,
      label: rs[0]!.label,
      kind: rs[0]!.kind,
      verdict: worst,
      inputs: rs.map((r) => ({ input: r.input, verdict: r.verdict })),
      speedup: sp ?? null,
      low: sp !== undefined ? Math.min(...rs.map((r) => r.timing!.low)) : null,
      high: sp !== undefined ? Math.max(...rs.map((r) => r.timing!.high)) : null,
      registers: withBuild.build.registers,
      stackFrameBytes: withBuild.build.stackFrameBytes,
      reason: bad ? `${bad.input === BUILD_INPUT ? "" : `${bad.input}: `}${bad.reason ?? bad.verdict}` : null,
      rank: null,
    });
  }
  const order = (v: EvalVerdict) => (v === "match" ? -1 : VERDICT_ORDER.indexOf(v));
  out.sort((a, b) => order(a.verdict) - order(b.verdict) || (b.speedup ?? 0) - (a.speedup ?? 0) || a.label.localeCompare(b.label));
  let rank = 0;
  for (const c of out) if (c.verdict === "match") c.rank = ++rank;
  return out;
}

function reportOf(
  records: EvalRecord[],
  o: { dir: string; inputs: string[]; results: string | null; shard: Shard | null; workers: number; wall: number },
): EvalReport {
  const candidates = summarize(records);
  const summary = Object.fromEntries([
    ["candidates", candidates.length],
    ...EVAL_VERDICTS.map((v) => [v, candidates.filter((c) => c.verdict === v).length]),
  ]) as EvalReport["summary"];
  return {
    dir: o.dir,
    inputs: o.inputs,
    results: o.results,
    shard: o.shard,
    workers: o.workers,
    candidates,
    records,
    summary,
    seconds: { wall: o.wall, build: sumBy(records, (r) => r.build.seconds, true), run: sumBy(records, (r) => r.runSeconds) },
    exitCode: candidates.some((c) => c.verdict === "error") ? 2 : 0,
  };
}

/** Sum of f over records; once per candidate when `perCandidate` (a build is one per candidate, whatever its inputs). */
function sumBy(records: EvalRecord[], f: (r: EvalRecord) => number, perCandidate = false): number {
  const seen = new Set<string>();
  let s = 0;
  for (const r of records) {
    if (perCandidate) {
      if (seen.has(r.candidate)) continue;
      seen.add(r.candidate);
    }
    s += f(r);
  }
  return s;
}

/** The ranked table: one row per candidate. */
export function rankedTable(r: EvalReport): string {
  const rows = r.candidates.map((c) => [
    c.rank !== null ? String(c.rank) : "-",
    c.verdict,
    c.speedup !== null ? `${c.speedup.toFixed(2)}×` : "",
    c.low !== null ? `${c.low.toFixed(2)}–${c.high!.toFixed(2)}` : "",
    c.registers !== null ? String(c.registers) : "",
    c.stackFrameBytes !== null ? String(c.stackFrameBytes) : "",
    `${c.inputs.filter((i) => i.verdict === "match").length}/${c.inputs[0]?.input === BUILD_INPUT ? r.inputs.length : c.inputs.length}`,
    one(c.label),
    c.verdict === "match" ? "" : shortReason(c.reason, 120),
  ]);
  const head = ["rank", "verdict", "speedup", "interval", "regs", "frame B", "inputs ok", "candidate", "why"];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((x) => x[i]!.length)));
  const line = (x: string[]) =>
    x
      .map((c, i) => (i === x.length - 1 ? c : c.padEnd(w[i]!)))
      .join("  ")
      .trimEnd();
  const s = r.summary;
  const tail = `${s.candidates} candidates on ${r.inputs.length} input${r.inputs.length > 1 ? "s" : ""}: ${EVAL_VERDICTS.filter((v) => s[v])
    .map((v) => `${s[v]} ${v}`)
    .join(
      ", ",
    )}; ${r.seconds.wall.toFixed(1)} s (builds ${r.seconds.build.toFixed(1)} s, GPU runs ${r.seconds.run.toFixed(1)} s, ${r.workers} worker${r.workers > 1 ? "s" : ""})`;
  return [line(head), ...rows.map(line), tail].join("\n");
}

/**
 * `kerncap eval --merge FILE…`: the shards' results files in one report (a candidate's record of
 * one input in two files: the later file's).
 * @throws KerncapError E_USAGE (no such file), E_RESULTS (damaged, or holding no record)
 */
export function mergeEval(files: string[]): EvalReport {
  const byKey = new Map<string, EvalRecord>();
  let inputs = new Set<string>();
  for (const f of files) {
    const path = resolve(f);
    if (!existsSync(path) || statSync(path).isDirectory())
      throw new KerncapError("E_USAGE", `no results file ${path}`, { hint: "Give the --jsonl files the shards wrote." });
    const { records } = parseRecords(path, readFileSync(path, "utf8"), EVAL_RECORDS);
    if (!records.length)
      throw new KerncapError("E_RESULTS", `${path} holds no eval record`, {
        hint: "A shard that stopped before its first candidate leaves an empty file: run it again (--resume), or leave it out.",
      });
    for (const r of records) {
      byKey.set(key(r.candidate, r.input), r);
      if (r.input !== BUILD_INPUT) inputs.add(r.input);
    }
  }
  inputs = new Set([...inputs].sort());
  const records = [...byKey.values()];
  return reportOf(records, { dir: "", inputs: [...inputs], results: null, shard: null, workers: 0, wall: 0 });
}
