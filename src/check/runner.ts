/**
 * What every capture of one check is replayed with (the settings a worker is handed: its
 * protocol, ./worker.ts) and how a mismatch is said in one line. The per-capture check itself,
 * with its gates, is a workflow: src/ops/check.ts checkCapture.
 */
export { mismatchReason } from "../replay/run-result.ts";

/** What every capture of one check is replayed with (the verb's options). */
export interface CheckSettings {
  /** Timed launches per capture (the median and its interval come from them). */
  iters: number;
  /** Checked launches (default: the engine's 3, then 8 when they differ). */
  runs?: number;
  verify: boolean;
  /** Flush L2 before each timed launch (--flush-l2: src/replay/engine.ts ReplayOptions.flushL2). */
  flushL2?: boolean;
  rebuild: boolean;
  /** --build-only (with --rebuild): rebuild each capture and replay nothing, no GPU looked for (verdict "built"). */
  buildOnly?: boolean;
  /** The folder of the GPUs' timing windows (src/util/timing-window.ts), the parent's private one, where several workers share the GPUs: a replay's restore and checked runs share its worker's GPU, its timed launches have it alone. */
  timingWindows?: string;
  /** --force: rebuild with another Triton version than the capture's. */
  force: boolean;
  /** --trust: rebuild received captures too (their build.sh runs with the user's rights). */
  trust: boolean;
  /** Options given for the whole run (each capture's own judging settings, kerncap judge, fill in the rest: src/replay/judge-settings.ts). */
  tolerance: { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; multiset?: string[] };
}
