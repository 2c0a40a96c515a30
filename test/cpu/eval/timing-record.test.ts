/**
 * An eval record's timing (src/eval/timing.ts timingOf) keeps what an automaton needs to trust a
 * "same": the launch pairs timed, the smallest difference the measurement would have claimed
 * (detectable) and the seconds the timed rounds took, and the record's schema
 * (src/format/eval-record.ts EvalTiming) accepts them.
 */
import { expect, test } from "bun:test";
import * as v from "valibot";
import { timingOf } from "../../../src/eval/timing.ts";
import { EvalTiming } from "../../../src/format/eval-record.ts";
import { adaptiveCompare, compareTimings } from "../../../src/replay/stats.ts";

/** Times (µs) around `us` with a small deterministic wobble. */
const times = (us: number, n: number, phase: number) => Array.from({ length: n }, (_, i) => us * (1 + 0.002 * Math.sin(i * 1.7 + phase)));

test("a timed comparison's record keeps its pairs, detectable difference and seconds", async () => {
  let clock = 0;
  const out = await adaptiveCompare(
    (n) => {
      clock += n * 1e-4;
      return { a: times(10, n, 0), b: times(10, n, 1) };
    },
    { minRounds: 32, block: 2, budgetSeconds: 1, now: () => clock },
  );
  const t = timingOf({ ...out.compare, seconds: out.seconds });
  expect(t).not.toBeNull();
  expect(t!.pairs).toBe(out.rounds);
  expect(t!.pairs).toBeGreaterThanOrEqual(32);
  expect(t!.detectable).toBe(out.compare.detectable);
  expect(t!.seconds).toBeCloseTo(out.seconds, 3);
  expect(v.parse(EvalTiming, t)).toEqual(t!);
});

test("a comparison timed outside adaptiveCompare (one batch) has no seconds", () => {
  const c = compareTimings(times(10, 6, 0), times(10, 6, 1), { block: 2 });
  const t = timingOf(c)!;
  expect(t.pairs).toBe(6);
  expect("seconds" in t).toBe(false);
  expect(t.detectable).toBe(c.detectable);
  expect(v.parse(EvalTiming, t)).toEqual(t);
});
