/**
 * What every capture of one check is replayed with (the settings a worker is handed: its
 * protocol, ./worker.ts) and how a mismatch is said in one line. The per-capture check itself,
 * with its gates, is a workflow: src/ops/check.ts checkCapture.
 */
import type { ReplayResult } from "../replay/engine.ts";

/** What every capture of one check is replayed with (the verb's options). */
export interface CheckSettings {
  /** Timed launches per capture (the median and its interval come from them). */
  iters: number;
  /** Checked launches (default: the engine's 3, then 8 when they differ). */
  runs?: number;
  verify: boolean;
  rebuild: boolean;
  /** --force: rebuild with another Triton version than the capture's. */
  force: boolean;
  /** --trust: rebuild received captures too (their build.sh runs with the user's rights). */
  trust: boolean;
  /** Options given for the whole run (each capture's own judging settings, kerncap judge, fill in the rest: src/replay/judge-settings.ts). */
  tolerance: { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; multiset?: string[] };
}

/** One line: why a replay mismatched. */
export function mismatchReason(r: ReplayResult): string {
  if (r.fault)
    return `the capture faulted in the app (${r.fault.expected.name}); the replay ${r.fault.observed ? `faulted with ${r.fault.observed.name}` : "did not fault"}`;
  const x = r.mismatches[0];
  const more = r.mismatches.length > 1 ? ` (and ${r.mismatches.length - 1} more)` : "";
  return x
    ? `${r.mismatches.length} of ${r.regionsChecked} regions differ from the app's after state: ${x.va} (${x.kind}), ${x.bytesDiffering} bytes from byte ${x.firstDiffOffset}${more}`
    : `numerics ${r.numerics.verdict}`;
}
