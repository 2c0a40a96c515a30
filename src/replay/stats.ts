/**
 * Is kernel B faster than kernel A? Timings taken interleaved (A B, B A, A B… on the same restored
 * memory, src/replay/engine.ts ReplaySession.runCompared), so that clock and thermal drift hit
 * both alike, compared as the ratio of their medians with a 95% confidence interval from a paired
 * bootstrap: pair i (A's and B's i-th launch, taken back to back) is resampled as a unit, which
 * keeps the drift they share out of the interval. 2000 resamples, percentile interval, a fixed
 * seed: the same timings always give the same interval. The median, not the mean: a launch
 * delayed by a preemption or a clock step moves the mean, not the median. Pure functions.
 */
import { median } from "./compare.ts";

export interface TimingComparison {
  /** Launch pairs compared. */
  pairs: number;
  /** Median kernel time (µs) of the baseline (A) and the candidate (B). */
  baselineMedianUs: number;
  candidateMedianUs: number;
  /** baseline median / candidate median: above 1, the candidate is faster. */
  speedup: number;
  /** 95% confidence interval of `speedup` (paired bootstrap). */
  low: number;
  high: number;
  /** faster: the interval lies above 1 (and not all within ±RESOLUTION); slower: below 1 (likewise); same: it holds 1, or lies within ±RESOLUTION. */
  verdict: "faster" | "slower" | "same";
  /** "1.07× faster (1.05–1.09)", "1.12× slower (1.10–1.15)", "no difference beyond noise (0.99–1.02)". */
  text: string;
  method: string;
}

/** mulberry32: a small, fast 32-bit PRNG; uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The smallest speed difference a comparison claims (a fraction: 0.005 = 0.5%). The same module
 * timed against itself (`replay --against` its own cubin, 200 pairs, H200) gave a 310 µs kernel
 * an interval of 1.00005–1.00015 once in three: clear of 1, so "1.00× faster", for no change. Below this
 * margin a difference is not a property of the kernel but of the timing (event resolution of
 * 32 ns, the launch's position, the L2 state the restore leaves), so "same" is said.
 */
export const RESOLUTION = 0.005;

/** Fewest launch pairs for an interval worth printing. */
export const MIN_PAIRS = 5;

/**
 * Compare interleaved timings: baseline[i] and candidate[i] taken back to back (µs).
 * @throws Error when the lists differ in length or hold fewer than MIN_PAIRS pairs (the callers
 *   check --iters first) or a time that is not a positive number
 */
export function compareTimings(baseline: number[], candidate: number[], o: { resamples?: number; seed?: number } = {}): TimingComparison {
  const n = baseline.length;
  if (n !== candidate.length || n < MIN_PAIRS) throw new Error(`compareTimings: ${n} and ${candidate.length} timings (equal counts, at least ${MIN_PAIRS})`);
  if (![...baseline, ...candidate].every((x) => Number.isFinite(x) && x > 0)) throw new Error("compareTimings: a time that is not a positive number");
  const resamples = o.resamples ?? 2000;
  const rand = seededRandom(o.seed ?? 27);
  const a = new Array<number>(n);
  const b = new Array<number>(n);
  const ratios = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) {
      const k = Math.floor(rand() * n);
      a[i] = baseline[k]!;
      b[i] = candidate[k]!;
    }
    ratios[r] = median(a) / median(b);
  }
  ratios.sort();
  const q = (p: number) => ratios[Math.min(resamples - 1, Math.max(0, Math.round(p * (resamples - 1))))]!;
  const [low, high] = [q(0.025), q(0.975)];
  const baselineMedianUs = median(baseline);
  const candidateMedianUs = median(candidate);
  const speedup = baselineMedianUs / candidateMedianUs;
  // an interval clear of 1 but inside ±RESOLUTION is a difference the timing cannot claim (see RESOLUTION)
  const within = low >= 1 / (1 + RESOLUTION) && high <= 1 + RESOLUTION;
  const verdict = within ? "same" : low > 1 ? "faster" : high < 1 ? "slower" : "same";
  const f = (x: number) => x.toFixed(2);
  const f3 = (x: number) => x.toFixed(3);
  const text =
    verdict === "faster" ? `${f(speedup)}× faster (${f(low)}–${f(high)})`
    : verdict === "slower" ? `${f(1 / speedup)}× slower (${f(1 / high)}–${f(1 / low)})`
    : within && (low > 1 || high < 1) ? `no difference beyond ${RESOLUTION * 100}% (${f3(low)}–${f3(high)})`
    : `no difference beyond noise (${f(low)}–${f(high)})`;
  return { pairs: n, baselineMedianUs, candidateMedianUs, speedup, low, high, verdict, text, method: `ratio of medians over ${n} interleaved launch pairs, 95% paired-bootstrap interval (${resamples} resamples, fixed seed); differences within ±${RESOLUTION * 100}% are not claimed` };
}
