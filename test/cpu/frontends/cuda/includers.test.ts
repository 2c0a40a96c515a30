/**
 * The locator on the layout of issue 25 with nvcc and CMake (no GPU, no capture: the kernel's
 * names stand in for the captured module, which is built without line info): test/apps/cmake_umbrella
 * configured with the Unix Makefiles generator (include folders in a response file,
 * compile_commands.json) and with Ninja (no database: `ninja -t compdb` of the build folder);
 * the kernel template in src/kernels/tiled_gemm.cuh reached from src/<tu>.cu only through
 * src/umbrella.cuh, instantiated by two TUs with different tile sizes. Each time the TU that
 * instantiates the captured arguments is found and the reproducer's build.sh compiles the kernel
 * to an sm_90 cubin. Also: an include spelled through a macro (found by nvcc -M alone), a source
 * root without a database (a guess, said to be one), and the message when no TU includes it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { cubinKernels } from "../../../../src/codeobj/cubin.ts";
import { NO_NVCC_REASON, NVCC } from "../../../nvcc-fixtures.ts";
import { KerncapError } from "../../../../src/errors.ts";
import { locateKernelSource } from "../../../../src/frontends/cuda/locate.ts";
import { renderCudaReproducer } from "../../../../src/frontends/cuda/repro.ts";

const APP = resolve(import.meta.dir, "../../../apps/cmake_umbrella");
const CMAKE = Bun.which("cmake");
const NINJA = Bun.which("ninja");
const WORK = mkdtempSync(join(tmpdir(), "kerncap-includers-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));
if (!NVCC) console.warn(NO_NVCC_REASON);
if (NVCC && !CMAKE) console.warn("[includers] cmake not found: skipping the CMake layouts");

const K128 = {
  kernel: "_Z11sgemm_tiledILi128ELi128ELi8ELi8ELi8EEviiifPKfS1_fPf",
  demangled: "void sgemm_tiled<128, 128, 8, 8, 8>(int, int, int, float, float const*, float const*, float, float*)",
};
const K64 = {
  kernel: "_Z11sgemm_tiledILi64ELi64ELi8ELi4ELi4EEviiifPKfS1_fPf",
  demangled: "void sgemm_tiled<64, 64, 8, 4, 4>(int, int, int, float, float const*, float const*, float, float*)",
};
const DEF = join(APP, "src/kernels/tiled_gemm.cuh");
const MK = join(WORK, "build-make");
const NJ = join(WORK, "build-ninja");

async function thrown(p: Promise<unknown>): Promise<KerncapError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no error thrown");
}

/** Render the reproducer for a location and run its build.sh: the kernels of the cubin it prints. */
async function reproducerKernels(
  loc: Awaited<ReturnType<typeof locateKernelSource>>,
  k: typeof K128,
  out: string,
): Promise<{ kernels: string[]; script: string; source: Record<string, unknown> }> {
  const r = renderCudaReproducer({ outDir: out, kernelName: k.kernel, demangledName: k.demangled, arch: "sm_90", location: loc, sourceRoot: APP, nvcc: NVCC });
  const b = Bun.spawnSync(["bash", join(out, "build.sh")], { cwd: out, stdout: "pipe", stderr: "pipe", env: { ...process.env, NVCC: NVCC! } });
  expect(b.exitCode, b.stderr.toString()).toBe(0);
  const cubin = b.stdout.toString().trim().split("\n").pop()!;
  return { kernels: cubinKernels(new Uint8Array(readFileSync(cubin))), script: readFileSync(join(out, "build.sh"), "utf8"), source: r.source };
}

describe.skipIf(!NVCC || !CMAKE)("a CMake project whose kernel template is reached through an umbrella header (nvcc, cmake)", () => {
  beforeAll(async () => {
    // both configures at once (each runs nvcc's compiler checks); Ninja without the database
    const configure = (dir: string, extra: string[]) =>
      Bun.spawn([CMAKE!, "-S", APP, "-B", dir, `-DCMAKE_CUDA_COMPILER=${NVCC}`, "-DCMAKE_CUDA_ARCHITECTURES=90", ...extra], { stdout: "pipe", stderr: "pipe" });
    const runs = [configure(MK, ["-G", "Unix Makefiles", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]), ...(NINJA ? [configure(NJ, ["-G", "Ninja"])] : [])];
    for (const p of runs) {
      const code = await p.exited;
      if (code !== 0) throw new Error(`cmake configure failed: ${await new Response(p.stderr).text()}`);
    }
  }, 120_000);

  test("Unix Makefiles: includes in a response file; the TU that launches <128,…> with named constants, by its PTX entry; build.sh compiles it", async () => {
    const db = join(MK, "compile_commands.json");
    expect(readFileSync(db, "utf8")).toContain("--options-file CMakeFiles/umbrella_kernels.dir/includes_CUDA.rsp");
    const loc = await locateKernelSource({ ...K128, arch: "sm_90", sourceRoot: APP, compileCommands: db });
    expect(loc.method).toBe("compile-commands");
    expect(loc.definition).toBe(DEF);
    expect(loc.tu).toBe(join(APP, "src/gemm_128.cu"));
    expect(loc.tuCertain).toBe(true);
    expect(loc.tuReason).toContain(`has the captured entry ${K128.kernel}`);
    expect(loc.otherCandidates.sort()).toEqual(["gemm_64.cu", "gemm_sweep.cu", "reduce.cu", "scale.cu", "softmax.cu"].map((f) => join(APP, "src", f)));
    expect(loc.compileCommand?.responseFiles).toEqual([join(MK, "CMakeFiles/umbrella_kernels.dir/includes_CUDA.rsp")]);
    expect(loc.looked).toContain("  6 of 7 TUs reach " + DEF + " through their #include lines");
    expect(loc.tuReason).toContain("2 of the 3 TUs that name sgemm_tiled compiled"); // the smallest first (gemm_64.cu, gemm_128.cu): not the sweep TU
    const r = await reproducerKernels(loc, K128, join(WORK, "cap-make"));
    expect(r.kernels).toContain(K128.kernel);
    expect(r.script).toContain('-I"$here/src"/include'); // the response file's folder, pointed into the copy
    expect(r.script).not.toContain("options-file");
    expect(r.source.tuReason).toBe(loc.tuReason);
  }, 120_000);

  test.skipIf(!NINJA)(
    "Ninja build folder without compile_commands.json: ninja -t compdb; the TU that spells <64,…> through its launcher; build.sh compiles it",
    async () => {
      const loc = await locateKernelSource({ ...K64, arch: "sm_90", compileCommands: NJ });
      expect(loc.compileCommand?.from).toBe(`${NJ} (ninja -t compdb)`);
      expect(loc.definition).toBe(DEF);
      expect(loc.tu).toBe(join(APP, "src/gemm_64.cu"));
      expect(loc.tuCertain).toBe(true);
      expect(loc.tuReason).toContain("it spells sgemm_tiled<64, 64, 8, 4, 4>");
      const r = await reproducerKernels(loc, K64, join(WORK, "cap-ninja"));
      expect(r.kernels).toContain(K64.kernel);
    },
    120_000,
  );

  test("no TU of the database includes the definition: the message says what was read and found, and asks for nothing that was given", async () => {
    const only = (JSON.parse(readFileSync(join(MK, "compile_commands.json"), "utf8")) as { file: string }[]).filter((e) => e.file.endsWith("main.cu"));
    const db = join(WORK, "main-only.json");
    writeFileSync(db, JSON.stringify(only));
    const err = await thrown(locateKernelSource({ ...K128, arch: "sm_90", sourceRoot: APP, compileCommands: db }));
    expect(err.code).toBe("E_SOURCE_NOT_FOUND");
    expect(err.message).toContain("was not found with --source-root and --compile-commands; tried:");
    expect(err.message).toContain(`${db}: 1 CUDA TU`);
    expect(err.message).toContain(`${APP}: __global__ sgemm_tiled defined in src/kernels/tiled_gemm.cuh`);
    expect(err.message).toContain(`0 of 1 TUs reach ${DEF} through their #include lines`);
    expect(err.message).toContain("nvcc -M of 1 TU\n");
    expect(err.message).toContain("0 TUs include it");
    expect(err.message.split(`${APP}: __global__`).length).toBe(2); // the root is searched once
    expect(err.hint).toContain("no TU of the compile database includes it");
    expect(err.hint).not.toContain("Pass --source-root");
  }, 60_000);

  test("a source root without a compile database: the default flags miss the build's define, the #include chain still says which TUs, the choice is called a guess", async () => {
    const loc = await locateKernelSource({ ...K128, arch: "sm_90", sourceRoot: APP });
    expect(loc.method).toBe("source-root");
    expect(["gemm_64.cu", "gemm_128.cu", "gemm_sweep.cu"].map((f) => join(APP, "src", f))).toContain(loc.tu); // the includers that name sgemm_tiled
    expect(loc.otherCandidates).toHaveLength(5);
    expect(loc.tuCertain).toBe(false);
    expect(loc.tuReason).toContain("it names sgemm_tiled (3 of 6 includers do; none's PTX had the captured entry)");
    expect(loc.compileCommand).toBeUndefined();
    expect(loc.looked.join("\n")).toContain("UMB_ACC_TYPE is set by the build");
    expect(loc.looked.join("\n")).toContain("kept by their #include lines alone");
  }, 60_000);
});

describe.skipIf(!NVCC)("an include the text cannot follow (nvcc)", () => {
  test("#include through a macro: no TU reaches the header by text, nvcc -M of every TU finds the one", async () => {
    const dir = join(WORK, "macro");
    mkdirSync(join(dir, "k"), { recursive: true });
    writeFileSync(join(dir, "k", "scale.cuh"), "#pragma once\n__global__ void scale_by_two(float* p) { p[threadIdx.x] *= 2.0f; }\n");
    writeFileSync(join(dir, "a.cu"), '#define KERNEL_HEADER "k/scale.cuh"\n#include KERNEL_HEADER\nvoid run(float* p) { scale_by_two<<<1, 32>>>(p); }\n');
    writeFileSync(join(dir, "b.cu"), "__global__ void other(int* p) { p[0] = 1; }\n");
    writeFileSync(
      join(dir, "compile_commands.json"),
      JSON.stringify(["a.cu", "b.cu"].map((f) => ({ directory: dir, file: f, arguments: [NVCC, "-I.", "-c", f, "-o", `${f}.o`] }))),
    );
    const loc = await locateKernelSource({ kernel: "_Z12scale_by_twoPf", demangled: "scale_by_two(float*)", arch: "sm_90", compileCommands: dir });
    expect(loc.tu).toBe(join(dir, "a.cu"));
    expect(loc.definition).toBe(join(dir, "k", "scale.cuh"));
    expect(loc.tuReason).toContain("the only TU that includes");
    expect(loc.looked).toContain("  0 of 2 TUs reach " + join(dir, "k", "scale.cuh") + " through their #include lines");
    expect(loc.looked).toContain("  nvcc -M of 2 TUs");
  }, 60_000);
});
