/**
 * The replay engine, one for every vendor: restore a capture's memory at its exact VAs, check it
 * against the manifest's kc64, launch the kernel with the captured parameter bytes and launch
 * attributes, compare every region with the app's after state (bit-exact, tolerance, run-to-run
 * envelope), time. This module is its public face (replay, replayCompared, openReplay and the
 * types of ./result.ts); the work is in ./session.ts (a capture resident on the device, its
 * runs), ./restore.ts (reserve, restore, put back), ./checked-runs.ts (the launches checked on the
 * device), ./judging.ts (the verdicts), over one backend per vendor (./backends/: interface.ts,
 * factory.ts, cuda.ts, hsa.ts).
 */
import type { OpenedCapture } from "../format/capture-dir.ts";
import type { ComparedRuns, ReplayOptions, ReplayResult, RunOptions } from "./result.ts";
import { openReplay, type ReplaySession } from "./session.ts";
import { inSharedWindow } from "../util/timing-window.ts";
import type { TimingComparison } from "./stats.ts";

export type { ClockState } from "./backends/interface.ts";
export type { ComparedRuns, MultisetRegion, RegionMismatch, ReplayOptions, ReplayResult, ResetStats, RunOptions, SetRun } from "./result.ts";
export { openReplay, type ReplaySession } from "./session.ts";
export { MAX_DYNAMIC_SHARED, withRebuiltLaunch } from "./rebuilt-launch.ts";
export { CHECKED_RUNS_SECONDS, MAX_CHECKED_RUNS } from "./checked-runs.ts";
export { Restorer } from "./restore.ts";
export { sanitizerCommand } from "./judging.ts";

/**
 * Run `f` on a session and close it; the device context goes with it when the run left it
 * unusable (a kernel fault: a replayed fault, an error isContextLost holds), so that the process
 * can replay another capture (`kerncap check`'s worker keeps one context for all of them).
 */
async function runClosing<T>(s: ReplaySession, f: () => Promise<T>, faulted: (r: T) => boolean): Promise<T> {
  let lost = false;
  try {
    const r = await f();
    lost = faulted(r);
    return r;
  } catch (e) {
    lost = s.isContextLost(e);
    throw e;
  } finally {
    s.close({ resetDevice: lost });
  }
}

/**
 * Replay an opened capture on its device (CUDA or HSA, by the manifest's vendor): openReplay, one
 * run, close.
 * @throws KerncapError for damaged captures (E_CHECKSUM),
 *   no GPU (E_NO_GPU), a taken VA (E_VA_TAKEN), a module the GPU can't run (E_ARCH).
 */
export async function replay(c: OpenedCapture, o: ReplayOptions): Promise<ReplayResult> {
  // the restore too shares the GPU with other workers' restores and checked runs, never with their timed launches
  return inSharedWindow(o.timingWindow, async () => {
    const s = await openReplay(c, o);
    return runClosing(
      s,
      () => s.run(o),
      (r) => r.fault?.observed != null,
    );
  });
}

/** One comparison of replayCompared's `repeat`: its compare and its wall time (s: module loads, checked runs, the timed rounds). */
export interface RepeatedCompare {
  compare: TimingComparison | null;
  seconds: number;
}

/**
 * Replay a capture with two kernels on its memory (ReplaySession.runCompared): the baseline
 * (by default the captured module and launch) and the candidate, judged each, timed interleaved.
 * `repeat` > 1: the whole comparison (module loads included) made that many times on the one
 * restored memory, each one's compare in `repeats` (is a claimed difference stable? the verdict
 * benchmark, scripts/bench-verdicts.sh); the results are the first comparison's.
 * @throws as replay
 */
export async function replayCompared(
  c: OpenedCapture,
  baseline: ReplayOptions,
  candidate: RunOptions,
  repeat = 1,
): Promise<ComparedRuns & { repeats?: RepeatedCompare[] }> {
  const s = await openReplay(c, baseline);
  return runClosing(
    s,
    async () => {
      let first: ComparedRuns | undefined;
      const repeats: RepeatedCompare[] = [];
      for (let i = 0; i < repeat; i++) {
        const t0 = performance.now();
        const r = await s.runCompared(baseline, candidate);
        repeats.push({ compare: r.compare, seconds: (performance.now() - t0) / 1000 });
        first ??= r;
      }
      return repeat > 1 ? { ...first!, repeats } : first!;
    },
    (r) => [r.baseline, r.candidate].some((x) => x?.fault?.observed != null),
  );
}
