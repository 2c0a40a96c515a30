/**
 * kerncap tune on the autotuned Triton matmul (test/apps/triton_matmul_autotune.py, issue 27):
 * the app's own launch captured, then (1) the autotuner's 4 configs recorded at capture (the
 * default space), (2) a grid of 36 configs from --config, each compiled, judged against the app's
 * after state (with a tolerance: another tile shape sums in another order) and timed interleaved
 * with the app's choice. Targets: ≥ 20 configs in ≤ 30 s; the winner is the app's choice or faster.
 *
 * And on a CUDA kernel: test/apps/cuda_tmpl's tiled_apply<float, 256, Mul> (TILE_ROWS, a macro of
 * its header guarded by #ifndef, sets the rows per thread: 8 with the captured grid of 4 leaves
 * half the threads idle and computes every element once, so it matches bit for bit), captured
 * with its compile_commands.json; tuned over --define TILE_ROWS=4,8 --maxrregcount 32,64 (the
 * app's module, build.sh as is, and 4 configs: 6 rows, all matching), then --nvcc-flag
 * alternatives and a macro value that does not compile (its row is the compiler's error).
 * Documents go to $KERNCAP_GPU_OUT/tune/.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, manifest, run, skipReason, workDir } from "./harness.ts";

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
  const c = kc([
    "run",
    "--kernel",
    "^matmul_kernel$",
    "--dispatch",
    "1",
    "--out",
    cap,
    "--json",
    "--",
    "python3",
    join(APPS, "triton_matmul_autotune.py"),
    "3",
  ]);
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
    expect(
      d.rows.filter((x: any) => x.verdict === "compile-error" || x.verdict === "launch-error"),
      JSON.stringify(d.rows),
    ).toEqual([]);
  }, 300_000);

  test("without --grid: the app's grid lambda inferred from the capture (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)), printed; every config matches", () => {
    const r = kc(["tune", cap, ...TOL, "--json"]);
    if (OUT) writeFileSync(join(OUT, "tune-inferred.json"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const d = json(r);
    expect(d.grid).toBe(GRID);
    expect(d.gridInferred).toBe(true);
    expect(r.stderr).toContain(`launch grid inferred from the capture: ${GRID}`);
    expect(
      d.rows.filter((x: any) => x.verdict !== "match"),
      JSON.stringify(d.rows),
    ).toEqual([]);
  }, 300_000);

  test("36 configs from --config in at most 30 s; the winner matches and is the app's choice or faster", () => {
    const r = kc(["tune", cap, "--config", "BLOCK_M=32,64,128 BLOCK_N=32,64,128 num_warps=4,8 num_stages=2,3", "--grid", GRID, ...TOL, "--json"]);
    if (OUT) writeFileSync(join(OUT, "tune-grid.json"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const d = json(r);
    const bad = d.rows.filter((x: any) => x.verdict !== "match");
    if (OUT)
      writeFileSync(
        join(OUT, "tune-grid-summary.json"),
        JSON.stringify({ seconds: r.seconds, tool: d.seconds, rows: d.rows.length, bad, winner: d.winner }, null, 2),
      );
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

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const SKIP_CUDA = !!skipReason("tune (CUDA)", [[!NVCC, "no nvcc"]]);
const tmpl = join(WORK, "tiled");

describe.skipIf(SKIP_CUDA)("kerncap tune (CUDA)", () => {
  beforeAll(() => {
    const proj = join(WORK, "tmplproj");
    expect(run(["cp", "-r", join(APPS, "cuda_tmpl"), proj], { cwd: WORK }).code).toBe(0);
    const bdir = join(proj, "build");
    mkdirSync(bdir, { recursive: true });
    const argv = [NVCC!, "-DKC_SCALE=0.5f", `-I${proj}/include`, "-O3", "-std=c++17", "-arch=sm_90", "-o", join(bdir, "app"), join(proj, "main.cu")];
    const b = run(argv, { cwd: bdir });
    expect(b.code, b.stderr).toBe(0);
    writeFileSync(
      join(bdir, "compile_commands.json"),
      JSON.stringify([{ directory: bdir, arguments: argv.slice(0, -3).concat(["-c", join(proj, "main.cu"), "-o", "main.o"]), file: join(proj, "main.cu") }]),
    );
    const c = kc([
      "run",
      "--kernel",
      "tiled_apply<float, 256",
      "--dispatch",
      "1",
      "--compile-commands",
      join(bdir, "compile_commands.json"),
      "--source-root",
      proj,
      "--out",
      tmpl,
      "--json",
      "--",
      join(bdir, "app"),
      "3",
    ]);
    expect(c.code, c.stderr.slice(-3000)).toBe(0);
    expect(manifest(tmpl).kernel.frontend).toBe("cuda");
  }, 300_000);

  test("--define TILE_ROWS=4,8 --maxrregcount 32,64: 6 rows (the app's module, build.sh, 4 configs), every one matching; the winner's flags to paste", () => {
    const r = kc(["tune", tmpl, "--define", "TILE_ROWS=4,8", "--maxrregcount", "32,64", "--json"]);
    if (OUT) writeFileSync(join(OUT, "tune-cuda.json"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const d = json(r);
    expect(d.frontend).toBe("cuda");
    expect(d.rows).toHaveLength(6);
    expect(d.rows[0]).toMatchObject({ captured: true, label: "captured module", verdict: "match" });
    expect(d.rows[1]).toMatchObject({ captured: false, label: "build.sh", verdict: "match", config: { defines: {}, flags: [] } });
    expect(d.rows.map((x: any) => x.label).slice(2)).toEqual([
      "TILE_ROWS=4 maxrregcount=32",
      "TILE_ROWS=4 maxrregcount=64",
      "TILE_ROWS=8 maxrregcount=32",
      "TILE_ROWS=8 maxrregcount=64",
    ]);
    expect(
      d.rows.filter((x: any) => x.verdict !== "match"),
      JSON.stringify(d.rows),
    ).toEqual([]);
    for (const x of d.rows) expect(x.medianUs, x.label).toBeGreaterThan(0);
    for (const x of d.rows) expect(x.registers, x.label).toBeGreaterThan(0);
    for (const x of d.rows.slice(2)) expect(x.registers, x.label).toBeLessThanOrEqual(x.config.maxrregcount);
    expect(d.winner.verdict).toBe("match");
    if (!d.winner.captured) expect(d.paste).toMatch(d.winner.label === "build.sh" ? /^$/ : /^-DTILE_ROWS=[48] -maxrregcount=(32|64)$/);
    else expect(d.paste).toBeNull();
  }, 300_000);

  test("the text: a table with registers; nvcc flag alternatives; a macro value that does not compile is a row with its error", () => {
    const r = kc(["tune", tmpl, "--config", "TILE_ROWS=8,no_such_name", "--nvcc-flag=-Xptxas=-O1", "--nvcc-flag=-Xptxas=-O3"]);
    if (OUT) writeFileSync(join(OUT, "tune-cuda.txt"), r.stdout + "\n" + r.stderr);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stdout).toMatch(/^config\s+verdict\s+µs\s+vs app\s+regs$/m);
    const table = r.stdout
      .split("\n\n")[0]!
      .split("\n")
      .filter((l) => /\s(match|mismatch|compile-error|launch-error)\s/.test(l));
    expect(table).toHaveLength(2 + 4); // the app's module, build.sh, 2 macro values × 2 flag alternatives
    expect(table.filter((l) => /compile-error/.test(l))).toHaveLength(2);
    // one error text once, with the labels of the rows that gave it (src/frontends/tune.ts tuneNotes)
    expect(r.stdout).toMatch(/^  TILE_ROWS=no_such_name -Xptxas=-O[13], TILE_ROWS=no_such_name -Xptxas=-O[13]: compile-error: .*no_such_name/m);
    expect(r.stdout).toMatch(/^winner: /m);
  }, 300_000);
});
