/**
 * The timed launches' setup (src/replay/timing-setup.ts): KERNCAP_TIMING's grammar, the ranges a
 * warm launch reads again after L2 is written back, and the order of the device work before one
 * timed launch (restore, L2 step, spin and events), on a fake backend that records its calls.
 */
import { describe, expect, test } from "bun:test";
import { isKerncapError } from "../../../src/errors.ts";
import {
  DEFAULT_TIMING,
  describeSetup,
  parseTimingSetup,
  rewarmRanges,
  timeOneLaunch,
  type L2Step,
  type TimedKernel,
} from "../../../src/replay/timing-setup.ts";

describe("KERNCAP_TIMING", () => {
  test("unset or empty: the defaults (L2 as the device restore leaves it, 30 µs spin, 2 warm-ups, CUDA events)", () => {
    expect(parseTimingSetup(undefined)).toEqual({ spinUs: 30, warmup: 2, restore: "device", l2: "restored", clock: "events" });
    expect(parseTimingSetup("")).toEqual(DEFAULT_TIMING);
    expect(parseTimingSetup(" , ")).toEqual(DEFAULT_TIMING);
  });

  test("any subset of the keys, in any order, over the defaults", () => {
    expect(parseTimingSetup("l2=restored")).toEqual({ ...DEFAULT_TIMING, l2: "restored" });
    expect(parseTimingSetup("restore=none, spin=0,warmup=20,l2=evicted")).toEqual({ spinUs: 0, warmup: 20, restore: "none", l2: "evicted", clock: "events" });
    expect(parseTimingSetup("restore=host,spin=2000")).toEqual({ ...DEFAULT_TIMING, restore: "host", spinUs: 2000 });
    expect(describeSetup(parseTimingSetup("spin=5,l2=restored"))).toBe("spin=5,warmup=2,restore=device,l2=restored,clock=events");
    expect(parseTimingSetup("clock=cupti,l2=evicted")).toEqual({ ...DEFAULT_TIMING, clock: "cupti", l2: "evicted" });
    expect(parseTimingSetup("clock=events")).toEqual(DEFAULT_TIMING);
    expect(describeSetup(parseTimingSetup("clock=cupti"))).toBe("spin=30,warmup=2,restore=device,l2=restored,clock=cupti");
    // the defaults are not changed by a parse
    expect(DEFAULT_TIMING.l2).toBe("restored");
    expect(DEFAULT_TIMING.clock).toBe("events");
  });

  for (const bad of [
    "spin",
    "spin=",
    "spin=-1",
    "spin=1.5",
    "spin=100001",
    "warmup=1001",
    "restore=dtod",
    "l2=flushed",
    "flush=1",
    "SPIN=3",
    "clock=ncu",
    "clock=",
    "clock=CUPTI",
  ]) {
    test(`"${bad}" is E_USAGE naming the word and the grammar`, () => {
      let err: unknown;
      try {
        parseTimingSetup(`warmup=3,${bad}`);
      } catch (e) {
        err = e;
      }
      expect(isKerncapError(err)).toBe(true);
      if (!isKerncapError(err)) return;
      expect(err.code).toBe("E_USAGE");
      expect(err.message).toContain(`"${bad}"`);
      expect(err.hint).toContain("l2=reread|restored|evicted");
      expect(err.hint).toContain("clock=events|cupti");
    });
  }
});

describe("rewarmRanges", () => {
  const MiB = 1 << 20;
  // region 0: an input; 1: the output (the app changed it); 2: an input the parameters do not name; 3: a large input
  const regions = [
    { va: "0x7f0000000000", size: 4 * MiB, changed: false },
    { va: "0x7f0001000000", size: 4 * MiB, changed: true },
    { va: "0x7f0002000000", size: 4 * MiB, changed: false },
    { va: "0x7f0010000000", size: 300 * MiB, changed: false },
  ];
  const params = (...words: bigint[]) => {
    const b = new Uint8Array(words.length * 8 + 4);
    const dv = new DataView(b.buffer);
    words.forEach((w, i) => dv.setBigUint64(i * 8, w, true));
    return b;
  };

  test("each pointer's region from the pointer on, the outputs first, inputs last in parameter order; other words ignored", () => {
    // PyTorch's TensorIterator: a struct of data pointers [output, input] passed by value, then a count
    const p = params(0x7f0001000000n, 0x7f0000000100n, 16777216n);
    expect(rewarmRanges(regions, p, 100 * MiB)).toEqual([
      { va: 0x7f0001000000n, bytes: 4 * MiB },
      { va: 0x7f0000000100n, bytes: 4 * MiB - 0x100 },
    ]);
  });

  test("pointers into one region merge into one range, to the region's end", () => {
    const p = params(0x7f0010000000n + BigInt(10 * MiB), 0x7f0010000000n, 0x7f0000000000n);
    expect(rewarmRanges(regions, p, 1000 * MiB)).toEqual([
      { va: 0x7f0010000000n, bytes: 300 * MiB },
      { va: 0x7f0000000000n, bytes: 4 * MiB },
    ]);
  });

  test("at most capBytes in all: the ranges read last (the inputs) kept, the first one kept cut to its start, earlier ones dropped", () => {
    // output (4 MiB), then inputs: region 0 (4 MiB), region 3 (300 MiB)
    const p = params(0x7f0001000000n, 0x7f0000000000n, 0x7f0010000000n);
    expect(rewarmRanges(regions, p, 100 * MiB)).toEqual([{ va: 0x7f0010000000n, bytes: 100 * MiB }]);
    expect(rewarmRanges(regions, p, 306 * MiB)).toEqual([
      { va: 0x7f0001000000n, bytes: 2 * MiB },
      { va: 0x7f0000000000n, bytes: 4 * MiB },
      { va: 0x7f0010000000n, bytes: 300 * MiB },
    ]);
    // a table of many pointers reads no more than the cap
    const many = params(...Array.from({ length: 64 }, (_, i) => 0x7f0010000000n + BigInt(i) * BigInt(4 * MiB)), 0x7f0002000000n);
    const rs = rewarmRanges(regions, many, 100 * MiB);
    expect(rs.reduce((a, r) => a + r.bytes, 0)).toBe(100 * MiB);
    expect(rs.at(-1)).toEqual({ va: 0x7f0002000000n, bytes: 4 * MiB });
  });

  test("only 8-byte words of the buffer are read (a pointer needs its alignment); a buffer of no pointers reads nothing", () => {
    const b = new Uint8Array(20);
    new DataView(b.buffer).setBigUint64(4, 0x7f0000000000n, true);
    expect(rewarmRanges(regions, b, 100 * MiB)).toEqual([]);
    expect(rewarmRanges(regions, new Uint8Array(0), 100 * MiB)).toEqual([]);
    expect(rewarmRanges([], params(0x7f0000000000n), 100 * MiB)).toEqual([]);
  });
});

describe("timeOneLaunch: the device work before a timed launch, in order", () => {
  function fake(canRead: boolean) {
    const calls: string[] = [];
    const be = {
      timedLaunch: (launch: () => void, spinUs: number) => {
        calls.push(`spin ${spinUs}`, "event");
        launch();
        calls.push("event");
        return 12.5;
      },
      memset: (va: bigint, v: number, n: number) => void calls.push(`memset 0x${va.toString(16)} ${v} ${n}`),
    };
    const scanner = canRead ? { evict: (va: bigint, n: number) => (calls.push(`read 0x${va.toString(16)} ${n}`), true) } : {};
    const k: TimedKernel = {
      launch: () => void calls.push("launch"),
      restoreChanged: () => void calls.push("restore"),
      rewarm: [
        { va: 0x2000n, bytes: 64 },
        { va: 0x1000n, bytes: 32 },
      ],
    };
    return { calls, be, scanner, k };
  }
  const flush = { va: 0xf000n, bytes: 256 };

  test("reread: restore, the flush buffer read, the kernel's ranges read, then spin, events and launch", () => {
    const f = fake(true);
    expect(timeOneLaunch(f.be, f.scanner, f.k, parseTimingSetup("l2=reread"), { kind: "reread", flush })).toBe(12.5);
    expect(f.calls).toEqual(["restore", "read 0xf000 256", "read 0x2000 64", "read 0x1000 32", "spin 30", "event", "launch", "event"]);
  });

  test("restored (the default): restore then the launch, nothing in between", () => {
    const f = fake(true);
    timeOneLaunch(f.be, f.scanner, f.k, parseTimingSetup("l2=restored,spin=0"), { kind: "none" });
    expect(f.calls).toEqual(["restore", "spin 0", "event", "launch", "event"]);
  });

  test("restore=none: back to back, no restore", () => {
    const f = fake(true);
    timeOneLaunch(f.be, f.scanner, f.k, parseTimingSetup("restore=none"), { kind: "reread", flush });
    expect(f.calls[0]).toBe("read 0xf000 256");
    expect(f.calls).not.toContain("restore");
  });

  test("--flush-l2: the read, nothing read again; a memset only where the backend cannot read", () => {
    const f = fake(true);
    const step: L2Step = { kind: "flush", flush, memsetFill: 7 };
    timeOneLaunch(f.be, f.scanner, f.k, DEFAULT_TIMING, step);
    expect(f.calls).toEqual(["restore", "read 0xf000 256", "spin 30", "event", "launch", "event"]);
    const g = fake(false);
    timeOneLaunch(g.be, g.scanner, g.k, DEFAULT_TIMING, step);
    expect(g.calls).toEqual(["restore", "memset 0xf000 7 256", "spin 30", "event", "launch", "event"]);
  });

  test("a warm step on a backend that cannot read: no memset (it would leave the dirty lines the step removes), nothing read again", () => {
    for (const step of [
      { kind: "reread", flush },
      { kind: "flush", flush },
    ] as L2Step[]) {
      const f = fake(false);
      timeOneLaunch(f.be, f.scanner, f.k, DEFAULT_TIMING, step);
      expect(f.calls).toEqual(["restore", "spin 30", "event", "launch", "event"]);
    }
  });
});
