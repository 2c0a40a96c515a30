/**
 * Where `kerncap eval` reads the timing comparison of a candidate against the captured module:
 * the replay engine's interleaved runs (src/replay/engine.ts runCompared) judged by
 * src/replay/stats.ts. eval's only use of that API: a change of the comparison's statistics is
 * followed here, and the rest of eval sees EvalTiming.
 */
import type { EvalTiming } from "../format/eval-record.ts";
import type { TimingComparison } from "../replay/stats.ts";

/** The fewest timed launches that give a comparison (src/replay/stats.ts). */
export { MIN_PAIRS } from "../replay/stats.ts";

/** A comparison as eval records it; null when there was none (fewer than MIN_PAIRS timed launches, a capture that faults). */
export function timingOf(c: TimingComparison | null): EvalTiming | null {
  if (!c) return null;
  return {
    baselineMedianUs: c.baselineMedianUs,
    candidateMedianUs: c.candidateMedianUs,
    speedup: c.speedup,
    low: c.low,
    high: c.high,
    verdict: c.verdict,
    decided: c.decided,
    pairs: c.pairs,
    detectable: c.detectable,
    ...(c.seconds !== undefined ? { seconds: Math.round(c.seconds * 1000) / 1000 } : {}),
    ...(c.waitSeconds !== undefined ? { waitSeconds: Math.round(c.waitSeconds * 1000) / 1000 } : {}),
    text: c.text,
  };
}

/**
 * The geometric mean of speedups (captured median / candidate median) over a candidate's inputs:
 * its rank among the candidates that match on every input. undefined when an input has none.
 */
export function meanSpeedup(speedups: (number | null | undefined)[]): number | undefined {
  if (!speedups.length || speedups.some((s) => !(typeof s === "number" && s > 0))) return undefined;
  return Math.exp(speedups.reduce((a: number, s) => a + Math.log(s!), 0) / speedups.length);
}
