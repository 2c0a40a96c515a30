/**
 * A capture's memory resident on the device (ReplaySession): opened once (./restore.ts: spans
 * reserved at the captured VAs, the before state restored and checked), then any number of runs,
 * each a module load, the checked runs (./checked-runs.ts), their judging (./judging.ts) and the
 * timed launches, with the memory put back to the before state between runs. Device work goes through the backend of the capture's vendor (./backends/factory.ts openBackend).
 */
import { chunkExpectation } from "../format/chunks.ts";
import { verifyFiles, type OpenedCapture } from "../format/capture-dir.ts";
import { openImageInCapture, type FileImage } from "../format/file-image.ts";
import type { Manifest } from "../format/manifest.ts";
import { capturePath, changed, readCaptureBytes } from "../format/paths.ts";
import { checksumsChecked } from "../format/received.ts";
import { timingOverride } from "../env.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { openBackend } from "./backends/factory.ts";
import type { ClockState, DeviceScanner, ReplayBackend } from "./backends/interface.ts";
import { checkedRanges, checkedRuns, paddingWritten, rangeNames, timedLaunchCheck, type CheckedRange } from "./checked-runs.ts";
import { judgeEachRun, judgeRuns, replayFault, type Judged } from "./judging.ts";
import { judgingInEffect, mergeJudging, type JudgeSettings } from "./judge-settings.ts";
import { ChangedChunks, checkRestored, moduleGlobals, putBackWritten, reserveSpans, restoreBefore, type LoadedGlobal, type Restorer } from "./restore.ts";
import { zeroedPadding } from "./restore.ts";
import type { ComparedRuns, ReplayOptions, ReplayResult, ResetStats, RunOptions, SetRun } from "./result.ts";
import { keepModuleState, type KeptState } from "./module-state.ts";
import { editAgainstReference, referenceOf, type ReferenceNoise } from "./reference-noise.ts";
import { resultOf, type RunFacts } from "./run-result.ts";
import { withRebuiltLaunch } from "./rebuilt-launch.ts";
import { unloadModule, type Loaded, type Prepared } from "./prepared.ts";
import { mark } from "../util/marks.ts";
import { inSharedWindow } from "../util/timing-window.ts";
import { adaptiveCompare, blockOf, COMPARE_SECONDS, MIN_PAIRS, roundOrder, type TimingComparison } from "./stats.ts";
import {
  DEFAULT_TIMING,
  describeSetup,
  kernelClock,
  parseTimingSetup,
  rewarmRanges,
  timeOneLaunch,
  type L2Step,
  type TimedKernel,
  type TimingSetup,
} from "./timing-setup.ts";

/**
 * A capture's memory resident on the GPU at its captured VAs, checked, ready for any number of
 * runs (kernel launches of the captured or a rebuilt module). One per process: the captured VAs
 * are reserved once.
 */
export interface ReplaySession {
  readonly dir: string;
  readonly manifest: Manifest;
  /** The restore, the VA reservation and the GPU check of open (reported in every run's result). */
  readonly opened: { restore: ReplayResult["restore"]; reserve: ReplayResult["reserve"]; verifySeconds: number };
  /** The last reset (null before the first). */
  readonly lastReset: ResetStats | null;
  /**
   * One replay: module load, globals restore, checked runs, compare, timed launches (the result replay returns). From the
   * second run on, the memory is first put back to the before state (reset()). The module is unloaded at the end. With
   * `o.timingWindow`, all but the timed launches hold it shared, the timed launches alone (src/util/timing-window.ts).
   * @throws as replay; an error for which isContextLost(e) holds (a kernel fault) leaves the
   *   context unusable: close the session with the context (close({ resetDevice: true })) and open another.
   */
  run(o: RunOptions): Promise<ReplayResult>;
  /**
   * Two kernels on the same memory: each judged as run() judges it (checked runs, compare), one after the other from the
   * before state, then timed interleaved (timeInterleaved) with a second load of each module, in rounds taken until the
   * comparison (src/replay/stats.ts adaptiveCompare) is decided or `candidate.compareBudgetSeconds` ends. `candidate.modulePath`
   * may be a promise (a build still running): the baseline is checked meanwhile. iters: the larger of the two. The timing window as run()'s.
   * @throws as run()
   */
  runCompared(baseline: RunOptions, candidate: RunOptions): Promise<ComparedRuns>;
  /**
   * Several kernels on the same memory (kerncap tune's configs): each judged as run() judges it,
   * from the before state, then all timed interleaved with `timing`'s iters and L2 flush. With
   * `tolerate`, a kernel that fails to load or launch (a KerncapError: too much shared memory, a
   * kernel not in its module) is that entry's error and the others go on.
   * @returns one entry per kernel, in order: its result and its times (µs), or its error
   */
  runSet(list: RunOptions[], timing: RunOptions, tolerate?: boolean): Promise<SetRun[]>;
  /**
   * Put back the before state of every chunk the previous runs wrote: the app's changed chunks from the device backup, then a
   * kc64 scan of every region against the manifest's before hashes (chunkExpectation(...).beforeHash) and the chunks that still
   * differ from memory/before.bin (a wrong kernel may write anywhere). No-op when nothing ran since the last reset. run() calls
   * it; a caller with idle time (the watch between saves) calls it earlier to take it off the next run's path.
   * @throws KerncapError E_CHECKSUM when verify is on and a chunk put back does not hash as the manifest says.
   */
  reset(): ResetStats | undefined;
  /** Whether an error of run() left the device context unusable (the backend's isContextLost). */
  isContextLost(e: unknown): boolean;
  /**
   * Free what the session holds on the device and the host: its allocations, pinned buffers and
   * the VA reservations (ReplayBackend.close); the context stays for the next capture, unless
   * `resetDevice` destroys it (after a kernel fault: isContextLost).
   */
  close(o?: { resetDevice?: boolean }): void;
}

/**
 * Open an opened capture (src/format/capture-dir.ts openCapture) for replay on its device (the
 * backend of its vendor, src/replay/backends/factory.ts): check the small files, reserve every span at its
 * captured VA, restore the before state, check it (kc64 per chunk, when verify) and load the scan
 * kernel. Steps 1-2 of replay, done once. `o.verify` false: not for a received capture (checksumsChecked).
 * @throws KerncapError E_CHECKSUM, E_NO_GPU, E_VA_TAKEN, the backend's (E_HSA_NOT_FOUND, E_HSA_VMEM, E_ARCH).
 */
export async function openReplay(c: OpenedCapture, o: Pick<ReplayOptions, "verify" | "ordinal">): Promise<ReplaySession> {
  const { dir, manifest: m } = c;
  const setup = parseTimingSetup(timingOverride()); // a bad KERNCAP_TIMING is refused before any GPU work
  // Small files (SHA-256) and the memory files' sizes; the memory itself is checked on the GPU
  // once restored (kc64 of every chunk against the manifest), which reads it at device speed; a received capture's even with --no-verify.
  const verify = checksumsChecked(dir, m, o.verify);
  verifyFiles(dir, verify ? m : { ...m, files: [] });
  // 1. Reserve every span at its exact VA before anything large is mapped on the host side.
  const be = openBackend(m, o.ordinal);
  try {
    return await openOn(be, dir, m, { verify }, setup);
  } catch (e) {
    // nothing stays reserved (close unmaps): the no-ASLR retry (src/replay/aslr.ts) is another process that needs these VAs
    be.close();
    if (be.isContextLost(e)) be.reset();
    throw e;
  }
}

async function openOn(be: ReplayBackend, dir: string, m: Manifest, o: Pick<ReplayOptions, "verify">, setup: TimingSetup): Promise<ReplaySession> {
  const reserve = reserveSpans(be, m);
  const { restorer, restore } = restoreBefore(be, dir, m);
  const scanner = await be.scanner();
  const tv = performance.now();
  if (o.verify) for (const r of m.regions) checkRestored(scanner, BigInt(r.va), r, m.memory.chunkBytes, m.memory.before, `region ${r.va}`);
  const verifySeconds = (performance.now() - tv) / 1000;
  return new Session(dir, m, be, restorer, scanner, o.verify, { restore, reserve, verifySeconds }, setup, kernelClock(be, setup));
}

class Session implements ReplaySession {
  lastReset: ResetStats | null = null;
  /** The capture's judging settings (src/replay/judge-settings.ts), read once at open: each run's options override them. */
  private readonly judging: JudgeSettings | undefined;
  private readonly C: number;
  /** Some run launched since the last reset. */
  private dirty = false;
  /** The app's changed chunks of every region, and their before state on the device (step 4). */
  private readonly changed: ChangedChunks;
  private flush: bigint | undefined;
  /** The last timed launches had L2 flushed before each. */
  private flushed = false;
  /** How L2 was prepared before the last timed launches (the result's timing.method), when not flushed. */
  private warmL2 = "";
  /** The flush buffer could not be allocated: not asked again. */
  private flushRefused = false;
  /** The clocks during the last timed launches (the backend's clocks). */
  private clocks: Promise<ClockState | null> = Promise.resolve(null);
  /** memory/before.bin and after.bin, each read from one descriptor opened by the capture path rule, never by name again. */
  private readonly images: { before: FileImage; after: FileImage };
  private readonly regionExpect: ReturnType<typeof chunkExpectation>[];
  /** The memory the spans map around the regions (./compare.ts spanPadding): no allocation of the app's, zeroed before the first rebuilt module's launch. */
  private padding: { va: bigint; size: number }[] | undefined;
  /** The captured module's nondeterminism, from its run with the most checked runs in this session (./reference-noise.ts). */
  private reference: ReferenceNoise | undefined;

  constructor(
    readonly dir: string,
    readonly manifest: Manifest,
    private readonly be: ReplayBackend,
    private readonly restorer: Restorer,
    private readonly scanner: DeviceScanner,
    private readonly verify: boolean,
    readonly opened: ReplaySession["opened"],
    private readonly setup: TimingSetup = DEFAULT_TIMING,
    /** Why clock=cupti was asked and not used (the result's timing.clockNote). */
    private readonly clockNote?: string,
  ) {
    const m = manifest;
    this.C = m.memory.chunkBytes;
    this.changed = new ChangedChunks(be, m, restorer);
    this.images = { before: openImageInCapture(dir, m.memory.before), after: openImageInCapture(dir, m.memory.after) };
    if (restorer.img.size && !this.images.before.sameFile(restorer.img)) throw changed(dir, m.memory.before); // restored from one file, compared with another
    this.regionExpect = m.regions.map((r) => chunkExpectation(r, this.C));
    this.judging = judgingInEffect(dir, m).settings; // a received capture's only once accepted (./judge-settings.ts judgingInEffect)
  }

  reset(): ResetStats | undefined {
    if (!this.dirty) return undefined;
    const t0 = performance.now();
    const m = this.manifest;
    this.changed.restore();
    const { chunks, bytes } = putBackWritten(this.scanner, this.restorer, m, this.regionExpect, this.verify);
    this.dirty = false;
    this.lastReset = { chunks, bytes, regionsScanned: m.regions.length, seconds: (performance.now() - t0) / 1000 };
    if (chunks) log.debug(`reset: ${chunks} chunks (${bytes} bytes) written outside the app's changed chunks put back from ${m.memory.before}`);
    return this.lastReset;
  }

  isContextLost(e: unknown): boolean {
    return this.be.isContextLost(e);
  }

  close(o: { resetDevice?: boolean } = {}): void {
    // best effort: after a kernel fault the context refuses every call, and the error to report is the fault
    this.changed.free();
    try {
      if (this.flush !== undefined) this.be.memFree(this.flush);
    } catch {
      /* the context is gone with the fault */
    }
    this.restorer.dispose();
    for (const img of Object.values(this.images)) img.close();
    this.be.close();
    if (o.resetDevice) this.be.reset();
    this.flush = undefined;
  }

  async run(o: RunOptions): Promise<ReplayResult> {
    const w = o.timingWindow;
    return inSharedWindow(w, async () => {
      this.reset();
      const l = await this.load(o);
      try {
        const p = await this.prepare(o, l);
        if (p.fault) return p.fault;
        await w?.enter();
        const times = this.timeInterleaved([p], o, 0)[0]!; // one prepared kernel's timed launches
        w?.leave();
        return p.finish(times, false, await this.clocks);
      } finally {
        unloadModule(l);
      }
    });
  }

  async runCompared(baseline: RunOptions, candidate: RunOptions): Promise<ComparedRuns> {
    // a launch that faults in the app ends the context: nothing to time, the candidate alone is judged
    if (this.manifest.fault) return { baseline: null, candidate: await this.run(candidate), compare: null };
    const iters = Math.max(baseline.iters, candidate.iters);
    const timing = { ...candidate, iters };
    if (iters < MIN_PAIRS) {
      const [a, b] = await this.runSet([baseline, candidate], timing, false);
      if ("error" in a!) throw a.error;
      if ("error" in b!) throw b.error;
      return { baseline: a.result, candidate: b.result, compare: null };
    }
    // each module loaded a second time (one checked run: the same module again) and timed in the same rounds: the
    // placement's share of a difference halves, and each A/A difference is the kernel's own noise floor
    // (src/replay/stats.ts); more rounds until the comparison is decided or the budget ends
    let compare: TimingComparison | null = null;
    const window = candidate.timingWindow; // src/util/timing-window.ts: shared for resets, loads and checked runs, alone to time
    let waited = (await window?.share()) ?? 0;
    const [a, b] = await this.withPrepared([baseline, candidate, { ...baseline, runs: 1 }, { ...candidate, runs: 1 }], false, async (ps) => {
      let round = 0;
      waited += (await window?.enter()) ?? 0;
      const out = await adaptiveCompare(
        (n) => {
          const t = this.timeInterleaved(ps, { ...timing, iters: n }, round);
          round += n;
          return { a: t[0]!, b: t[1]!, aa: t[2]!, bb: t[3]! };
        },
        { minRounds: iters, block: blockOf(ps.length), budgetSeconds: candidate.compareBudgetSeconds ?? COMPARE_SECONDS },
      );
      window?.leave();
      compare = { ...out.compare, seconds: out.seconds, ...(window ? { waitSeconds: waited } : {}) };
      return this.roundTimes;
    }).finally(() => window?.leave());
    if ("error" in a!) throw a.error;
    if ("error" in b!) throw b.error;
    return { baseline: a.result, candidate: b.result, compare };
  }

  async runSet(list: RunOptions[], timing: RunOptions, tolerate = true): Promise<SetRun[]> {
    return this.withPrepared(list, tolerate, (ps) => this.timeInterleaved(ps, timing, 0));
  }

  /**
   * Load and prepare (check) each kernel of `list` from the before state, then time them with
   * `time` (each kernel's times, µs) and finish each result; modules unloaded at the end.
   */
  private async withPrepared(list: RunOptions[], tolerate: boolean, time: (ps: Prepared[]) => number[][] | Promise<number[][]>): Promise<SetRun[]> {
    const loaded: Loaded[] = [];
    const ready: { k: number; p: Prepared }[] = [];
    const out: SetRun[] = [];
    try {
      for (const [k, o] of list.entries()) {
        this.reset();
        try {
          const l = await this.load(o);
          loaded.push(l);
          ready.push({ k, p: await this.prepare(o, l) });
        } catch (e) {
          if (!tolerate || !isKerncapError(e)) throw e;
          log.debug(`kernel ${k} of the set: ${e.message}`);
          out[k] = { error: e };
        }
      }
      const times = await time(ready.map((x) => x.p));
      const clocks = await this.clocks;
      for (const [j, { k, p }] of ready.entries()) out[k] = { result: p.finish(times[j]!, ready.length > 1, clocks), times: times[j]! };
      return out;
    } finally {
      for (const l of loaded) unloadModule(l);
    }
  }

  /** 3. The module (waiting for a build still running), loaded. */
  private async load(o: RunOptions): Promise<Loaded> {
    const { dir, be } = this;
    const m = this.manifest;
    const tw = (mark("the replay waits for the module"), performance.now());
    const rebuilt = await o.modulePath; // an absolute path that the reproducer's build printed
    const modFile = rebuilt ?? capturePath(dir, m.module.file);
    const moduleWaitSeconds = (performance.now() - tw) / 1000;
    const t2 = performance.now();
    const image = new Uint8Array(rebuilt ? await Bun.file(rebuilt).arrayBuffer() : readCaptureBytes(dir, m.module.file, m.module.size));
    const rebuiltLaunch = rebuilt && !o.launch ? o.launchOf?.(rebuilt) : undefined;
    return { mod: be.loadModule(image, modFile, m), modFile, moduleWaitSeconds, t2, release: [], ...(rebuiltLaunch ? { rebuiltLaunch } : {}) };
  }

  /** Every kernel's times of the timeInterleaved calls since the last one at round 0 (µs, in launch order). */
  private roundTimes: number[][] = [];

  /**
   * 6. Timed launches, each from the before state: `setup.warmup` warm-up launches each (2; none when iters is 0: under a
   * profiler or compute-sanitizer; none when `firstRound` > 0, a continuation), then `iters` timed ones each. With several
   * kernels, one launch of each per round in the balanced order of src/replay/stats.ts roundOrder (A B, B A, …; rounds
   * numbered from `firstRound`), so that a position effect (the launch right after the restore) falls on all alike. Before
   * each launch, after its restore, the L2 step of l2Step (src/replay/timing-setup.ts timeOneLaunch). The clocks are read meanwhile (this.clocks).
   * @returns each kernel's times of this call (µs), in launch order; this.roundTimes holds them since round 0
   */
  private timeInterleaved(ps: Prepared[], o: RunOptions, firstRound: number): number[][] {
    const { be } = this;
    if (firstRound === 0) {
      this.clocks = (o.iters ? be.clocks?.() : undefined) ?? Promise.resolve(null);
      this.roundTimes = ps.map(() => []);
    }
    const times = ps.map(() => [] as number[]);
    // one timed launch of each kernel checked, in a round drawn at random (the first call only;
    // not without the restore between launches, KERNCAP_TIMING restore=none: each launch then starts from the last)
    const checkRound = ps.map(() => (firstRound === 0 && o.iters > 0 && this.setup.restore !== "none" ? Math.floor(Math.random() * o.iters) : -1));
    for (let i = o.iters && firstRound === 0 ? -this.setup.warmup : 0; i < o.iters; i++) {
      const order = roundOrder(ps.length, i < 0 ? i + this.setup.warmup : firstRound + i);
      const step = this.l2Step(o, i);
      for (const k of order) {
        const us = timeOneLaunch(be, this.scanner, ps[k]!.timed, this.setup, step);
        if (i === checkRound[k]) ps[k]!.checkTimed?.(i);
        if (i >= 0) {
          times[k]!.push(us);
          this.roundTimes[k]!.push(us);
        }
      }
    }
    be.sync();
    return times;
  }

  /**
   * The L2 step before the timed launches of round `i` (src/replay/timing-setup.ts L2Step), and
   * this.flushed / this.warmL2 for the result. --flush-l2: a read of a buffer of 256 MiB, or of
   * twice the L2 where that is more (H200: 50 MiB), which evicts every line the previous launch
   * left (clean lines, DeviceScanner.evict; a memset where the backend cannot read). Warm: the
   * same read then the kernel's ranges ("reread"), the read alone ("evicted"), or nothing
   * ("restored"; and where the backend cannot read: a memset would leave dirty lines, the very
   * thing the read is there to remove).
   */
  private l2Step(o: RunOptions, i: number): L2Step {
    const { be } = this;
    const flushBytes = Math.max(256 << 20, 2 * (be.l2Bytes?.() ?? 0));
    const warm = this.setup.l2;
    const wanted = o.flushL2 || (warm !== "restored" && this.scanner.evict !== undefined);
    if (wanted && this.flush === undefined && !this.flushRefused) {
      try {
        const p = be.memAlloc(flushBytes);
        be.memset(p, 0, flushBytes);
        this.flush = p;
      } catch {
        this.flushRefused = true;
        if (o.flushL2) log.warn(`--flush-l2: no device memory for the ${flushBytes >> 20} MiB flush buffer; timing with a warm L2`);
        else log.debug(`no device memory for the ${flushBytes >> 20} MiB buffer that writes L2 back: L2 as the restore leaves it`);
      }
    }
    const flush = wanted && this.flush !== undefined ? { va: this.flush, bytes: flushBytes } : undefined;
    this.flushed = o.flushL2 === true && flush !== undefined;
    if (o.flushL2) {
      this.warmL2 = "";
      return flush ? { kind: "flush", flush, memsetFill: i & 0xff } : { kind: "none" };
    }
    if (flush && warm === "reread") {
      this.warmL2 = `L2 warm: written back by a read of ${flushBytes >> 20} MiB, then the ranges the parameters point to read again`;
      return { kind: "reread", flush };
    }
    if (flush && warm === "evicted") {
      this.warmL2 = `L2 written back by a read of ${flushBytes >> 20} MiB, nothing read again`;
      return { kind: "flush", flush };
    }
    this.warmL2 = "L2 warm as the restore left it";
    return { kind: "none" };
  }

  /**
   * Steps 3-5 for one loaded module: the kernel, its attributes, the module globals restored, the
   * checked runs compared with the app's after state; what remains is timing (the launch and the
   * restore between launches) and the result (finish, given the times).
   */
  private async prepare(given: RunOptions, l: Loaded): Promise<Prepared> {
    const { dir, be, restorer, scanner, C } = this;
    const { mod, modFile, moduleWaitSeconds, t2, rebuiltLaunch } = l;
    // the capture's judging settings under this run's options (src/replay/judge-settings.ts)
    const judged = mergeJudging(this.judging, given);
    const o: RunOptions = { ...given, ...judged.options };
    const { restore, reserve, verifySeconds } = this.opened;
    const m = this.manifest;
    // another launch configuration of the kernel (another capture's, a tuned config's): its grid, block, shared memory, attributes and parameter bytes
    const lm = o.launch
      ? { ...m, launch: o.launch.launch, functionAttributes: o.launch.functionAttributes }
      : rebuiltLaunch
        ? withRebuiltLaunch(m, rebuiltLaunch)
        : m;
    const name = o.kernelName ?? m.kernel.name;
    const f = mod.kernel(name);
    if (f === undefined) {
      throw new KerncapError("E_KERNEL_NOT_IN_MODULE", `kernel ${name} is not in ${modFile}`, {
        hint: 'The module does not export the captured kernel symbol; check the kernel name (extern "C" or templates change the mangled name).',
      });
    }
    f.applyAttributes(lm.functionAttributes);
    // Module globals (__device__/__constant__ variables): the loaded module has its own copies,
    // at addresses of the runtime's choosing; write the captured before state into them by name.
    const globals = moduleGlobals(mod, m, modFile, o.modulePath !== undefined);
    const restoreGlobal = (g: LoadedGlobal) => restorer.restore(g.dva, g, C);
    globals.forEach(restoreGlobal);
    restorer.finish();
    // a rebuilt module's own __device__ variables: put back as loaded before every launch (./module-state.ts)
    const state = o.modulePath !== undefined ? keepModuleState(be, mod, new Set(globals.map((g) => g.name))) : undefined;
    if (state) {
      l.release.push(() => state.free());
      log.debug(`the rebuilt module's own variables (${state.globals.map((g) => g.name).join(", ")}: ${state.bytes} bytes) put back before every launch`);
    }
    if (this.verify) for (const g of globals) checkRestored(scanner, g.dva, g, C, m.memory.before, `global ${g.name}`);
    const loadSeconds = (performance.now() - t2) / 1000;
    log.debug(`module loaded, function ${name} found, attributes applied, ${globals.length} module globals restored`);

    const params = o.launch?.params ?? new Uint8Array(readCaptureBytes(dir, m.params.file, m.params.size));
    const launchKernel = f.launcher(lm, params);
    const launch = () => {
      this.dirty = true;
      launchKernel();
    };
    const module = { file: modFile, loadSeconds, waitSeconds: moduleWaitSeconds };

    // A launch that faulted in the app: reproduce the fault here (the expected outcome), nothing to compare.
    if (m.fault) {
      const fault = replayFault(dir, m, be, launch, module, restore, reserve, verifySeconds);
      return { fault, launch, restoreChanged: () => {}, timed: { launch, restoreChanged: () => {}, rewarm: [] }, finish: () => fault };
    }

    // 4. Keep a device copy of the chunks the kernel writes, to restore them between timed runs
    // (made once per session, from the before state).
    this.changed.keep();
    const restoreChanged = (fromHost = false) => {
      for (const g of globals) if (g.changed) restoreGlobal(g);
      state?.putBack();
      restorer.finish();
      this.changed.restore(fromHost);
    };
    // what a warm launch reads again: at most twice the L2 in all (more evicts what was read first)
    const rewarm = rewarmRanges(m.regions, params, 2 * (be.l2Bytes?.() ?? 0) || 256 << 20);
    const timed: TimedKernel = { launch, restoreChanged: () => restoreChanged(this.setup.restore === "host"), rewarm };

    return this.checkAndJudge({ o, judgedFrom: judged.fromCapture, params, globals, launch, restoreChanged, timed, module, state });
  }

  /**
   * 5. Checked launches of a prepared kernel from the same before state (./checked-runs.ts),
   * judged (./judging.ts), a rebuilt module's against the captured kernel's nondeterminism
   * (./reference-noise.ts); what remains is timing and the result (finish, given the times).
   */
  private async checkAndJudge(k: {
    o: RunOptions;
    judgedFrom: string[];
    params: Uint8Array;
    globals: LoadedGlobal[];
    launch: () => void;
    restoreChanged: () => void;
    timed: TimedKernel;
    module: ReplayResult["module"];
    state: KeptState | undefined;
  }): Promise<Prepared> {
    const { dir, be, scanner, C, images } = this;
    const { o, params, globals, launch, restoreChanged, timed, module, state } = k;
    const m = this.manifest;
    const { verifySeconds } = this.opened;
    log.debug(
      `launching grid ${m.launch.grid} block ${m.launch.block} with ${params.byteLength} parameter bytes, ${Math.max(1, o.runs ?? (o.nondeterministic ? 8 : 3))} checked runs`,
    );
    const tc = performance.now();
    const { ranges, tol, asMultiset } = checkedRanges(m, params, o, globals, images);
    const expect = ranges.map((x) => chunkExpectation(x.r, C));
    // a rebuilt module that writes the memory mapped around the regions (where it could keep a result between launches)
    const edited = o.modulePath !== undefined;
    const padding = edited ? (this.padding ??= zeroedPadding(be, m)) : []; // zeroed once, before an edit's first launch
    const runs = checkedRuns(be, scanner, ranges, expect, o, { launch, restoreChanged: () => restoreChanged() }, C, images);
    let outside = padding.length ? paddingWritten(be, scanner, padding, C) : undefined;
    const judgedRuns = judgeRuns(ranges, expect, runs, asMultiset, tol, C, images);
    const names = rangeNames(m, ranges);
    const eachRunWithin = () => tol.atol + tol.rtol > 0 && judgeEachRun(ranges, expect, runs, asMultiset, tol, C, images);
    const reference = await this.againstReference(o, judgedRuns, runs.runs, ranges, eachRunWithin);
    const compareSeconds = (performance.now() - tc) / 1000;
    const base = {
      dir,
      m,
      o,
      module,
      globals: globals.length,
      check: { verifySeconds, compareSeconds, bytesCopiedBack: runs.bytesCopiedBack },
      runs: runs.runs,
      tol,
      judgedFrom: k.judgedFrom,
      ...(reference ? { reference } : {}),
      ...(state ? { moduleState: { variables: state.globals.length, bytes: state.bytes, names: state.globals.map((g) => g.name) } } : {}),
    };
    const clock = {
      clock: this.setup.clock === "cupti" && !this.clockNote ? ("cupti" as const) : ("events" as const),
      ...(this.clockNote ? { clockNote: this.clockNote } : {}),
    };
    // a rebuilt module's timed launch checked (the captured one is what the app ran), when its checked runs and the
    // captured kernel's were bit-identical (a nondeterministic kernel's timed launch may differ by its noise)
    const checkable = o.modulePath !== undefined && !judgedRuns.varied.length && !(await this.capturedNoise(o)).varied.length;
    const timedCheck = checkable ? timedLaunchCheck(be, scanner, ranges, runs.scans[0]!, C, names) : undefined;
    // at the timed launch checked: its bytes (a deterministic kernel's), and the memory around the regions (every rebuilt module's)
    const checkTimed = edited
      ? (round: number) => {
          timedCheck?.check(round);
          if (!outside && padding.length) outside = paddingWritten(be, scanner, padding, C);
        }
      : undefined;
    const finish = (times: number[], interleaved: boolean, clocks: ClockState | null) =>
      resultOf(be, this.opened, { ...base, ...(timedCheck?.outcome ? { timedCheck: timedCheck.outcome } : {}), ...(outside ? { outside } : {}) }, judgedRuns, {
        times,
        interleaved,
        clocks,
        flushed: this.flushed,
        method: this.method(),
        ...clock,
      });
    return { launch, restoreChanged: () => restoreChanged(), timed, finish, ...(checkTimed ? { checkTimed } : {}) };
  }

  /**
   * A run of the captured module: its nondeterminism kept as the session's reference. A rebuilt
   * module whose checked runs differed (and no expectation of determinism said otherwise): judged
   * against that reference (./reference-noise.ts editAgainstReference), taken by a run of the
   * captured module here when none with 3 or more checked runs ran yet in this session.
   */
  private async againstReference(
    o: RunOptions,
    j: Judged,
    nRuns: number,
    ranges: CheckedRange[],
    eachRunWithin: () => boolean,
  ): Promise<RunFacts["reference"]> {
    if (o.modulePath === undefined) {
      if (o.launch === undefined && o.kernelName === undefined && nRuns > (this.reference?.runs ?? 0)) this.reference = referenceOf(j, nRuns);
      return undefined;
    }
    if (o.nondeterministic === false) return undefined; // runs that differ are a mismatch already
    const names = rangeNames(this.manifest, ranges);
    return editAgainstReference(
      { ...j, runs: nRuns },
      ranges.map((x) => x.dtype),
      names,
      () => this.capturedNoise(o),
      eachRunWithin,
    );
  }

  /**
   * The captured kernel's nondeterminism (./reference-noise.ts): the session's reference, taken by
   * a run of the captured module here (no timed launch) when none with 3 or more checked runs ran
   * yet, judged with `o`'s element types and multiset regions (its noise is per type).
   */
  private async capturedNoise(o: RunOptions): Promise<ReferenceNoise> {
    if (!this.reference || this.reference.runs < 3) {
      this.reset();
      const ro: RunOptions = { iters: 0, regionTypes: o.regionTypes, dtype: o.dtype, dtypes: o.dtypes, multiset: o.multiset };
      const l = await this.load(ro);
      try {
        await this.prepare(ro, l);
      } finally {
        unloadModule(l);
      }
    }
    return this.reference!;
  }

  /** How the last timed launches were taken (the result's timing.method): the backend's timers, the L2 step, a setup other than the default named. */
  private method(): string {
    const s = this.setup;
    const how = this.scanner.evict ? "a read of a buffer larger than L2: clean lines" : "a memset of a buffer larger than L2";
    const l2 = this.flushed ? `L2 flushed before each (${how})` : this.warmL2 || "L2 warm";
    const own = describeSetup(s) === describeSetup(DEFAULT_TIMING) ? "" : ` (KERNCAP_TIMING ${describeSetup(s)})`;
    return this.be.timingMethod({ spinUs: s.spinUs, warmup: s.warmup, l2 }) + own;
  }
}
