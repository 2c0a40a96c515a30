/**
 * kerncap tune on the autotuned Triton matmul (test/apps/triton_matmul_autotune.py, issue 27):
 * the app's own launch captured, then (1) the autotuner's 4 configs recorded at capture (the
 * default space), (2) a grid of 36 configs from --config, each compiled, judged against the app's
 * after state (with a tolerance: another tile shape sums in another order) and timed interleaved
 * with the app's choice. Targets: ≥ 20 configs in ≤ 30 s; the winner is the app's choice or faster.
 * Documents go to $KERNCAP_GPU_OUT/tune/.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, manifest, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("tune");
const WORK = workDir("kerncap-tune-");
const OUT = process.env.KERNCAP_GPU_OUT ? join(process.env.KERNCAP_GPU_OUT, "tune") : undefined;
const kc = (args: string[]) => kerncap(WORK, args, { TRITON_CACHE_DIR: join(WORK, "triton-cache") });
const cap = join(WORK, "matmul");
const GRID = "cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)"; // the app's grid lambda
const TOL = ["--atol", "1e-3", "--rtol", "1e-3"];

beforeAll(() => {
  if (SKIP) return;
  if (OUT) mkdirSync(OUT, { recursive: true });
  const c = kc(["run", "--kernel", "^matmul_kernel$", "--dispatch", "1", "--out", cap, "--json", "--", "python3", join(APPS, "triton_matmul_autotune.py"), "3"]);
  expect(c.code, c.stderr.slice(-3000)).toBe(0);
}, 300_000);

describe.skipIf(SKIP)("kerncap tune (Triton)", () => {
  test("the autotuner's configs recorded at capture are the default space", () => {
    const m = manifest(cap);
    expect(m.source.autotune.configList).toHaveLength(4);
    const r = kc(["tune", cap, "--grid", GRID, ...TOL, "--json"]);
    if (OUT) writeFileSync(join(OUT, "tune-default.json"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const d = json(r);
    expect(d.rows).toHaveLength(4); // the app's own (its captured module) and the 3 others
    expect(d.rows[0].captured).toBe(true);
    expect(d.rows[0].verdict).toBe("match");
    expect(d.rows.filter((x: any) => x.verdict === "compile-error" || x.verdict === "launch-error"), JSON.stringify(d.rows)).toEqual([]);
  }, 300_000);

  test("36 configs from --config in at most 30 s; the winner matches and is the app's choice or faster", () => {
    const r = kc(["tune", cap, "--config", "BLOCK_M=32,64,128 BLOCK_N=32,64,128 num_warps=4,8 num_stages=2,3", "--grid", GRID, ...TOL, "--json"]);
    if (OUT) writeFileSync(join(OUT, "tune-grid.json"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const d = json(r);
    const bad = d.rows.filter((x: any) => x.verdict !== "match");
    if (OUT) writeFileSync(join(OUT, "tune-grid-summary.json"), JSON.stringify({ seconds: r.seconds, tool: d.seconds, rows: d.rows.length, bad, winner: d.winner }, null, 2));
    expect(d.rows.length).toBeGreaterThanOrEqual(20);
    expect(r.seconds).toBeLessThanOrEqual(30);
    expect(d.winner.verdict).toBe("match");
    const app = d.rows.find((x: any) => x.captured);
    expect(d.winner.medianUs).toBeLessThanOrEqual(app.medianUs);
  }, 300_000);

  test("the text: a table and the line for @triton.autotune", () => {
    const r = kc(["tune", cap, "--config", "num_warps=2,4,8", ...TOL]);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stdout).toMatch(/^config\s+verdict\s+µs\s+vs app$/m);
    expect(r.stdout).toMatch(/^  triton\.Config\(\{"BLOCK_M": \d+, "BLOCK_N": \d+, "BLOCK_K": \d+\}, num_warps=\d, num_stages=\d/m);
  }, 300_000);
});
