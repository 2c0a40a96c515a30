import { describe, expect, test } from "bun:test";
import {
  adaptiveCompare,
  compareTimings,
  compareUnpaired,
  entropyStable,
  normalQuantile,
  roundOrder,
  seededRandom,
  signedRankCritical,
  signedRankInterval,
  type RoundTimes,
} from "../../../src/replay/stats.ts";

/**
 * A simulated GPU timing series, as the engine takes it: `kernels` launched once per round in the
 * engine's balanced order (roundOrder), each launch's time (µs) =
 *   true time × its module load's bias × drift (slow wander + clock steps) × position effect
 *   × per-launch noise (log-normal) × an occasional heavy-tailed outlier (Pareto),
 * quantized to the event timer's 32 ns. Realistic magnitudes for the H200: noise 0.3% (300 µs)
 * to 3% (2 µs), a few % of drift over a run, 1-2% outliers up to several × slower.
 */
function simulator(o: { us: number[]; noise: number; seed: number; loadBias?: number; outliers?: number; first?: number; slowHalf?: number }) {
  const r = seededRandom(o.seed);
  const gauss = () => {
    const u = Math.max(r(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  };
  const k = o.us.length;
  // a module load places the code somewhere: a small fixed bias per load
  const bias = o.us.map(() => Math.exp((o.loadBias ?? 0.001) * gauss()));
  let round = 0;
  let drift = 1;
  let clock = 0; // simulated seconds
  return {
    now: () => clock,
    take(rounds: number): number[][] {
      const out = o.us.map(() => [] as number[]);
      for (let i = 0; i < rounds; i++, round++) {
        drift *= Math.exp(0.002 * gauss()); // random-walk wander
        if (r() < 0.003) drift *= r() < 0.5 ? 0.97 : 1.03; // a clock step
        const order = roundOrder(k, round);
        for (const [pos, j] of order.entries()) {
          let t =
            o.us[j]! * bias[j]! * drift * (pos === 0 ? 1 + (o.first ?? 0.004) : 1) * (r() < 0.5 ? 1 + (o.slowHalf ?? 0) : 1) * Math.exp(o.noise * gauss());
          if (r() < (o.outliers ?? 0.02)) t *= 1 + 0.05 / Math.pow(Math.max(r(), 1e-6), 1 / 1.5); // Pareto tail
          t = Math.max(0.032, Math.round(t / 0.032) * 0.032);
          out[j]!.push(t);
          clock += (t + 15) / 1e6; // the launch and the restore before it
        }
      }
      return out;
    },
  };
}

/** One adaptive comparison, as runCompared makes it: the baseline, the candidate and the second load of each (A, B, A', B'). */
async function simulatedCompare(
  us: number,
  ratio: number,
  seed: number,
  noise: number,
  harsh: { loadBias: number; first: number; slowHalf: number } | object = {},
) {
  const sim = simulator({ us: [us, us * ratio, us, us * ratio], noise, seed, ...harsh });
  const take = (n: number): RoundTimes => {
    const [a, b, aa, bb] = sim.take(n);
    return { a: a!, b: b!, aa: aa!, bb: bb! };
  };
  return (await adaptiveCompare(take, { minRounds: 24, block: 8, budgetSeconds: 1, now: sim.now })).compare;
}

const NOISE: Record<number, number> = { 2: 0.03, 9: 0.015, 40: 0.008, 300: 0.003 };

describe("interleaved timing comparison", () => {
  test("the signed-rank interval: exact critical values (n = 8 at 99%: the extremes; n = 20: 38 from the tables), the normal approximation above 60", () => {
    expect(signedRankCritical(7, 0.01)).toBeUndefined();
    expect(signedRankCritical(8, 0.01)).toBe(1);
    // tables of the Wilcoxon signed-rank test, two-sided alpha 0.01, n = 20: T ≤ 37 rejects, so the interval starts at rank 38
    expect(signedRankCritical(20, 0.01)).toBe(38);
    expect(signedRankCritical(20, 0.05)).toBe(53);
    expect(normalQuantile(0.995)).toBeCloseTo(2.5758, 3);
    // the exact count at n = 60 and the normal approximation (used above 60) agree within 1%
    const approx = (n: number) => (n * (n + 1)) / 4 - normalQuantile(0.995) * Math.sqrt((n * (n + 1) * (2 * n + 1)) / 24);
    expect(Math.abs(signedRankCritical(60, 0.01)! / approx(60) - 1)).toBeLessThan(0.01);
    expect(signedRankCritical(100, 0.01)).toBe(Math.floor(approx(100)));
    const ci = signedRankInterval([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])!;
    expect(ci.estimate).toBe(5.5);
    expect(ci.low).toBeLessThan(5.5);
    expect(ci.high).toBeGreaterThan(5.5);
  });

  test("1000 simulated A/A comparisons (a kernel against itself, its module loaded twice) on kernels of 2, 9, 40 and 300 µs: at most 1% claim a difference", async () => {
    let claims = 0;
    let n = 0;
    const detectable: number[] = [];
    for (const us of [2, 9, 40, 300]) {
      for (let s = 0; s < 250; s++, n++) {
        const c = await simulatedCompare(us, 1, 1000 * us + s, NOISE[us]!);
        if (c.verdict !== "same") claims++;
        else detectable.push(c.detectable!);
      }
    }
    expect(n).toBe(1000);
    expect(claims).toBeLessThanOrEqual(10);
    // when it claims none, it says what it could have seen: below the 3% the target asks to find, mostly
    detectable.sort((a, b) => a - b);
    expect(detectable[Math.floor(detectable.length / 2)]!).toBeLessThan(0.03);
  }, 120_000);

  test("harsher: a 3% advantage of launching first, half the launches 5% slower, a 0.3% bias per module load: still at most 1% of 400 A/A comparisons claim", async () => {
    let claims = 0;
    for (const us of [2, 9, 40, 300])
      for (let s = 0; s < 100; s++)
        if ((await simulatedCompare(us, 1, 50_000 + 100 * us + s, NOISE[us]!, { loadBias: 0.003, first: 0.03, slowHalf: 0.05 })).verdict !== "same") claims++;
    expect(claims).toBeLessThanOrEqual(4);
  }, 120_000);

  test("a real 3% change (slower and faster) found at least 95 times in 100 on the same kernels; a 10% one every time", async () => {
    for (const [ratio, need] of [
      [1.03, 0.95],
      [1 / 1.03, 0.95],
      [1.1, 1],
    ] as const) {
      let found = 0;
      let n = 0;
      for (const us of [2, 9, 40, 300]) {
        for (let s = 0; s < 60; s++, n++) {
          const c = await simulatedCompare(us, ratio, 7000 * us + s + Math.round(ratio * 100), NOISE[us]!);
          if (c.verdict === (ratio > 1 ? "slower" : "faster")) found++;
        }
      }
      expect(found / n).toBeGreaterThanOrEqual(need);
    }
  }, 120_000);

  test("a 7% faster candidate: faster, the interval around 1.07, despite a shared drift larger than the difference", () => {
    const r = seededRandom(1);
    const A: number[] = [],
      B: number[] = [];
    for (let i = 0; i < 60; i++) {
      const drift = 1 + 0.05 * Math.sin(i / 7); // ±5%, the same for both members of a pair
      A.push(107 * drift * (1 + 0.02 * (r() - 0.5)));
      B.push(100 * drift * (1 + 0.02 * (r() - 0.5)));
    }
    const c = compareTimings(A, B);
    expect(c.verdict).toBe("faster");
    expect(c.decided).toBe(true);
    expect(c.low).toBeGreaterThan(1.05);
    expect(c.high).toBeLessThan(1.09);
    expect(c.text).toMatch(/^1\.0[6-8]× faster \(1\.0\d–1\.\d\d\)$/);
    const s = compareTimings(B, A);
    expect(s.verdict).toBe("slower");
    expect(s.text).toMatch(/^1\.0[6-8]× slower \(1\.0\d–1\.\d\d\)$/);
  });

  test("a tight interval clear of 1 but within the 1% margin (the module against itself on the H200: 1.00005–1.00015) is 'same within 1%'", () => {
    const r = seededRandom(3);
    const A = Array.from({ length: 200 }, () => 310.2 * (1 + 0.0005 * (r() - 0.5)));
    const c = compareTimings(
      A,
      A.map((x) => x / 1.004),
    );
    expect(c.low).toBeGreaterThan(1);
    expect(c.verdict).toBe("same");
    expect(c.decided).toBe(true);
    expect(c.text).toMatch(/^same within 1% \(1\.00\d–1\.00\d\)$/);
    expect(
      compareTimings(
        A,
        A.map((x) => x / 1.02),
      ).verdict,
    ).toBe("faster");
  });

  test("the A/A floor raises the margin: a kernel whose second load differs by 2% claims no 1.5% difference", () => {
    const r = seededRandom(9);
    const A = Array.from({ length: 120 }, () => 50 * (1 + 0.002 * (r() - 0.5)));
    const AA = A.map((x) => x * 1.02);
    const B = A.map((x) => x / 1.015);
    expect(compareTimings(A, B).verdict).toBe("faster"); // no floor: 1.5% is beyond the 1% margin
    const c = compareTimings(A, B, { aa: AA });
    expect(c.margin).toBeGreaterThan(0.019);
    expect(c.verdict).toBe("same");
    expect(c.aa!.speedup).toBeCloseTo(1 / 1.02, 3);
    expect(
      compareTimings(
        A,
        A.map((x) => x / 1.06),
        { aa: AA },
      ).verdict,
    ).toBe("faster");
  });

  test("an undecided comparison says the smallest difference it could have seen; one launch 10× slow changes nothing", () => {
    const r = seededRandom(4);
    const A = Array.from({ length: 16 }, () => 10 * (1 + 0.08 * (r() - 0.5)));
    const B = A.map((x) => x * (1 + 0.08 * (r() - 0.5)));
    const c = compareTimings(A, B);
    expect(c.decided).toBe(false);
    expect(c.verdict).toBe("same");
    expect(c.text).toMatch(/^no difference claimed \(0\.\d{3}–1\.\d{3}\): the smallest this measurement could have seen is \d+(\.\d)?%$/);
    expect(c.detectable!).toBeGreaterThan(c.margin);
    const B2 = [...B];
    B2[5] = B2[5]! * 10;
    expect(compareTimings(A, B2).verdict).toBe("same");
  });

  test("the same timings give the same answer; medians in µs; too few pairs, unequal counts or a non-positive time are refused", () => {
    const A = [10, 10.1, 9.9, 10, 10.2, 10, 9.8, 10.1, 10, 10.3, 9.9, 10, 10, 10.1, 9.9, 10];
    const B = A.map((x) => x * 0.8);
    expect(compareTimings(A, B)).toEqual(compareTimings(A, B));
    expect(compareTimings([1, 2, 3, 4, 5], [1, 1, 1, 1, 1]).baselineMedianUs).toBe(3);
    expect(compareTimings([1, 2, 3, 4, 5], [1, 1, 1, 1, 1]).text).toContain("too few for an interval");
    expect(() => compareTimings([1, 2, 3, 4], [1, 2, 3, 4])).toThrow(/at least 5/);
    expect(() => compareTimings([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6])).toThrow();
    expect(() => compareTimings([1, 2, 3, 4, NaN], [1, 2, 3, 4, 5])).toThrow(/positive/);
  });

  test("the engine's round order is balanced: over 2k rounds each kernel takes each position equally often", () => {
    expect([0, 1, 2, 3].map((r) => roundOrder(2, r))).toEqual([
      [0, 1],
      [1, 0],
      [1, 0],
      [0, 1],
    ]);
    for (const k of [2, 3, 5]) {
      const seen = Array.from({ length: k }, () => new Array<number>(k).fill(0));
      for (let r = 0; r < 2 * k; r++) roundOrder(k, r).forEach((j, pos) => seen[j]![pos]!++);
      for (const row of seen) expect(new Set(row).size).toBe(1);
    }
  });

  test("entropy criterion: a series still spreading is not stable, one that has sampled its distribution is", () => {
    const r = seededRandom(5);
    const steady = Array.from({ length: 400 }, () => 100 + Math.round(4 * r()));
    expect(entropyStable(steady, 1)).toBe(true);
    const spreading = Array.from({ length: 400 }, (_, i) => 100 + i); // a new value every launch
    expect(entropyStable(spreading, 1)).toBe(false);
    expect(entropyStable(steady.slice(0, 20), 1)).toBe(false); // too few to say
  });

  test("adaptive sampling stops within its budget: a noisy kernel with no difference ends at the budget, undecided or same", async () => {
    const sim = simulator({ us: [2, 2, 2], noise: 0.2, seed: 11, outliers: 0.1 });
    let batches = 0;
    const out = await adaptiveCompare(
      (n) => {
        batches++;
        const [a, b, aa] = sim.take(n);
        return { a: a!, b: b!, aa: aa! };
      },
      { minRounds: 12, block: 6, budgetSeconds: 0.05, now: sim.now },
    );
    expect(out.seconds).toBeLessThan(0.05 * 2.2);
    expect(out.batches).toBe(batches);
    expect(out.compare.verdict).toBe("same");
    expect(out.rounds % 6).toBe(0);
  });

  test("unpaired (check's baseline): a 10% slower run's interval lies above 1.05; the same distribution's holds 1", () => {
    const r = seededRandom(8);
    const base = Array.from({ length: 50 }, () => 20 * (1 + 0.01 * (r() - 0.5)));
    const now = Array.from({ length: 50 }, () => 22 * (1 + 0.01 * (r() - 0.5)));
    const c = compareUnpaired(now, base)!;
    expect(c.low).toBeGreaterThan(1.05);
    expect(c.ratio).toBeCloseTo(1.1, 2);
    const same = compareUnpaired(base.slice(0, 25), base.slice(25))!;
    expect(same.low).toBeLessThan(1);
    expect(same.high).toBeGreaterThan(1);
    expect(compareUnpaired([1, 2, 3], base)).toBeUndefined();
  });
});
