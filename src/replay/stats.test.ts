import { describe, expect, test } from "bun:test";
import { compareTimings, seededRandom } from "./stats.ts";

/** n launch pairs around `a` µs and `b` µs, with ±2% noise and a drift that both share (clock steps). */
function pairs(n: number, a: number, b: number, seed = 1): [number[], number[]] {
  const r = seededRandom(seed);
  const A: number[] = [], B: number[] = [];
  for (let i = 0; i < n; i++) {
    const drift = 1 + 0.05 * Math.sin(i / 7); // ±5%, the same for both members of a pair
    A.push(a * drift * (1 + 0.02 * (r() - 0.5)));
    B.push(b * drift * (1 + 0.02 * (r() - 0.5)));
  }
  return [A, B];
}

describe("interleaved timing comparison", () => {
  test("a 7% faster candidate: faster, the interval around 1.07 and above 1, despite a shared drift larger than the difference", () => {
    const c = compareTimings(...pairs(50, 107, 100));
    expect(c.verdict).toBe("faster");
    expect(c.low).toBeGreaterThan(1.04);
    expect(c.high).toBeLessThan(1.1);
    expect(c.low).toBeLessThanOrEqual(c.speedup);
    expect(c.high).toBeGreaterThanOrEqual(c.speedup);
    expect(c.text).toMatch(/^1\.0[6-8]× faster \(1\.0\d–1\.\d\d\)$/);
  });
  test("the same kernel twice: no difference beyond noise, the interval holds 1", () => {
    const c = compareTimings(...pairs(30, 50, 50));
    expect(c.verdict).toBe("same");
    expect(c.low).toBeLessThan(1);
    expect(c.high).toBeGreaterThan(1);
    expect(c.text).toStartWith("no difference beyond noise (");
  });
  test("a difference clear of 1 but within ±0.5% (the module against itself on the H200: 1.00005–1.00015) is not claimed", () => {
    // a 310 µs kernel with 0.05% noise, the candidate 0.04% faster: the interval is tight and above 1
    const r = seededRandom(3);
    const A = Array.from({ length: 200 }, () => 310.2 * (1 + 0.0005 * (r() - 0.5)));
    const B = A.map((x) => x / 1.0004);
    const c = compareTimings(A, B);
    expect(c.low).toBeGreaterThan(1);
    expect(c.verdict).toBe("same");
    expect(c.text).toMatch(/^no difference beyond 0\.5% \(1\.00\d–1\.00\d\)$/);
    // 2% faster with the same tight noise: claimed
    expect(compareTimings(A, A.map((x) => x / 1.02)).verdict).toBe("faster");
  });
  test("a slower candidate says slower with the inverted ratio", () => {
    const c = compareTimings(...pairs(20, 100, 125));
    expect(c.verdict).toBe("slower");
    expect(c.speedup).toBeCloseTo(0.8, 1);
    expect(c.text).toMatch(/^1\.2[4-6]× slower \(1\.\d\d–1\.\d\d\)$/);
  });
  test("a fixed seed: the same timings give the same interval; medians in µs", () => {
    const [A, B] = pairs(12, 10, 9);
    expect(compareTimings(A, B)).toEqual(compareTimings(A, B));
    expect(compareTimings([1, 2, 3, 4, 5], [1, 1, 1, 1, 1]).baselineMedianUs).toBe(3);
    expect(seededRandom(5)()).toBe(seededRandom(5)());
  });
  test("too few pairs, unequal counts or a non-positive time are refused", () => {
    expect(() => compareTimings([1, 2, 3, 4], [1, 2, 3, 4])).toThrow(/at least 5/);
    expect(() => compareTimings([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6])).toThrow();
    expect(() => compareTimings([1, 2, 3, 4, NaN], [1, 2, 3, 4, 5])).toThrow(/positive/);
  });
});
