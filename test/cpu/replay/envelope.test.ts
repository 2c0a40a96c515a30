/**
 * The run-to-run envelope (src/replay/envelope.ts) on synthetic data: float-atomic-like noise
 * passes, a planted wrong value fails, deterministic elements stay bit-exact, multisets.
 */
import { describe, expect, test } from "bun:test";
import { judgeEnvelope, judgeHeld, judgeMultiset, kernelNoise, maxSpread, multisetDifference, ulp } from "../../../src/replay/envelope.ts";
import { toleranceOptions } from "../../../src/cli/args.ts";
import { multisetRegions } from "../../../src/replay/tolerance-plan.ts";

const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
const i32 = (xs: number[]) => new Uint8Array(new Int32Array(xs).buffer);

/** Sum of values in a random order, in float32: what a float atomicAdd gives from run to run. */
function atomicSum(vals: number[], seed: number): number {
  const order = vals.map((v, i) => [v, Math.sin(seed * 9973 + i)] as const).sort((a, b) => a[1] - b[1]);
  let s = Math.fround(0);
  for (const [v] of order) s = Math.fround(s + v);
  return s;
}

test("accumulations in a different order: varying elements, app inside the envelope", () => {
  const vals = Array.from({ length: 4000 }, (_, i) => Math.fround(Math.sin(i) * 1e3));
  const runs = [1, 2, 3].map((s) => f32([atomicSum(vals, s), 7, atomicSum(vals.slice(0, 100), s)]));
  const app = f32([atomicSum(vals, 42), 7, atomicSum(vals.slice(0, 100), 42)]);
  const e = judgeEnvelope("fp32", app, runs);
  expect(e.elementsVarying).toBeGreaterThanOrEqual(1);
  expect(e.maxUlpSpread).toBeGreaterThan(0);
  expect(e.outside).toBe(0);
});

test("a planted wrong value fails, in a varying and in a deterministic element", () => {
  const runs = [f32([1.0, 2.0, 3.0]), f32([1.0000001, 2.0, 3.0]), f32([0.9999999, 2.0, 3.0])];
  expect(judgeEnvelope("fp32", f32([1.0, 2.0, 3.0]), runs).outside).toBe(0);
  const far = judgeEnvelope("fp32", f32([1.01, 2.0, 3.0]), runs);
  expect(far.outside).toBe(1);
  expect(far.firstOutsideOffset).toBe(0);
  const det = judgeEnvelope("fp32", f32([1.0, 2.1, 3.0]), runs); // element 1 never varied: only the noise floor allows for it
  expect(det.outside).toBe(1);
  expect(det.firstOutsideOffset).toBe(4);
  // the region's noise floor (A) admits an element that happened not to vary among the runs
  expect(judgeEnvelope("fp32", f32([1.0, 2.0000002, 3.0]), runs, 1e-5).outside).toBe(0);
  expect(judgeEnvelope("fp32", f32([1.0, 2.5, 3.0]), runs, 1e-5).outside).toBe(1);
});

test("integers (a histogram) that do not vary stay exact; NaN only where a run had NaN", () => {
  const runs = [i32([5, 9, 0]), i32([5, 9, 0])];
  expect(judgeEnvelope("i32", i32([5, 9, 0]), runs)).toMatchObject({ elementsVarying: 0, outside: 0 });
  expect(judgeEnvelope("i32", i32([5, 10, 0]), runs).outside).toBe(1);
  expect(judgeEnvelope("fp32", f32([NaN]), [f32([NaN]), f32([1])]).outside).toBe(0);
  expect(judgeEnvelope("fp32", f32([NaN]), [f32([1]), f32([1])]).outside).toBe(1);
});

test("ulp of float32 and fp16 at 1.0", () => {
  expect(ulp(1, "fp32")).toBe(2 ** -23);
  expect(ulp(1, "fp16")).toBe(2 ** -10);
  expect(ulp(3, "i32")).toBe(0);
});

test("multiset comparison: any order of the same elements is equal; one changed element is not", () => {
  expect(multisetDifference("i32", i32([3, 1, 2, 2]), i32([2, 3, 2, 1]))).toBe(0);
  expect(multisetDifference("i32", i32([3, 1, 2, 2]), i32([2, 3, 5, 1]))).toBe(2);
});

test("maxSpread is the largest hi − lo over the runs", () => {
  expect(maxSpread("fp32", [f32([1, 5]), f32([1.5, 5]), f32([0.75, 5])])).toBe(0.75);
});

/** A stream compaction's output as an atomic append writes it: the selected values in the order `perm` gives. */
function compacted(n: number, perm: (xs: number[]) => number[], cap = n): Uint8Array {
  const sel = Array.from({ length: n }, (_, i) => i * 7 + 3);
  const out = new Uint32Array(cap); // the unused tail keeps its before state (zeros)
  out.set(perm(sel));
  return new Uint8Array(out.buffer);
}
const shuffle = (seed: number) => (xs: number[]) =>
  xs
    .map((v, i) => [v, Math.sin(seed * 7919 + i)] as const)
    .sort((a, b) => a[1] - b[1])
    .map(([v]) => v);

test("multiset: runs that append the same elements in another order match the app; bytes differ", () => {
  const app = compacted(5000, shuffle(1), 6000);
  const runs = [2, 3, 4].map((s) => compacted(5000, shuffle(s), 6000));
  const j = judgeMultiset("u32", app, runs);
  expect(j).toEqual({ elements: 6000, runs: 3, runsReordered: 3, unmatched: 0, firstBadRun: -1 });
  expect(judgeMultiset("u32", app, [app.slice()])).toMatchObject({ runsReordered: 0, unmatched: 0 });
});

test("multiset: a planted wrong element fails; so does a different count of elements", () => {
  const app = compacted(5000, shuffle(1), 6000);
  const bad = app.slice();
  new DataView(bad.buffer).setUint32(4 * 1234, 0xfffffff0, true); // one element the kernel never writes
  const runs = [2, 3].map((s) => compacted(5000, shuffle(s), 6000));
  const j = judgeMultiset("u32", bad, runs);
  expect(j.unmatched).toBe(2); // the planted value and the element it replaced
  expect(j.firstBadRun).toBe(0);
  // the kernel appended one element fewer (the counter differs): the tail's zero takes its place
  const fewer = compacted(4999, shuffle(5), 6000);
  expect(judgeMultiset("u32", app, [runs[0]!, fewer])).toMatchObject({ unmatched: 2, firstBadRun: 1 });
  // a region of another length: the extra elements have no partner
  expect(multisetDifference("u32", compacted(10, shuffle(1)), compacted(12, shuffle(2)))).toBe(2);
});

test("multiset: elements are compared as bit patterns of the element size (8-byte, NaN, -0)", () => {
  const u64 = (xs: bigint[]) => new Uint8Array(new BigUint64Array(xs).buffer);
  expect(multisetDifference("u64", u64([2n ** 60n + 1n, 5n]), u64([5n, 2n ** 60n + 1n]))).toBe(0);
  expect(multisetDifference("u64", u64([2n ** 60n + 1n, 5n]), u64([5n, 2n ** 60n]))).toBe(2); // beyond 2^53: no rounding
  expect(multisetDifference("fp32", f32([NaN, 1]), f32([1, NaN]))).toBe(0);
  expect(multisetDifference("fp32", f32([-0, 1]), f32([1, 0]))).toBe(2);
  expect(multisetDifference("fp16", i32([0x00010002]), i32([0x00020001]))).toBe(0); // two 2-byte elements swapped
});

test("--multiset names regions by index, VA, param:N, changed, all; a wrong name is a usage error", () => {
  const m = {
    regions: [
      { va: "0x7f0000000000", size: 4096, changed: false },
      { va: "0x7f0000200000", size: 8192, changed: true },
      { va: "0x7f0000400000", size: 4, changed: true },
    ],
    params: {
      layout: [
        { index: 0, offset: 0, size: 8 },
        { index: 1, offset: 8, size: 4 },
        { index: 2, offset: 16, size: 8 },
      ],
    },
  } as unknown as Parameters<typeof multisetRegions>[0];
  const params = new Uint8Array(24);
  new DataView(params.buffer).setBigUint64(0, 0x7f0000200010n, true);
  new DataView(params.buffer).setBigUint64(16, 0x10n, true);
  expect(multisetRegions(m, params, ["1"])).toEqual([1]);
  expect(multisetRegions(m, params, ["0x7f0000200000"])).toEqual([1]);
  expect(multisetRegions(m, params, ["0x7f0000000fff", "2"])).toEqual([0, 2]);
  expect(multisetRegions(m, params, ["param:0"])).toEqual([1]);
  expect(multisetRegions(m, params, ["changed"])).toEqual([1, 2]);
  expect(multisetRegions(m, params, ["all,1"])).toEqual([0, 1, 2]);
  for (const bad of ["3", "0x10", "param:1", "param:2", "param:9"]) expect(() => multisetRegions(m, params, [bad])).toThrow(/--multiset/);
  // the CLI: every value of a repeated option, comma lists, syntax checked before any GPU work
  expect(toleranceOptions({ multiset: "2" }, ["DIR", "--multiset", "1", "--multiset=2,0x7f00"]).multiset).toEqual(["1", "2", "0x7f00"]);
  expect(toleranceOptions({}).multiset).toBeUndefined();
  expect(() => toleranceOptions({ multiset: "out" }, ["--multiset", "out"])).toThrow(/does not name a region/);
});

/**
 * The held-back case of the H200 (a float-atomics kernel: 8 warps per block atomicAdd into one
 * float per block): the replays vary in some accumulators by 1-2 ulp, one accumulator never
 * varies in any replay, and the app's value of it is 1 ulp away. Judged with the kernel's own
 * noise, not bit for bit; a planted change of a few ulp there is still caught.
 */
describe("the kernel's nondeterminism (regions whose replays never varied)", () => {
  /** 8 partial sums added in an order given by `seed`, in float32 (one block's accumulator). */
  const blockSum = (block: number, seed: number) => {
    const parts = Array.from({ length: 8 }, (_, w) => Math.fround(Math.sin(block * 31 + w) * 10 ** ((w % 4) - 1)));
    return atomicSum(parts, seed);
  };
  /** Region r's accumulators (64 blocks) after a run with `seed`; region 3's blocks are summed in one fixed order in every replay. */
  const region = (r: number, seed: number) => f32(Array.from({ length: 64 }, (_, b) => blockSum(r * 64 + b, r === 3 ? 0 : seed)));
  const seeds = Array.from({ length: 32 }, (_, k) => k + 1);
  const envOf = (r: number) =>
    judgeEnvelope(
      "fp32",
      region(r, 99),
      seeds.map((s) => region(r, s)),
    );

  test("the noise: the largest ulp spread per element type over the regions that varied, and which", () => {
    const envs = [1, 4, 5].map((r) => ({ index: r, dtype: "fp32" as const, env: envOf(r) }));
    for (const e of envs) expect(e.env.maxUlpSpread).toBeGreaterThan(0);
    const n = kernelNoise([
      ...envs,
      { index: 6, dtype: "i32", env: { ...envs[0]!.env } },
      { index: 7, dtype: "fp32", env: { ...envs[0]!.env, elementsVarying: 0, maxUlpSpread: 0 } },
    ]);
    expect([...n.keys()]).toEqual(["fp32"]);
    expect(n.get("fp32")!.regions).toEqual([1, 4, 5]);
    expect(n.get("fp32")!.ulp).toBe(Math.ceil(Math.max(...envs.map((e) => e.env.maxUlpSpread))));
  });

  test("the app 1 ulp away in a region that never varied: within the kernel's noise; a few ulp planted in one element: outside", () => {
    const runs = seeds.map((s) => region(3, s));
    expect(runs.every((r) => Buffer.from(r).equals(Buffer.from(runs[0]!)))).toBe(true); // region 3 never varied
    const app = new Float32Array(region(3, 0).buffer.slice(0));
    const next = (x: number, k: number) => {
      const b = new Float32Array([x]);
      new Int32Array(b.buffer)[0]! += k; // k ulp further from zero (same sign)
      return b[0]!;
    };
    app[17] = next(app[17]!, 1);
    const bytes = new Uint8Array(app.buffer);
    const noise = 2;
    const j = judgeHeld("fp32", bytes, runs[0]!, noise);
    expect(j).toEqual({ differing: 1, maxUlp: 1, outside: 0, firstOutsideOffset: -1 });
    // bit for bit (how a region whose chunks never varied was judged before): a difference, so a MISMATCH
    expect(Buffer.from(bytes).equals(Buffer.from(runs[0]!))).toBe(false);
    // planted: 5 ulp in element 40 of the same region
    app[40] = next(app[40]!, 5);
    const bad = judgeHeld("fp32", new Uint8Array(app.buffer), runs[0]!, noise);
    expect(bad.outside).toBe(1);
    expect(bad.firstOutsideOffset).toBe(40 * 4);
    expect(bad.maxUlp).toBe(5);
    // exactly at the noise passes; NaN against a number never does; -0 against +0 is no difference in ulp
    expect(judgeHeld("fp32", f32([next(1, 2)]), f32([1]), 2).outside).toBe(0);
    expect(judgeHeld("fp32", f32([NaN]), f32([1]), 2).outside).toBe(1);
    expect(judgeHeld("fp32", f32([-0]), f32([0]), 0).outside).toBe(0);
    // ulp at the element's magnitude: 2 ulp of 1e6 is far more than 2 ulp of 1
    expect(judgeHeld("fp32", f32([1e6 + 0.125]), f32([1e6]), 2).outside).toBe(0);
    expect(judgeHeld("fp32", f32([1 + 0.125]), f32([1]), 2).outside).toBe(1);
  });
});
