import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { autotuneLine, configLabel, evalGrid, parseConfigSpace, pickWinner, tuneRow, tuneTable, type TuneRow } from "../../../src/frontends/tune.ts";
import type { ReplayResult, SetRun } from "../../../src/replay/engine.ts";
import { seededRandom } from "../../../src/replay/stats.ts";

describe("tune: the config space", () => {
  test("NAME=V1,V2 words expand to their cartesian product; options apart from constexprs; specs joined without duplicates", () => {
    const c = parseConfigSpace(["BLOCK_M=64,128 num_warps=4,8", "BLOCK_M=64 num_warps=4 num_stages=3"]);
    expect(c.map(configLabel)).toEqual([
      "BLOCK_M=64 num_warps=4",
      "BLOCK_M=64 num_warps=8",
      "BLOCK_M=128 num_warps=4",
      "BLOCK_M=128 num_warps=8",
      "BLOCK_M=64 num_warps=4 num_stages=3",
    ]);
    expect(c[0]).toEqual({ kwargs: { BLOCK_M: 64 }, options: { num_warps: 4 } });
    expect(parseConfigSpace(["A=1,2,3 B=1,2 C=5,6 num_stages=2,3"])).toHaveLength(24);
    expect(parseConfigSpace(["num_warps=4,4,8"])).toHaveLength(2);
  });
  test("bad words are usage errors naming the word", () => {
    expect(() => parseConfigSpace(["BLOCK_M=64,abc"])).toThrow(/"BLOCK_M=64,abc" is not NAME=V1,V2/);
    expect(() => parseConfigSpace(["BLOCK_M 64"])).toThrow(/"BLOCK_M" is not/);
    expect(() => parseConfigSpace(["A=1 A=2"])).toThrow(/A is given twice/);
    expect(() => parseConfigSpace(["  "])).toThrow(/empty/);
  });
  test("the winner as a line for @triton.autotune", () => {
    expect(autotuneLine({ kwargs: { BLOCK_M: 64, BLOCK_N: 128 }, options: { num_stages: 3, num_warps: 4 } })).toBe(
      'triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=4, num_stages=3)',
    );
    expect(autotuneLine({ kwargs: {}, options: {} })).toBe("triton.Config({})");
  });
});

describe("tune: grid expressions", () => {
  const vars = { M: 512, N: 384, BLOCK_M: 64, BLOCK_N: 128 };
  test("cdiv, min, max, floor division, precedence, parentheses; missing dimensions are 1", () => {
    expect(evalGrid("cdiv(M,BLOCK_M)*cdiv(N,BLOCK_N),1,1", vars)).toEqual([24, 1, 1]);
    expect(evalGrid("cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)", vars)).toEqual([8, 3, 1]);
    expect(evalGrid("(M + BLOCK_M - 1) // BLOCK_M", vars)).toEqual([8, 1, 1]);
    expect(evalGrid("N / BLOCK_M + 2 * 3 % 4, max(1, M - 1000), min(4, 9)", vars)).toEqual([8, 1, 4]);
    expect(evalGrid("-(-M // BLOCK_N)", vars)).toEqual([4, 1, 1]);
  });
  test("faults name their cause", () => {
    expect(() => evalGrid("cdiv(M, BLOCK_K)", vars)).toThrow(/unknown name BLOCK_K \(known: M, N, BLOCK_M, BLOCK_N\)/);
    expect(() => evalGrid("M // 0", vars)).toThrow(/division by zero/);
    expect(() => evalGrid("pow(M, 2)", vars)).toThrow(/unknown function pow/);
    expect(() => evalGrid("M - 600", vars)).toThrow(/dimension x is -88/);
    expect(() => evalGrid("1,1,1,1", vars)).toThrow(/4 dimensions/);
    expect(() => evalGrid("M ** 2", vars)).toThrow(/--grid/);
    expect(() => evalGrid("__import__('os')", vars)).toThrow(/unexpected/);
    expect(() => evalGrid("(M", vars)).toThrow(/expected \) at the end/);
  });
  test("agrees with integer arithmetic on random sums and products (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 256 }), fc.integer({ min: 1, max: 64 }), (m, b, k) => {
        const [x] = evalGrid(`cdiv(m, b) * k + m % b`, { m, b, k });
        expect(x).toBe(Math.ceil(m / b) * k + (m % b));
      }),
    );
  });
});

describe("tune: the table and the winner", () => {
  const row = (label: Record<string, number>, verdict: TuneRow["verdict"], medianUs: number | null, captured = false): TuneRow => ({
    config: { kwargs: label, options: {} },
    captured,
    verdict,
    medianUs,
    speedup: medianUs === null ? null : 10 / medianUs,
  });
  test("the fastest matching config wins; a faster mismatch never does; the app's choice wins a tie", () => {
    const rows = [row({ B: 1 }, "match", 10, true), row({ B: 2 }, "mismatch", 5), row({ B: 3 }, "match", 8), row({ B: 4 }, "compile-error", null)];
    expect(pickWinner(rows)!.config.kwargs).toEqual({ B: 3 });
    expect(pickWinner([row({ B: 3 }, "match", 10), row({ B: 1 }, "match", 10, true)])!.captured).toBe(true);
    expect(pickWinner([row({ B: 2 }, "mismatch", 5)])).toBeUndefined();
    const t = tuneTable(rows).split("\n");
    expect(t[0]).toMatch(/^config\s+verdict\s+µs\s+vs app$/);
    expect(t.slice(1).map((l) => l.split(/\s{2,}/)[0])).toEqual(["B=2", "B=3", "B=1 (app)", "B=4"]);
    expect(t[2]).toMatch(/B=3\s+match\s+8\.00\s+1\.25×$/);
  });
  test("rows compared with the app's in the same rounds: a config 1% faster by its median but the same within the noise does not win; one faster beyond it does", () => {
    const r = seededRandom(2);
    const app = Array.from({ length: 40 }, () => 10 * (1 + 0.04 * (r() - 0.5)));
    const set = (times: number[]): SetRun => ({
      result: { verdict: "match", timing: { medianUs: [...times].sort((a, b) => a - b)[20]! } } as ReplayResult,
      times,
    });
    const appRun = set(app);
    const noisy = tuneRow({ kwargs: { B: 2 }, options: {} }, false, set(app.map((x) => x * 0.99 * (1 + 0.04 * (r() - 0.5)))), appRun);
    expect(noisy.vsApp!.verdict).toBe("same");
    const own = tuneRow({ kwargs: { B: 1 }, options: {} }, true, appRun, appRun);
    expect(own.vsApp).toBeUndefined();
    expect(pickWinner([own, noisy])!.captured).toBe(true);
    const fast = tuneRow({ kwargs: { B: 3 }, options: {} }, false, set(app.map((x) => x * 0.8)), appRun);
    expect(fast.vsApp!.verdict).toBe("faster");
    expect(pickWinner([own, noisy, fast])!.config.kwargs).toEqual({ B: 3 });
    // "(same)" only where the interval lies within the margin: the noisy one is undecided
    expect(noisy.vsApp!.decided).toBe(false);
    const twin = tuneRow({ kwargs: { B: 4 }, options: {} }, false, set(app.map((x) => x * 1.001)), appRun);
    expect(twin.vsApp).toMatchObject({ verdict: "same", decided: true });
    const lines = tuneTable([own, noisy, fast, twin]).split("\n");
    expect(lines.find((l) => l.startsWith("B=4"))).toContain("(same)");
    expect(lines.find((l) => l.startsWith("B=2"))).not.toContain("(same)");
  });
  test("a config 2× slower timed in too few rounds for an interval: no difference claimed (decided false), and the table does not call it the same", () => {
    const app = [10, 10.1, 9.9, 10, 10.2, 9.8];
    const set = (times: number[]): SetRun => ({
      result: { verdict: "match", timing: { medianUs: [...times].sort((a, b) => a - b)[3]! } } as ReplayResult,
      times,
    });
    const slow = tuneRow({ kwargs: { B: 8 }, options: {} }, false, set(app.map((x) => x * 2.2)), set(app));
    expect(slow.vsApp).toMatchObject({ verdict: "same", decided: false });
    expect(slow.vsApp!.text).toContain("no difference claimed");
    const line = tuneTable([slow]).split("\n")[1]!;
    expect(line).toMatch(/0\.45×$/);
    expect(line).not.toContain("(same)");
  });

  test("--build-only: the app's row says captured (its module is the capture's, never built), the configs built", () => {
    const rows: TuneRow<unknown>[] = [
      { config: {}, label: "captured module", captured: true, verdict: "built", medianUs: null, speedup: null, registers: 14 },
      { config: {}, label: "maxrregcount=32", captured: false, verdict: "built", medianUs: null, speedup: null, registers: 14 },
    ];
    const lines = tuneTable(rows).split("\n");
    expect(lines[1]).toMatch(/^captured module \(app\)\s+captured\s/);
    expect(lines[2]).toMatch(/^maxrregcount=32\s+built\s/);
  });
});
