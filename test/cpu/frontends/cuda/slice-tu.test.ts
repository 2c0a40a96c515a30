/**
 * A CUDA slice compiles the kernel its whole TU compiles (adversary 42: edits that a cut at the
 * kernel judged as another kernel). The table of ./slice-edits.test.ts names each construct after
 * the kernel that keeps a TU from being sliced; here, with a real nvcc: an edit that reads
 * `__BASE_FILE__` or `__FILE__` (the slice is another file) builds, through the capture's build.sh,
 * the same machine code from the slice as from the whole TU; a class completed after the kernel
 * makes no slice; and the fast build's plan follows build.sh from the slice to the whole TU when
 * an edit leaves no slice (it compiled the "not made" slice, a file with no kernel, before); an edit
 * that reads `__builtin_FILE()` (the path nvcc was given, which -fmacro-prefix-map leaves alone) or
 * `__DATE__`/`__TIME__` builds the same kernel in every folder (adversary 47: kerncap's private build
 * folder judged one kernel, the capture's own build.sh compiled another).
 */
import { describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../../src/capture/demo.ts";
import { kernelCodeSha256 } from "../../../../src/codeobj/kernel-code.ts";
import { planFor } from "../../../../src/frontends/cuda/fast-plan.ts";
import { findNvcc } from "../../../../src/frontends/cuda/nvcc.ts";
import { notMadeText, refreshSlice, remakeStaleSlice, sliceMetaOf } from "../../../../src/frontends/cuda/slice.ts";
import { tempDir } from "../../fixtures.ts";

const NVCC = (() => {
  try {
    return findNvcc();
  } catch {
    return undefined;
  }
})();

const HEAD = `#include <cuda_runtime.h>
struct Vec { float *data; int n; };
struct Saxpy { float a; Vec x, y; };
`;
const KERNEL = (scale: string) => `__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p->y.n) p->y.data[i] = ${scale} * p->x.data[i] + p->y.data[i];
}
`;
// a: the slice's own name ends in slice.cu, the TU's does not; b: the slice's presumed name is short
const BASE_FILE = `${HEAD}__host__ __device__ constexpr bool ends_slice(const char* s, int n) { return n > 9 && s[n - 9] == 's' && s[n - 8] == 'l'; }
__device__ float sc(float a) { return ends_slice(__BASE_FILE__, sizeof(__BASE_FILE__)) ? a : 2.0f * a; }
__device__ float sf(float a) { return sizeof(__FILE__) < 20 ? a : 3.0f * a; }
__device__ float st(float a) { return __TIMESTAMP__[20] == '2' ? a : 5.0f * a; }
${KERNEL("st(sf(sc(p->a)))")}int main() { return 0; }
`;

// __builtin_FILE() reads the path nvcc was given (an absolute one starts with '/'); __TIME__ the build's time
const WHERE_WHEN = `${HEAD}__device__ float bf(float a) { constexpr const char* f = __builtin_FILE(); return f[0] == '/' ? 2.0f * a : a; }
__device__ float hf(float a) { constexpr const char* f = __builtin_FILE(); return f[0] == 's' && f[3] == '/' ? a : 3.0f * a; } // src/…
__device__ float tm(float a) { return __TIME__[0] == '0' && __TIME__[1] == '0' && __DATE__[9] == '7' ? a : 5.0f * a; }
${KERNEL("tm(hf(bf(p->a)))")}int main() { return 0; }
`;

function capture() {
  const { dir, manifest } = writeDemo(join(tempDir(), "cap"), false);
  const meta = sliceMetaOf(manifest)!;
  return { dir, manifest, meta, tu: join(dir, "src", meta.tu), slice: join(dir, "src", meta.slice) };
}

/** The kernel's machine code (kernelCodeSha256) built by the capture's build.sh from its slice, then from the whole TU (the slice made "not made"). */
function sliceAndWholeTu(c: ReturnType<typeof capture>): [string | null, string | null] {
  build(c.dir, join(c.dir, "build", "slice.cubin"));
  writeFileSync(c.slice, notMadeText(c.meta, "the test's whole TU"));
  build(c.dir, join(c.dir, "build", "whole.cubin"));
  return [kernelCodeSha256(join(c.dir, "build", "slice.cubin"), c.manifest), kernelCodeSha256(join(c.dir, "build", "whole.cubin"), c.manifest)];
}

function build(dir: string, out: string): void {
  const p = Bun.spawnSync(["bash", join(dir, "build.sh"), out], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`build.sh: ${p.stderr.toString()}`);
}

describe.skipIf(!NVCC)("the slice compiles the whole TU's kernel", () => {
  test("an edit reading __BASE_FILE__, __FILE__ and __TIMESTAMP__: the slice's machine code is the whole TU's", () => {
    const c = capture();
    writeFileSync(c.tu, BASE_FILE);
    const old = new Date("1999-01-01T00:00:00Z"); // a year the slice written now does not have: __TIMESTAMP__[20] is '1'
    utimesSync(c.tu, old, old);
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    build(c.dir, join(c.dir, "build", "slice.cubin"));
    expect(readFileSync(join(c.dir, "build", "slice-build.log"), "utf8")).not.toContain("redefined"); // its warning is not the user's
    writeFileSync(c.slice, notMadeText(c.meta, "the test's whole TU"));
    build(c.dir, join(c.dir, "build", "whole.cubin"));
    const sliced = kernelCodeSha256(join(c.dir, "build", "slice.cubin"), c.manifest);
    expect(sliced).toMatch(/^[0-9a-f]{64}$/);
    expect(sliced).toBe(kernelCodeSha256(join(c.dir, "build", "whole.cubin"), c.manifest));
  });

  test("a class only declared before the kernel and completed after it: no slice, and the fast build's plan compiles the whole TU", async () => {
    const c = capture();
    const work = join(c.dir, "build", "pruned");
    mkdirSync(work, { recursive: true });
    const env = { ...process.env } as Record<string, string | undefined>;
    expect((await planFor(c.dir, work, env)).source).toContain(c.meta.slice);
    const text = `${HEAD}#include <type_traits>
struct Tag;
template <class T, class = void> struct is_complete : std::false_type {};
template <class T> struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
template <class T> __device__ float scale_of(float a) { if constexpr (is_complete<T>::value) return 2.0f * a; else return a; }
${KERNEL("scale_of<Tag>(p->a)")}struct Tag { int z; };
int main() { return 0; }
`;
    writeFileSync(c.tu, text);
    const r = refreshSlice(c.dir, c.meta);
    expect(r.action).toBe("removed");
    expect(r.reason).toContain("declares `Tag` after the kernel, which the code before it names");
    const plan = await planFor(c.dir, work, env);
    expect(plan.source).not.toContain(c.meta.slice);
    expect(plan.source).toContain(c.meta.tu);
  });

  test("another kernel before it instantiates a trait of a class completed in between: its body stays, the slice's kernel is the TU's", () => {
    const c = capture();
    const text = `${HEAD}#include <type_traits>
struct Tag;
template <class T, class = void> struct is_complete : std::false_type {};
template <class T> struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
__global__ void first(float* p) { p[0] = is_complete<Tag>::value ? 2.0f : 1.0f; }
struct Tag { int z; };
${KERNEL("(is_complete<Tag>::value ? 2.0f : 1.0f) * p->a")}int main() { return 0; }
`;
    writeFileSync(c.tu, text);
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    expect(readFileSync(c.slice, "utf8")).toContain("p[0] = is_complete<Tag>::value ? 2.0f : 1.0f;"); // the first kernel's body stays
    const [sliced, whole] = sliceAndWholeTu(c);
    expect(sliced).toBe(whole);
    // with nothing declared between them, the other kernel's body is left out as before
    writeFileSync(c.tu, text.replace("struct Tag { int z; };\n", "").replace("__global__ void first", "struct Tag { int z; };\n__global__ void first"));
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    expect(readFileSync(c.slice, "utf8")).not.toContain("p[0] = is_complete<Tag>::value");
  });

  test("a system header included after the kernel that a template before it could find an overload in (<cuComplex.h>'s cuCabsf(float2)): no slice", () => {
    const c = capture();
    writeFileSync(
      c.tu,
      `${HEAD}__device__ float cuCabsf(...) { return 1.0f; }
template <class T> __device__ float mag(T t) { return cuCabsf(t); }
${KERNEL("mag(make_float2(p->a, 2.0f))")}#include <cuComplex.h>
int main() { return 0; }
`,
    );
    const r = refreshSlice(c.dir, c.meta);
    expect(r.action).toBe("removed");
    expect(r.reason).toContain("includes <cuComplex.h> after the kernel");
  });

  test("a #define inside another kernel's body: the body stays, the slice's kernel is the TU's", () => {
    const c = capture();
    writeFileSync(
      c.tu,
      `${HEAD}__global__ void k0(float* q) {
#define SCALE 3.0f
  q[0] = 1;
}
#ifndef SCALE
#define SCALE 1.0f
#endif
${KERNEL("SCALE * p->a")}int main() { return 0; }
`,
    );
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    const [sliced, whole] = sliceAndWholeTu(c);
    expect(sliced).toBe(whole);
  });

  test("an edit reading __builtin_FILE(), __DATE__ and __TIME__ builds the same kernel, slice and whole TU, in the capture and in copies of it elsewhere", () => {
    const c = capture();
    writeFileSync(c.tu, WHERE_WHEN);
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    const codes: (string | null)[] = [];
    const both = (dir: string) => {
      build(dir, join(dir, "build", "slice.cubin"));
      expect(readFileSync(join(dir, "build", "slice-build.log"), "utf8")).not.toContain("compiling the whole TU");
      const slice = readFileSync(join(dir, "src", c.meta.slice), "utf8");
      writeFileSync(join(dir, "src", c.meta.slice), notMadeText(c.meta, "the test's whole TU"));
      build(dir, join(dir, "build", "whole.cubin"));
      writeFileSync(join(dir, "src", c.meta.slice), slice);
      codes.push(kernelCodeSha256(join(dir, "build", "slice.cubin"), c.manifest), kernelCodeSha256(join(dir, "build", "whole.cubin"), c.manifest));
    };
    const spaced = join(tempDir(), "a folder $(x)", "cap"); // build.sh compiles through a temporary folder there
    const plain = join(tempDir(), "elsewhere", "cap");
    for (const to of [spaced, plain]) cpSync(c.dir, to, { recursive: true, preserveTimestamps: true });
    for (const dir of [c.dir, spaced, plain]) both(dir);
    // the kernel the sources mean when the path is relative and the clock pinned: p->a unscaled
    const ref = capture();
    writeFileSync(ref.tu, `${HEAD}${KERNEL("p->a")}int main() { return 0; }\n`);
    expect(refreshSlice(ref.dir, ref.meta).action).toBe("remade");
    build(ref.dir, join(ref.dir, "build", "ref.cubin"));
    const want = kernelCodeSha256(join(ref.dir, "build", "ref.cubin"), ref.manifest);
    expect(want).toMatch(/^[0-9a-f]{64}$/);
    expect(codes).toEqual(Array(6).fill(want));
  }, 60_000); // nvcc builds of the slice and the whole TU, here and in copies: 5 s was too little on a loaded 2-core machine

  test("after an agent's (confined) build the capture's own build.sh compiles the whole TU, the kernel the agent was judged by; the user's validate makes the slice again", () => {
    const c = capture();
    // adversary 48: a later kernel calls the helper too; the slice leaves that call out (a helper cicc need not inline
    // may be specialised for the one call it sees: __noinline__ ones make no slice, below)
    writeFileSync(
      c.tu,
      `${HEAD}__device__ float helper(float x, float k) { float a = 0; for (int j = 0; j < 16; j++) a = __sinf(a * k + x); return a; }
${KERNEL("helper(p->a, 1.5f)")}__global__ void other(float* q) { q[0] = helper(q[1], q[2]); }
int main() { return 0; }
`,
    );
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    remakeStaleSlice(c.dir, c.manifest, { confined: true });
    expect(readFileSync(c.slice, "utf8")).toContain("sha256=none");
    const p = Bun.spawnSync(["bash", join(c.dir, "build.sh"), join(c.dir, "build", "inplace.cubin")], { cwd: c.dir, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    expect(p.stderr.toString()).toContain("no usable slice");
    remakeStaleSlice(c.dir, c.manifest);
    expect(readFileSync(c.slice, "utf8")).toMatch(/sha256=[0-9a-f]{64} /);
  });

  test("a __noinline__ helper the kernel calls, called after the kernel too: no slice; called by another kernel before it: that body stays, the slice's kernel is the TU's", () => {
    const c = capture();
    const helper = "__device__ __noinline__ float helper(float x, float k) { float a = 0; for (int j = 0; j < 16; j++) a = __sinf(a * k + x); return a; }\n";
    writeFileSync(
      c.tu,
      `${HEAD}${helper}${KERNEL("helper(p->a, 1.5f)")}__global__ void other(float* q) { q[0] = helper(q[1], q[2]); }\nint main() { return 0; }\n`,
    );
    const r = refreshSlice(c.dir, c.meta);
    expect(r.action).toBe("removed");
    expect(r.reason).toContain("calls `helper`, declared __noinline__ before it, after the kernel");
    writeFileSync(
      c.tu,
      `${HEAD}${helper}__global__ void other(float* q) { q[0] = helper(q[1], q[2]); }\n${KERNEL("helper(p->a, 1.5f)")}int main() { return 0; }\n`,
    );
    expect(refreshSlice(c.dir, c.meta).action).toBe("remade");
    expect(readFileSync(c.slice, "utf8")).toContain("q[0] = helper(q[1], q[2]);"); // the other kernel's body stays
    const [sliced, whole] = sliceAndWholeTu(c);
    expect(sliced).toBe(whole);
  });
});
