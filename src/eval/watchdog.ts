/**
 * The watchdog of `kerncap eval`'s GPU workers (src/check/pool.ts workerCommand kills a worker's
 * process group at its bounds): the bound of a candidate's whole judgement on an input, from the
 * captured kernel time, and the bound of its first launch alone, where a hung kernel hangs.
 */
import type { EvalOutcome } from "../format/eval-record.ts";
import type { Manifest } from "../format/manifest.ts";
import type { EvalInput } from "./inputs.ts";
import type { EvalSettings, EvalTask } from "./worker.ts";

/** The floor of the first launch's bound (s; firstLaunchMs). */
export const FIRST_LAUNCH_FLOOR_S = 1;
/** The watchdog's floor (s): no bound is shorter, however short the captured kernel. */
export const TIMEOUT_FLOOR_S = 10;
/** The watchdog allows this many times the captured kernel time for every launch a judgement makes. */
export const TIMEOUT_FACTOR = 100;

/** The watchdog of the GPU workers (src/check/pool.ts workerCommand). */
export interface Watchdog {
  ms: (t: EvalTask) => number;
  /** The bound of the candidate's first launch alone (ms; firstLaunchMs), undefined where the capture has no kernel time. */
  firstLaunchMs: (t: EvalTask) => number | undefined;
  timedOut: (t: EvalTask, ms: number, first?: boolean) => EvalOutcome;
}

/**
 * The watchdog's bound for one candidate on an input (ms): TIMEOUT_FACTOR × the captured kernel
 * time (manifest timing.app_launch_us) for each launch of a judgement (the captured module's
 * checked one, the candidate's checked ones, 2 × iters timed, warm-ups), plus the time to put the
 * input's memory back at 1 GB/s (bytes the regions hold), at most WATCHDOG_MAX_MS, never below
 * `floorS` (--timeout, at most a day).
 */
export function watchdogMs(m: Manifest, s: EvalSettings, floorS: number): number {
  const appUs = m.timing?.app_launch_us ?? 0;
  const launches = 1 + (s.runs ?? 8) + 2 * s.iters + 4;
  const restoreMs = m.regions.reduce((a, r) => a + r.size, 0) / 1e6;
  const fromCapture = Math.min(WATCHDOG_MAX_MS, (TIMEOUT_FACTOR * appUs * launches) / 1000 + restoreMs);
  return Math.round(Math.max(floorS * 1000, fromCapture));
}

/**
 * The bound of a candidate's first checked launch alone (ms): TIMEOUT_FACTOR × the captured kernel
 * time (the per-launch share of watchdogMs), at least FIRST_LAUNCH_FLOOR_S, never more than the
 * whole judgement's bound. A hung kernel (a loop that never ends, a barrier never reached) hangs
 * at its first launch: it is killed there instead of at the judgement's bound (the benchmark's
 * hanging candidate was the last record of every eval, 5 s after its launches began).
 * undefined where the capture has no kernel time (manifest timing.app_launch_us): the judgement's bound alone.
 */
export function firstLaunchMs(m: Manifest, s: EvalSettings, floorS: number): number | undefined {
  const appUs = m.timing?.app_launch_us ?? 0;
  if (!(appUs > 0)) return undefined;
  return Math.round(Math.min(watchdogMs(m, s, floorS), Math.max(FIRST_LAUNCH_FLOOR_S * 1000, (TIMEOUT_FACTOR * appUs) / 1000)));
}

/**
 * The most the watchdog's bound grows from a capture's own figures (ms): 6 hours. A received
 * manifest's kernel time or region sizes could ask past 2^31 - 1 ms, which the timer takes as 1 ms
 * (a candidate killed at once), or for weeks (a hung candidate never killed): adversary 64.
 */
export const WATCHDOG_MAX_MS = 6 * 3_600_000;

/** The watchdog of this run's GPU workers: each input's bound (watchdogMs), and the outcome of a candidate killed past it. */
export function watchdogOf(o: { settings: EvalSettings; timeoutS?: number }, inputs: EvalInput[]): Watchdog {
  const floorS = o.timeoutS ?? TIMEOUT_FLOOR_S;
  const manifests = new Map(inputs.map((i) => [i.id, i.manifest]));
  return {
    ms: (t) => watchdogMs(manifests.get(t.input)!, o.settings, floorS),
    firstLaunchMs: (t) => firstLaunchMs(manifests.get(t.input)!, o.settings, floorS),
    timedOut: (t, ms, first) => ({
      candidate: t.candidate,
      input: t.input,
      verdict: "timeout",
      reason: first
        ? `its first launch ran past ${(ms / 1000).toFixed(1)} s (${TIMEOUT_FACTOR}× the captured kernel time, at least ${FIRST_LAUNCH_FLOOR_S} s): killed with its worker`
        : `its launches ran past ${(ms / 1000).toFixed(1)} s (${TIMEOUT_FACTOR}× the captured kernel time per launch, at least ${floorS} s): killed with its worker`,
      code: "E_TIMEOUT",
      numerics: null,
      timing: null,
      runSeconds: ms / 1000,
      device: null,
    }),
  };
}
