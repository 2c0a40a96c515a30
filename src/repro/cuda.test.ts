/**
 * CUDA reproducer without a GPU: compile the test apps with the local nvcc as the application
 * would, treat the module as the captured one, locate the source, render the reproducer, run its
 * build.sh, and check with the cubin readers that the rebuilt cubin exports the same kernel with
 * the same parameter layout. Skipped when nvcc is missing.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { cubinKernels, cubinParamLayout } from "../codeobj/cubin.ts";
import { pickCubin } from "../codeobj/fatbin.ts";
import { NO_NVCC_REASON, NVCC } from "../codeobj/nvcc-fixtures.ts";
import { KerncapError } from "../errors.ts";
import { archFor, checkRebuiltModule, cudaFlagsFromCommand, cudaReproducerHook, parseDeps, planSlice, renderCudaReproducer } from "./cuda.ts";
import { definesKernel, kernelNameParts, locateKernelSource, shellWords } from "./locate.ts";

const APPS = resolve(import.meta.dir, "../../test/apps");
const WORK = mkdtempSync(join(tmpdir(), "kerncap-cuda-repro-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));
if (!NVCC) console.warn(NO_NVCC_REASON);

function sh(argv: string[], cwd = WORK): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(argv, { cwd, stdout: "pipe", stderr: "pipe", env: { ...process.env, NVCC: NVCC ?? "nvcc" } });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}
function nvcc(args: string[], cwd = WORK): void {
  const r = sh([NVCC!, ...args], cwd);
  if (r.code !== 0) throw new Error(`nvcc ${args.join(" ")}:\n${r.err}`);
}
/** The manifest fields checkRebuiltModule reads, as a capture of `kernel` in `module` would hold. */
function fakeManifest(module: Uint8Array, kernel: string, demangled: string) {
  const layout = cubinParamLayout(pickCubin(module, "sm_90").cubin, kernel);
  return { kernel: { name: kernel, demangled }, params: { layout }, device: { arch: "sm_90" } } as any;
}
function build(dir: string): string {
  const r = sh(["bash", join(dir, "build.sh")], dir);
  if (r.code !== 0) throw new Error(`build.sh failed:\n${r.err}`);
  return r.out.trim().split("\n").pop()!;
}

describe("names and parsing", () => {
  test("kernelNameParts", () => {
    expect(kernelNameParts("void mul_mat_q<(ggml_type)2, 64, false>(char const*, int)")).toEqual({ qualified: "mul_mat_q<(ggml_type)2, 64, false>", base: "mul_mat_q", templateArgs: "(ggml_type)2, 64, false" });
    expect(kernelNameParts("void kc::tiled_apply<float, 256, (kc::Op)1>(float*, float const*, float, int)").base).toBe("tiled_apply");
    expect(kernelNameParts("scale_jobs(Job const*, int)")).toEqual({ qualified: "scale_jobs", base: "scale_jobs", templateArgs: undefined });
  });
  test("definesKernel tells a definition from a declaration", () => {
    expect(definesKernel("template <int N>\n__global__ void __launch_bounds__(256) k(int* p,\n int n) {\n}", "k")).toBe(true);
    expect(definesKernel("__global__ void k(int* p);", "k")).toBe(false);
    expect(definesKernel("__global__ void kk(int* p) {}", "k")).toBe(false);
  });
  test("shellWords and compile-command flags", () => {
    const argv = shellWords(`/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DGGML_X -DNAME=\\"v\\" -I../include -isystem /opt/x -O3 -DNDEBUG -std=c++17 "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" -Xcompiler=-fPIC -use_fast_math -MD -MT a.o -MF a.d -x cu -c /p/src/k.cu -o CMakeFiles/k.o`);
    const f = cudaFlagsFromCommand(argv, "/p/build", "/p/src/k.cu");
    expect(f.words.map((w) => w.text)).toEqual(["-forward-unknown-to-host-compiler", "-DGGML_X", '-DNAME="v"', "-I/p/include", "-isystem /opt/x", "-O3", "-DNDEBUG", "-std=c++17", "-Xcompiler=-fPIC", "-use_fast_math"]);
    expect(f.originalArch).toEqual(["--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]"]);
    expect(archFor("sm_90", f.originalArch)).toBe("sm_90a");
    expect(cudaFlagsFromCommand(["nvcc", "-rdc=true", "-c", "/a.cu"], "/", "/a.cu").rdc).toBe(true);
  });
  test("parseDeps", () => {
    expect(parseDeps("k.o: /a/k.cu /a/b\\ c.h \\\n  /usr/include/x.h\n")).toEqual(["/a/k.cu", "/a/b c.h", "/usr/include/x.h"]);
  });
});

describe.skipIf(!NVCC)("reproducers built with nvcc", () => {
  test("structs.cu: line info finds the TU; build.sh rebuilds the same kernels and layouts", () => {
    const fat = join(WORK, "structs.fatbin");
    nvcc(["-fatbin", "-O2", "-lineinfo", "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90", "-o", fat, join(APPS, "structs.cu")]);
    const module = new Uint8Array(readFileSync(fat));
    for (const [kernel, demangled] of [
      ["_Z10scale_jobsPK3Jobi", "scale_jobs(Job const*, int)"],
      ["_Z12axpy_inplaceIfLi4EEvPT_PKS0_S0_i", "void axpy_inplace<float, 4>(float*, float const*, float, int)"],
    ] as const) {
      const loc = locateKernelSource({ kernel, demangled, module, arch: "sm_90" });
      expect(loc.method).toBe("line-info");
      expect(loc.tu).toBe(join(APPS, "structs.cu"));
      const out = join(WORK, `structs-${kernel}`);
      const r = renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc });
      expect(r.flags.from).toBe("default");
      expect(r.slice.used).toBe(false); // defined in the TU itself
      expect(r.files).toContain("src/structs.cu");
      expect(readFileSync(join(out, "README.md"), "utf8")).toContain("Assumed flags");
      const cubin = build(out);
      expect(cubin).toBe(join(out, "build/kernel.cubin"));
      checkRebuiltModule(cubin, fakeManifest(module, kernel, demangled));
    }
  }, 120_000);

  test("header template + compile_commands.json: slice compiles only the captured instantiation; a layout edit is refused", () => {
    // an application tree with a CMake-like build folder and compile_commands.json
    const proj = join(WORK, "tmplproj");
    cpSync(join(APPS, "cuda_tmpl"), proj, { recursive: true });
    const bdir = join(proj, "build");
    mkdirSync(bdir, { recursive: true });
    const cmd = `${NVCC} -DKC_SCALE=0.5f -I${proj}/include -O3 -std=c++17 --generate-code=arch=compute_90,code=[compute_90,sm_90] -x cu -c ${proj}/main.cu -o CMakeFiles/app.dir/main.cu.o`;
    writeFileSync(join(bdir, "compile_commands.json"), JSON.stringify([{ directory: bdir, command: cmd, file: `${proj}/main.cu` }]));
    const appFat = join(bdir, "app.fatbin");
    nvcc(["-fatbin", "-DKC_SCALE=0.5f", `-I${proj}/include`, "-O3", "-gencode", "arch=compute_90,code=sm_90", "-o", appFat, join(proj, "main.cu")]);
    const module = new Uint8Array(readFileSync(appFat));
    const all = cubinKernels(pickCubin(module, "sm_90").cubin);
    expect(all).toHaveLength(3);
    const kernel = all.find((k) => k.includes("IfLi256E"))!;
    const demangled = "void kc::tiled_apply<float, 256, (kc::Op)1>(float*, float const*, kc::Coef<float>, int)";

    // no line info in this module: compile_commands.json found under the source root
    const loc = locateKernelSource({ kernel, demangled, module, arch: "sm_90", sourceRoot: proj });
    expect(loc.method).toBe("compile-commands");
    expect(loc.tu).toBe(join(proj, "main.cu"));
    expect(loc.definition).toBe(join(proj, "kernels/tiled.cuh"));
    expect(planSlice(loc, readFileSync(loc.tu, "utf8")).text).toContain("(void*)&kc::tiled_apply<float, 256, (kc::Op)1>;");

    const out = join(WORK, "tmpl-capture");
    const r = renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc, sourceRoot: proj });
    expect(r.flags.from).toBe("compile-commands");
    expect(r.slice.used).toBe(true);
    expect(r.files).toEqual(expect.arrayContaining(["src/main.cu", "src/kernels/tiled.cuh", "src/include/tile_config.h", "src/main.kerncap-slice.cu"]));
    const script = readFileSync(join(out, "build.sh"), "utf8");
    expect(script).toContain(`-I"$here/src"/include`);
    expect(script).not.toContain(`-I${proj}`);
    const cubin = build(out);
    const rebuilt = new Uint8Array(readFileSync(cubin));
    expect(cubinKernels(rebuilt)).toEqual([kernel]); // only the captured instantiation
    const m = fakeManifest(module, kernel, demangled);
    checkRebuiltModule(cubin, m);

    // a real edit (tile constant in a header two folders away) rebuilds; the layout is unchanged
    const cfg = join(out, "src/include/tile_config.h");
    writeFileSync(cfg, readFileSync(cfg, "utf8").replace("#define TILE_ROWS 4", "#define TILE_ROWS 8"));
    checkRebuiltModule(build(out), m);

    // an edit that changes the parameter layout (a by-value struct grows) is refused before anything launches
    const def = join(out, "src/kernels/tiled.cuh");
    writeFileSync(def, readFileSync(def, "utf8").replace("  T a;\n};", "  T a;\n  T b;\n};"));
    let err: unknown;
    try {
      checkRebuiltModule(build(out), m);
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_PARAM_LAYOUT");
    expect((err as KerncapError).message).toContain("parameter 2: captured 4 bytes at offset 16, rebuilt 8 bytes at offset 16");

    // a compile error: build.sh exits non-zero with nvcc's message on stderr
    writeFileSync(def, readFileSync(def, "utf8").replace("int base =", "int base = undefined_name +"));
    const bad = sh(["bash", join(out, "build.sh")], out);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain("undefined_name");
  }, 180_000);

  test("overlay mode: only the edited files are copied; the rest resolves in the original tree", () => {
    const proj = join(WORK, "tmplproj");
    const bdir = join(proj, "build");
    const module = new Uint8Array(readFileSync(join(bdir, "app.fatbin")));
    const kernel = cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("IdLi128E"))!;
    const demangled = "void kc::tiled_apply<double, 128, (kc::Op)0>(double*, double const*, kc::Coef<double>, int)";
    const loc = locateKernelSource({ kernel, demangled, module, arch: "sm_90", compileCommands: bdir });
    const out = join(WORK, "tmpl-overlay");
    const r = renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc, sourceRoot: proj, overlay: true });
    expect(r.mode).toBe("overlay");
    expect(r.files.filter((f) => f.startsWith("src/")).sort()).toEqual(["src/kernels/tiled.cuh", "src/main.cu", "src/main.kerncap-slice.cu"]);
    const before = readFileSync(join(proj, "kernels/tiled.cuh"), "utf8");
    // the edit lives only in the copy: the original is untouched and still wins nowhere
    const def = join(out, "src/kernels/tiled.cuh");
    writeFileSync(def, readFileSync(def, "utf8").replace("__global__ void tiled_apply", "__global__ void __launch_bounds__(128) tiled_apply"));
    const cubin = build(out);
    expect(cubinKernels(new Uint8Array(readFileSync(cubin)))).toEqual([kernel]);
    checkRebuiltModule(cubin, fakeManifest(module, kernel, demangled));
    expect(readFileSync(join(proj, "kernels/tiled.cuh"), "utf8")).toBe(before);
  }, 120_000);

  test("-rdc: a kernel that calls device code of another TU is refused with the reason", () => {
    const dir = join(WORK, "rdc");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "k.cu"), `extern __device__ float helper(float);\n__global__ void rk(float* p) { p[0] = helper(p[1]); }\n`);
    nvcc(["-cubin", "-rdc=true", "-arch=sm_90", "-o", "k.cubin", "k.cu"], dir);
    let err: unknown;
    try {
      checkRebuiltModule(join(dir, "k.cubin"), { kernel: { name: "_Z2rkPf", demangled: "rk(float*)" }, params: { layout: [{ index: 0, offset: 0, size: 8 }] }, device: { arch: "sm_90" } } as any);
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_RDC");
    expect((err as KerncapError).message).toContain("_Z6helperf");
  }, 60_000);

  test("capture hook: renders into the capture folder and records manifest.source.cuda", async () => {
    const dir = join(WORK, "hook-capture");
    mkdirSync(join(dir, "kernel"), { recursive: true });
    cpSync(join(WORK, "tmplproj/build/app.fatbin"), join(dir, "kernel/module.fatbin"));
    const module = new Uint8Array(readFileSync(join(dir, "kernel/module.fatbin")));
    const kernel = cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("IdLi128E"))!;
    const m = { ...fakeManifest(module, kernel, "void kc::tiled_apply<double, 128, (kc::Op)0>(double*, double const*, kc::Coef<double>, int)"), module: { file: "kernel/module.fatbin" } } as any;
    m.kernel.frontend = "cuda";
    await cudaReproducerHook({ sourceRoot: join(WORK, "tmplproj") })(dir, m);
    expect(m.source.cuda.method).toBe("compile-commands");
    expect(m.source.cuda.slice.used).toBe(true);
    checkRebuiltModule(build(dir), m);
    // not found: the capture goes on, the reason is stored
    const m2 = { ...m, kernel: { ...m.kernel, demangled: "void nowhere<int>(int*)" }, source: undefined };
    await cudaReproducerHook({ sourceRoot: WORK + "/empty" })(dir, m2);
    expect(m2.source.cuda.error).toContain("was not found");
  }, 120_000);

  test("source not found: says where it looked and how to point kerncap at it", () => {
    const empty = join(WORK, "empty");
    mkdirSync(empty, { recursive: true });
    let err: unknown;
    try {
      locateKernelSource({ kernel: "_Z3fooPf", demangled: "foo(float*)", arch: "sm_90", sourceRoot: empty });
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_SOURCE_NOT_FOUND");
    expect((err as KerncapError).message).toContain(`compile_commands.json in ${empty}/{,build,out,`);
    expect((err as KerncapError).message).toContain(`${empty} (search for __global__ foo)`);
    expect((err as KerncapError).hint).toContain("--source-root");
  });
});
