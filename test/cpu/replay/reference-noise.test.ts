/**
 * An edited kernel's runs judged against the captured kernel's nondeterminism
 * (src/replay/reference-noise.ts), the rebuilt module's own variables put back before every
 * launch (src/replay/module-state.ts), and a timed launch checked against the checked runs
 * (src/replay/checked-runs.ts timedLaunchCheck): the decisions on recorded values, no GPU.
 */
import { describe, expect, test } from "bun:test";
import { kernelNoise, judgeEnvelope } from "../../../src/replay/envelope.ts";
import type { ElementType } from "../../../src/replay/tolerance.ts";
import {
  beyondReference,
  EDIT_SPREAD_FACTOR,
  EDIT_SPREAD_ULP,
  editAgainstReference,
  referenceOf,
  type ReferenceNoise,
} from "../../../src/replay/reference-noise.ts";
import { keepModuleState } from "../../../src/replay/module-state.ts";
import { spanPadding, vaSpans } from "../../../src/replay/compare.ts";
import { timedLaunchCheck, type CheckedRange } from "../../../src/replay/checked-runs.ts";
import type { ChunkScan, DeviceMemory, DeviceScanner, ReplayModule } from "../../../src/replay/backends/interface.ts";
import type { ReplayResult } from "../../../src/replay/result.ts";
import { mismatchReason } from "../../../src/replay/run-result.ts";
import { describeReplay } from "../../../src/cli/format.ts";
import { verdictEvent, watchLine } from "../../../src/rebuild/watch.ts";

const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);

/** The judging of ranges whose runs are given: which varied, and the noise per type (as judgeRuns computes it). */
function judged(ranges: { dtype: ElementType; runs: number[][] }[]) {
  const varied: number[] = [];
  const env: Parameters<typeof kernelNoise>[0] = [];
  ranges.forEach((r, i) => {
    const bytes = r.runs.map((x) => (r.dtype === "u8" ? new Uint8Array(x) : f32(x)));
    if (bytes.slice(1).some((b) => !Buffer.from(b).equals(Buffer.from(bytes[0]!)))) {
      varied.push(i);
      env.push({ index: i, dtype: r.dtype, env: judgeEnvelope(r.dtype, bytes[0]!, bytes) });
    }
  });
  const runs = ranges[0]!.runs.length;
  const runsDiffering = new Set<number>();
  for (let k = 1; k < runs; k++) if (ranges.some((r) => r.runs[k]!.some((v, e) => !Object.is(v, r.runs[0]![e])))) runsDiffering.add(k);
  return { varied, noise: kernelNoise(env), runsDiffering, runs };
}

const names = ["region 0", "region 1", "global counter"];
const dtypes: ElementType[] = ["fp32", "fp32", "u8"];

describe("an edited kernel against the captured kernel's nondeterminism", () => {
  const deterministicRef: ReferenceNoise = referenceOf(
    judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [1, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0]] },
    ]),
    3,
  );
  // float atomics: region 0 spreads a few ulp across runs
  const one = 1 + 2 ** -23;
  const noisyRef: ReferenceNoise = referenceOf(
    judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [one, 2],
          [1 + 2 * 2 ** -23, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0], [0]] },
    ]),
    4,
  );

  test("the reference: which ranges varied and the spread per float type, in ulp", () => {
    expect(deterministicRef).toEqual({ runs: 3, varied: [], ulp: {} });
    expect(noisyRef.varied).toEqual([0]);
    expect(noisyRef.ulp.fp32).toBe(2);
  });

  test("an edit whose output flips sign from launch to launch (garbage widening its own envelope) is beyond a deterministic kernel", () => {
    const edit = judged([
      {
        dtype: "fp32",
        runs: [
          [-1e30, -1e30],
          [1e30, 1e30],
          [-1e30, -1e30],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0]] },
    ]);
    const why = beyondReference(edit, dtypes, names, deterministicRef);
    expect(why).toContain("differ among themselves (1 of 2 later runs differ from the first, first in region 0)");
    expect(why).toContain("captured kernel's 3 runs are bit-identical");
  });

  test("the same garbage is beyond a nondeterministic kernel too: millions of ulp against 2", () => {
    const edit = judged([
      {
        dtype: "fp32",
        runs: [
          [-1e30, 2],
          [1e30, 2],
          [-1e30, 2],
          [1e30, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0], [0]] },
    ]);
    const why = beyondReference(edit, dtypes, names, noisyRef);
    expect(why).toContain("spread");
    expect(why).toContain("at most 2 ulp");
  });

  test("an edit reordering the same atomics (a few ulp) is within a nondeterministic kernel's noise; just past the bound it is not", () => {
    const u = 2 ** -23;
    const within = judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [1 + 5 * u, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0]] },
    ]);
    expect(beyondReference(within, dtypes, names, noisyRef)).toBeUndefined();
    const bound = EDIT_SPREAD_FACTOR * 2 + EDIT_SPREAD_ULP; // 16 ulp
    const past = judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [1 + (bound + 1) * u, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0]] },
    ]);
    expect(beyondReference(past, dtypes, names, noisyRef)).toContain(`spread ${bound + 1} ulp`);
  });

  test("NaN in some runs (no finite spread, which the envelope lets pass) and a non-float range varying where the captured kernel's never did", () => {
    const nan = judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [NaN, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [0], [0]] },
    ]);
    expect(beyondReference(nan, dtypes, names, noisyRef)).toContain("by NaN, infinities or signed zeros");
    const counter = judged([
      {
        dtype: "fp32",
        runs: [
          [1, 2],
          [1, 2],
          [1, 2],
        ],
      },
      { dtype: "fp32", runs: [[5], [5], [5]] },
      { dtype: "u8", runs: [[0], [1], [2]] },
    ]);
    expect(beyondReference(counter, dtypes, names, noisyRef)).toBe(
      "global counter (u8) differs among the edited kernel's checked runs, never among the captured kernel's 4",
    );
  });

  test("editAgainstReference: no reference taken when the edit's runs agree; a tolerance judging each run on its own accepts an edit that brings atomics in", async () => {
    let asked = 0;
    const reference = async () => {
      asked++;
      return deterministicRef;
    };
    const same = judged([{ dtype: "fp32", runs: [[1], [1], [1]] }]);
    expect(await editAgainstReference(same, ["fp32"], names, reference, () => true)).toBeUndefined();
    expect(asked).toBe(0);
    const splitK = judged([{ dtype: "fp32", runs: [[1], [1 + 2 ** -23], [1]] }]);
    expect(await editAgainstReference(splitK, ["fp32"], names, reference, () => true)).toEqual({
      runs: 3,
      nondeterministic: false,
      eachRunWithinTolerance: true,
    });
    const r = await editAgainstReference(splitK, ["fp32"], names, reference, () => false);
    expect(r?.beyond).toContain("nondeterminism the edit brought in");
    expect(asked).toBe(2);
  });
});

/** Device memory in host arrays: addresses are offsets into one buffer. */
function fakeMemory(size: number) {
  const mem = new Uint8Array(size);
  let next = size / 2;
  const log: string[] = [];
  const dm: DeviceMemory = {
    memAlloc: (n) => {
      const at = next;
      next += n;
      log.push(`alloc ${n}`);
      return BigInt(at);
    },
    memFree: () => void log.push("free"),
    hostAlloc: (n) => new Uint8Array(n),
    hostFree: () => {},
    hostRegister: () => false,
    hostUnregister: () => {},
    htod: (dst, src) => mem.set(src, Number(dst)),
    htodAsync: (dst, src) => mem.set(src, Number(dst)),
    dtoh: (dst, src) => dst.set(mem.subarray(Number(src), Number(src) + dst.length)),
    dtod: (dst, src, n) => mem.copyWithin(Number(dst), Number(src), Number(src) + n),
    memset: (dst, v, n) => mem.fill(v, Number(dst), Number(dst) + n),
    sync: () => {},
  };
  return { mem, dm, log };
}

describe("a rebuilt module's own variables are put back as loaded before every launch", () => {
  const module = (globals: { name: string; va: bigint; size: number }[]): ReplayModule => ({
    kernel: () => undefined,
    global: (n) => globals.find((g) => g.name === n),
    writableGlobals: () => globals,
    unload: () => {},
  });

  test("a result cache and a done flag (small: host copies) come back to their loaded state; the captured globals are left to the restore", () => {
    const { mem, dm } = fakeMemory(1 << 20);
    mem.set([7, 7, 7, 7], 100); // kc_cache as loaded
    const mod = module([
      { name: "kc_cache", va: 100n, size: 4 },
      { name: "kc_done", va: 200n, size: 4 },
      { name: "captured_table", va: 300n, size: 4 },
    ]);
    const kept = keepModuleState(dm, mod, new Set(["captured_table"]))!;
    expect(kept.globals.map((g) => g.name)).toEqual(["kc_cache", "kc_done"]);
    expect(kept.bytes).toBe(8);
    mem.set([1, 2, 3, 4], 100); // the first launch caches its result
    mem.set([0xee, 0xff, 0xc0, 0xc0], 200); // and says so
    mem.set([9, 9, 9, 9], 300);
    kept.putBack();
    expect([...mem.subarray(100, 104)]).toEqual([7, 7, 7, 7]);
    expect([...mem.subarray(200, 204)]).toEqual([0, 0, 0, 0]);
    expect([...mem.subarray(300, 304)]).toEqual([9, 9, 9, 9]); // not ours: the capture's restore puts it back
  });

  test("larger than 64 KiB: one device copy, put back device to device and freed with the module", () => {
    const { mem, dm, log } = fakeMemory(1 << 20);
    const size = 100 << 10;
    mem.fill(3, 0, size);
    const kept = keepModuleState(dm, module([{ name: "big", va: 0n, size }]), new Set())!;
    expect(log).toEqual([`alloc ${size}`]);
    mem.fill(8, 0, size);
    kept.putBack();
    expect(mem.subarray(0, size).every((b) => b === 3)).toBe(true);
    kept.free();
    expect(log).toEqual([`alloc ${size}`, "free"]);
  });

  test("no variable of its own, or a backend that cannot list them (HSA): nothing kept", () => {
    const { dm } = fakeMemory(1024);
    expect(keepModuleState(dm, module([{ name: "captured_table", va: 0n, size: 4 }]), new Set(["captured_table"]))).toBeUndefined();
    expect(keepModuleState(dm, { kernel: () => undefined, global: () => undefined, unload: () => {} }, new Set())).toBeUndefined();
  });
});

describe("a timed launch checked against the checked runs", () => {
  const range = (va: bigint, size: number): CheckedRange => ({
    r: { va: `0x${va.toString(16)}`, size } as CheckedRange["r"],
    base: va,
    kind: "param",
    dtype: "fp32",
    source: "default",
  });
  const scanOf = (hashes: bigint[]): ChunkScan => ({ hash: hashes, nonzero: hashes.map(() => 1) }) as unknown as ChunkScan;

  test("a timed launch that wrote what the checked runs wrote passes; one that skipped its work names the range and chunk", () => {
    let now: bigint[][] = [[1n, 2n], [3n]];
    let syncs = 0;
    const scanner = { scan: (va: bigint) => scanOf(now[va === 0n ? 0 : 1]!), spin: () => {} } as unknown as DeviceScanner;
    const ranges = [range(0n, 128), range(4096n, 64)];
    const first = [scanOf([1n, 2n]), scanOf([3n])];
    const ok = timedLaunchCheck({ sync: () => void syncs++ }, scanner, ranges, first, 64, ["region 0", "region 1"]);
    ok.check(7);
    expect(ok.outcome).toEqual({ round: 7 });
    expect(syncs).toBe(1);
    now = [[1n, 2n], [99n]];
    const lazy = timedLaunchCheck({ sync: () => {} }, scanner, ranges, first, 64, ["region 0", "region 1"]);
    lazy.check(12);
    expect(lazy.outcome).toEqual({ round: 12, differs: "region 1 chunk 0" });
  });
});

describe("what a verdict on a gamed kernel says (text, the reason records carry, the watch's line)", () => {
  const result = (determinism: Record<string, unknown>, check: Record<string, unknown> = {}) =>
    ({
      kernel: "fma_loop(float*, int, int)",
      verdict: "mismatch",
      regionsChecked: 1,
      bytesChecked: 4096,
      mismatches: [],
      timing: { iters: 0 },
      restore: { storedBytes: 4096, bytes: 4096, seconds: 0.001, gbPerS: 4, hostRegistered: false },
      reserve: { spans: 1, bytes: 1 << 25, seconds: 0 },
      check: { verifySeconds: 0, compareSeconds: 0, bytesCopiedBack: 0, ...check },
      determinism: { runs: 8, runsDiffering: 7, nondeterministic: true, ...determinism },
      module: { file: "/tmp/k.cubin", loadSeconds: 0 },
      device: { name: "H200", arch: "sm_90" },
      numerics: { verdict: "within-spread", atol: 0, rtol: 0, regions: [] },
    }) as unknown as ReplayResult;
  const beyond =
    "the edited kernel's checked runs differ among themselves (7 of 7 later runs differ from the first, first in region 0) where the captured kernel's 3 runs are bit-identical: nondeterminism the edit brought in";

  test("runs beyond the captured kernel's: the reason in the text, in eval's and check's records, and on the watch's line", () => {
    const r = result({ reference: { runs: 3, nondeterministic: false, beyond } });
    const text = describeReplay(r);
    expect(text).toStartWith("MISMATCH  fma_loop");
    expect(text).toContain(`  ${beyond}; a tolerance (--rtol, --atol) judges each of the edited kernel's runs on its own`);
    expect(mismatchReason(r)).toBe(beyond);
    const line = watchLine(verdictEvent(r, { trigger: "save", files: [], at: new Date(0), buildSeconds: 1, saveToVerdictSeconds: 1.2, reset: null }));
    expect(line).toContain(`MISMATCH: ${beyond}`);
  });

  test("a timed launch that skipped its work, and a module whose own variables were put back", () => {
    const r = result(
      { runs: 3, runsDiffering: 0, nondeterministic: false, moduleState: { variables: 2, bytes: 16 << 20, names: ["kc_cache", "kc_blocks"] } },
      { timedLaunch: { round: 5, differs: "region 0 chunk 0" } },
    );
    expect(mismatchReason(r)).toStartWith("timed launch 6 wrote other bytes than the checked runs (region 0 chunk 0)");
    expect(describeReplay(r)).toContain("the rebuilt module's own variables put back as loaded before every launch: kc_cache, kc_blocks (16.0 MiB)");
    const ok = result({ reference: { runs: 16, nondeterministic: true } });
    expect(describeReplay({ ...ok, verdict: "match" })).toContain(
      "the edited kernel's runs differ within the captured kernel's nondeterminism (the captured kernel's 16 runs here differ too)",
    );
  });
});

describe("the memory mapped around the regions (where a kernel could keep a result between launches)", () => {
  test("spanPadding: each span's bytes no region holds, around and between regions", () => {
    const g = 1 << 20;
    const regions = [
      { va: 0x10_0000_1000n, size: 0x2000 },
      { va: 0x10_0000_8000n, size: 0x1000 },
      { va: 0x10_0040_0000n, size: g },
    ];
    const pad = spanPadding(vaSpans(regions, g), regions);
    expect(pad.map((p) => [p.va.toString(16), p.size])).toEqual([
      ["1000000000", 0x1000],
      ["1000003000", 0x5000],
      ["1000009000", g - 0x9000],
    ]);
    expect(spanPadding(vaSpans([{ va: 0x20_0000_0000n, size: g }], g), [{ va: 0x20_0000_0000n, size: g }])).toEqual([]);
  });
});
