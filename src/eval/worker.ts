/**
 * The GPU side of `kerncap eval` (`kerncap eval --worker`, started by src/eval/eval.ts through
 * check's pool, src/check/pool.ts workerCommand, with its own CUDA_VISIBLE_DEVICES): one process,
 * one CUDA context; the captured memory of an input restored once (src/replay/engine.ts
 * openReplay) and kept on the GPU for every candidate judged on it, as `validate --watch` keeps it
 * between saves. Before each candidate the session puts back only what earlier runs wrote
 * (ReplaySession.reset: the app's changed chunks from the device backup, then every chunk whose
 * kc64 differs from the before state), so a candidate never sees another's writes: each starts
 * from the captured before state, and its checked runs each start from it again.
 *
 * Protocol (check's, src/check/worker.ts serveProtocol): stdin's first line `{"settings":
 * EvalSettings}`, then `{"task": EvalTask}` lines; for each task stdout gets `{"started": true}`
 * once the input is resident and the candidate's launches begin (the parent's watchdog runs from
 * there: a hung kernel is killed with its worker), then `{"outcome": EvalOutcome}`. Where several
 * workers share a GPU, a comparison's timed rounds wait for the GPU's timing window
 * (src/util/timing-window.ts): a wait is said `{"waiting": true}` (the watchdog pauses) and its end
 * `{"started": true}` (the watchdog runs again, from its full bound). `{"launch": "begin"}` and
 * `{"launch": "end"}` go out around the candidate's first checked launch: the parent bounds that
 * launch alone (a hung kernel is known hung at its first launch). After a kernel
 * fault (the device context is lost) the outcome says `"retire": true` and the worker ends: the
 * parent starts a fresh one for the next candidate.
 *
 * The time compared is the kernel's own on the captured input: the candidate and the captured
 * module are timed alternately on the same memory (src/replay/engine.ts runCompared). A candidate
 * that keeps a result in device memory (a module global, a spare region) and skips the work when
 * it finds it is caught before it is timed: its checked runs (at least two, the CLI's --runs
 * floor) each start from the restored before state, so the second finds the cache, skips, and
 * leaves the outputs at their before state: a mismatch.
 */
import { resolve } from "node:path";
import * as v from "valibot";
import { mismatchReason } from "../check/runner.ts";
import { isKerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { openCapture } from "../format/capture-dir.ts";
import type { EvalOutcome } from "../format/eval-record.ts";
import { readCaptureBytes } from "../format/paths.ts";
import { frontendOf, regionTypesOf } from "../frontends/index.ts";
import { rebuiltRun } from "../rebuild/rebuilder.ts";
import { openReplay, withRebuiltLaunch, type ComparedRuns, type ReplaySession, type RunOptions } from "../replay/engine.ts";
import { gpuTimingWindow, inSharedWindow, type TimingWindow } from "../util/timing-window.ts";
import { timingOf } from "./timing.ts";

/** What every candidate of one eval is judged with (the verb's options). */
export interface EvalSettings {
  /** Timed launches of the candidate and of the captured module, interleaved. */
  iters: number;
  /** Checked launches of the candidate (default: the engine's 3, then 8 when they differ). */
  runs?: number;
  verify: boolean;
  /** --atol/--rtol/--dtype (dtypes: --dtype REGION=T)/--multiset, as src/cli/args.ts toleranceOptions gives them. */
  tolerance: { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; multiset?: string[] };
  /** Flush L2 before each timed launch, the candidate's and the captured module's (src/replay/engine.ts RunOptions.flushL2; eval's and tune's --flush-l2). */
  flushL2?: boolean;
  /** Seconds the comparison may spend on more timed rounds after `iters` until it is decided (src/replay/stats.ts adaptiveCompare; default the engine's). 0: `iters` rounds only (kerncap tune: many configs, each timed alike). */
  compareBudgetSeconds?: number;
  /** The folder of the GPUs' timing windows (src/util/timing-window.ts), the parent's private one, where several workers share the GPUs: the timed rounds of a comparison wait for the worker's GPU's window. */
  timingWindows?: string;
  /** The capture folder of the input the first tasks are judged on: the worker makes it resident as soon as it starts (EvalJudge.prepare): a worker that replaces one ended by a fault or a timeout is ready before the next task comes. */
  warm?: string;
}

/** One candidate on one input, as the parent hands it to a worker. */
export interface EvalTask {
  candidate: string;
  /** The input's identity and its capture folder. */
  input: string;
  dir: string;
  /** The candidate's built module (in its private copy). */
  module: string;
  /** A Triton config's grid where it changes the tile sizes. */
  grid?: [number, number, number];
}

const Tolerance = v.object({
  atol: v.optional(v.number()),
  rtol: v.optional(v.number()),
  dtype: v.optional(v.string()),
  dtypes: v.optional(v.record(v.string(), v.string())),
  multiset: v.optional(v.array(v.string())),
});
/** The protocol's lines (src/check/worker.ts serveProtocol). */
export const EVAL_PROTOCOL = {
  settings: v.object({
    settings: v.object({
      iters: v.number(),
      runs: v.optional(v.number()),
      verify: v.boolean(),
      tolerance: Tolerance,
      flushL2: v.optional(v.boolean()),
      compareBudgetSeconds: v.optional(v.number()),
      warm: v.optional(v.string()),
      timingWindows: v.optional(v.string()),
    }),
  }),
  task: v.object({
    task: v.object({
      candidate: v.string(),
      input: v.string(),
      dir: v.string(),
      module: v.string(),
      grid: v.optional(v.tuple([v.number(), v.number(), v.number()])),
    }),
  }),
};

/**
 * Judges candidates in this process, keeping one input's memory on the GPU (see the file's comment).
 * `started` is called when a candidate's launches are about to begin.
 */
export class EvalJudge {
  private session: ReplaySession | undefined;
  private contextLost = false;

  /**
   * @param started called when a candidate's launches are about to begin, and again when its timed
   *   rounds begin after a wait for the GPU's timing window (the parent's watchdog runs from there)
   * @param open how an input is made resident (openReplay; the CPU tests give a session without a GPU)
   * @param waiting called when the timed rounds wait for the GPU's timing window (the parent's watchdog pauses)
   * @param launch called before ("begin") and after ("end") the candidate's first checked launch (the parent's watchdog of that launch)
   */
  constructor(
    private readonly started: () => void,
    private readonly open: (dir: string, s: EvalSettings) => Promise<ReplaySession> = (dir, s) =>
      openReplay(openCapture(dir), { verify: s.verify, ordinal: 0 }),
    private readonly waiting: () => void = () => {},
    private readonly launch?: (what: "begin" | "end") => void,
  ) {}

  /** The timing window of this worker's GPU (its CUDA_VISIBLE_DEVICES), telling the parent when it waits and when its launches go on. */
  private windowOf(s: EvalSettings): TimingWindow | undefined {
    const w = gpuTimingWindow(s.timingWindows);
    if (!w) return undefined;
    const told = (take: (waiting: () => void) => Promise<number>) => async () => {
      let waited = false;
      const seconds = await take(() => {
        waited = true;
        this.waiting();
      });
      if (waited) this.started();
      return seconds;
    };
    return { share: told((f) => w.share(f)), enter: told((f) => w.enter(f)), leave: () => w.leave() };
  }

  /** Whether a kernel fault took this process's device context (the worker retires). */
  lost(): boolean {
    return this.contextLost;
  }

  private async sessionFor(dir: string, s: EvalSettings): Promise<ReplaySession> {
    const want = resolve(dir);
    if (this.session && resolve(this.session.dir) === want) return this.session;
    this.close();
    // the restore shares the GPU with other workers' restores and checked runs, never with their timed rounds
    const window = gpuTimingWindow(s.timingWindows);
    this.session = await inSharedWindow(window, () => this.open(want, s));
    return this.session;
  }

  /**
   * Make `s.warm`'s input resident before any task comes (a replacement worker's CUDA context and
   * the input's restore overlap the other workers' runs). Never throws: a failure is logged and left to
   * the first task on that input, whose outcome then says it.
   */
  async prepare(s: EvalSettings): Promise<void> {
    if (s.warm === undefined) return;
    const t0 = performance.now();
    try {
      await this.sessionFor(s.warm, s);
      log.debug(`input ${s.warm} resident before the first task (${((performance.now() - t0) / 1000).toFixed(2)} s)`);
    } catch (e) {
      this.close();
      log.debug(`the input was not made resident before the first task: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** Free the resident input (its VAs, device memory). */
  close(): void {
    this.session?.close();
    this.session = undefined;
    // the memory images' mmap windows are unmapped when collected (src/format/file-image.ts): before another input's fixed VAs
    Bun.gc(true);
  }

  /** Judge one candidate on one input. Never throws: a failure is the outcome's error or fault. */
  async judge(t: EvalTask, s: EvalSettings): Promise<EvalOutcome> {
    const t0 = performance.now();
    const base = { candidate: t.candidate, input: t.input, reason: null, code: null, numerics: null, timing: null, device: null };
    let session: ReplaySession | undefined;
    try {
      session = await this.sessionFor(t.dir, s);
      const m = session.manifest;
      const fe = frontendOf(m);
      const window = this.windowOf(s);
      const timed = {
        ...(window ? { timingWindow: window } : {}),
        ...(s.flushL2 ? { flushL2: true } : {}),
        ...(s.compareBudgetSeconds !== undefined ? { compareBudgetSeconds: s.compareBudgetSeconds } : {}),
      };
      const run: RunOptions = {
        iters: s.iters,
        ...(s.runs !== undefined ? { runs: s.runs } : {}),
        ...s.tolerance,
        ...timed,
        regionTypes: regionTypesOf(m),
        ...rebuiltRun(fe, m, t.module),
        ...(this.launch ? { firstLaunch: { begin: () => this.launch!("begin"), end: () => this.launch!("end") } } : {}),
      };
      if (t.grid) {
        const rebuilt = fe.rebuiltLaunch?.(t.module, m);
        const mg = { ...m, launch: { ...m.launch, grid: t.grid } };
        const w = rebuilt ? withRebuiltLaunch(mg, rebuilt) : mg;
        run.launch = {
          launch: w.launch,
          functionAttributes: w.functionAttributes,
          params: new Uint8Array(readCaptureBytes(session.dir, m.params.file, m.params.size)),
        };
      }
      this.started();
      const r = await session.runCompared({ iters: s.iters, runs: 1, regionTypes: run.regionTypes, ...timed }, run);
      return { ...base, ...verdictOf(r), runSeconds: (performance.now() - t0) / 1000, device: r.candidate.device };
    } catch (e) {
      const message = (e instanceof Error ? e.message : String(e)).split("\n").slice(0, 3).join(" / ");
      const code = isKerncapError(e) ? e.code : "E_INTERNAL";
      if (session?.isContextLost(e)) {
        this.contextLost = true;
        session.close({ resetDevice: true });
        this.session = undefined;
        return { ...base, verdict: "fault", code, reason: message, runSeconds: (performance.now() - t0) / 1000 };
      }
      return { ...base, verdict: "error", code, reason: message, runSeconds: (performance.now() - t0) / 1000 };
    }
  }
}

/**
 * The verdict, numerics, reason and timing of a candidate's compared runs; with a mismatch, or a
 * match that is not bit-exact, its `judgement`: validate's `mismatches` and `numerics` of the
 * candidate's result as they are (the same fields of the same ReplayResult that validate --json
 * prints), a number that is not finite (a relative error against 0) null, as JSON writes it.
 */
export function verdictOf(r: ComparedRuns): Pick<EvalOutcome, "verdict" | "numerics" | "reason" | "timing" | "baseline" | "judgement"> {
  const c = r.candidate;
  const baseline = r.baseline ? { baseline: r.baseline.verdict } : {};
  const judgement =
    c.verdict === "mismatch" || c.numerics.verdict !== "bit-exact"
      ? { judgement: JSON.parse(JSON.stringify({ mismatches: c.mismatches, numerics: c.numerics })) as NonNullable<EvalOutcome["judgement"]> }
      : {};
  if (c.verdict === "mismatch")
    return { verdict: "mismatch", numerics: c.numerics.verdict, reason: mismatchReason(c), timing: null, ...baseline, ...judgement };
  return { verdict: "match", numerics: c.numerics.verdict, reason: null, timing: timingOf(r.compare), ...baseline, ...judgement };
}
