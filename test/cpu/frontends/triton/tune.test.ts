import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeCapture, tempDir } from "../../fixtures.ts";
import { capturedConfig, tritonScalarArgs, tunableNames, tunedConfig, tuneSpace } from "../../../../src/frontends/triton/tune.ts";
import { autotuneLine, parseConfigSpace } from "../../../../src/frontends/tune.ts";

const SIG = { a_ptr: "*fp16", c_ptr: "*fp32", M: "i32", N: "i32", K: "i64", flag: "i1", alpha: "fp32", BLOCK_M: "constexpr", BLOCK_N: "constexpr" };
const PIN = {
  fnName: "matmul_kernel",
  python: "python3",
  signature: SIG,
  constexprs: [
    { name: "BLOCK_M", expr: "64" },
    { name: "BLOCK_N", expr: "128" },
    { name: "ACT", expr: "'relu'" },
  ],
  options: { num_warps: 4, num_stages: 3, num_ctas: 1, maxnreg: null },
  autotune: {
    configList: [
      { kwargs: { BLOCK_M: 64, BLOCK_N: 128 }, num_warps: 4, num_stages: 3, num_ctas: 1, maxnreg: null },
      { kwargs: { BLOCK_M: 128, BLOCK_N: 64 }, num_warps: 8, num_stages: 2, num_ctas: 1, maxnreg: null },
    ],
  },
};

describe("tune (Triton): what the capture gives", () => {
  test("the kernel's integer arguments by name from the parameter bytes (constexprs are not launched)", () => {
    const p = new Uint8Array(48);
    const dv = new DataView(p.buffer);
    dv.setBigUint64(0, 0x7f00n, true);
    dv.setBigUint64(8, 0x7f10n, true);
    dv.setInt32(16, 512, true);
    dv.setInt32(20, -3, true);
    dv.setBigInt64(24, 1n << 40n, true);
    dv.setUint8(32, 1);
    dv.setFloat32(36, 0.5, true);
    const layout = [0, 8, 16, 20, 24, 32, 36].map((offset, index) => ({ index, offset, size: [8, 8, 4, 4, 8, 1, 4][index]! }));
    expect(tritonScalarArgs(SIG, p, layout)).toEqual({ M: 512, N: -3, K: 2 ** 40, flag: 1 });
  });
  test("the app's own config from pinned.json (whole-number constexprs, compile options); the space from the autotuner's configs, or --config", () => {
    expect(capturedConfig(PIN)).toEqual({ kwargs: { BLOCK_M: 64, BLOCK_N: 128 }, options: { num_warps: 4, num_stages: 3, num_ctas: 1 } });
    expect(tuneSpace(PIN, [])).toEqual([
      { kwargs: { BLOCK_M: 64, BLOCK_N: 128 }, options: { num_warps: 4, num_stages: 3, num_ctas: 1 } },
      { kwargs: { BLOCK_M: 128, BLOCK_N: 64 }, options: { num_warps: 8, num_stages: 2, num_ctas: 1 } },
    ]);
    expect(tuneSpace(PIN, ["num_warps=2,4"])).toHaveLength(2);
    expect(() => tuneSpace({ ...PIN, autotune: null }, [])).toThrow(/recorded no autotuner configs/);
  });
});

/** A Triton capture without a GPU: the fixture's capture relabelled, with a pinned.json (M, N in its parameter bytes). */
async function tritonCapture(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  m.kernel.frontend = "triton";
  writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
  // the fixture's parameters: a pointer at 0, an int (1024) at 8
  writeFileSync(
    join(dir, "pinned.json"),
    JSON.stringify({ ...PIN, signature: { x_ptr: "*fp32", n: "i32", BLOCK: "constexpr" }, constexprs: [{ name: "BLOCK", expr: "256" }] }),
  );
  return dir;
}

/** kerncap in a child process (--json sets stdout aside for the document: not in this process). */
function cli(argv: string[]): { code: number; out: string } {
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../../src/cli/main.ts"), ...argv], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() };
}

describe("kerncap tune: refused before anything compiles", () => {
  test("tile sizes that change without --grid; a --grid that misses the app's own grid; a bad --grid; num_ctas", async () => {
    const dir = await tritonCapture();
    const err = async (args: string[], d = dir) => JSON.parse(cli(["tune", d, "--json", ...args]).out).error;
    // a captured grid of 7 blocks: no cdiv(n, BLOCK) (n = 1024) gives it; what was tried is said
    const odd = await tritonCapture();
    const m = JSON.parse(readFileSync(join(odd, "kerncap.json"), "utf8"));
    m.launch.grid = [7, 1, 1];
    writeFileSync(join(odd, "kerncap.json"), JSON.stringify(m));
    const e = await err(["--config", "BLOCK=128,512"], odd);
    expect(e.message).toContain("no formula of the capture's values fits");
    expect(e.message).toContain("give --grid");
    expect(e.hint).toContain("Tried, per axis: axis x = 7: cdiv(ARG, TILE), cdiv(ARG, TILE) * cdiv(ARG, TILE)");
    expect(e.hint).toContain("integer arguments (n)");
    // the fixture launched 4 blocks: cdiv(n, BLOCK) = cdiv(1024, 256) = 4 is right, n // 128 is not
    expect((await err(["--config", "BLOCK=128", "--grid", "n // 128"])).message).toBe("--grid gives 8x1x1 for the app's own config, the app launched 4x1x1");
    expect((await err(["--config", "BLOCK=128", "--grid", "cdiv(n, BLOCKS)"])).message).toContain("unknown name BLOCKS");
    expect((await err(["--config", "num_ctas=2"])).message).toContain("num_ctas");
    expect((await err(["--config", "BLOCK=1 BLOCK=2"])).message).toContain("BLOCK is given twice");
  });
  test("tile sizes that change without --grid: the grid inferred from the capture (cdiv(n, BLOCK): 4 blocks for n = 1024, BLOCK = 256), said, and tune goes on", async () => {
    const dir = await tritonCapture();
    const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../../src/cli/main.ts"), "tune", dir, "--json", "--config", "BLOCK=128,512"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, KERNCAP_LIBCUDA: "" },
    });
    expect(p.stderr.toString()).toContain("launch grid inferred from the capture: cdiv(n, BLOCK) (4x1x1 for the app's config, as captured)");
    // past the grid: what stops it here is the build or the missing GPU, not a usage error about the grid
    const doc = JSON.parse(p.stdout.toString());
    expect(doc.error?.message ?? "").not.toContain("--grid");
  });
  test("the other frontend's options are refused; a CUDA capture without a reproducer says so", async () => {
    const tdir = await tritonCapture();
    const t = JSON.parse(cli(["tune", tdir, "--json", "--define", "BLOCK=1,2"]).out).error;
    expect(t.message).toContain("--define: options of a CUDA capture's tune");
    expect(t.hint).toContain("maxnreg");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const g = cli(["tune", dir, "--json", "--maxrregcount", "32", "--grid", "4"]);
    expect(g.code).toBe(2);
    expect(JSON.parse(g.out).error.message).toContain("--grid is a Triton tune's option");
    const r = cli(["tune", dir, "--json", "--maxrregcount", "32,64"]);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.out).error).toMatchObject({ code: "E_NO_REPRODUCER" });
    // the space first: a usage error needs no reproducer
    expect(JSON.parse(cli(["tune", dir, "--json", "--maxrregcount", "300"]).out).error.message).toContain("from 1 to 255");
  });
});

describe("the configs reported", () => {
  test("only the constexprs the autotuner's configs or --config name: Triton's specialization of an argument equal to 1 is no config", () => {
    const pin = { ...PIN, constexprs: [{ name: "stride_ak", expr: "1" }, ...PIN.constexprs] };
    const base = capturedConfig(pin);
    expect(base.kwargs.stride_ak).toBe(1);
    const names = tunableNames(pin, parseConfigSpace(["num_warps=2,4"]));
    expect([...names!].sort()).toEqual(["BLOCK_M", "BLOCK_N"]);
    expect(autotuneLine(tunedConfig(names)(base))).toBe('triton.Config({"BLOCK_M": 64, "BLOCK_N": 128}, num_warps=4, num_stages=3, num_ctas=1)');
    const none = tunableNames({ ...pin, autotune: null }, parseConfigSpace(["num_warps=2,4"]));
    expect(none).toBeNull();
    expect(tunedConfig(none)(base)).toEqual(base);
  });
});
