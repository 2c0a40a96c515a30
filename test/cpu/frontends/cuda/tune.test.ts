/**
 * The CUDA tune's builds on the CPU, with the real reproducer: the demo capture (`kerncap demo`:
 * a CUDA capture whose build.sh is kerncap's own) with its saxpy kernel given a macro that adds
 * register pressure and one that breaks the build; each config built by build.sh with its -D and
 * -maxrregcount into its own folder, the registers read back from the cubins. Then the verb
 * itself: it builds every config and, without a GPU, stops at the replay (E_NO_GPU).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../../../../src/cli/main.ts";
import { readManifest } from "../../../../src/format/capture-dir.ts";
import { NVCC } from "../../../nvcc-fixtures.ts";
import { tempDir } from "../../fixtures.ts";
import { buildCudaConfigs, moduleRegisters, tuneModulePath } from "../../../../src/frontends/cuda/tune.ts";
import { parseCudaSpace, type CudaConfig } from "../../../../src/frontends/cuda/tune-space.ts";
import * as v from "valibot";
import { describeTune } from "../../../../src/cli/commands/tune.ts";
import { DOCUMENTS, jsonDocument } from "../../../../src/format/documents.ts";
import type { TuneResult } from "../../../../src/frontends/tune.ts";

const HAS_GPU = existsSync("/dev/nvidiactl");
let savedState: string | undefined;
let dir = "";

/** saxpy with HEAVY=1: 24 loads kept live and combined (about 32 registers on sm_90 with nvcc 13); BROKEN: an #error. */
const KERNEL = `#ifndef HEAVY
#define HEAVY 0
#endif
#ifdef BROKEN
#error "BROKEN is defined"
#endif
__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p->y.n) return;
  float acc = p->a * p->x.data[i] + p->y.data[i];
#if HEAVY
  float r[24];
#pragma unroll
  for (int k = 0; k < 24; k++) r[k] = p->x.data[(i + k * 97) % p->x.n];
#pragma unroll
  for (int k = 0; k < 24; k++) acc = acc * r[(k * 7) % 24] + r[k];
#endif
  p->y.data[i] = acc;
}`;

beforeAll(async () => {
  if (!NVCC) return;
  // the demo's trust record goes to a state folder of this test's own (validate's and tune's children inherit it)
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir();
  dir = join(tempDir(), "demo");
  expect(await runCli(["demo", dir])).toBe(0);
  const src = join(dir, "src/saxpy.cu");
  const text = readFileSync(src, "utf8");
  const from = text.indexOf("__global__ void saxpy");
  const to = text.indexOf("}\n", from) + 1;
  writeFileSync(src, text.slice(0, from) + KERNEL + text.slice(to));
});
afterAll(() => {
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

describe.skipIf(!NVCC)("tune (CUDA): each config built by the reproducer's build.sh", () => {
  test("-D and -maxrregcount reach nvcc: the registers follow them; a config that does not build is its error, the others build", async () => {
    const m = readManifest(dir);
    const configs = [
      { defines: {}, flags: [] },
      ...parseCudaSpace({ configs: [], defines: ["HEAVY=1"], maxrregcount: "24,255", nvccFlags: [] }),
      ...parseCudaSpace({ configs: ["BROKEN=1"], defines: [], nvccFlags: [] }),
    ];
    const seen: [number, number][] = [];
    const built = await buildCudaConfigs(dir, m, configs, { jobs: 2, onBuilt: (done, total) => void seen.push([done, total]) });
    expect(built).toHaveLength(4);
    // the progress line's counts: 0 at the start, then one per build, failed ones too
    expect(seen).toEqual([
      [0, 4],
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    const ok = built.map((b) => ("error" in b ? undefined : b));
    // each into its own folder
    for (const i of [0, 1, 2]) expect(ok[i]!.module, String(i)).toBe(tuneModulePath(dir, i));
    const [plain, capped, free] = [ok[0]!.registers!, ok[1]!.registers!, ok[2]!.registers!];
    expect(plain).toBeGreaterThan(0);
    expect(free).toBeGreaterThan(24); // HEAVY=1 without a limit (255)
    expect(capped).toBeLessThanOrEqual(24); // HEAVY=1 -maxrregcount=24
    expect(free).toBeGreaterThan(plain);
    const broken = built[3]!;
    expect("error" in broken && broken.error).toContain("BROKEN is defined");
    // the captured module's registers are read the same way (a cubin for the captured arch)
    expect(moduleRegisters(join(dir, m.module.file), m)).toBeGreaterThan(0);
  }, 120_000);

  test("kerncap tune builds every config (the build.sh row too) and, without a GPU, stops at the replay", async () => {
    if (HAS_GPU) return; // the GPU suite runs the whole tune (test/gpu/tune.test.ts)
    const p = Bun.spawnSync(
      [
        process.execPath,
        join(import.meta.dir, "../../../../src/cli/main.ts"),
        "tune",
        dir,
        "--json",
        "--config",
        "HEAVY=0,1 maxrregcount=32",
        "--config",
        "BROKEN=1",
        "--config",
        "num_warps=4",
        "--jobs",
        "2",
        "--report",
        join(dir, "..", "t.html"),
        "--csv",
        join(dir, "..", "t.csv"),
      ],
      { stdout: "pipe", stderr: "pipe", env: process.env },
    );
    // the files asked for, not written, and said so (found by a new user: nothing was said)
    expect(p.stderr.toString()).toContain(`--report ${join(dir, "..", "t.html")} and --csv ${join(dir, "..", "t.csv")}: not written (no config was timed)`);
    expect(existsSync(join(dir, "..", "t.html"))).toBe(false);
    expect(p.exitCode, p.stderr.toString()).toBe(2);
    const doc = JSON.parse(p.stdout.toString());
    expect(doc.error.code).toBe("E_NO_GPU");
    // each config's build, structured, in the error document (what an agent or a script reads)
    const configs: { config: string; build: string; registers?: number; error?: string }[] = doc.error.details.configs;
    expect(configs.find((c) => c.config === "build.sh")?.build).toBe("built");
    expect(configs.find((c) => c.config.startsWith("BROKEN=1"))).toMatchObject({ build: "compile-error", error: expect.stringContaining("BROKEN is defined") });
    // build.sh as is, HEAVY=0 maxrregcount=32, HEAVY=1 maxrregcount=32, and BROKEN=1 (a union of two specs)
    for (const i of [0, 1, 2]) expect(existsSync(tuneModulePath(dir, i)), String(i)).toBe(true);
    const err = p.stderr.toString();
    expect(err).toMatch(/5 builds in .* \(1 failed\)/);
    expect(err).toContain("num_warps: Triton's compile option, but this is a CUDA capture: swept as the macro -Dnum_warps");
    // what was said on stderr before the configs ran is in the error document too (a harness reads only stdout)
    expect(doc.error.details.warnings).toEqual([
      "num_warps: Triton's compile option, but this is a CUDA capture: swept as the macro -Dnum_warps",
      expect.stringContaining("-Dnum_warps: no source under src/ names it"),
    ]);
    // which configs built and which did not is said before the replay refuses: a machine without a GPU learns it too
    expect(err).toMatch(/build\.sh: built \(\d+ registers\/thread/);
    expect(err).toMatch(/BROKEN=1.*: does not build: .*BROKEN is defined/);
  }, 120_000);
});

describe("tune (CUDA): what it prints", () => {
  const cfg = (defines: Record<string, string>, maxrregcount?: number): CudaConfig => ({ defines, ...(maxrregcount ? { maxrregcount } : {}), flags: [] });
  const r: TuneResult<CudaConfig> = {
    dir: "/x/cap",
    frontend: "cuda",
    kernel: "_Z1kPf",
    symbol: "_Z1kPf",
    grid: null,
    rows: [
      { config: cfg({}), label: "captured module", captured: true, verdict: "match", medianUs: 10, speedup: 1, registers: 40 },
      { config: cfg({}), label: "build.sh", captured: false, verdict: "match", medianUs: 10.1, speedup: 10 / 10.1, registers: 40 },
      { config: cfg({ TILE: "32" }, 64), label: "TILE=32 maxrregcount=64", captured: false, verdict: "match", medianUs: 8, speedup: 1.25, registers: 64 },
      {
        config: cfg({ TILE: "16" }, 64),
        label: "TILE=16 maxrregcount=64",
        captured: false,
        verdict: "match",
        medianUs: 10.05,
        speedup: 10 / 10.05,
        registers: 40,
        note: "the kernel's machine code is build.sh's: the flags change nothing in it",
      },
      {
        config: cfg({ TILE: "x" }),
        label: "TILE=x",
        captured: false,
        verdict: "compile-error",
        medianUs: null,
        speedup: null,
        registers: null,
        error: 'src/k.cu(3): error: identifier "x" is undefined',
      },
    ],
    winner: null,
    paste: "-DTILE=32 -maxrregcount=64",
    seconds: { compile: 2.5, replay: 1.5 },
  };
  r.winner = r.rows[2]!;
  test("the table with registers, the errors and notes under it, the winner and its nvcc flags; the document conforms to kerncap.tune/1", () => {
    const t = describeTune(r as TuneResult<unknown>).split("\n");
    expect(t[0]).toMatch(/^config\s+verdict\s+µs\s+vs app\s+regs$/);
    expect(t[1]).toMatch(/^TILE=32 maxrregcount=64\s+match\s+8\.00\s+1\.25×\s+64$/);
    expect(t.slice(1, 6).map((l) => l.split(/\s{2,}/)[0])).toEqual([
      "TILE=32 maxrregcount=64",
      "captured module (app)",
      "TILE=16 maxrregcount=64",
      "build.sh",
      "TILE=x",
    ]);
    expect(t).toContain('  TILE=x: compile-error: src/k.cu(3): error: identifier "x" is undefined');
    expect(t).toContain("  TILE=16 maxrregcount=64: the kernel's machine code is build.sh's: the flags change nothing in it");
    expect(t).toContain("winner: TILE=32 maxrregcount=64, 1.25× the app's");
    expect(t).toContain("  -DTILE=32 -maxrregcount=64");
    expect(v.safeParse(DOCUMENTS.tune, JSON.parse(JSON.stringify(jsonDocument("tune", r)))).success).toBe(true);
    // the app's own build winning: nothing to paste
    const own = describeTune({ ...r, winner: r.rows[0]!, paste: null } as TuneResult<unknown>);
    expect(own).toContain("winner: captured module (the app's own)");
    expect(own).not.toContain("  -DTILE");
  });
});

describe("a swept macro no source names", () => {
  test("is named (every value builds the same kernel); one the source reads is not", async () => {
    const { unusedMacros } = await import("../../../../src/frontends/cuda/tune.ts");
    const { writeDemo } = await import("../../../../src/capture/demo.ts");
    const dir = writeDemo(join(tempDir(), "cap"), false).dir;
    writeFileSync(join(dir, "src/saxpy.cu"), `${readFileSync(join(dir, "src/saxpy.cu"), "utf8")}\n#ifndef BLOCK_X\n#define BLOCK_X 4\n#endif\n`);
    expect(unusedMacros(dir, ["BLK", "BLOCK_X", "BLOCK"])).toEqual(["BLK", "BLOCK"]);
    expect(unusedMacros(dir, [])).toEqual([]);
  });
});
