/**
 * `kerncap export` of an AMD (hip) capture, without an AMD GPU: the HSA program is rendered from a
 * synthetic hip capture (a real gfx90a code object from hipcc, an offload bundle the export
 * unbundles), built with the export's own Makefile (and CMake) against Debian's ROCm headers and
 * libhsa-runtime64 (ROCm 5.2: no virtual memory API in its headers, which the program looks up at
 * run time), and run against the stand-in runtime test/apps/hip/fake_libhsa.c (host memory for
 * device memory, the captured VAs mapped at their addresses, the kernel `scale` run as a C
 * function on the dispatch packet's kernarg).
 * NOT covered: the real ROCr runtime, an AMD GPU, hsa_amd_vmem on ROCm 6: the program has never
 * run on AMD hardware. Skips without gcc, hipcc or the HSA headers (scripts/install-rocm.sh).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isOffloadBundle } from "../../src/codeobj/amdgpu.ts";
import { exportCapture } from "../../src/export/export.ts";
import { buildFakeHsa, compileScale, FAKE_LIBHSA, hipScaleCapture, SCALE_N } from "../hip-fixture.ts";

const ROOT = resolve(import.meta.dir, "../..");
const HSA_INC = process.env.HSA_INCLUDE ?? "/usr/include";
const READY = !!Bun.which("gcc") && !!Bun.which("hipcc") && !!Bun.which("make") && existsSync(join(HSA_INC, "hsa/hsa.h"));
const REASON = READY ? "" : "(skipped: gcc, make, hipcc or hsa/hsa.h missing; run scripts/install-rocm.sh)";

const N = SCALE_N; // floats in the data region
const DATA_VA = 0x7e5b_0000_0000n;
const INPUT_VA = 0x7e5b_0010_0000n;

let tmp = "";
let fakeDir = "";
let bundle = new Uint8Array();

function sh(cmd: string[], o: { cwd?: string; env?: Record<string, string> } = {}): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(cmd, { cwd: o.cwd, env: { ...process.env, ...o.env }, stdout: "pipe", stderr: "pipe", timeout: 120_000 });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}

beforeAll(() => {
  if (!READY) return;
  tmp = mkdtempSync(join(tmpdir(), "kerncap-export-hsa-"));
  // the stand-in runtime under the real one's name, for LD_LIBRARY_PATH
  fakeDir = join(tmp, "fake");
  mkdirSync(fakeDir);
  buildFakeHsa(join(fakeDir, "libhsa-runtime64.so.1"));
  symlinkSync("libhsa-runtime64.so.1", join(fakeDir, "libhsa-runtime64.so"));
  const co = join(tmp, "scale.co");
  compileScale(co);
  bundle = new Uint8Array(readFileSync(co));
}, 120_000);
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

/** A hip capture of scale(data, 2, N) (test/hip-fixture.ts): data holds k before and `after(k)` after, an input region the kernel does not touch. */
function hipCapture(name: string, after?: (k: number) => number): Promise<string> {
  return hipScaleCapture(tmp, name, { module: bundle, dataVa: DATA_VA, inputVa: INPUT_VA, after });
}

/** Export capture `name`, copy the export to a fresh folder, build it with its Makefile against the system's HSA headers and library. */
async function exported(name: string, after?: (k: number) => number) {
  const cap = await hipCapture(name, after);
  const r = exportCapture(cap, join(tmp, `${name}-export`));
  const fresh = join(tmp, "fresh", name);
  cpSync(r.out, fresh, { recursive: true });
  const mk = sh(["make", "ROCM_PATH=/usr", "CFLAGS=-O2 -std=c11 -Wall -Wextra -Werror", "repro"], { cwd: fresh });
  expect(mk.err).not.toContain("warning");
  expect(mk.code, mk.err).toBe(0);
  return { r, fresh };
}

const repro = (dir: string, args: string[] = []) => sh(["./repro", "-n", "5", ...args], { cwd: dir, env: { LD_LIBRARY_PATH: fakeDir } });

describe.skipIf(!READY)(`kerncap export of a hip capture: the HSA program ${REASON}`, () => {
  test("the folder: the HSA program in place of the CUDA one, the code object unbundled for gfx90a, capture.h's dispatch facts, a README that says it never ran on AMD hardware", async () => {
    const { r, fresh } = await exported("files");
    expect(isOffloadBundle(bundle)).toBe(true);
    expect(r.module.file).toBe("kernel.hsaco");
    expect(readFileSync(join(fresh, "kernel.hsaco")).subarray(0, 4)).toEqual(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
    expect(r.triton).toBeNull();
    expect(r.commands).toMatchObject({ build: "make", run: "./repro", triton: null });
    const files = readdirSync(fresh).sort();
    for (const f of ["repro.c", "repro_common.h", "capture.h", "Makefile", "CMakeLists.txt", "README.md", "kerncap-export.json", "data"])
      expect(files).toContain(f);
    for (const f of ["hsa", "repro.py", "kcdata.py", "kernel.ptx"]) expect(files).not.toContain(f);
    expect(readFileSync(join(fresh, "repro.c"), "utf8")).toContain("hsa_executable_load_agent_code_object");
    expect(readFileSync(join(fresh, "Makefile"), "utf8")).toContain("-lhsa-runtime64");
    const h = readFileSync(join(fresh, "capture.h"), "utf8");
    expect(h).toContain('#define KERNEL_SYMBOL "_Z5scalePffi.kd"');
    expect(h).toMatch(/#define KERNARG_SEGMENT_BYTES \d+u/);
    expect(h).toContain("#define CAPTURED_ORDINAL 0");
    expect(h).not.toContain("LAUNCH_ATTRS"); // CUDA's tables stay out of the HSA program
    const readme = readFileSync(join(fresh, "README.md"), "utf8");
    expect(readme).toContain("never run on AMD hardware");
    expect(readme).toContain("hsa_amd_vmem_address_reserve");
    expect(readme).not.toContain("cuMemAddressReserve");
    expect(readme).not.toContain("--verify-only"); // the CUDA program's option only
  });

  test("built against Debian's ROCm headers and libhsa-runtime64, run on the stand-in runtime: MATCH when the kernel gives the app's after state", async () => {
    const { fresh } = await exported("match");
    const r = repro(fresh);
    expect(r.out, r.err).toContain("MATCH: 2 regions, 0 module globals compared with the app's after state (bit for bit)");
    expect(r.out).toContain("on Fake MI210 (gfx90a); captured on Fake MI210 (gfx90a)");
    expect(r.out).toMatch(/kernel time: median [\d.]+ us, min [\d.]+ us over 5 dispatches \(wall clock/);
    expect(r.code).toBe(0);
    // the data folder is the capture itself (a hip capture kerncap replays)
    expect(existsSync(join(fresh, "data/kerncap.json"))).toBe(true);
    // make run: the same program, its output as printable ASCII, its status kept
    const run = sh(["make", "ROCM_PATH=/usr", "run"], { cwd: fresh, env: { LD_LIBRARY_PATH: fakeDir } });
    expect(run.out, run.err).toContain("MATCH: 2 regions");
    expect(run.code).toBe(0);
  });

  test("MISMATCH (exit 1) when the app's after state differs from what the kernel computes, named by region", async () => {
    const { fresh } = await exported("mismatch", (k) => (k === 5 ? 11 : 2 * k));
    const r = repro(fresh, ["-n", "0"]);
    expect(r.out, r.err).toContain(`MISMATCH region 0x${DATA_VA.toString(16)} (${N * 4} bytes, fp32): 1 elements differ, the first at byte 20`);
    expect(r.out).toContain("MISMATCH: 2 regions");
    expect(r.code).toBe(1);
    const run = sh(["make", "ROCM_PATH=/usr", "run"], { cwd: fresh, env: { LD_LIBRARY_PATH: fakeDir } });
    expect(run.out, run.err).toContain("MISMATCH: 2 regions");
    expect(run.code).not.toBe(0); // ./repro's exit 1 through make, not tr's 0
  });

  test("errors exit 2: a file that is no code object (-m), a GPU agent that is not there, a ROCm 5 runtime (no virtual memory API)", async () => {
    const { fresh } = await exported("errors");
    writeFileSync(join(fresh, "other.hsaco"), "not a code object");
    const notThere = repro(fresh, ["-m", "other.hsaco"]);
    expect(notThere.code).toBe(2);
    expect(notThere.err).toContain("hsa_code_object_reader_create_from_memory");
    const agent = repro(fresh, ["-g", "3"]);
    expect(agent.code).toBe(2);
    expect(agent.err).toContain("GPU agent 3 not found (1 present)");
    // the stand-in runtime without hsa_amd_vmem_address_reserve, as ROCm 5.x is
    const rocm5 = join(tmp, "rocm5");
    mkdirSync(rocm5, { recursive: true });
    const cc = sh(["gcc", "-shared", "-fPIC", "-Dhsa_amd_vmem_address_reserve=absent_in_rocm5", "-o", join(rocm5, "libhsa-runtime64.so.1"), FAKE_LIBHSA]);
    expect(cc.code, cc.err).toBe(0);
    const old = sh(["./repro", "-n", "0"], { cwd: fresh, env: { LD_LIBRARY_PATH: rocm5 } });
    expect(old.code).toBe(2);
    expect(old.err).toContain("this HSA runtime lacks hsa_amd_vmem_address_reserve: replaying at the captured VAs needs ROCm 6.0 or newer");
  });

  test("CMake builds the same program against Debian's hsa-runtime64 package", async () => {
    if (!Bun.which("cmake")) return;
    const { fresh } = await exported("cmake");
    const c = sh(["cmake", "-B", "cmake-build", "."], { cwd: fresh });
    expect(c.code, c.out + c.err).toBe(0);
    const b = sh(["cmake", "--build", "cmake-build"], { cwd: fresh });
    expect(b.code, b.out + b.err).toBe(0);
    const r = sh(["./cmake-build/repro", "-n", "2"], { cwd: fresh, env: { LD_LIBRARY_PATH: fakeDir } });
    expect(r.out, r.err).toContain("MATCH: ");
    expect(r.code).toBe(0);
  }, 120_000);
});
