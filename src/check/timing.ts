/**
 * "Slower beyond its interval": the decision of `kerncap check` from two sets of timed launches
 * (µs) of one kernel, this run's and the baseline's.
 *
 * Each set gives its median and a distribution-free confidence interval for the median: the order
 * statistics [x(k+1), x(n-k)] of the sorted n times, k the largest count with
 * P(Binomial(n, 1/2) ≤ k) ≤ α/2 (exact; 95%: n = 10 gives [x2, x9], n = 20 gives [x6, x15]; fewer
 * than 6 times give none). The time ratio's interval is then [now.low / base.high, now.high /
 * base.low]: both medians inside their intervals puts the ratio inside it, so it holds with at
 * least 0.95² ≈ 90% confidence. A kernel is *slower* when the whole interval lies above
 * 1 + slowerPct/100, *faster* when it lies wholly below 1 − slowerPct/100: a threshold, because
 * times taken in one process vary less than times taken in two (clocks, placement), and a check
 * that cries wolf at every 2% is no use.
 */
import type { TimeJudgement } from "../format/check-record.ts";

export interface MedianInterval {
  medianUs: number;
  lowUs: number;
  highUs: number;
  n: number;
}

/** P(Binomial(n, 1/2) ≤ k), summed exactly in floating point (n ≤ a few thousand). */
function binomialCdfHalf(n: number, k: number): number {
  let term = Math.pow(0.5, n); // C(n, 0) / 2^n
  let sum = term;
  for (let i = 1; i <= k; i++) {
    term *= (n - i + 1) / i;
    sum += term;
  }
  return sum;
}

/** Median of times (µs) and its (1 − alpha) interval, or undefined when there are too few for one. */
export function medianInterval(samplesUs: readonly number[], alpha = 0.05): MedianInterval | undefined {
  const x = samplesUs.filter((t) => Number.isFinite(t)).sort((a, b) => a - b);
  const n = x.length;
  if (n === 0 || binomialCdfHalf(n, 0) > alpha / 2) return undefined;
  let k = 0;
  while (k + 1 < n / 2 && binomialCdfHalf(n, k + 1) <= alpha / 2) k++;
  const mid = n / 2;
  const medianUs = n % 2 ? x[(n - 1) / 2]! : (x[mid - 1]! + x[mid]!) / 2;
  return { medianUs, lowUs: x[k]!, highUs: x[n - 1 - k]!, n };
}

/**
 * Judge this run's times against the baseline's.
 * @param now this run's timed launches (µs)
 * @param base the baseline's (µs), or undefined when it has none for this capture
 * @param slowerPct the threshold (percent)
 */
export function judgeTime(now: readonly number[], base: readonly number[] | undefined, slowerPct: number): TimeJudgement {
  const none = { ratio: null, low: null, high: null, baselineMedianUs: null, slowerPct };
  if (!base) return { verdict: "no-baseline", ...none, reason: "no baseline for this capture: this run's times become it" };
  const a = medianInterval(now);
  const b = medianInterval(base);
  if (!a || !b) return { verdict: "too-few-runs", ...none, baselineMedianUs: b?.medianUs ?? null, reason: `an interval needs at least 6 timed launches (this run ${now.length}, the baseline ${base.length}); raise --iters` };
  const ratio = a.medianUs / b.medianUs;
  const low = a.lowUs / b.highUs;
  const high = a.highUs / b.lowUs;
  const t = slowerPct / 100;
  const verdict = low > 1 + t ? "slower" : high < 1 - t ? "faster" : "same";
  const reason = verdict === "same" ? null : `${ratio.toFixed(2)}× the baseline's ${b.medianUs.toFixed(1)} µs (interval ${low.toFixed(2)}–${high.toFixed(2)}, beyond ±${slowerPct}%)`;
  return { verdict, ratio, low, high, baselineMedianUs: b.medianUs, slowerPct, reason };
}
