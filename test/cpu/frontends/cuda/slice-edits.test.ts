/**
 * A CUDA slice (src/*.kerncap-slice.cu) edited by hand (found by a new user: the edit was dropped
 * without a word). The slice is generated from its TU: an edit of the slice that does not build is
 * the build's error (build.sh does not compile the unedited TU in its place), and an edit of the TU
 * afterwards is refused (E_SLICE_EDITED) rather than remaking the slice over the edit. A stand-in
 * nvcc (no CUDA toolkit needed) fails on a source holding BROKEN and writes its output otherwise.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../../src/capture/demo.ts";
import { KerncapError } from "../../../../src/errors.ts";
import { refreshSlice, sliceEditedByHand, sliceMetaOf } from "../../../../src/frontends/cuda/slice.ts";
import { tempDir } from "../../fixtures.ts";

const FAKE_NVCC = `#!/usr/bin/env bash
src=""; for a in "$@"; do case "$a" in *.cu) src="$a";; esac; done
if grep -q BROKEN "$src"; then echo "$src(1): error: BROKEN is undefined" >&2; exit 1; fi
: >"\${@: -1}"
`;

function demo(): { dir: string; slice: string; tu: string; meta: NonNullable<ReturnType<typeof sliceMetaOf>>; nvcc: string } {
  const root = tempDir();
  const { dir, manifest } = writeDemo(join(root, "cap"), false);
  const nvcc = join(root, "nvcc");
  writeFileSync(nvcc, FAKE_NVCC, { mode: 0o755 });
  const meta = sliceMetaOf(manifest)!;
  return { dir, slice: join(dir, "src", meta.slice), tu: join(dir, "src", meta.tu), meta, nvcc };
}

function build(dir: string, nvcc: string) {
  const p = Bun.spawnSync(["bash", join(dir, "build.sh")], { cwd: dir, env: { ...process.env, NVCC: nvcc }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, err: p.stderr.toString() };
}

describe("a slice edited by hand", () => {
  test("kerncap's slice carries its body's hash: unedited it is not 'edited'; one changed line is", () => {
    const { slice } = demo();
    const text = readFileSync(slice, "utf8");
    expect(text.split("\n")[0]).toMatch(/ sha256=[0-9a-f]{64} body=[0-9a-f]{64}$/);
    expect(sliceEditedByHand(text)).toBe(false);
    expect(sliceEditedByHand(text.replace("p->a", "2.0f * p->a"))).toBe(true);
    expect(sliceEditedByHand(text.replace(/ body=[0-9a-f]{64}/, ""))).toBe(false); // an older kerncap's slice
  });

  test("an edit of the slice that does not build fails the build (no whole TU compiled in its place); one that builds is compiled", () => {
    const { dir, slice, nvcc } = demo();
    expect(build(dir, nvcc).code).toBe(0);
    writeFileSync(slice, readFileSync(slice, "utf8").replace("p->a", "BROKEN * p->a"));
    const broken = build(dir, nvcc);
    expect(broken.code).toBe(1);
    expect(broken.err).toContain("was edited by hand: compiling it as it is");
    expect(broken.err).toContain("BROKEN is undefined");
    expect(broken.err).toContain("edited by hand, does not build (its messages above); the whole TU is not compiled in its place");
    writeFileSync(slice, readFileSync(slice, "utf8").replace("BROKEN * p->a", "2.0f * p->a"));
    const fine = build(dir, nvcc);
    expect(fine.code, fine.err).toBe(0);
    expect(fine.err).toContain("was edited by hand: compiling it as it is");
  });

  test("an edit of the TU after one of the slice: E_SLICE_EDITED, the slice kept; without a slice edit the slice is remade", () => {
    const { dir, slice, tu, meta } = demo();
    const edited = readFileSync(slice, "utf8").replace("p->a", "2.0f * p->a");
    writeFileSync(slice, edited);
    expect(refreshSlice(dir, meta).action).toBe("fresh"); // its TU unchanged: compiled as edited
    writeFileSync(tu, `${readFileSync(tu, "utf8")}// a comment\n`);
    let e: unknown;
    try {
      refreshSlice(dir, meta);
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_SLICE_EDITED");
    // the way out, naming the TU once (the demo's kernel is defined in its TU: no second name for the same file)
    expect((e as KerncapError).hint).toBe(
      `Keep one of the two edits: carry the slice's edit over to src/${meta.tu} and delete src/${meta.slice} (the next validate makes it again), or undo the change of src/${meta.tu}.`,
    );
    expect(readFileSync(slice, "utf8")).toBe(edited);
    // the slice as kerncap made it: remade from the changed TU
    const other = demo();
    writeFileSync(other.tu, `${readFileSync(other.tu, "utf8")}// a comment\n`);
    expect(refreshSlice(other.dir, other.meta).action).toBe("remade");
    expect(sliceEditedByHand(readFileSync(other.slice, "utf8"))).toBe(false);
  });
});

describe("a name declared again after the kernel (adversary 39 #08: the slice compiled a·x+y where the TU compiles 7·a·x+y)", () => {
  const OLD = `__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p->y.n) p->y.data[i] = p->a * p->x.data[i] + p->y.data[i];
}`;
  const NEW = `__device__ float pick(const Saxpy &, long) { return 1.0f; }
template <class T> __device__ float scale(const T &s) { return pick(s, 0) * s.a; }
__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p->y.n) p->y.data[i] = scale(*p) * p->x.data[i] + p->y.data[i];
}
__device__ float pick(const Saxpy &, int) { return 7.0f; }`;

  test("an overload after the kernel of a function the code before it calls: no slice, the whole TU compiled (said); without it the slice is made", () => {
    const { dir, tu, slice, meta } = demo();
    const text = readFileSync(tu, "utf8");
    expect(text).toContain(OLD);
    writeFileSync(tu, text.replace(OLD, NEW));
    const r = refreshSlice(dir, meta);
    expect(r.action).toBe("removed");
    expect(r.reason).toContain("declares `pick` after the kernel, which the code before it names");
    expect(readFileSync(slice, "utf8")).not.toContain("pick(s, 0)"); // no slice of the TU's text: build.sh compiles the TU
    // the helper's overloads all before the kernel: the slice holds everything the kernel can see
    writeFileSync(tu, text.replace(OLD, NEW.replace("__device__ float pick(const Saxpy &, int) { return 7.0f; }", "")));
    expect(refreshSlice(dir, meta).action).toBe("remade");
    expect(readFileSync(slice, "utf8")).toContain("pick(s, 0)");
  });
});

describe("what after the kernel keeps a TU from being sliced (adversary 40: specializations, a late #include, a macro's declaration)", () => {
  const BEFORE = `#include "cfg.h"
namespace ns { struct Tag {}; }
template <class T> struct Tr { static constexpr float v = 1.0f; };
template <class T> constexpr float kv = 1.0f;
template <class T> __device__ float helper(T) { return Tr<T>::v * kv<T>; }
#define MAKE(a, b) namespace ns { __device__ float a##b(Tag) { return 7.0f; } }
__global__ void k(float* p) { p[0] = helper(ns::Tag{}); }
`;
  const hazard = async (after: string, before = BEFORE) => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const tu = before + after;
    return sliceHazard(tu, codeMask(tu), before.length);
  };
  test("a project header included only after the kernel is read as the kernel's tail; one included before as the code before it", async () => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const header = (rel: string, text: string) => ({ rel, text, mask: codeMask(text) });
    const before = '#include "lib/early.cuh"\n__global__ void k(float* p) { p[0] = helper(ns::Tag{}); }\n';
    const early = header(
      "lib/early.cuh",
      "namespace ns { struct Tag {}; }\ntemplate <class T> __device__ float helper(T t) { return pick(t, 0); }\n__device__ float pick(ns::Tag, long) { return 1; }\n",
    );
    const tu = `${before}#include "lib/late.cuh"\nint main() { return 0; }\n`;
    const at = (late: string) => sliceHazard(tu, codeMask(tu), before.length, { headers: [early, header("lib/late.cuh", late)] });
    expect(at("namespace ns { __device__ float pick(Tag, int) { return 7; } }\n")).toContain("declares `pick` in src/lib/late.cuh, included after the kernel");
    expect(at("__global__ void other(float* p) { p[1] = 2; }\nvoid launch_other(float* p);\n")).toBeUndefined();
    // the late header however it is named: <…> through -I, a path with .. in it
    const overload = header("lib/late.cuh", "namespace ns { __device__ float pick(Tag, int) { return 7; } }\n");
    for (const inc of ["<late.cuh>", '"lib/x/../late.cuh"']) {
      const t = `${before}#include ${inc}\nint main() { return 0; }\n`;
      expect(sliceHazard(t, codeMask(t), before.length, { headers: [early, overload] })).toContain("declares `pick` in src/lib/late.cuh");
    }
    // a name outside src/: a system header's, not read, refuses the slice where a template before could find what it
    // declares (adversary 43: <cuComplex.h>'s cuCabsf(float2)); one no include folder has was not found by the compile
    // (llm.c's #ifdef'd "llmc/cudnn_att.h") and refuses nothing
    expect(sliceHazard(tu, codeMask(tu), before.length, { headers: [early], system: { has: () => true, includes: () => [], defines: () => [] } })).toContain(
      "includes <lib/late.cuh> after the kernel",
    );
    expect(
      sliceHazard(tu, codeMask(tu), before.length, { headers: [early], system: { has: () => false, includes: () => [], defines: () => [] } }),
    ).toBeUndefined();
  });

  test("a system header included after the kernel in a group that is certainly not compiled (llm.c's #ifdef MULTI_GPU / <nccl.h> under NO_MULTI_GPU=1) refuses nothing; one that may be, does", async () => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const before = "template <class T> __device__ T twice(T t) { return t + t; }\n__global__ void k(float* p) { p[0] = twice(p[1]); }\n";
    const system = (defined: string[] = []) => ({ has: () => true, includes: () => [], defines: (n: string) => (n === "cuda_runtime.h" ? defined : []) });
    const at = (after: string, o: { flags?: string[]; defined?: string[]; headers?: { rel: string; text: string; mask: string }[] } = {}) => {
      const tu = `#include <cuda_runtime.h>\n${before}${after}int main() { return 0; }\n`;
      const flags = o.flags ?? [];
      const flagDefines = (n: string) => flags.includes(n);
      return sliceHazard(tu, codeMask(tu), `#include <cuda_runtime.h>\n${before}`.length, { headers: o.headers ?? [], system: system(o.defined), flagDefines });
    };
    const ifdef = "#ifdef MULTI_GPU\n#include <nccl.h>\n#endif\n";
    expect(at(ifdef)).toBeUndefined();
    expect(at("#if defined(MULTI_GPU)\n#include <nccl.h>\n#endif\n")).toBeUndefined();
    expect(at("#ifndef MULTI_GPU\nint single;\n#else\n#include <nccl.h>\n#endif\n")).toBeUndefined();
    // defined by a flag (-DMULTI_GPU), by the project's sources, by a system header: may be compiled, refused as before
    expect(at(ifdef, { flags: ["MULTI_GPU"] })).toContain("includes <nccl.h> after the kernel");
    expect(at(`#define MULTI_GPU\n${ifdef}`)).toContain("includes <nccl.h> after the kernel");
    const def = { rel: "lib/cfg.h", text: "#define MULTI_GPU 1\n", mask: "" };
    expect(at(ifdef, { headers: [def] })).toContain("includes <nccl.h> after the kernel");
    expect(at(ifdef, { defined: ["MULTI_GPU"] })).toContain("includes <nccl.h> after the kernel");
    // a name a compiler could predefine, an #elif, an #ifndef's own group: may be compiled
    expect(at("#ifdef __linux__\n#include <nccl.h>\n#endif\n")).toContain("includes <nccl.h> after the kernel");
    expect(at("#ifdef MULTI_GPU\n#elif 1\n#include <nccl.h>\n#endif\n")).toContain("includes <nccl.h> after the kernel");
    expect(at("#ifndef MULTI_GPU\n#include <nccl.h>\n#endif\n")).toContain("includes <nccl.h> after the kernel");
    // without the flags read (no build.sh), every group counts
    const tu = `${before}${ifdef}`;
    expect(sliceHazard(tu, codeMask(tu), before.length, { headers: [], system: system() })).toContain("includes <nccl.h> after the kernel");
  });

  test("a macro a system header defines (gcc's own stddef.h: NULL), one that nvcc's or the compiler's environment or an include folder outside src/ may define: the group counts (adversary 49)", async () => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const { flagDefinesIn, systemHeaders } = await import("../../../../src/frontends/cuda/slice-directives.ts");
    // late.h stands for a system header new after the kernel (<cuComplex.h>), the others are this machine's own
    const system = {
      has: (n: string) => n === "late.h" || systemHeaders.has(n),
      includes: (n: string) => (n === "late.h" ? [] : systemHeaders.includes(n)),
      defines: (n: string) => (n === "late.h" ? [] : systemHeaders.defines(n)),
    };
    const before = "#include <cstdio>\ntemplate <class T> __device__ T twice(T t) { return t + t; }\n__global__ void k(float* p) { p[0] = twice(p[1]); }\n";
    const at = (macro: string, flags = "") => {
      const tu = `${before}#ifdef ${macro}\n#include <late.h>\n#endif\nint main() { return 0; }\n`;
      return sliceHazard(tu, codeMask(tu), before.length, { headers: [], system, flagDefines: flagDefinesIn(flags) });
    };
    expect(at("KC_NOT_DEFINED")).toBeUndefined();
    if (systemHeaders.has("cstdio") && systemHeaders.has("stddef.h")) expect(at("NULL")).toContain("includes <late.h> after the kernel");
    expect(at("KC_NOT_DEFINED", "-DKC_NOT_DEFINED")).toContain("includes <late.h> after the kernel");
    expect(at("KC_NOT_DEFINED", '-I"$here/src"/inc')).toBeUndefined();
    expect(at("KC_NOT_DEFINED", "-I/home/u/include")).toContain("includes <late.h> after the kernel"); // a header there may define it
    for (const k of ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CPATH", "CPLUS_INCLUDE_PATH"]) {
      const saved = process.env[k];
      process.env[k] = k.startsWith("NVCC") ? "-DKC_NOT_DEFINED" : "/home/u/include";
      try {
        expect(at("KC_NOT_DEFINED")).toContain("includes <late.h> after the kernel");
      } finally {
        if (saved === undefined) delete process.env[k];
        else process.env[k] = saved;
      }
    }
  });

  test("the flags of a capture's own build.sh (its commands, not its comments) say which macros they may define", async () => {
    const { flagDefinesOf } = await import("../../../../src/frontends/cuda/slice-directives.ts");
    const { dir } = writeDemo(join(tempDir(), "cap"), false);
    expect(flagDefinesOf(dir)("KC_NOT_DEFINED")).toBe(false);
    const script = readFileSync(join(dir, "build.sh"), "utf8");
    writeFileSync(join(dir, "build.sh"), script.replace('-I"$here/src"', '-I"$here/src" -DKC_DEFINED'));
    expect(flagDefinesOf(dir)("KC_DEFINED")).toBe(true);
    expect(flagDefinesOf(dir)("KC_NOT_DEFINED")).toBe(false);
    writeFileSync(join(dir, "build.sh"), script.replace('-I"$here/src"', '-I"$here/src" -include /home/u/defs.h'));
    expect(flagDefinesOf(dir)("KC_NOT_DEFINED")).toBe(true);
  });

  test("a call after the kernel of a function declared __noinline__, in any spelling, a macro's too: no slice (adversary 48, 51)", async () => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    for (const attr of ["__noinline__", "__attribute__((noinline))", "[[gnu::noinline]]", "NOINL"]) {
      const before = `#define NOINL __attribute__((noinline))\n__device__ ${attr} float helper(float x) { return x * 2; }\n__global__ void k(float* p) { p[0] = helper(p[1]); }\n`;
      const tu = `${before}__global__ void other(float* q) { q[0] = helper(q[1]); }\n`;
      expect(sliceHazard(tu, codeMask(tu), before.length), attr).toContain("calls `helper`, declared __noinline__ before it, after the kernel");
    }
    const plain = "__device__ float helper(float x) { return x * 2; }\n__global__ void k(float* p) { p[0] = helper(p[1]); }\n";
    const tu = `${plain}__global__ void other(float* q) { q[0] = helper(q[1]); }\n`;
    expect(sliceHazard(tu, codeMask(tu), plain.length)).toBeUndefined(); // a helper cicc may inline: not excluded (docs/verbs.md)
  });

  test("each construct that can change the kernel the TU compiles is named; what cannot is not", async () => {
    expect(await hazard("template <> struct Tr<ns::Tag> { static constexpr float v = 7.0f; };\n")).toContain("specializes `Tr`");
    expect(await hazard("template <class U> struct Tr<U*> { static constexpr float v = 7.0f; };\n")).toContain("specializes `Tr`");
    expect(await hazard("template <> constexpr float kv<ns::Tag> = 7.0f;\n")).toContain("specializes `kv`");
    expect(await hazard('#define LATE "late.cuh"\n#include LATE\n')).toContain("includes a file named by a macro");
    expect(await hazard("MAKE(pi, ck)\n")).toContain("calls the macro `MAKE`");
    expect(await hazard("namespace ns { __device__ float helper(Tag) { return 7.0f; } }\n")).toContain("declares `helper`");
    expect(await hazard("namespace ns { using ::helper; }\n")).toContain("using");
    expect(await hazard("__device__ float operator*(ns::Tag, float f) { return f; }\n")).toContain("operator");
    // adversary 41: a friend a template's instantiation defines; a variable declared extern before, defined after; the
    // kernel or a helper declared again with attributes that merge into it
    expect(
      await hazard(
        "constexpr int dummy = sizeof(setter<0, 42>);\n",
        `template <int N, int V> struct setter { friend constexpr int get(int) { return V; } };\n${BEFORE}`,
      ),
    ).toContain("friend");
    expect(await hazard("__device__ float g = 5.0f;\n", "extern __device__ float g;\n__global__ void k(float* p) { p[0] = g; }\n")).toContain(
      "declares `g` after the kernel, which the code before it names",
    );
    expect(await hazard("__global__ void __launch_bounds__(32, 1) k(float* p);\n", "__global__ void k(float* p) { p[0] = 1; }\n")).toContain("declares `k`");
    expect(
      await hazard("__device__ __noinline__ float f(float);\n", "__device__ float f(float x) { return x; }\n__global__ void k(float* p) { p[0] = f(p[1]); }\n"),
    ).toContain("declares `f`");
    expect(await hazard("void launch(float* p) { k<<<1, 1>>>(p); }\n", "extern int verbose;\n__global__ void k(float* p) { p[0] = 1; }\n")).toBeUndefined();
    // adversary 42: a class or an enum completed after the kernel (a trait sees it complete in the TU), a static member
    // defined, a derived class completed, a deduction guide, names spelt through a macro
    const declared = (k: string) => `${k}\n__global__ void k(float* p) { p[0] = f<Tag>(1); }\n`;
    expect(await hazard("struct Tag { int z; };\n", declared("struct Tag;"))).toContain("declares `Tag` after the kernel");
    expect(await hazard("struct Tag : Base { int z; };\n", declared("struct Base {};\nstruct Tag;"))).toContain("`Tag`");
    expect(await hazard("enum class Tag : int { big = 1 };\n", declared("enum class Tag : int;"))).toContain("declares `Tag`");
    expect(await hazard("const int Tag::v = 2;\n", declared("struct Tag { static const int v; };"))).toContain("`Tag`");
    expect(await hazard("Tag(float) -> Tag<double>;\n", declared("template <class T> struct Tag { T v; };"))).toContain("declares `Tag`");
    expect(await hazard("#define KN k\n__global__ void __launch_bounds__(32) KN(float* p);\n", declared(""))).toContain("through the macro `KN`");
    expect(await hazard("#define TRX Tr\ntemplate <class T> struct TRX<T*> { static constexpr float v = 2.0f; };\n")).toContain("`TRX`");
    // a host variable declared extern before (llm.c's `cudaDeviceProp deviceProp;`): device code cannot read it
    expect(await hazard("cudaDeviceProp deviceProp;\n", "extern cudaDeviceProp deviceProp;\n__global__ void k(float* p) { p[0] = 1; }\n")).toBeUndefined();
    expect(await hazard("int table[4];\n", "extern int table[];\n__global__ void k(float* p) { p[0] = 1; }\n")).toContain("`table`");
    // nothing the kernel before can see: another template kernel, host code, a system header's include without templates before
    expect(
      await hazard("template <int N> __global__ void other(float* p) { p[N] = 0; }\nvoid launch(float* p) { k<<<1, 1>>>(p); }\nint main() { return 0; }\n"),
    ).toBeUndefined();
    expect(
      await hazard(
        '#include "late.cuh"\nvoid host_only() {}\n',
        "__device__ float f(float x) { return x; }\n__global__ void k(float* p) { p[0] = f(p[1]); }\n",
      ),
    ).toBeUndefined();
  });
});

describe("an instantiation slice leaves the TU's own code out only where that code adds nothing the kernel sees", () => {
  test("explicit instantiations through a header's macro (ggml's DECL_MMQ_CASE) slice; a specialization, an overload, a completed class, an unexpandable macro, a late include do not", async () => {
    const { instantiationHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const text = `#pragma once
struct Tag;
template <class T> struct Tr { static constexpr float v = 1.0f; };
template <class T> __device__ float pick(T, long) { return 1; }
template <int N> __global__ void kern(float* p) { p[N] = Tr<int>::v * pick(N, 0); }
template <int N> void launch(float* p) { kern<N><<<1, 1>>>(p); }
#define DECL_CASE(n) template void launch<n>(float* p)
`;
    const header = { rel: "lib/kern.cuh", text, mask: codeMask(text) };
    const at = (code: string) => {
      const tu = `#include "../lib/kern.cuh"\n${code}`;
      return instantiationHazard(tu, codeMask(tu), { headers: [header] });
    };
    expect(at("DECL_CASE(3);\nDECL_CASE(4);\n")).toBeUndefined();
    // host code (ggml's mmq.cu, the CMake project's launcher): functions device code cannot call, whatever they name
    expect(at("bool should_use(enum Kind k, int n) { return n > 0; }\nvoid launch_all(float* p) { launch<3>(p); }\n")).toBeUndefined();
    expect(at("extern template void launch<5>(float* p);\nint main() { return 0; }\n")).toBeUndefined();
    expect(at("template <> struct Tr<int> { static constexpr float v = 7.0f; };\n")).toContain("declares `Tr`");
    expect(at("__device__ float pick(int, int) { return 7; }\n")).toContain("declares `pick`");
    expect(at("struct Tag { int z; };\n")).toContain("declares `Tag`");
    expect(at("#define PASTE(a, b) a##b\nPASTE(pi, ck)(int, int);\n")).toContain("macros kerncap does not expand");
    expect(at('DECL_CASE(3);\n#include "late.cuh"\n')).toContain("includes a file after its own code");
    expect(at("template <int N> struct setter { friend constexpr int get(int) { return N; } };\n")).toContain("friend");
    // adversary 45: a device variable no header names (it moves the module's constant-bank slots), a specialization of a
    // std template no header spells (a structured binding's tuple_size)
    expect(at("DECL_CASE(3);\n__device__ int kc_pad;\n")).toContain("neither host code nor an explicit instantiation");
    expect(at("namespace std { template <> struct tuple_size<Pair> { static constexpr int value = 2; }; }\n")).toContain(
      "neither host code nor an explicit instantiation",
    );
  });
});

describe("adversary 43: includes however spelt, macros of the system, directives in a body left out, a header entered twice, a forged slice", () => {
  const BEFORE = `#include "early.cuh"
template <class T> __device__ float mag(T t) { return sel(t); }
__global__ void k(float* p) { p[0] = mag(make_float2(p[1], 2.0f)); }
`;
  const early = "#pragma once\n__device__ float sel(...) { return 1.0f; }\n";
  const late = "#pragma once\n__device__ float sel(float2 v) { return v.x * v.y + 3.0f; }\n";
  const at = async (after: string, headers: Record<string, string> = { "early.cuh": early, "late.cuh": late }, before = BEFORE) => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const tu = before + after;
    const hs = Object.entries(headers).map(([rel, text]) => ({ rel, text, mask: codeMask(text) }));
    return sliceHazard(tu, codeMask(tu), before.length, { headers: hs, system: { has: () => false, includes: () => [], defines: () => [] } });
  };
  test("a header included after the kernel is read whatever the spelling of its #include", async () => {
    for (const inc of [
      '#include /*x*/ "late.cuh"',
      '/**/#include "late.cuh"',
      '%:include "late.cuh"',
      '#inc\\\nlude "late.cuh"',
      "#include <late.cuh>",
      '#  include "./late.cuh"',
    ])
      expect(await at(`${inc}\n`)).toContain("declares `sel` in src/late.cuh, included after the kernel");
    expect(
      await at('#include "late.cuh"\n', { "early.cuh": early, "late.cuh": "#pragma once\n__device__ float other(float2 v) { return v.x; }\n" }),
    ).toBeUndefined();
  });
  test("a name made by a system header's macro (__CONCAT) in a declaration after the kernel", async () => {
    expect(await at("__device__ float __CONCAT(se, l)(float2 v) { return v.x; }\n")).toContain("through the macro `__CONCAT`");
  });
  test("a header with no include guard, entered again after the kernel, is read again: what it declares the second time counts", async () => {
    const twice = "#ifdef PHASE2\n__device__ float sel(float2 v) { return v.x * v.y + 3.0f; }\n#endif\n";
    const before = `#include "twice.cuh"\n${BEFORE.split("\n").slice(1).join("\n")}`;
    expect(await at('#define PHASE2\n#include "twice.cuh"\n', { "twice.cuh": twice }, before)).toContain(
      "declares `sel` in src/twice.cuh, included after the kernel",
    );
    // guarded, it is entered once: the second #include adds nothing
    expect(await at('#include "early.cuh"\n', { "early.cuh": early }, BEFORE)).toBeUndefined();
  });
  test("another kernel's body holding a directive or __COUNTER__ stays in the slice", async () => {
    const { bodyStays } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    for (const body of ["#define SCALE 3.0f", "#undef SCALE", '#pragma pop_macro("SCALE")', '#include "early.cuh"', "q[0] = __COUNTER__;"]) {
      const tu = `__global__ void k0(float* q) {\n${body}\n}\n__global__ void k(float* p) { p[0] = 1; }\n`;
      const open = tu.indexOf("{"),
        close = tu.indexOf("\n}\n") + 1;
      expect(bodyStays(tu, codeMask(tu), open, close + 1, tu.length)).toBe(true);
    }
    const plain = "__global__ void k0(float* q) { q[0] = 2; }\n__global__ void k(float* p) { p[0] = 1; }\n";
    expect(bodyStays(plain, codeMask(plain), plain.indexOf("{"), plain.indexOf("}") + 1, plain.length)).toBe(false);
  });
  test("a slice stamped as made from its TU that kerncap would not make from it (a received archive's) is replaced", () => {
    const { dir, manifest } = writeDemo(join(tempDir(), "cap"), false);
    const meta = sliceMetaOf(manifest)!;
    const slice = join(dir, "src", meta.slice);
    const made = readFileSync(slice, "utf8");
    const nl = made.indexOf("\n");
    const forged = made.slice(nl + 1).replace("p->a * p->x.data[i]", "42.0f * p->x.data[i]");
    expect(forged).not.toBe(made.slice(nl + 1));
    const sha = (t: string) => new Bun.CryptoHasher("sha256").update(t).digest("hex");
    writeFileSync(slice, `${made.slice(0, nl).replace(/ body=[0-9a-f]{64}$/, ` body=${sha(forged)}`)}\n${forged}`);
    expect(sliceEditedByHand(readFileSync(slice, "utf8"))).toBe(false); // its stamps are consistent
    expect(refreshSlice(dir, meta).action).toBe("remade");
    expect(readFileSync(slice, "utf8")).toBe(made);
  });
});

describe("adversary 44: the lexer reads braces and splices as the compiler does; implicit names; pragma operators", () => {
  const hazardOf = async (tu: string, cutAfter: string) => {
    const { sliceHazard } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const end = tu.indexOf(cutAfter) + cutAfter.length;
    return sliceHazard(tu, codeMask(tu), end, { headers: [] });
  };
  test("a // comment continued by a backslash, and the digraph braces, are read as the compiler reads them", async () => {
    const { codeMask, kernelDefinitions } = await import("../../../../src/frontends/cuda/slice.ts");
    const spliced =
      "__global__ void k0(float*q){ // a \\\n{\n q[0]=1;\n}\n__device__ float h(float){return 2.f;}\n__global__ void k(float* p) { p[0] = h(1.0f); }\n";
    const defs = kernelDefinitions(spliced, codeMask(spliced));
    expect(defs.map((d) => d.name)).toEqual(["k0", "k"]);
    expect(spliced.slice(defs[0]!.open, defs[0]!.close + 1)).not.toContain("h(float)"); // k0's body ends where the compiler ends it
    const digraph = "__global__ void k0(float*q){ q[0]=1; %>\n__device__ float h(float) <% return 2.f; }\n__global__ void k(float* p) { p[0] = h(1.0f); }\n";
    const d2 = kernelDefinitions(digraph, codeMask(digraph));
    expect(digraph.slice(d2[0]!.open, d2[0]!.close + 1)).not.toContain("h(float)");
    // a line spliced in code: its tokens are not the ones read
    expect(await hazardOf("__global__ void k(float* p) { p[0] = 1; }\n__dev\\\nice__ float q(float);\n", "p[0] = 1; }")).toContain("splices a line");
  });
  test("a specialization after the kernel, even of a name the code before never spells (a structured binding's std::tuple_size)", async () => {
    const tu = `#include <utility>
struct Pair { float a, b; template <int I> __device__ float get() const { return I ? a : b; } };
template <class T> __device__ float pick(T t) { auto [u, v] = t; return u; }
__global__ void k(float* p) { p[0] = pick(Pair{p[1], p[2]}); }
namespace std { template <> struct tuple_size<Pair> : integral_constant<size_t, 2> {}; }
`;
    expect(await hazardOf(tu, "pick(Pair{p[1], p[2]}); }")).toContain("specializes `tuple_size` after the kernel");
    // an overload of a name C++ looks up unspelt (a range-for's begin) declared after the kernel
    expect(await hazardOf("__global__ void k(float* p) { p[0] = 1; }\nnamespace ns { __device__ float* begin(Vec& v); }\n", "p[0] = 1; }")).toContain(
      "declares `begin`",
    );
  });
  test("a pragma operator in another kernel's body keeps the body", async () => {
    const { bodyStays } = await import("../../../../src/frontends/cuda/slice-lookup.ts");
    const { codeMask } = await import("../../../../src/frontends/cuda/slice.ts");
    const tu = '__global__ void k0(float* q) { _Pragma("pop_macro(\\"SCALE\\")") q[0] = 1; }\n__global__ void k(float* p) { p[0] = 1; }\n';
    expect(bodyStays(tu, codeMask(tu), tu.indexOf("{"), tu.indexOf("}") + 1, tu.length)).toBe(true);
  });
  test("a confined build (an agent's, an eval candidate's, a received capture's) compiles the whole TU of a prefix slice", async () => {
    const { regenerateSlice, CONFINED_WHOLE_TU } = await import("../../../../src/frontends/cuda/slice-confined.ts");
    const { dir, manifest } = writeDemo(join(tempDir(), "cap"), false);
    const meta = sliceMetaOf(manifest)!;
    const r = regenerateSlice(dir, meta);
    expect(r.action).toBe("removed");
    expect(readFileSync(join(dir, "src", meta.slice), "utf8")).toContain(`sha256=none\n// not made: ${CONFINED_WHOLE_TU}`);
  });
});
