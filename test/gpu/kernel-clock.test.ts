/**
 * The replay's kernel clock on a GPU (KERNCAP_TIMING clock=cupti, src/replay/backends/cuda-kernel-clock.ts):
 * an empty kernel captured from test/apps/tiny_kernels.cu and replayed under clock=events and
 * clock=cupti. On the H200 the event pair after the spin gives 2.69 µs for an empty kernel, ncu's
 * gpu__time_duration 1.31 µs: CUPTI's own timestamps must come out below the events' and
 * within a sane bound (above 0.3 µs, below 2.5 µs), with the result saying which clock timed it.
 * And under another CUPTI client (the variables ncu's launcher sets) clock=cupti falls back to
 * events and says why, with the same verdict.
 * Skipped (and counted as skipped) where no NVIDIA GPU is present.
 *
 * Needs: KERNCAP_BIN (default dist/kerncap), nvcc.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("gpu kernel clock tests", [[!Bun.which("nvcc"), "no nvcc"]]);
const WORK = workDir("kerncap-gpu-clock-");
const CAP = join(WORK, "empty");

beforeAll(() => {
  if (SKIP) return;
  const bin = join(WORK, "tiny_kernels");
  const b = run(["nvcc", "-O2", "-arch=sm_90", "-o", bin, join(APPS, "tiny_kernels.cu")], { cwd: WORK });
  if (b.code !== 0) throw new Error(`nvcc failed: ${b.stderr}`);
  const r = kerncap(WORK, ["run", "--kernel", "^empty_kernel", "--dispatch", "1", "--out", CAP, "--", bin, "4"]);
  if (r.code !== 0) throw new Error(`capture failed (exit ${r.code}): ${r.stderr}`);
});

interface Timing {
  medianUs: number;
  p10Us: number;
  method: string;
  clock?: string;
  clockNote?: string;
}
const replay = (timing: string, env: Record<string, string> = {}) => {
  const r = kerncap(WORK, ["replay", CAP, "--iters", "40", "--runs", "1", "--json"], { KERNCAP_TIMING: timing, ...env });
  expect(r.code, r.stderr).toBe(0);
  const doc = json<{ verdict: string; timing: Timing }>(r);
  return { ...doc, stderr: r.stderr };
};

describe.skipIf(SKIP)("kernel clock", () => {
  test("an empty kernel: CUPTI's time is below the event pair's and within 0.3-2.5 µs", () => {
    const ev = replay("clock=events");
    const cu = replay("clock=cupti");
    console.log(
      `[kernel-clock] empty kernel: events ${ev.timing.medianUs.toFixed(3)} µs, CUPTI ${cu.timing.medianUs.toFixed(3)} µs (p10 ${cu.timing.p10Us.toFixed(3)})`,
    );
    expect(ev.verdict).toBe("match");
    expect(cu.verdict).toBe("match");
    expect(ev.timing.clock).toBe("events");
    expect(cu.timing.clock, cu.timing.clockNote ?? cu.stderr).toBe("cupti");
    expect(cu.timing.method).toContain("CUPTI kernel activity records");
    expect(cu.timing.method).not.toContain("had no record");
    expect(cu.timing.medianUs).toBeLessThan(ev.timing.medianUs);
    expect(cu.timing.medianUs).toBeGreaterThan(0.3);
    expect(cu.timing.medianUs).toBeLessThan(2.5);
  });

  test("under another CUPTI client (ncu's launcher variables): events, and the note says why", () => {
    const r = replay("clock=cupti", { NV_COMPUTE_PROFILER_PERFWORKS_DIR: "/opt/nvidia/nsight-compute/target" });
    expect(r.verdict).toBe("match");
    expect(r.timing.clock).toBe("events");
    expect(r.timing.clockNote).toContain("Nsight Compute (ncu) runs this process");
    expect(r.stderr).toContain("KERNCAP_TIMING clock=cupti: Nsight Compute (ncu)");
  });
});
