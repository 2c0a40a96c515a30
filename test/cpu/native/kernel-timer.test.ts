/**
 * The replay's kernel clock without a GPU: the library c/build/libkerncap_timer.so (c/cuda/kc_timer.c,
 * built by scripts/build-c.sh) exports exactly its six functions and links no libcupti; over a
 * stand-in libcupti (c/test/fake_cupti_activity.c, built here) it refuses when libcupti does not
 * load, when another client holds CUPTI (naming it) and when the activity kind is refused, each
 * time leaving nothing subscribed; and once started, a tagged launch's record comes back with its
 * tag and is turned into its duration, while an untagged launch (a spin, a scan) never shows.
 * Also the pure parts: the record layout, the matching of records to a launch, the choice not to
 * start under another CUPTI client (src/replay/backends/cuda-kernel-clock.ts), and the session's
 * note when clock=cupti falls back to events (src/replay/timing-setup.ts kernelClock).
 * Parts skip without gcc, nm or the CUDA headers.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { dlopen, FFIType } from "bun:ffi";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  decodeTimerRecords,
  RECORD_BYTES,
  startKernelTimer,
  TIMER_E_SUBSCRIBERS,
  type KernelTimer,
  type TimerRecord,
} from "../../../src/native/kernel-timer.ts";
import { CuptiClock, durationOf, openCuptiClock } from "../../../src/replay/backends/cuda-kernel-clock.ts";
import { kernelClock, parseTimingSetup } from "../../../src/replay/timing-setup.ts";

const ROOT = resolve(import.meta.dir, "../../..");
const LIB = join(ROOT, "c/build/libkerncap_timer.so");
const CUDA_HOME = process.env.CUDA_HOME ?? "/usr/local/cuda";
const INC = [join(CUDA_HOME, "include"), join(CUDA_HOME, "extras/CUPTI/include")].filter((d) => existsSync(join(d, "cupti.h")));
const canBuild = !!Bun.which("gcc") && INC.length > 0 && existsSync(LIB);

const rec = (tag: number, start: number, end: number, correlation = 1): TimerRecord => ({
  tag: BigInt(tag),
  startNs: BigInt(start),
  endNs: BigInt(end),
  correlation,
});

describe("the kernel clock library", () => {
  test.skipIf(!Bun.which("nm") || !existsSync(LIB))("exports exactly its six functions and needs neither libcupti nor libcuda", () => {
    const r = Bun.spawnSync(["nm", "-D", "--defined-only", LIB], { stdout: "pipe" });
    const names = r.stdout
      .toString()
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length === 3 && f[1] === "T")
      .map((f) => f[2]!);
    expect(names.sort()).toEqual(["kc_timer_flush", "kc_timer_lost", "kc_timer_mark", "kc_timer_read", "kc_timer_start", "kc_timer_stop"]);
    const needed = Bun.spawnSync(["readelf", "-d", LIB], { stdout: "pipe" }).stdout.toString();
    expect(needed).not.toMatch(/NEEDED.*lib(cuda|cupti)/);
  });

  // one process, one CUPTI state: these run in order (libcupti that does not load first, as once a
  // libcupti loaded the library keeps it)
  describe.skipIf(!canBuild)("over a stand-in libcupti", () => {
    const tmp = mkdtempSync(join(tmpdir(), "kerncap-timer-"));
    const fake = join(tmp, "libcupti.so");
    afterAll(() => rmSync(tmp, { recursive: true, force: true }));
    let f: ReturnType<typeof dlopen<typeof FAKE>>["symbols"];
    const { i32, u32, u64 } = FFIType;
    const FAKE = {
      fake_cupti_mode: { args: [i32], returns: FFIType.void },
      fake_cupti_launch: { args: [u32, u64, u64], returns: FFIType.void },
      fake_cupti_subscribed: { args: [], returns: i32 },
      fake_cupti_enabled: { args: [], returns: i32 },
    } as const;

    test("a libcupti that does not load: code 1 and the loader's reason", () => {
      const r = startKernelTimer(join(tmp, "missing/libcupti.so"), LIB);
      expect("code" in r && r.code).toBe(1);
      expect("why" in r && r.why).toContain("libcupti does not load");
      expect("why" in r && r.why).toContain("missing/libcupti.so");
    });

    test("the stand-in builds", () => {
      const cc = Bun.spawnSync(["gcc", "-shared", "-fPIC", "-O1", ...INC.map((d) => `-I${d}`), "-o", fake, join(ROOT, "c/test/fake_cupti_activity.c")], {
        stderr: "pipe",
      });
      expect(cc.stderr.toString()).toBe("");
      expect(cc.exitCode).toBe(0);
      f = dlopen(fake, FAKE).symbols;
    });

    test("CUPTI held by another client: code 3, the holder named, nothing enabled", () => {
      f.fake_cupti_mode(1);
      const r = startKernelTimer(fake, LIB);
      expect("code" in r && r.code).toBe(TIMER_E_SUBSCRIBERS);
      expect("why" in r && r.why).toContain("CUPTI is held by another client (Nsight Compute)");
      expect("why" in r && r.why).toContain("MULTIPLE_SUBSCRIBERS");
      expect(f.fake_cupti_subscribed()).toBe(0);
      expect(f.fake_cupti_enabled()).toBe(0);
    });

    test("the kernel activity kind refused: code 5 with CUPTI's result, unsubscribed again", () => {
      f.fake_cupti_mode(2);
      const r = startKernelTimer(fake, LIB);
      expect("code" in r && r.code).toBe(5);
      expect("why" in r && r.why).toBe("cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_NOT_INITIALIZED");
      expect(f.fake_cupti_subscribed()).toBe(0);
    });

    test("started: a tagged launch's record comes back with its tag, an untagged one never", () => {
      f.fake_cupti_mode(0);
      const r = startKernelTimer(fake, LIB);
      if (!("timer" in r)) throw new Error(r.why);
      expect(f.fake_cupti_subscribed()).toBe(1);
      expect(f.fake_cupti_enabled()).toBe(1);
      const t: KernelTimer = r.timer;
      f.fake_cupti_launch(40, 500n, 31_000n); // the spin kernel: untagged
      t.mark(7);
      f.fake_cupti_launch(41, 31_200n, 32_510n);
      t.mark(0);
      f.fake_cupti_launch(42, 40_000n, 40_900n); // a scan kernel after it
      expect(t.read()).toEqual([]); // nothing until a flush delivers the buffer
      expect(t.flush(false)).toBe(0);
      expect(t.read()).toEqual([{ tag: 7n, startNs: 31_200n, endNs: 32_510n, correlation: 41 }]);
      expect(t.read()).toEqual([]);
      expect(t.lost()).toBe(0);

      // the replay's use of it: each launch tagged, its duration (µs) taken once it completed
      const clock = new CuptiClock(t);
      const a = clock.tagged(() => f.fake_cupti_launch(50, 1_000n, 2_310n));
      f.fake_cupti_launch(51, 3_000n, 9_000n);
      expect(clock.take(a, 99)).toBeCloseTo(1.31, 9);
      // a record whose kernel had not ended (end 0): the event pair's time, counted
      const b = clock.tagged(() => f.fake_cupti_launch(52, 10_000n, 0n));
      expect(clock.take(b, 2.69)).toBe(2.69);
      expect(clock.describe()).toContain("1 of 2 launches had no record: timed by CUDA events");

      clock.stop();
      expect(f.fake_cupti_enabled()).toBe(0);
      expect(f.fake_cupti_subscribed()).toBe(0);
      // and it starts again (another session in the same process: check, watch)
      const again = startKernelTimer(fake, LIB);
      expect("timer" in again).toBe(true);
      if ("timer" in again) again.timer.stop();
    });
  });
});

// the real libcupti on a machine without a driver, through the embedded library written to the
// cache (the path `kerncap replay` takes), in a process of its own: CUPTI's refusal, said
const realCupti = ["/usr/local/cuda/lib64/libcupti.so", join(CUDA_HOME, "extras/CUPTI/lib64/libcupti.so")].find((p) => existsSync(p));
const hasGpu = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");
test.skipIf(!realCupti || hasGpu || !existsSync(LIB))("the real libcupti without a driver: refused with CUPTI's own result, nothing thrown", () => {
  const tmp = mkdtempSync(join(tmpdir(), "kerncap-timer-real-"));
  try {
    const script = `import { startKernelTimer } from ${JSON.stringify(join(ROOT, "src/native/kernel-timer.ts"))};\nconsole.log(JSON.stringify(startKernelTimer(${JSON.stringify(realCupti)})));`;
    const p = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env, KERNCAP_CACHE: join(tmp, "cache") }, stdout: "pipe", stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    const r = JSON.parse(p.stdout.toString());
    expect(r.code).toBeGreaterThan(0);
    expect(r.why).toMatch(/^cupti\w+.* failed: CUPTI_ERROR_\w+/);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

describe("records to durations", () => {
  test("kc_timer_record_t: tag, start, end (u64) and the correlation id (u32), 32 bytes each", () => {
    const b = new Uint8Array(2 * RECORD_BYTES + 5);
    const dv = new DataView(b.buffer);
    dv.setBigUint64(0, 3n, true);
    dv.setBigUint64(8, 1_000_000_000_123n, true);
    dv.setBigUint64(16, 1_000_000_001_433n, true);
    dv.setUint32(24, 77, true);
    dv.setBigUint64(32, 4n, true);
    expect(decodeTimerRecords(b, 1)).toEqual([{ tag: 3n, startNs: 1_000_000_000_123n, endNs: 1_000_000_001_433n, correlation: 77 }]);
    expect(decodeTimerRecords(b, 2)[1]!.tag).toBe(4n);
    expect(decodeTimerRecords(b, 9)).toHaveLength(2); // never past the buffer
  });

  test("a launch's duration is its own record's end - start (µs); none when missing or unfilled", () => {
    const rs = [rec(1, 100, 1410), rec(2, 5_000, 37_670), rec(3, 0, 900), rec(4, 900, 0), rec(5, 900, 800)];
    expect(durationOf(rs, 1n)).toBeCloseTo(1.31, 9);
    expect(durationOf(rs, 2n)).toBeCloseTo(32.67, 9);
    for (const t of [3n, 4n, 5n, 9n]) expect(durationOf(rs, t)).toBeUndefined();
  });

  test("records come in any order: each launch takes its own, earlier tags are dropped", () => {
    const queue: TimerRecord[][] = [[rec(2, 300, 700), rec(1, 100, 200)], [], [], [rec(3, 800, 1_800)]];
    const flushes: boolean[] = [];
    const marks: number[] = [];
    const clock = new CuptiClock({
      mark: (t) => void marks.push(t),
      flush: (forced) => (flushes.push(forced), 0),
      read: () => queue.shift() ?? [],
      lost: () => 0,
      stop: () => {},
    });
    const t1 = clock.tagged(() => {});
    const t2 = clock.tagged(() => {});
    expect(marks).toEqual([1, 0, 2, 0]); // tagged for the launch only
    expect(clock.take(t1, 50)).toBeCloseTo(0.1, 9);
    expect(clock.take(t2, 50)).toBeCloseTo(0.4, 9); // already read with the first flush
    const t3 = clock.tagged(() => {});
    expect(clock.take(t3, 50)).toBeCloseTo(1, 9); // a plain flush brought nothing, the forced one did
    expect(flushes).toEqual([false, false, false, true]);
    expect(clock.missed).toBe(0);
  });

  test("a launch that throws leaves no tag behind", () => {
    const marks: number[] = [];
    const clock = new CuptiClock({ mark: (t) => void marks.push(t), flush: () => 0, read: () => [], lost: () => 0, stop: () => {} });
    expect(() =>
      clock.tagged(() => {
        throw new Error("launch failed");
      }),
    ).toThrow("launch failed");
    expect(marks).toEqual([1, 0]);
  });
});

describe("when the CUPTI clock is not started", () => {
  const never = () => {
    throw new Error("must not start CUPTI");
  };
  test("under ncu, nsys or compute-sanitizer, or with any CUDA tool injected", () => {
    expect(openCuptiClock({ NV_COMPUTE_PROFILER_PERFWORKS_DIR: "/opt/nvidia/nsight-compute/2025.3/target" }, never)).toEqual({
      why: "Nsight Compute (ncu) runs this process and holds CUPTI",
    });
    expect(openCuptiClock({ NV_TPS_LAUNCH_TOKEN: "x" }, never)).toEqual({ why: "an Nsight tool (nsys or ncu) runs this process and holds CUPTI" });
    expect(openCuptiClock({ NV_SANITIZER_INJECTION_PORT_BASE: "1" }, never)).toEqual({ why: "compute-sanitizer runs this process and holds CUPTI" });
    const injected = openCuptiClock({ CUDA_INJECTION64_PATH: "/opt/x/libToolsInjection64.so" }, never);
    expect("why" in injected && injected.why).toContain("CUDA_INJECTION64_PATH=/opt/x/libToolsInjection64.so");
  });

  test("no libcupti: the search's own message", () => {
    const r = openCuptiClock({ KERNCAP_CUPTI_PATH: "/nonexistent/libcupti.so" }, never);
    expect("why" in r && r.why).toBe("KERNCAP_CUPTI_PATH names a file that does not exist: /nonexistent/libcupti.so");
  });

  test("CUPTI's refusal is passed on; a started timer becomes the clock", () => {
    const env = { KERNCAP_CUPTI_PATH: process.execPath }; // an ELF file: the search accepts it
    expect(openCuptiClock(env, () => ({ code: TIMER_E_SUBSCRIBERS, why: "CUPTI is held by another client (nsys)" }))).toEqual({
      why: "CUPTI is held by another client (nsys)",
    });
    const seen: string[] = [];
    const ok = openCuptiClock(env, (p) => (seen.push(p), { timer: { mark: () => {}, flush: () => 0, read: () => [], lost: () => 0, stop: () => {} } }));
    expect(seen).toEqual([process.execPath]);
    expect("clock" in ok && ok.clock).toBeInstanceOf(CuptiClock);
  });

  test("the session's note: clock=cupti asked and events used, said in the result and the log; nothing asked with clock=events", () => {
    const calls: string[] = [];
    const be = (why: string | undefined) => ({ vendor: "nvidia" as const, useKernelClock: () => (calls.push("asked"), why) });
    expect(kernelClock(be("x"), parseTimingSetup("clock=events"))).toBeUndefined();
    expect(calls).toEqual([]);
    expect(kernelClock(be(undefined), parseTimingSetup("clock=cupti"))).toBeUndefined();
    expect(kernelClock(be("Nsight Compute (ncu) runs this process and holds CUPTI"), parseTimingSetup("clock=cupti"))).toBe(
      "clock=cupti not used: Nsight Compute (ncu) runs this process and holds CUPTI",
    );
    expect(kernelClock({ vendor: "amd" }, parseTimingSetup("clock=cupti"))).toBe("clock=cupti not used: the amd backend has no kernel clock");
  });
});
