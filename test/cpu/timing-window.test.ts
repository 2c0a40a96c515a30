/**
 * The GPUs' timing windows (src/util/timing-window.ts): several eval workers on one GPU take turns
 * for their timed rounds, a worker waiting for the window is not taken for a hung one by the
 * watchdog (src/check/pool.ts), and the wait is in the record (timing.waitSeconds).
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { workerCommand } from "../../src/check/pool.ts";
import { runEval } from "../../src/ops/eval.ts";
import { fileTimingWindow, gpuTimingWindow, timingWindowFile } from "../../src/util/timing-window.ts";
import { fakeBuild, fakeEvalOptions, SETTINGS } from "./eval-child.ts";
import { captureWithSource, tempDir } from "./fixtures.ts";

const WINDOW_WORKER = join(import.meta.dir, "eval-window-worker.ts");

describe("timing windows", () => {
  test("shared holders overlap, an alone holder waits for them and they for it", async () => {
    const path = timingWindowFile(tempDir(), "0");
    const [a, b, c] = [fileTimingWindow(path), fileTimingWindow(path), fileTimingWindow(path)];
    expect(await a.share()).toBe(0);
    expect(await b.share()).toBe(0);
    let told = 0;
    setTimeout(() => a.leave(), 60);
    setTimeout(() => b.leave(), 120);
    expect(await c.enter(() => told++)).toBeGreaterThan(0.1);
    expect(told).toBe(1);
    setTimeout(() => c.leave(), 80);
    expect(await a.share()).toBeGreaterThan(0.05);
    // a holder that shares, then enters, converts its own lock: no wait for itself
    a.leave();
    expect(await a.share()).toBe(0);
    expect(await a.enter()).toBe(0);
    a.leave();
  });

  test("two shared holders that both enter do not deadlock: each lets go of its shared lock before it waits, one enters, then the other", async () => {
    const path = timingWindowFile(tempDir(), "0");
    const [a, b] = [fileTimingWindow(path), fileTimingWindow(path)];
    await a.share();
    await b.share();
    const order: string[] = [];
    const pa = a.enter().then(() => (order.push("a"), setTimeout(() => a.leave(), 30)));
    const pb = b.enter().then(() => (order.push("b"), setTimeout(() => b.leave(), 30)));
    await Promise.race([Promise.all([pa, pb]), Bun.sleep(3000).then(() => order.push("deadlock"))]);
    expect(order.sort()).toEqual(["a", "b"]);
  });

  test("a process waiting to time goes before shared holders that come after it (the turnstile): it waits only for those already there", async () => {
    const path = timingWindowFile(tempDir(), "0");
    const [a, b, c] = [fileTimingWindow(path), fileTimingWindow(path), fileTimingWindow(path)];
    await a.share();
    const order: string[] = [];
    const pb = b.enter().then(() => order.push("b timed"));
    await Bun.sleep(20);
    const pc = c.share().then(() => order.push("c shared"));
    await Bun.sleep(40);
    expect(order).toEqual([]); // b waits for a; c waits behind b
    a.leave();
    await pb;
    await Bun.sleep(30);
    expect(order).toEqual(["b timed"]);
    b.leave();
    await pc;
    expect(order).toEqual(["b timed", "c shared"]);
    c.leave();
  });

  test("a second holder waits until the first leaves, is told once, and says how long it waited; another GPU's window is its own", async () => {
    const d = tempDir();
    const path = timingWindowFile(d, "0");
    const a = fileTimingWindow(path);
    const b = fileTimingWindow(path);
    expect(await a.enter()).toBe(0);
    // another GPU (CUDA_VISIBLE_DEVICES=1): free while GPU 0's is held
    const other = fileTimingWindow(timingWindowFile(d, "1"));
    expect(await other.enter()).toBe(0);
    other.leave();
    let told = 0;
    setTimeout(() => a.leave(), 150);
    const waited = await b.enter(() => told++);
    expect(told).toBe(1);
    expect(waited).toBeGreaterThan(0.1);
    // a's enter now waits for b
    let aTold = 0;
    const t = a.enter(() => aTold++);
    await Bun.sleep(30);
    expect(aTold).toBe(1);
    b.leave();
    expect(await t).toBeGreaterThan(0.02);
    a.leave();
    a.leave(); // idempotent
  });

  test("a worker's window is in a private folder of the user's only: a folder open to others, or a link to one, gives none and nothing is made there (adversary 75)", () => {
    const open = tempDir();
    chmodSync(open, 0o777);
    expect(gpuTimingWindow(open)).toBeUndefined();
    const link = join(tempDir(), "link");
    const target = tempDir();
    symlinkSync(target, link);
    expect(gpuTimingWindow(link)).toBeUndefined();
    expect(readdirSync(open)).toEqual([]);
    expect(readdirSync(target)).toEqual([]);
    const mine = tempDir();
    chmodSync(mine, 0o700);
    expect(gpuTimingWindow(mine)).toBeDefined();
  });

  test("a GPU's name is a file name in the folder; a link at the window's name gives no window (nothing waits on it)", async () => {
    const d = tempDir();
    expect(timingWindowFile(d, undefined)).toBe(join(d, "timing-default.lock"));
    expect(timingWindowFile(d, "../x/GPU-1")).toBe(join(d, "timing-___x_GPU-1.lock"));
    const target = join(d, "target");
    writeFileSync(target, "");
    const path = join(d, "timing-link.lock");
    symlinkSync(target, path);
    const a = fileTimingWindow(path);
    const b = fileTimingWindow(path);
    expect(await a.enter()).toBe(0);
    let told = 0;
    expect(await b.enter(() => told++)).toBe(0);
    expect(told).toBe(0);
  });

  test("two workers of an eval time one at a time, alone on the GPU, and a wait for the window longer than the watchdog's bound is not a timeout", async () => {
    const cap = await captureWithSource();
    const d = tempDir("kerncap-cands-");
    const files = ["a", "b", "c", "d"].map((n) => {
      writeFileSync(join(d, `${n}.cu`), "match");
      return join(d, `${n}.cu`);
    });
    const log = join(tempDir(), "windows.log");
    writeFileSync(log, "");
    process.env.EVAL_WINDOW_LOG = log;
    process.env.EVAL_WINDOW_MS = "350";
    try {
      const report = await runEval(
        fakeEvalOptions([cap], files, {
          slots: [null, null],
          jobs: 4,
          buildWith: fakeBuild(),
          // the watchdog's floor (0.6 s) is shorter than a wait for the other worker's 0.35 s of timed rounds and its own 0.35 s
          timeoutS: 0.6,
          open: (say, w, warm, windows) =>
            workerCommand([process.execPath, WINDOW_WORKER], { ...SETTINGS, ...(warm ? { warm } : {}), ...(windows ? { timingWindows: windows } : {}) }, say, {
              watchdog: w.ms,
              timedOut: w.timedOut,
            }),
        }),
      );
      expect(report.records.map((r) => r.verdict)).toEqual(["match", "match", "match", "match"]);
      const spans = readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .map((l) => l.split(" "))
        .map(([pid, how, from, to]) => ({ pid, how, from: Number(from), to: Number(to) }));
      const alone = spans.filter((s) => s.how === "alone");
      expect(alone.length).toBe(4);
      expect(new Set(alone.map((s) => s.pid)).size).toBe(2); // both workers timed
      // nothing of another worker, shared or timed, overlaps a worker's timed rounds
      for (const t of alone) for (const o of spans.filter((s) => s.pid !== t.pid)) expect(o.to <= t.from || o.from >= t.to).toBe(true);
      const waits = report.records.map((r) => r.timing?.waitSeconds ?? -1);
      expect(waits.every((w) => w >= 0)).toBe(true);
      expect(Math.max(...waits)).toBeGreaterThan(0.2);
      // --shared-timing: no window, no wait recorded
      const shared = await runEval(
        fakeEvalOptions([cap], files.slice(0, 2), {
          slots: [null, null],
          sharedTiming: true,
          open: (say, w, warm, windows) =>
            workerCommand([process.execPath, WINDOW_WORKER], { ...SETTINGS, ...(warm ? { warm } : {}), ...(windows ? { timingWindows: windows } : {}) }, say, {
              watchdog: w.ms,
              timedOut: w.timedOut,
            }),
        }),
      );
      expect(shared.records.map((r) => [r.verdict, r.timing?.waitSeconds])).toEqual([
        ["match", undefined],
        ["match", undefined],
      ]);
    } finally {
      delete process.env.EVAL_WINDOW_LOG;
      delete process.env.EVAL_WINDOW_MS;
    }
  }, 30_000);
});
