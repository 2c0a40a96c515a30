/**
 * The run-to-run envelope (src/replay/envelope.ts) on synthetic data: float-atomic-like noise
 * passes, a planted wrong value fails, deterministic elements stay bit-exact, multisets.
 */
import { expect, test } from "bun:test";
import { judgeEnvelope, multisetDifference, ulp } from "./envelope.ts";

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
  const det = judgeEnvelope("fp32", f32([1.0, 2.0000002, 3.0]), runs); // element 1 never varied: bit-exact contract
  expect(det.outside).toBe(1);
  expect(det.firstOutsideOffset).toBe(4);
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
