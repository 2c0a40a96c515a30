/**
 * The one timing compare of kerncap: is kernel B faster than kernel A? It serves `replay
 * --against`, validate and the watch (the rebuilt kernel against the captured module), `tune`
 * (each config against the app's) and `check`'s baseline (this run's times against a stored
 * run's, compareUnpaired). Pure functions over times in µs; the GPU side (the interleaved
 * launches) is src/replay/engine.ts ReplaySession.runCompared.
 *
 * What it guards against, and how (targets: a comparison of a kernel with itself claims a
 * difference at most 1 time in 100; a real 3% change is found at least 95 times in 100):
 * - Drift and position: the launches are interleaved in balanced blocks (A B then B A: ABBA),
 *   and the estimate is built from per-block differences of log-times, in which a clock step or
 *   a linear drift, and the advantage of launching first, cancel.
 * - Heavy tails and outliers (a preemption, a clock change mid-launch): the estimate is the
 *   Hodges–Lehmann median of the block differences' Walsh averages, its interval the Wilcoxon
 *   signed-rank one, at 99%: rank-based, so one launch 10× slow moves neither.
 * - Differences that are real but not the kernel's (a module loaded at another address, the
 *   L2 state a restore leaves): each kernel is timed from two loads of its module in the same
 *   rounds (`aa`, `bb`); each side is the geometric mean of its two loads (the placement's share
 *   of the difference halved), the intervals of the two A/A differences are the kernels' own
 *   noise floor, and no difference inside it, or inside MIN_MARGIN, is claimed.
 * - Too few samples: adaptiveCompare takes more rounds until the interval is decided (clear of
 *   the margin, or inside it) and the times' distribution has stopped changing (the entropy
 *   criterion of NVIDIA nvbench, nvbench/detail/entropy_criterion.cxx), or a time budget ends.
 *   When no difference is claimed, `detectable` says the smallest difference that this
 *   measurement would have claimed.
 */
import { median } from "./compare.ts";

export interface TimingComparison {
  /** Launch pairs (rounds) compared. */
  pairs: number;
  /** Median kernel time (µs) of the baseline (A) and the candidate (B). */
  baselineMedianUs: number;
  candidateMedianUs: number;
  /** A's time / B's time, estimated (Hodges–Lehmann over balanced blocks): above 1, the candidate is faster. */
  speedup: number;
  /** The 99% interval of `speedup` (Wilcoxon signed-rank over the blocks; with too few launches for one, the range of the pairs' ratios). */
  low: number;
  high: number;
  /** faster / slower: the interval lies wholly beyond the margin; same: otherwise (no claim). */
  verdict: "faster" | "slower" | "same";
  /** The interval lies wholly beyond the margin (a claim) or wholly within it ("same within"): more launches would not change the verdict. */
  decided: boolean;
  /** The smallest difference claimed (a fraction: 0.01 = 1%): MIN_MARGIN, or the A/A floor where that is larger. */
  margin: number;
  /** The baseline against its second load in the same rounds (speedup interval), when timed: the kernel's own noise floor. */
  aa: { speedup: number; low: number; high: number } | null;
  /** The candidate against its second load, likewise (null when not timed). */
  bb: { speedup: number; low: number; high: number } | null;
  /** The smallest difference (a fraction) that this measurement would have claimed: margin + half the interval's width (null: too few launches for an interval). */
  detectable: number | null;
  /** Wall time (s) of the timed rounds, every batch of adaptiveCompare's (absent where one batch was timed outside it). */
  seconds?: number;
  /** Seconds waited for the GPU's timing window before the timed rounds (RunOptions.timingWindow; absent where there was none, 0 where it was free). */
  waitSeconds?: number;
  /** "1.07× faster (1.05–1.09)", "1.12× slower (1.10–1.15)", "same within 1% (0.996–1.004)", "no difference claimed: …". */
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
 * The smallest speed difference a comparison claims (a fraction: 0.01 = 1%). Measured on the
 * H200: the same module timed against itself gave a 310 µs kernel an interval of 1.00005–1.00015
 * (clear of 1, for no change) and a 9 µs cuBLAS GEMM one of 1.0035–1.0211. Below this a difference
 * belongs to the timing (event resolution of 32 ns, the launch's position, the L2 state the
 * restore leaves), not to the kernel.
 */
export const MIN_MARGIN = 0.01;
/** @deprecated the old name of MIN_MARGIN */
export const RESOLUTION = MIN_MARGIN;

/** Confidence of the interval: 99%, so that a claim by chance is rarer than the 1-in-100 target even before the margin. */
export const CONFIDENCE = 0.99;

/** Fewest launch pairs callers accept (--iters); an interval needs at least MIN_BLOCKS blocks, and adaptiveCompare takes more. */
export const MIN_PAIRS = 5;
/** Fewest blocks for a 99% signed-rank interval (7 give none: 2/2^7 > 0.01). */
export const MIN_BLOCKS = 8;

/** Standard normal quantile (Acklam's rational approximation; |error| < 1.2e-9). */
export function normalQuantile(p: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  }
  if (p > 1 - lo) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

/** Exact number of signed-rank sums ≤ k for n (counts of subsets of {1..n} with sum ≤ k), for small n. */
function signedRankCdfCount(n: number, kMax: number): number[] {
  // dp[s] = subsets of {1..i} with sum s
  let dp = new Float64Array(kMax + 1);
  dp[0] = 1;
  for (let i = 1; i <= n; i++) {
    const next = dp.slice();
    for (let s = i; s <= kMax; s++) next[s]! += dp[s - i]!;
    dp = next;
  }
  const cum: number[] = [];
  let acc = 0;
  for (let s = 0; s <= kMax; s++) cum.push((acc += dp[s]!));
  return cum;
}

/**
 * The rank k of the Walsh averages that bounds a (1 − alpha) interval for n blocks: the interval
 * is [W(k), W(M − 1 − k)] of the M = n(n+1)/2 sorted Walsh averages (0-based). Exact for n ≤ 60,
 * the normal approximation above. undefined when n is too small for any interval at that level.
 */
export function signedRankCritical(n: number, alpha: number): number | undefined {
  const M = (n * (n + 1)) / 2;
  if (n <= 60) {
    const cum = signedRankCdfCount(n, M);
    const total = 2 ** n;
    let k = -1;
    while (k + 1 < M && cum[k + 1]! / total <= alpha / 2) k++;
    return k < 0 ? undefined : k + 1;
  }
  const z = normalQuantile(1 - alpha / 2);
  return Math.max(1, Math.floor(M / 2 - z * Math.sqrt((n * (n + 1) * (2 * n + 1)) / 24)));
}

/**
 * Hodges–Lehmann estimate and Wilcoxon signed-rank interval of the centre of `d` (block
 * differences, any unit). Above 400 values the Walsh averages are taken over an even thinning of
 * the sorted pairs (every value still in), so the cost stays O(400²).
 * @returns estimate and interval, or undefined with fewer than MIN_BLOCKS values
 */
export function signedRankInterval(d: readonly number[], confidence = CONFIDENCE): { estimate: number; low: number; high: number } | undefined {
  const n = d.length;
  if (n < MIN_BLOCKS) return undefined;
  const k = signedRankCritical(n, 1 - confidence);
  if (k === undefined) return undefined;
  const M = (n * (n + 1)) / 2;
  let w: Float64Array;
  let scale = 1;
  if (M <= (400 * 401) / 2) {
    w = new Float64Array(M);
    let t = 0;
    for (let i = 0; i < n; i++) for (let j = i; j < n; j++) w[t++] = (d[i]! + d[j]!) / 2;
  } else {
    // a random-free subsample of the Walsh averages: pairs (i, j) on a lattice, every i included
    const stride = Math.ceil(M / 80200);
    const out: number[] = [];
    let t = 0;
    for (let i = 0; i < n; i++) for (let j = i; j < n; j++, t++) if (t % stride === 0) out.push((d[i]! + d[j]!) / 2);
    w = Float64Array.from(out);
    scale = w.length / M;
  }
  w.sort();
  const at = (r: number) => w[Math.min(w.length - 1, Math.max(0, Math.round(r * scale)))]!;
  const mid = (w.length - 1) / 2;
  const estimate = (w[Math.floor(mid)]! + w[Math.ceil(mid)]!) / 2;
  return { estimate, low: at(k - 1), high: at(M - k) };
}

/** Per-block mean of ln(a) − ln(b): blocks of `block` consecutive rounds (the last partial block dropped). */
export function blockDifferences(a: readonly number[], b: readonly number[], block: number): number[] {
  const out: number[] = [];
  for (let s = 0; s + block <= a.length; s += block) {
    let x = 0;
    for (let i = s; i < s + block; i++) x += Math.log(a[i]!) - Math.log(b[i]!);
    out.push(x / block);
  }
  return out;
}

export interface CompareOptions {
  /** Rounds in one balanced block (the engine's order: 2 for two kernels, A B then B A; 2k for k kernels). Default 2. */
  block?: number;
  /** The baseline's times again, from a second load of its module in the same rounds: its difference from `baseline` is the A/A floor. */
  aa?: readonly number[];
  /**
   * The candidate's times again, from a second load of its module (with `aa`): each side is then
   * the geometric mean of its two loads, which halves the variance a module's placement adds, and
   * the floor is the larger of the two A/A intervals' edges.
   */
  bb?: readonly number[];
  /** Smallest difference claimed (fraction); default MIN_MARGIN. */
  margin?: number;
  confidence?: number;
}

function checkTimes(baseline: readonly number[], candidate: readonly number[], aa?: readonly number[], bb?: readonly number[]): void {
  const n = baseline.length;
  if (n !== candidate.length || n < MIN_PAIRS || (aa && aa.length !== n) || (bb && bb.length !== n))
    throw new Error(`compareTimings: ${n} and ${candidate.length} timings (equal counts, at least ${MIN_PAIRS})`);
  if (![...baseline, ...candidate, ...(aa ?? []), ...(bb ?? [])].every((x) => Number.isFinite(x) && x > 0))
    throw new Error("compareTimings: a time that is not a positive number");
}

/** Per round, the geometric mean of two loads' times (µs). */
const geo = (x: readonly number[], y: readonly number[]) => x.map((v, i) => Math.sqrt(v * y[i]!));

const pct = (x: number) => `${+(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`;

/**
 * Compare interleaved timings: baseline[i] and candidate[i] (µs) taken in round i of the
 * engine's balanced order (src/replay/engine.ts timeInterleaved), `o.aa[i]` too when given.
 * @throws Error when the lists differ in length or hold fewer than MIN_PAIRS pairs (the callers
 *   check --iters first) or a time that is not a positive number
 */
export function compareTimings(baseline: readonly number[], candidate: readonly number[], o: CompareOptions = {}): TimingComparison {
  checkTimes(baseline, candidate, o.aa, o.bb);
  const block = Math.max(1, o.block ?? 2);
  const confidence = o.confidence ?? CONFIDENCE;
  const n = baseline.length;
  const both = o.aa !== undefined && o.bb !== undefined;
  const ci = signedRankInterval(
    both ? blockDifferences(geo(baseline, o.aa!), geo(candidate, o.bb!), block) : blockDifferences(baseline, candidate, block),
    confidence,
  );
  const aaCi = o.aa ? signedRankInterval(blockDifferences(baseline, o.aa, block), confidence) : undefined;
  const bbCi = both ? signedRankInterval(blockDifferences(candidate, o.bb!, block), confidence) : undefined;
  // the A/A floor: the largest difference the kernel shows against itself at this confidence
  const edge = (x: { low: number; high: number } | undefined) => (x ? Math.max(Math.abs(x.low), Math.abs(x.high)) : 0);
  const floor = Math.expm1(Math.max(edge(aaCi), edge(bbCi)));
  const margin = Math.max(o.margin ?? MIN_MARGIN, floor);
  const baselineMedianUs = median([...baseline]);
  const candidateMedianUs = median([...candidate]);
  const method =
    `${n} launch pairs interleaved in balanced blocks of ${block} (A B, B A), ln-time differences per block; Hodges–Lehmann estimate, ${confidence * 100}% Wilcoxon signed-rank interval; ` +
    `${both ? "each kernel's module loaded twice, each side the geometric mean of its two loads; " : ""}differences within ±${pct(margin)} are not claimed (${aaCi ? `the larger of ${pct(o.margin ?? MIN_MARGIN)} and the kernel's own A/A interval${both ? "s" : ""}, ${both ? "each module" : "its module"} loaded twice` : `the least claimed`})`;
  const asSpeedup = (x: { estimate: number; low: number; high: number } | undefined) =>
    x ? { speedup: Math.exp(x.estimate), low: Math.exp(x.low), high: Math.exp(x.high) } : null;
  const aa = asSpeedup(aaCi);
  const bb = asSpeedup(bbCi);
  if (!ci) {
    // no interval: the range of the pairs' ratios stands in for it (never a claim)
    const ratios = baseline.map((x, i) => x / candidate[i]!);
    const speedup = baselineMedianUs / candidateMedianUs;
    return {
      pairs: n,
      baselineMedianUs,
      candidateMedianUs,
      speedup,
      low: Math.min(...ratios),
      high: Math.max(...ratios),
      verdict: "same",
      decided: false,
      margin,
      aa,
      bb,
      detectable: null,
      text: `no difference claimed: ${n} launch pairs are too few for an interval (at least ${MIN_BLOCKS * block})`,
      method,
    };
  }
  const speedup = Math.exp(ci.estimate);
  const [low, high] = [Math.exp(ci.low), Math.exp(ci.high)];
  const up = Math.log1p(margin);
  const faster = ci.low > up;
  const slower = ci.high < -up;
  const within = ci.low >= -up && ci.high <= up;
  const detectable = Math.expm1(up + (ci.high - ci.low) / 2);
  const f = (x: number) => x.toFixed(2);
  const f3 = (x: number) => x.toFixed(3);
  const text = faster
    ? `${f(speedup)}× faster (${f(low)}–${f(high)})`
    : slower
      ? `${f(1 / speedup)}× slower (${f(1 / high)}–${f(1 / low)})`
      : within
        ? `same within ${pct(margin)} (${f3(low)}–${f3(high)})`
        : `no difference claimed (${f3(low)}–${f3(high)}): the smallest this measurement could have seen is ${pct(detectable)}`;
  return {
    pairs: n,
    baselineMedianUs,
    candidateMedianUs,
    speedup,
    low,
    high,
    verdict: faster ? "faster" : slower ? "slower" : "same",
    decided: faster || slower || within,
    margin,
    aa,
    bb,
    detectable,
    text,
    method,
  };
}

/**
 * Shannon entropy (bits) of times binned at `binUs`, after each sample: the sequence nvbench's
 * entropy criterion watches (nvbench/detail/entropy_criterion.cxx). It rises while new times
 * keep appearing and flattens once the distribution is sampled.
 */
export function entropySeries(timesUs: readonly number[], binUs: number): number[] {
  const counts = new Map<number, number>();
  const out: number[] = [];
  // H = log2 N − (Σ c log2 c) / N, kept incrementally
  let sumClogC = 0;
  for (const [i, t] of timesUs.entries()) {
    const key = Math.round(t / binUs);
    const c = counts.get(key) ?? 0;
    if (c) sumClogC -= c * Math.log2(c);
    sumClogC += (c + 1) * Math.log2(c + 1);
    counts.set(key, c + 1);
    const N = i + 1;
    out.push(Math.log2(N) - sumClogC / N);
  }
  return out;
}

/**
 * Whether the times' distribution has stopped changing: the entropy of the last half of the
 * samples (at least 16) grows by less than `maxSlope` bits per sample on a least-squares line
 * (nvbench stops at an angle of 0.048°, about 8.4e-4 bits per sample). Bins of `binUs` (the
 * timer's resolution, or a share of the median: a continuous clock never repeats a value).
 */
export function entropyStable(timesUs: readonly number[], binUs: number, maxSlope = 8.4e-4): boolean {
  if (timesUs.length < 32) return false;
  const h = entropySeries(timesUs, binUs);
  const from = Math.floor(h.length / 2);
  const ys = h.slice(from);
  const n = ys.length;
  const mx = (n - 1) / 2;
  const my = ys.reduce((a, y) => a + y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (i - mx) * (ys[i]! - my);
    sxx += (i - mx) ** 2;
  }
  return sxy / sxx < maxSlope;
}

/** Bin width for entropyStable: the event timer's resolution (32 ns) or 0.5% of the median, whichever is larger. */
export function entropyBinUs(timesUs: readonly number[]): number {
  return Math.max(0.032, 0.005 * median([...timesUs]));
}

/**
 * The engine's launch order in round `r` for `k` kernels (src/replay/engine.ts timeInterleaved):
 * the rotation by ⌊r/2⌋ of 0..k−1, reversed on odd rounds. Over any 2k consecutive rounds that
 * start at an even round, each kernel takes each position equally often (k = 2: A B, B A, B A,
 * A B), so a block of 2 rounds (k = 2) or 2k rounds cancels the advantage of launching first.
 */
export function roundOrder(k: number, r: number): number[] {
  const rot = Math.floor(r / 2) % k;
  const order = Array.from({ length: k }, (_, i) => (i + rot) % k);
  return r & 1 ? order.reverse() : order;
}

/** Rounds of one balanced block for k kernels (roundOrder): 2 for two, 2k for more. */
export function blockOf(k: number): number {
  return k <= 2 ? 2 : 2 * k;
}

/** Times of one round batch: each kernel's times in launch order (µs). */
export interface RoundTimes {
  a: number[];
  b: number[];
  aa?: number[];
  bb?: number[];
}

/** adaptiveCompare's default bound on the rounds of one comparison. */
export const MAX_ROUNDS = 4096;

/** Default wall-clock budget (s) of adaptiveCompare's batches after the first. */
export const COMPARE_SECONDS = 1;

export interface AdaptiveOptions extends CompareOptions {
  /** Rounds of the first batch (the caller's --iters; rounded up to whole blocks). */
  minRounds: number;
  /** Most rounds in all (default MAX_ROUNDS). */
  maxRounds?: number;
  /** Wall-clock budget (s) for the batches after the first (default COMPARE_SECONDS). */
  budgetSeconds?: number;
  /** Clock in seconds (default performance.now()/1000; tests pass a simulated one). */
  now?: () => number;
}

/**
 * Sample until the comparison is decided and the times' distribution is stable, or the budget
 * ends: a first batch of minRounds rounds, then batches doubling the total. `take(rounds)` times
 * that many more rounds (continuing the balanced order: the engine keeps the round count) and
 * returns their times. Every batch is a whole number of blocks.
 * @returns the comparison over every round taken, and the rounds and seconds it took
 */
export async function adaptiveCompare(
  take: (rounds: number) => RoundTimes | Promise<RoundTimes>,
  o: AdaptiveOptions,
): Promise<{ compare: TimingComparison; rounds: number; seconds: number; batches: number }> {
  const block = Math.max(1, o.block ?? 2);
  const whole = (r: number) => Math.ceil(r / block) * block;
  const maxRounds = whole(o.maxRounds ?? MAX_ROUNDS);
  const now = o.now ?? (() => performance.now() / 1000);
  const t0 = now();
  const a: number[] = [];
  const b: number[] = [];
  const aa: number[] = [];
  const bb: number[] = [];
  let withAa = false;
  let withBb = false;
  let batches = 0;
  let want = whole(Math.max(o.minRounds, MIN_PAIRS));
  for (;;) {
    const got = await take(want);
    batches++;
    a.push(...got.a);
    b.push(...got.b);
    if (got.aa) {
      withAa = true;
      aa.push(...got.aa);
    }
    if (got.bb) {
      withBb = true;
      bb.push(...got.bb);
    }
    const c = compareTimings(a, b, { ...o, block, ...(withAa ? { aa } : {}), ...(withBb ? { bb } : {}) });
    const stable = entropyStable(a, entropyBinUs(a)) && entropyStable(b, entropyBinUs(b));
    const spent = now() - t0;
    const budget = o.budgetSeconds ?? COMPARE_SECONDS;
    const outOfBudget = budget <= 0 || (batches > 1 && spent >= budget);
    if ((c.decided && stable) || a.length >= maxRounds || outOfBudget) return { compare: c, rounds: a.length, seconds: spent, batches };
    // double the rounds, within what remains of the budget at the rate seen so far
    const rate = a.length / Math.max(spent, 1e-6);
    const left = Math.max(block, Math.floor((budget - spent) * rate));
    want = whole(Math.min(a.length, maxRounds - a.length, batches > 1 ? left : a.length));
  }
}

/**
 * Two sets of times taken in different processes (check's baseline against this run): the
 * ratio now/base of their locations, Hodges–Lehmann over ln-times with the Mann–Whitney interval
 * at `confidence`, compared with a threshold (fraction) rather than with 1, since times in two
 * processes differ by more than interleaved ones (clocks, placement). Above 300 times each, an
 * even thinning of the sorted times is used.
 * @returns ratio (now / base: above 1, slower) and its interval, or undefined with fewer than 6 times on either side
 */
export function compareUnpaired(
  now: readonly number[],
  base: readonly number[],
  confidence = CONFIDENCE,
): { ratio: number; low: number; high: number } | undefined {
  const thin = (x: readonly number[]) => {
    const s = x
      .filter((t) => Number.isFinite(t) && t > 0)
      .map(Math.log)
      .sort((p, q) => p - q);
    if (s.length <= 300) return s;
    return Array.from({ length: 300 }, (_, i) => s[Math.floor((i * s.length) / 300)]!);
  };
  const x = thin(now);
  const y = thin(base);
  const [m, n] = [x.length, y.length];
  if (m < 6 || n < 6) return undefined;
  const diffs = new Float64Array(m * n);
  let t = 0;
  for (const p of x) for (const q of y) diffs[t++] = p - q;
  diffs.sort();
  const z = normalQuantile(1 - (1 - confidence) / 2);
  const k = Math.max(0, Math.floor((m * n) / 2 - z * Math.sqrt((m * n * (m + n + 1)) / 12)));
  const mid = (diffs.length - 1) / 2;
  const est = (diffs[Math.floor(mid)]! + diffs[Math.ceil(mid)]!) / 2;
  return { ratio: Math.exp(est), low: Math.exp(diffs[k]!), high: Math.exp(diffs[Math.min(diffs.length - 1, m * n - 1 - k)]!) };
}
