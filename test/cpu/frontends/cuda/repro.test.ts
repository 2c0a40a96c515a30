/**
 * CUDA reproducer without a GPU: compile the test apps with the local nvcc as the application
 * would, treat the module as the captured one, locate the source, render the reproducer, run its
 * build.sh, and check with the cubin readers that the rebuilt cubin exports the same kernel with
 * the same parameter layout. Skipped when nvcc is missing.
 */
import { afterAll, describe, expect, spyOn, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { cubinKernels, cubinParamLayout } from "../../../../src/codeobj/cubin.ts";
import { pickCubin } from "../../../../src/codeobj/fatbin.ts";
import { NO_NVCC_REASON, NVCC } from "../../../nvcc-fixtures.ts";
import { KerncapError } from "../../../../src/errors.ts";
import { parseElf, SHN_UNDEF, STT_FUNC } from "../../../../src/codeobj/elf.ts";
import { log } from "../../../../src/log.ts";
import { buildReproducer } from "../../../../src/frontends/build.ts";
import { archFor, checkRebuiltModule, cudaReproducerHook, planSlice, renderCudaReproducer, toolkitProvided } from "../../../../src/frontends/cuda/repro.ts";
import { shellWords } from "../../../../src/frontends/cuda/compile-commands.ts";
import { cudaFlagsFromCommand } from "../../../../src/frontends/cuda/flags.ts";
import { parseDeps } from "../../../../src/frontends/cuda/nvcc.ts";
import { blankBodies, codeMask, kernelDefinitions, refreshSlice } from "../../../../src/frontends/cuda/slice.ts";
import { definesKernel, kernelNameParts, locateKernelSource } from "../../../../src/frontends/cuda/locate.ts";
import { cudaFrontend } from "../../../../src/frontends/cuda/index.ts";
import "../../../../src/frontends/index.ts"; // registers the frontends' run files with the trust gate that build.sh passes
import { readBuildScripts } from "../../../../src/frontends/stock-build.ts";
import { CUDA_TEMPLATES } from "../../../../src/frontends/cuda/templates.ts";

/** A rendered build.sh is kerncap's own to the trust gate's reading (src/frontends/stock-build.ts), with no program among its flags. */
function expectStock(out: string): void {
  const r = readBuildScripts(CUDA_TEMPLATES, [{ name: "build.sh", bytes: readFileSync(join(out, "build.sh")) }]);
  expect(r.stock, r.why).toBe(true);
  expect(r.programs).toEqual([]);
}

const APPS = resolve(import.meta.dir, "../../../apps");
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
    expect(kernelNameParts("void mul_mat_q<(ggml_type)2, 64, false>(char const*, int)")).toEqual({
      qualified: "mul_mat_q<(ggml_type)2, 64, false>",
      base: "mul_mat_q",
      templateArgs: "(ggml_type)2, 64, false",
    });
    expect(kernelNameParts("void kc::tiled_apply<float, 256, (kc::Op)1>(float*, float const*, float, int)").base).toBe("tiled_apply");
    expect(kernelNameParts("scale_jobs(Job const*, int)")).toEqual({ qualified: "scale_jobs", base: "scale_jobs", templateArgs: undefined });
  });
  test("definesKernel tells a definition from a declaration", () => {
    expect(definesKernel("template <int N>\n__global__ void __launch_bounds__(256) k(int* p,\n int n) {\n}", "k")).toBe(true);
    expect(definesKernel("__global__ void k(int* p);", "k")).toBe(false);
    expect(definesKernel("__global__ void kk(int* p) {}", "k")).toBe(false);
  });
  test("shellWords and compile-command flags", () => {
    const argv = shellWords(
      `/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DGGML_X -DNAME=\\"v\\" -I../include -isystem /opt/x -O3 -DNDEBUG -std=c++17 "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" -Xcompiler=-fPIC -use_fast_math -MD -MT a.o -MF a.d -x cu -c /p/src/k.cu -o CMakeFiles/k.o`,
    );
    const f = cudaFlagsFromCommand(argv, "/p/build", "/p/src/k.cu");
    expect(f.words.map((w) => w.text)).toEqual([
      "-forward-unknown-to-host-compiler",
      "-DGGML_X",
      '-DNAME="v"',
      "-I/p/include",
      "-isystem /opt/x",
      "-O3",
      "-DNDEBUG",
      "-std=c++17",
      "-Xcompiler=-fPIC",
      "-use_fast_math",
    ]);
    expect(f.originalArch).toEqual(["--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]"]);
    expect(archFor("sm_90", f.originalArch)).toBe("sm_90a");
    expect(cudaFlagsFromCommand(["nvcc", "-rdc=true", "-c", "/a.cu"], "/", "/a.cu").rdc).toBe(true);
  });
  test("parseDeps", () => {
    expect(parseDeps("k.o: /a/k.cu /a/b\\ c.h \\\n  /usr/include/x.h\n")).toEqual(["/a/k.cu", "/a/b c.h", "/usr/include/x.h"]);
  });
});

describe.skipIf(!NVCC)("reproducers built with nvcc", () => {
  test("structs.cu: line info finds the TU; build.sh rebuilds the same kernels and layouts", async () => {
    const fat = join(WORK, "structs.fatbin");
    nvcc([
      "-fatbin",
      "-O2",
      "-lineinfo",
      "-gencode",
      "arch=compute_80,code=sm_80",
      "-gencode",
      "arch=compute_90,code=sm_90",
      "-o",
      fat,
      join(APPS, "structs.cu"),
    ]);
    const module = new Uint8Array(readFileSync(fat));
    for (const [kernel, demangled] of [
      ["_Z10scale_jobsPK3Jobi", "scale_jobs(Job const*, int)"],
      ["_Z12axpy_inplaceIfLi4EEvPT_PKS0_S0_i", "void axpy_inplace<float, 4>(float*, float const*, float, int)"],
    ] as const) {
      const loc = await locateKernelSource({ kernel, demangled, module, arch: "sm_90" });
      expect(loc.method).toBe("line-info");
      expect(loc.tu).toBe(join(APPS, "structs.cu"));
      const out = join(WORK, `structs-${kernel}`);
      const r = renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc });
      expect(r.flags.from).toBe("default");
      expectStock(out);
      expect(r.slice.used).toBe(true); // defined in the TU itself: the TU up to its definition
      expect(r.slice.meta?.kind).toBe("prefix");
      expect(r.files).toContain("src/structs.cu");
      expect(readFileSync(join(out, "README.md"), "utf8")).toContain("Assumed flags");
      const cubin = build(out);
      expect(cubin).toBe(join(out, "build/kernel.cubin"));
      expect(cubinKernels(new Uint8Array(readFileSync(cubin)))).toEqual([kernel]); // the kernels after it are cut, none before it
      checkRebuiltModule(cubin, fakeManifest(module, kernel, demangled));
    }
  }, 120_000);

  test("header template + compile_commands.json: slice compiles only the captured instantiation; a layout edit is refused", async () => {
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
    const loc = await locateKernelSource({ kernel, demangled, module, arch: "sm_90", sourceRoot: proj });
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
    expectStock(out);
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

  test("overlay mode: only the edited files are copied; the rest resolves in the original tree", async () => {
    const proj = join(WORK, "tmplproj");
    const bdir = join(proj, "build");
    const module = new Uint8Array(readFileSync(join(bdir, "app.fatbin")));
    const kernel = cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("IdLi128E"))!;
    const demangled = "void kc::tiled_apply<double, 128, (kc::Op)0>(double*, double const*, kc::Coef<double>, int)";
    const loc = await locateKernelSource({ kernel, demangled, module, arch: "sm_90", compileCommands: bdir });
    const out = join(WORK, "tmpl-overlay");
    const r = renderCudaReproducer({
      outDir: out,
      kernelName: kernel,
      demangledName: demangled,
      arch: "sm_90",
      location: loc,
      sourceRoot: proj,
      overlay: true,
    });
    expect(r.mode).toBe("overlay");
    // what build.sh reads from the original tree, recorded by name: all a confined build may read of the project (src/frontends/confine.ts)
    expect(r.source.readInPlace).toEqual([join(proj, "include/tile_config.h")]);
    expectStock(out);
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
      checkRebuiltModule(join(dir, "k.cubin"), {
        kernel: { name: "_Z2rkPf", demangled: "rk(float*)" },
        params: { layout: [{ index: 0, offset: 0, size: 8 }] },
        device: { arch: "sm_90" },
      } as any);
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
    const m = {
      ...fakeManifest(module, kernel, "void kc::tiled_apply<double, 128, (kc::Op)0>(double*, double const*, kc::Coef<double>, int)"),
      module: { file: "kernel/module.fatbin" },
    } as any;
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

  test("source not found: says where it looked and how to point kerncap at it", async () => {
    const empty = join(WORK, "empty");
    mkdirSync(empty, { recursive: true });
    let err: unknown;
    try {
      await locateKernelSource({ kernel: "_Z3fooPf", demangled: "foo(float*)", arch: "sm_90", sourceRoot: empty });
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_SOURCE_NOT_FOUND");
    expect((err as KerncapError).message).toContain(`compile_commands.json in ${empty}/{,build,out,`);
    expect((err as KerncapError).message).toContain(`${empty}: no file defines __global__ foo`);
    expect((err as KerncapError).message).not.toContain("--source-root DIR"); // what was given is never asked for
    expect((err as KerncapError).hint).toContain("--source-root");
  });
});

describe("slice text", () => {
  test("codeMask and kernelDefinitions skip comments, strings and directives; bodies blank to declarations", () => {
    const text = [
      `#define K(n) __global__ void n() {}`,
      `// __global__ void in_comment() {}`,
      `namespace a { __global__ void __launch_bounds__(128) k1(int* p) { const char* s = "}{"; p[0] = '{'; }`,
      `template <int N> __global__ void k2(int* p)`,
      `{ if (N) { p[0] = 1'000; } }`,
      `__global__ void decl(int*); }`,
    ].join("\n");
    const defs = kernelDefinitions(text);
    expect(defs.map((d) => d.name)).toEqual(["k1", "k2"]);
    expect(codeMask(text).split("\n")[0]!.trim()).toBe("");
    const blanked = blankBodies(text, defs);
    expect(blanked.split("\n")).toHaveLength(6);
    expect(blanked).toContain("k1(int* p) ;");
    expect(blanked).not.toContain("p[0] = 1");
  });
  test("toolkitProvided: the driver's and the device libraries' functions, not the application's", () => {
    for (const n of [
      "vprintf",
      "malloc",
      "free",
      "__assertfail",
      "__cudaCDP2LaunchDeviceV2",
      "__cuda_syscall_cnpv2GetParameterBufferV2",
      "cudaGetParameterBufferV2",
      "cudaCGSynchronizeGrid",
      "__nv_sinf",
    ])
      expect(toolkitProvided(n)).toBe(true);
    for (const n of ["_Z6helperf", "helper", "my_malloc", "cuda_helper"]) expect(toolkitProvided(n)).toBe(false);
  });
});

/** Undefined functions of a cubin file (readelf -s: UND FUNC). */
function undefinedFunctions(path: string): string[] {
  return parseElf(pickCubin(new Uint8Array(readFileSync(path)), "sm_90").cubin)
    .symbols()
    .filter((s) => s.index > 0 && s.shndx === SHN_UNDEF && s.type === STT_FUNC)
    .map((s) => s.name);
}

describe.skipIf(!NVCC)("driver-provided device functions and slices of non-template kernels", () => {
  const MK = join(APPS, "multi_kernels");
  let module: Uint8Array;
  let all: string[];
  const app = () => {
    if (module) return;
    const fat = join(WORK, "mk.fatbin");
    nvcc(["-fatbin", "-O2", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90", "-o", fat, join(MK, "main.cu")]);
    module = new Uint8Array(readFileSync(fat));
    all = cubinKernels(pickCubin(module, "sm_90").cubin);
  };
  const render = async (kernel: string, demangled: string, extra: Partial<Parameters<typeof renderCudaReproducer>[0]> = {}) => {
    const loc = await locateKernelSource({ kernel, demangled, module, arch: "sm_90", sourceRoot: MK });
    const out = join(WORK, `mk-${kernel}${extra.slice === false ? "-whole" : ""}`);
    const r = renderCudaReproducer({ outDir: out, kernelName: kernel, demangledName: demangled, arch: "sm_90", location: loc, sourceRoot: MK, ...extra });
    return { r, out };
  };

  test("assert() and printf() in the kernel's TU: rebuilt (slice and whole TU) and accepted", async () => {
    app();
    const kernel = "_Z12checked_copyPfPKfi";
    for (const slice of [true, false]) {
      const { r, out } = await render(kernel, "checked_copy(float*, float const*, int)", { slice });
      expect(r.slice.used).toBe(slice);
      const cubin = build(out);
      expect(undefinedFunctions(cubin)).toEqual(expect.arrayContaining(["vprintf", "__assertfail"]));
      checkRebuiltModule(cubin, fakeManifest(module, kernel, "checked_copy(float*, float const*, int)"));
    }
  }, 120_000);

  test("non-template kernels: each slice holds the kernel with the captured layout and fewer other kernels", async () => {
    app();
    expect(all).toHaveLength(8);
    const cases: [string, string, (k: string[]) => void][] = [
      // defined in a header: the TU up to its #include; early.cuh's kernel stays, late.cuh's is cut
      [
        "_Z10rows_scalePfPKffi",
        "rows_scale(float*, float const*, float, int)",
        (k) => expect(k.sort()).toEqual(["_Z10early_fillPfi", "_Z10rows_scalePfPKffi"]),
      ],
      // defined in the TU: the headers' kernels stay, the TU's other kernels are gone
      [
        "_Z8add_biasPfi",
        "add_bias(float*, int)",
        (k) => expect(k.sort()).toEqual(["_Z10early_fillPfi", "_Z10rows_scalePfPKffi", "_Z11late_squarePfi", "_Z8add_biasPfi"]),
      ],
      ["_ZN2mk9pair_fillEPfNS_4PairEi", "mk::pair_fill(float*, mk::Pair, int)", (k) => expect(k).not.toContain("_Z8add_biasPfi")],
      ["_Z10stride_sumILi4EEvPfPKfi", "void stride_sum<4>(float*, float const*, int)", (k) => expect(k).not.toContain("_Z12checked_copyPfPKfi")],
    ];
    for (const [kernel, demangled, check] of cases) {
      const { r, out } = await render(kernel, demangled);
      expect(r.slice.used).toBe(true);
      expect(r.slice.meta?.kind).toBe("prefix");
      const cubin = build(out);
      const k = cubinKernels(new Uint8Array(readFileSync(cubin)));
      expect(k).toContain(kernel);
      expect(k.length).toBeLessThan(all.length);
      check(k);
      checkRebuiltModule(cubin, fakeManifest(module, kernel, demangled)); // same parameter layout
    }
    const rows = (await render("_Z10rows_scalePfPKffi", "rows_scale(float*, float const*, float, int)")).r;
    expect(rows.slice.meta?.cutInclude).toBe(`#include "kernels/rows.cuh"`);
  }, 240_000);

  test("an edited TU: build.sh compiles the whole TU until validate remakes the slice; a compile error names src/", async () => {
    app();
    const { out } = await render("_Z8add_biasPfi", "add_bias(float*, int)");
    const tu = join(out, "src/main.cu");
    writeFileSync(tu, readFileSync(tu, "utf8").replace("0.25f * (i & 7)", "0.5f * (i & 7)"));
    let r = sh(["bash", join(out, "build.sh")], out);
    expect(r.code).toBe(0);
    expect(r.err).toContain("kerncap: src/main.cu changed since the slice was made");
    expect(cubinKernels(new Uint8Array(readFileSync(r.out.trim())))).toHaveLength(all.length);
    const meta = JSON.parse(JSON.stringify((await render("_Z8add_biasPfi", "add_bias(float*, int)")).r.slice.meta)); // same meta as the capture recorded
    writeFileSync(tu, readFileSync(tu, "utf8").replace("0.25f * (i & 7)", "0.5f * (i & 7)"));
    expect(refreshSlice(out, meta).action).toBe("remade");
    expect(readFileSync(join(out, "src/main.kerncap-slice.cu"), "utf8")).toContain("0.5f * (i & 7)");
    r = sh(["bash", join(out, "build.sh")], out);
    expect(r.err).not.toContain("kerncap:");
    expect(cubinKernels(new Uint8Array(readFileSync(r.out.trim())))).toContain("_Z8add_biasPfi");
    expect(refreshSlice(out, meta).action).toBe("fresh");
    // a compile error in the slice is reported at the editable file's own line
    writeFileSync(tu, readFileSync(tu, "utf8").replace("y[i] += mk_bias(i);", "y[i] += undefined_name;"));
    refreshSlice(out, meta);
    r = sh(["bash", join(out, "build.sh")], out);
    expect(r.code).not.toBe(0);
    const line =
      readFileSync(tu, "utf8")
        .split("\n")
        .findIndex((l) => l.includes("undefined_name")) + 1;
    expect(r.err).toContain(`src/main.cu(${line}): error`);
  }, 180_000);

  test("a slice that does not build falls back to the whole TU, saying why, and is not tried again", async () => {
    const dir = join(WORK, "fwd");
    mkdirSync(dir, { recursive: true });
    // the kernel calls a device function that is declared before it and defined after it, both spelt through macros the
    // slice's rules do not expand (a later declaration of a name the text before spells is not sliced at all:
    // src/frontends/cuda/slice-lookup.ts): the slice is made, does not build, and build.sh falls back
    writeFileSync(
      join(dir, "fwd.cu"),
      `#define DECL __device__ float later(float);\n#define LATER later\nDECL\n__global__ void fk(float* p) { p[0] = LATER(p[1]); }\n__device__ float later(float x) { return x * 2; }\n__global__ void other(float* p) { p[0] = 1; }\n`,
    );
    nvcc(["-fatbin", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90", "-o", "fwd.fatbin", "fwd.cu"], dir);
    const mod = new Uint8Array(readFileSync(join(dir, "fwd.fatbin")));
    const loc = await locateKernelSource({ kernel: "_Z2fkPf", demangled: "fk(float*)", module: mod, arch: "sm_90" });
    const out = join(WORK, "fwd-capture");
    const r = renderCudaReproducer({ outDir: out, kernelName: "_Z2fkPf", demangledName: "fk(float*)", arch: "sm_90", location: loc });
    expect(r.slice.used).toBe(true);
    let b = sh(["bash", join(out, "build.sh")], out);
    expect(b.code).toBe(0);
    expect(b.err).toContain(
      "kerncap: the slice src/fwd.kerncap-slice.cu does not build (nvcc failed on it: build/slice-build.log): compiled the whole TU src/fwd.cu in its place",
    );
    expect(readFileSync(join(out, "build/slice-build.log"), "utf8")).toContain("later"); // the slice's own messages, kept
    checkRebuiltModule(b.out.trim(), fakeManifest(mod, "_Z2fkPf", "fk(float*)"));
    b = sh(["bash", join(out, "build.sh")], out);
    expect(b.err).toContain("kerncap: the slice did not build for this text of src/fwd.cu: compiling the whole TU");
    // an edit with a syntax error that the slice holds too: the compiler's error once (the whole TU's), last, and no
    // note blaming the slice (nu9 #12: "did not build either" came after the TU's error; nu12 #2: the note before it blamed the slice for the user's error)
    const tu = join(out, "src/fwd.cu");
    writeFileSync(tu, readFileSync(tu, "utf8").replace("return x * 2;", "return x * 2 SYNTAX;"));
    const sha = new Bun.CryptoHasher("sha256").update(readFileSync(tu)).digest("hex");
    const slicePath = join(out, "src/fwd.kerncap-slice.cu");
    // as kerncap would make it from that TU: both hashes of the first line match (else it is a slice edited by hand)
    const old = readFileSync(slicePath, "utf8");
    const body = `${old.slice(old.indexOf("\n") + 1)}\n__global__ void broken(float* p) { p[0] = 1 SYNTAX; }\n`;
    const bodySha = new Bun.CryptoHasher("sha256").update(body).digest("hex");
    writeFileSync(slicePath, `// kerncap slice of src/fwd.cu sha256=${sha} body=${bodySha}\n${body}`);
    b = sh(["bash", join(out, "build.sh")], out);
    expect(b.code).not.toBe(0);
    expect(b.err.match(/error: expected a ";"/g)?.length).toBe(1);
    expect(b.err).toContain("fwd.cu(");
    expect(b.err).not.toContain("kerncap-slice.cu(");
    expect(b.err).not.toContain("kerncap: the slice");
    expect(b.err).not.toContain("did not build either");
    expect(b.err.trimEnd()).toMatch(/compilation of "[^"]*fwd\.cu"\.$/); // the TU's error is the last word
  }, 120_000);

  test("-rdc: assert() and a device launch are device-linked and accepted; a function of another TU is refused (E_RDC)", async () => {
    const dir = join(WORK, "rdcproj");
    mkdirSync(join(dir, "build"), { recursive: true });
    writeFileSync(
      join(dir, "cdp.cu"),
      `#include <cassert>\n__global__ void child(int* p) { p[threadIdx.x] = 1; }\n__global__ void parent(int* p) { assert(p); if (threadIdx.x == 0) child<<<1, 32>>>(p); }\n`,
    );
    writeFileSync(join(dir, "x.cu"), `extern __device__ float helper(float);\n__global__ void rk(float* p) { p[0] = helper(p[1]); }\n`);
    const cmd = (f: string) => ({
      directory: join(dir, "build"),
      command: `${NVCC} -rdc=true -O2 -arch=sm_90 -c ${join(dir, f)} -o ${f}.o`,
      file: join(dir, f),
    });
    writeFileSync(join(dir, "build/compile_commands.json"), JSON.stringify([cmd("cdp.cu"), cmd("x.cu")]));
    nvcc(["-cubin", "-rdc=true", "-arch=sm_90", "-o", "cdp.rel.cubin", "cdp.cu"], dir);
    nvcc(["-dlink", "-cubin", "-arch=sm_90", "cdp.rel.cubin", "-lcudadevrt", "-o", "cdp.cubin"], dir);
    const mod = new Uint8Array(readFileSync(join(dir, "cdp.cubin")));
    const m = fakeManifest(mod, "_Z6parentPi", "parent(int*)");
    // the unlinked relocatable cubin lists only toolkit functions: not E_RDC, but not loadable either
    expect(undefinedFunctions(join(dir, "cdp.rel.cubin"))).toEqual(expect.arrayContaining(["__assertfail", "__cudaCDP2LaunchDeviceV2"]));
    expect(() => checkRebuiltModule(join(dir, "cdp.rel.cubin"), m)).toThrow(/relocatable cubin/);
    const loc = await locateKernelSource({ kernel: "_Z6parentPi", demangled: "parent(int*)", arch: "sm_90", compileCommands: join(dir, "build") });
    const out = join(WORK, "rdc-capture");
    const r = renderCudaReproducer({ outDir: out, kernelName: "_Z6parentPi", demangledName: "parent(int*)", arch: "sm_90", location: loc });
    expect(r.flags.rdc).toBe(true);
    const b = await buildReproducer(out, { quiet: true, force: false });
    checkRebuiltModule(b.module, m); // linked: accepted
    // another TU's function: the device link names it, validate refuses with E_RDC
    const loc2 = await locateKernelSource({ kernel: "_Z2rkPf", demangled: "rk(float*)", arch: "sm_90", compileCommands: join(dir, "build") });
    const out2 = join(WORK, "rdc-capture-x");
    renderCudaReproducer({ outDir: out2, kernelName: "_Z2rkPf", demangledName: "rk(float*)", arch: "sm_90", location: loc2 });
    let err: unknown;
    try {
      await buildReproducer(out2, { quiet: true, force: false, explain: cudaFrontend.explainBuildFailure });
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_RDC");
    expect((err as KerncapError).message).toContain("_Z6helperf");
  }, 180_000);

  test("capture hook messages name the final capture folder, never DIR.tmp-<pid>", async () => {
    app();
    const final = join(WORK, "named-capture");
    const tmp = `${final}.tmp-${process.pid}`;
    mkdirSync(join(tmp, "kernel"), { recursive: true });
    writeFileSync(join(tmp, "kernel/module.fatbin"), module);
    const m = { ...fakeManifest(module, "_Z8add_biasPfi", "add_bias(float*, int)"), module: { file: "kernel/module.fatbin" } } as any;
    m.kernel.frontend = "cuda";
    const seen: string[] = [];
    const spies = [spyOn(log, "info"), spyOn(log, "warn")].map((s) => s.mockImplementation(((...a: unknown[]) => void seen.push(a.join(" "))) as never));
    try {
      await cudaReproducerHook({ sourceRoot: MK })(tmp, m, final);
      // a failure whose message names a path inside the temporary folder
      await cudaReproducerHook({ sourceRoot: MK, compileCommands: join(tmp, "cc.json") })(tmp, { ...m, source: undefined }, final);
    } finally {
      spies.forEach((s) => s.mockRestore());
    }
    expect(seen.some((l) => l.includes(`edit ${final}/src/main.cu`))).toBe(true);
    expect(seen.some((l) => l.includes(`${final}/cc.json`))).toBe(true);
    expect(seen.join("\n")).not.toContain(".tmp-");
  }, 120_000);
});
