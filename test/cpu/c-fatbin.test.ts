/**
 * A capture keeps the PTX of the module where the application's image had it: the CUDA capture
 * library (c/build/libkerncap_cuda.so, c/cuda/kc_fatbin.h) driven by c/test/launch_main.c over the
 * stand-in libcuda/libcupti (c/test/fake_cuda.c), with a real fatbin built here by nvcc
 * (`-gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=sm_90`: sm_90 machine
 * code and compute_80 PTX). CUPTI's module-loaded callback hands over the sm_90 cubin alone (here:
 * the fatbin's entry, decompressed by src/codeobj); the capture must write the whole fatbin, which
 * src/codeobj reads back with its PTX, whichever way the application loaded it:
 *  - cuModuleLoadData of the fatbin (the module loads inside the call), or cuModuleLoad of its file;
 *  - cuLibraryLoadData of a __fatBinC_Wrapper_t around it, the module loaded later (lazy loading);
 *  - nothing seen but the module itself (the CUDA runtime's registered fatbins): found in this
 *    program's .nv_fatbin section.
 * And where no fatbin with PTX holds the cubin (a cubin loaded as it is, as Triton and XLA do; a
 * fatbin without PTX), the cubin is what is kept. Skips without gcc, the CUDA headers or nvcc.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describeModule } from "../../src/codeobj/index.ts";
import { fatbinEntries } from "../../src/codeobj/fatbin.ts";
import { NVCC } from "../nvcc-fixtures.ts";

const ROOT = resolve(import.meta.dir, "../..");
const CUDA_LIB = join(ROOT, "c/build/libkerncap_cuda.so");
const CUDA_HOME = process.env.CUDA_HOME ?? "/usr/local/cuda";
const CUDA_INC = [
  join(CUDA_HOME, "include"),
  join(CUDA_HOME, "extras/CUPTI/include"),
  ...(existsSync(join(CUDA_HOME, "targets")) ? readdirSync(join(CUDA_HOME, "targets")).map((t) => join(CUDA_HOME, "targets", t, "include")) : []),
].filter((d) => existsSync(d));
const READY = !!Bun.which("gcc") && !!NVCC && existsSync(CUDA_LIB) && CUDA_INC.some((d) => existsSync(join(d, "cupti.h")));

const KERNEL_CU = `extern "C" __global__ void twice(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\n`;

let tmp = "";
let fatbin: Uint8Array = new Uint8Array();
let noPtx: Uint8Array = new Uint8Array();
let cubin: Uint8Array = new Uint8Array();

function sh(argv: string[]): void {
  const p = Bun.spawnSync(argv, { stderr: "pipe", stdout: "pipe" });
  if (p.exitCode !== 0) throw new Error(`${argv.join(" ")}: ${p.stderr.toString()}`);
}

beforeAll(() => {
  if (!READY) return;
  tmp = mkdtempSync(join(tmpdir(), "kerncap-c-fatbin-"));
  writeFileSync(join(tmp, "k.cu"), KERNEL_CU);
  sh([
    NVCC!,
    "-fatbin",
    "-gencode",
    "arch=compute_80,code=compute_80",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "-o",
    join(tmp, "k.fatbin"),
    join(tmp, "k.cu"),
  ]);
  sh([NVCC!, "-fatbin", "-gencode", "arch=compute_90,code=sm_90", "-o", join(tmp, "noptx.fatbin"), join(tmp, "k.cu")]);
  // the same fatbin with its entries stored as they are, and LZ4-compressed (the default is zstd)
  sh([
    NVCC!,
    "-fatbin",
    "-gencode",
    "arch=compute_80,code=compute_80",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "--no-compress",
    "-o",
    join(tmp, "plain.fatbin"),
    join(tmp, "k.cu"),
  ]);
  sh([
    NVCC!,
    "-fatbin",
    "-gencode",
    "arch=compute_80,code=compute_80",
    "-gencode",
    "arch=compute_90,code=sm_90",
    "--compress-mode=speed",
    "-Xfatbin",
    "-compress-all",
    "-o",
    join(tmp, "lz4.fatbin"),
    join(tmp, "k.cu"),
  ]);
  fatbin = new Uint8Array(readFileSync(join(tmp, "k.fatbin")));
  noPtx = new Uint8Array(readFileSync(join(tmp, "noptx.fatbin")));
  // what CUPTI hands over: the one cubin the driver picked (the sm_90 entry, decompressed)
  cubin = fatbinEntries(fatbin)
    .find((e) => e.kind === "cubin" && e.arch === "sm_90")!
    .bytes();
  writeFileSync(join(tmp, "k.cubin"), cubin);
  const gcc = (args: string[]) => sh(["gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", ...args]);
  gcc(["-shared", "-fPIC", "-DFAKE_LIBCUDA", "-o", join(tmp, "libcuda.so.1"), join(ROOT, "c/test/fake_cuda.c")]);
  gcc(["-shared", "-fPIC", "-DFAKE_LIBCUPTI", "-o", join(tmp, "libcupti.so"), join(ROOT, "c/test/fake_cuda.c")]);
  const link = (out: string, extra: string[]) =>
    gcc([
      ...CUDA_INC.map((d) => `-I${d}`),
      "-o",
      join(tmp, out),
      join(ROOT, "c/test/launch_main.c"),
      ...extra,
      `-L${tmp}`,
      "-l:libcupti.so",
      `-Wl,-rpath,${tmp}`,
      "-ldl",
      "-lpthread",
    ]);
  link("launch_main", []);
  // a program whose .nv_fatbin section holds the fatbin, as nvcc's host objects put it there
  const bytes = [...fatbin].join(",");
  writeFileSync(join(tmp, "nv_fatbin.c"), `__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char kc_test_fatbin[] = {${bytes}};\n`);
  link("launch_main_rt", [join(tmp, "nv_fatbin.c")]);
}, 120_000);
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

let outs = 0;
/** Run the library on one load of `image` (a file, or "-": none) whose module is k.cubin, capture `twice`: the module file it wrote and raw.json. */
function capture(program: string, mode: "module" | "file" | "library" | "lazy", image: string, cubinFile = "k.cubin") {
  const out = join(tmp, `out-${outs++}`);
  mkdirSync(join(out, "kernel"), { recursive: true });
  mkdirSync(join(out, "memory"));
  const env = {
    PATH: process.env.PATH ?? "",
    LD_LIBRARY_PATH: tmp,
    KERNCAP_OUT: out,
    KERNCAP_CUPTI_PATH: join(tmp, "libcupti.so"),
    KERNCAP_MODE: "capture",
    KERNCAP_KERNEL: "^twice$",
    KERNCAP_DISPATCH: "0",
  };
  const p = Bun.spawnSync([join(tmp, program), CUDA_LIB, mode, image, join(tmp, cubinFile), "twice"], { env, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  expect(
    readdirSync(out).filter((f) => f.startsWith("error.")),
    p.stderr.toString(),
  ).toEqual([]);
  const raw = JSON.parse(readFileSync(join(out, "raw.json"), "utf8"));
  return { raw, module: new Uint8Array(readFileSync(join(out, raw.module.file))) };
}

/** The kept module is the application's whole fatbin (`app`, default k.fatbin): sm_90 machine code and the compute_80 PTX of `twice`. */
function keptFatbin(c: ReturnType<typeof capture>, app: Uint8Array = fatbin): void {
  expect(c.raw.module.kind).toBe("fatbin");
  expect(c.raw.module.file).toBe("kernel/module.fatbin");
  expect(c.raw.module.source).toContain("fatbin that holds the loaded cubin byte for byte");
  expect(Buffer.from(c.module).equals(Buffer.from(app))).toBe(true);
  expect(describeModule(c.module).archs.sort()).toEqual(["compute_80", "sm_90"]);
  const ptx = fatbinEntries(c.module).find((e) => e.kind === "ptx")!;
  expect(new TextDecoder().decode(ptx.bytes())).toContain(".entry twice");
}

describe.skipIf(!READY)("the capture keeps the application's fatbin with its PTX", () => {
  test("cuModuleLoadData of the fatbin: the whole fatbin is the captured module", () => {
    keptFatbin(capture("launch_main", "module", join(tmp, "k.fatbin")));
  });

  test("entries stored uncompressed or LZ4-compressed: the loaded cubin is found in them too", () => {
    for (const name of ["plain.fatbin", "lz4.fatbin"]) {
      const app = new Uint8Array(readFileSync(join(tmp, name)));
      const e = fatbinEntries(app).find((x) => x.kind === "cubin")!;
      expect(e.compression).toBe(name === "plain.fatbin" ? "none" : "lz4");
      keptFatbin(capture("launch_main", "module", join(tmp, name)), app);
    }
  });

  test("a loaded cubin one byte off the fatbin's entry (as if the driver touched it): kept by its size and the kernel's name, and said so", () => {
    const touched = cubin.slice();
    touched[touched.length - 1] ^= 0x01; // the last byte of the section header table, no name
    writeFileSync(join(tmp, "touched.cubin"), touched);
    const c = capture("launch_main", "module", join(tmp, "k.fatbin"), "touched.cubin");
    expect(c.raw.module.kind).toBe("fatbin");
    expect(c.raw.module.source).toContain("an entry of the loaded cubin's size naming the kernel");
    expect(Buffer.from(c.module).equals(Buffer.from(fatbin))).toBe(true);
  });

  test("cuModuleLoad of a fatbin file: the file's fatbin, read at the load", () => {
    keptFatbin(capture("launch_main", "file", join(tmp, "k.fatbin")));
  });

  test("cuLibraryLoadData of a __fatBinC_Wrapper_t, the module loaded later (lazy loading): the fatbin", () => {
    keptFatbin(capture("launch_main", "library", join(tmp, "k.fatbin")));
  });

  test("a module loaded outside any call the library saw (the runtime's registered fatbins): found in the program's .nv_fatbin", () => {
    keptFatbin(capture("launch_main_rt", "lazy", "-"));
  });

  test("a cubin loaded as it is (Triton, XLA), a fatbin without PTX, no fatbin anywhere: the cubin is kept", () => {
    writeFileSync(join(tmp, "noptx.fatbin"), noPtx);
    for (const c of [
      capture("launch_main", "module", join(tmp, "k.cubin")),
      capture("launch_main", "file", join(tmp, "k.cubin")),
      capture("launch_main", "module", join(tmp, "noptx.fatbin")),
      capture("launch_main", "lazy", "-"),
    ]) {
      expect(c.raw.module.kind).toBe("cubin");
      expect(Buffer.from(c.module).equals(Buffer.from(cubin))).toBe(true);
      expect(describeModule(c.module).archs).toEqual(["sm_90"]);
    }
  });
});
