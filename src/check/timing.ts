/**
 * "Slower beyond its interval": the decision of `kerncap check` from two sets of timed launches
 * (µs) of one kernel, this run's and the baseline's, through the one timing compare of kerncap
 * (src/replay/stats.ts compareUnpaired): the ratio now/baseline of their locations
 * (Hodges–Lehmann over ln-times) with its 99% Mann–Whitney interval. A kernel is *slower* when
 * the whole interval lies above 1 + slowerPct/100, *faster* when it lies wholly below
 * 1 − slowerPct/100: a threshold, because times taken in two processes vary more than times
 * taken interleaved in one (clocks, placement), and a check that cries wolf at every 2% is muted.
 */
import type { TimeJudgement } from "../format/check-record.ts";
import { median } from "../replay/compare.ts";
import { compareUnpaired } from "../replay/stats.ts";

/**
 * Judge this run's times against the baseline's.
 * @param now this run's timed launches (µs)
 * @param base the baseline's (µs), or undefined when it has none for this capture
 * @param slowerPct the threshold (percent)
 */
export function judgeTime(now: readonly number[], base: readonly number[] | undefined, slowerPct: number): TimeJudgement {
  const none = { ratio: null, low: null, high: null, baselineMedianUs: null, slowerPct };
  if (!base) return { verdict: "no-baseline", ...none, reason: "no baseline for this capture: this run's times become it" };
  const c = compareUnpaired(now, base);
  const baselineMedianUs = base.length ? median([...base]) : null;
  if (!c)
    return {
      verdict: "too-few-runs",
      ...none,
      baselineMedianUs,
      reason: `an interval needs at least 6 timed launches (this run ${now.length}, the baseline ${base.length}); raise --iters`,
    };
  const { ratio, low, high } = c;
  const t = slowerPct / 100;
  const verdict = low > 1 + t ? "slower" : high < 1 - t ? "faster" : "same";
  const reason =
    verdict === "same"
      ? null
      : `${ratio.toFixed(2)}× the baseline's ${baselineMedianUs!.toFixed(1)} µs (99% interval ${low.toFixed(2)}–${high.toFixed(2)}, beyond ±${slowerPct}%)`;
  return { verdict, ratio, low, high, baselineMedianUs, slowerPct, reason };
}
