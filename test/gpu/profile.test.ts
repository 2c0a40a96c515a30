/**
 * kerncap profile, replay --against and the timing conditions on the GPU (issue 27). The
 * compute-bound fma_loop of test/apps/verdicts.cu (~110 µs) is captured once; then
 * - `kerncap profile DIR --json -- --clock-control none --cache-control none`: the report in
 *   DIR/profile/, every figure present, the duration within 3% of ncu's on the application itself
 *   (same ncu options, `-k regex:fma_loop -c 1`);
 * - `kerncap replay DIR --against DIR`: the kernel against itself is no faster nor slower (ratio
 *   within 3% of 1), the clocks and L2 state named.
 * Figures and the ncu outputs go to $KERNCAP_GPU_OUT/profile/.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";
import { parseNcuDetails } from "../../src/profile/ncu.ts";

const NCU = Bun.which("ncu") ?? (existsSync("/usr/local/cuda/bin/ncu") ? "/usr/local/cuda/bin/ncu" : undefined);
const SKIP = !!skipReason("profile", [[!NCU, "no ncu on PATH or in /usr/local/cuda/bin"]]);
const WORK = workDir("kerncap-profile-");
const OUT = process.env.KERNCAP_GPU_OUT ? join(process.env.KERNCAP_GPU_OUT, "profile") : undefined;
const figures: Record<string, unknown> = {};
const save = (name: string, text: string) => OUT && writeFileSync(join(OUT, name), text);
let app = "";
let cap = "";

beforeAll(() => {
  if (SKIP) return;
  if (OUT) mkdirSync(OUT, { recursive: true });
  app = join(WORK, "verdicts");
  const b = run(["nvcc", "-O2", "-arch=sm_90", "-o", app, join(APPS, "verdicts.cu")], { cwd: WORK });
  expect(b.code, b.stderr).toBe(0);
  cap = join(WORK, "fma");
  const c = kerncap(WORK, ["run", "--kernel", "fma_loop", "--dispatch", "1", "--out", cap, "--json", "--", app, "fma"]);
  expect(c.code, c.stderr).toBe(0);
}, 180_000);

afterAll(() => {
  if (OUT) writeFileSync(join(OUT, "profile.json"), JSON.stringify(figures, null, 2));
});

describe.skipIf(SKIP)("kerncap profile (Nsight Compute on the replay)", () => {
  test("the captured launch only: a report in DIR/profile, every key figure, the duration within 3% of ncu on the app", () => {
    const p = run(
      [
        process.env.KERNCAP_BIN ?? join(import.meta.dir, "../../dist/kerncap"),
        "profile",
        cap,
        "--json",
        "--verbose",
        "--",
        "--clock-control",
        "none",
        "--cache-control",
        "none",
      ],
      { cwd: WORK, timeoutMs: 300_000 },
    );
    save("kerncap-profile.out", `${p.stdout}\n${p.stderr}`);
    expect(p.code, p.stderr.slice(-3000)).toBe(0);
    const doc = json(p);
    figures.profile = { seconds: p.seconds, ...doc };
    expect(doc.schema).toBe("kerncap.profile/1");
    expect(existsSync(doc.report)).toBe(true);
    expect(doc.report).toBe(join(cap, "profile", "replay.ncu-rep"));
    expect(doc.verdict).toBe("match");
    const f = doc.figures;
    for (const k of ["durationUs", "smThroughputPct", "memoryThroughputPct", "achievedOccupancyPct", "registersPerThread", "dramBytes"])
      expect(f[k], `${k} missing from the report (profile.json has the figures)`).toBeNumber();
    expect(f.limiter?.bound).toBeString(); // compute for an FMA loop, expectedly (recorded in profile.json)
    // ncu on the application itself, same options, the same launch (the second of fma_loop: --dispatch 1)
    const a = run(
      [
        NCU!,
        "--clock-control",
        "none",
        "--cache-control",
        "none",
        "-k",
        "regex:fma_loop",
        "-s",
        "1",
        "-c",
        "1",
        "--csv",
        "--page",
        "details",
        "--metrics",
        "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum",
        app,
        "fma",
      ],
      { cwd: WORK, timeoutMs: 300_000 },
    );
    save("ncu-app.csv", a.stdout + "\n" + a.stderr);
    expect(a.code, a.stderr.slice(-2000)).toBe(0);
    const [appFig] = parseNcuDetails(a.stdout);
    figures.app = { seconds: a.seconds, ...appFig };
    const ratio = f.durationUs / appFig!.durationUs!;
    figures.durationRatio = ratio;
    figures.timeToReport = { kerncapProfileSeconds: p.seconds, ncuOnAppSeconds: a.seconds };
    expect(Math.abs(ratio - 1)).toBeLessThan(0.03);
  }, 600_000);

  test("ncu options kerncap sets itself are refused; the replay under ncu runs one launch", () => {
    const r = kerncap(WORK, ["profile", cap, "--", "-c", "3"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("kerncap profile sets the launch count");
  });
});

describe.skipIf(SKIP)("replay --against and the timing conditions", () => {
  test("the kernel against itself: the ratio within 3% of 1, both verdicts match, clocks and L2 named", () => {
    const r = kerncap(WORK, ["replay", cap, "--against", cap, "--iters", "50", "--json"]);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const d = json(r);
    figures.againstSelf = { compare: d.compare, timing: d.timing, againstTiming: d.against?.timing };
    expect(d.against.verdict).toBe("match");
    // --iters is the fewest pairs: the adaptive compare takes more while the interval is wider than its margin (src/replay/stats.ts)
    expect(d.compare.pairs).toBeGreaterThanOrEqual(50);
    expect(Math.abs(d.compare.speedup - 1)).toBeLessThan(0.03);
    expect(d.compare.low).toBeLessThanOrEqual(d.compare.speedup);
    expect(d.timing.l2).toBe("warm");
    // the warm default: L2 as the restore leaves it (src/replay/timing-setup.ts DEFAULT_TIMING)
    expect(d.timing.method).not.toContain("then the ranges the parameters point to read again");
    expect(d.timing.clocks?.smMHz).toBeNumber();
  }, 300_000);

  test("--flush-l2 says flushed", () => {
    const r = kerncap(WORK, ["replay", cap, "--flush-l2", "--iters", "5", "--json"]);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const d = json(r);
    figures.flushed = d.timing;
    expect(d.timing.l2).toBe("flushed");
    expect(d.timing.method).toContain("L2 flushed before each");
  }, 300_000);
});
