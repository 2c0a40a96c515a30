/**
 * The device-side pruning of a preprocessed TU (src/frontends/cuda/prune/) and the watch's fast build
 * (src/frontends/cuda/fast-build.ts). Without nvcc: hand-written gcc -E output (line markers, a system
 * header, a project header, the primary file) checked declaration by declaration. With nvcc: a
 * project whose kernel header pulls <vector>, <string>, <unordered_map>, <memory>, <mutex> and
 * host structures, rendered as a reproducer; its pruned device-only build must give the kernel the
 * same machine code as build.sh's, and an edit of the kernel must reach the pruned build.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cubinKernels } from "../../../../src/codeobj/cubin.ts";
import { NO_NVCC_REASON, NVCC } from "../../../nvcc-fixtures.ts";
import { BuildSuperseded, FastBuildUnavailable } from "../../../../src/frontends/build.ts";
import { fastBuild, FastBuildState, parseDryrun, sameKernelCode } from "../../../../src/frontends/cuda/fast-build.ts";
import { KerncapError } from "../../../../src/errors.ts";
import type { Manifest } from "../../../../src/format/manifest.ts";
import { makeHeavyReproducer } from "../../../heavy-fixture.ts";
import { PRUNED_DIR, readPrunedCheck, Rebuilder, type RebuilderOptions } from "../../../../src/rebuild/rebuilder.ts";
import { cudaFrontend } from "../../../../src/frontends/cuda/index.ts";
import "../../../../src/frontends/index.ts"; // registers the frontends' run files with the trust gate that build.sh passes
import { DevicePruner, pruneDeviceTU } from "../../../../src/frontends/cuda/prune/cache.ts";

const WORK = mkdtempSync(join(tmpdir(), "kerncap-prune-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

/** gcc -E output of a slice: a system header, a project header, the primary file. */
const TU = [
  '# 0 "src/slice.cu"',
  '# 0 "<built-in>"',
  '# 0 "<command-line>"',
  '# 1 "src/slice.cu"',
  '# 1 "/usr/include/c++/12/bits/stl_vector.h" 1 3',
  "namespace std {",
  "template<typename _Tp> class vector { public: _Tp* _M_start; void push_back(const _Tp& __x); };",
  "template<typename _Tp> void vector<_Tp>::push_back(const _Tp& __x) { *_M_start = __x; }",
  "template<typename _Tp> inline void swap(vector<_Tp>& __a, vector<_Tp>& __b) { }",
  "template<typename _Tp> inline void swap(_Tp& __a, _Tp& __b) { _Tp __t = __a; __a = __b; __b = __t; }",
  "}",
  '# 2 "src/slice.cu" 2',
  '# 1 "src/ops.cuh" 1',
  "struct HostOnly { std::vector<int> v; };",
  "static void host_helper(HostOnly& h) { h.v.push_back(1); }",
  "enum Mode { MODE_A, MODE_B };",
  "struct Params { float scale; Mode mode; };",
  "constexpr int nthreads(int w) { return w * 32; }",
  "__attribute__((device)) inline float twice(float x) { return 2 * x; }",
  "__attribute__((device)) inline double twice(double x) { return 2 * x; }",
  "__attribute__((device)) inline float unused_helper(float x) { return x - 1; }",
  "template <typename T> struct Acc { T v; };",
  "template <> struct Acc<double> { double v; int n; };",
  "namespace detail { __attribute__((device)) inline float scaled(const Params& p, float x) { return p.mode == MODE_B ? twice(x) : p.scale * x; } }",
  "template <typename T, int W>",
  "__attribute__((global)) void __attribute__((launch_bounds(nthreads(W), 1)))",
  "kern(T* y, Params p) {",
  "  Acc<T> a{y[0]};",
  "  float r = detail::scaled(p, a.v);",
  "  std::swap(r, r);",
  "  y[0] = r;",
  "}",
  "template <int N> __attribute__((global)) void other_kernel(float* y) { y[0] = unused_helper(1.0f); }",
  '# 3 "src/slice.cu" 2',
  "static void* kerncap_odr_use = (void*)&kern<float, 4>;",
  "",
].join("\n");

describe("pruneDeviceTU on hand-written gcc -E output", () => {
  const r = pruneDeviceTU(TU);
  const out = r.text.split("\n");
  const has = (s: string) => out.some((l) => l.includes(s));
  test("the kernel and what it names stay: its template, helpers (every overload), types, enumerators, the namespace member, the launch_bounds function", () => {
    expect(has("kern(T* y, Params p) {")).toBe(true);
    expect(has("inline float twice(float x)")).toBe(true);
    expect(has("inline double twice(double x)")).toBe(true); // every overload of a name in use
    expect(has("struct Params")).toBe(true);
    expect(has("enum Mode")).toBe(true); // MODE_B names it
    expect(has("namespace detail { __attribute__((device)) inline float scaled")).toBe(true);
    expect(has("constexpr int nthreads")).toBe(true); // named inside __attribute__((launch_bounds(...)))
    expect(has("template <typename T> struct Acc { T v; };")).toBe(true);
    expect(has("template <> struct Acc<double>")).toBe(true); // a specialization of a kept template
    expect(has("static void* kerncap_odr_use")).toBe(true);
  });
  test("what nothing the kernel uses names goes: another kernel, an unused device function, host structures", () => {
    expect(has("other_kernel")).toBe(false); // a header's kernel template nothing instantiates: only the primary file's code is a root
    expect(has("unused_helper(float x) { return x - 1; }")).toBe(false); // …so what only it used goes too
    expect(has("struct HostOnly")).toBe(false);
    expect(has("host_helper(HostOnly& h)")).toBe(false);
  });
  test("a system header's overload whose parameters name an unneeded class goes; the generic one stays", () => {
    expect(has("inline void swap(vector<_Tp>& __a")).toBe(false);
    expect(has("inline void swap(_Tp& __a, _Tp& __b)")).toBe(true);
    expect(has("class vector")).toBe(false);
    expect(has("vector<_Tp>::push_back")).toBe(false);
  });
  test("line numbers and line markers are kept", () => {
    expect(out).toHaveLength(TU.split("\n").length);
    TU.split("\n").forEach((l, i) => {
      if (l.startsWith("# ")) expect(out[i]).toBe(l);
    });
    expect(r.lines().after).toBeLessThan(r.lines().before);
    expect(r.decls).toBeGreaterThan(r.kept);
  });
});

describe("pruneDeviceTU: host-only definitions", () => {
  test("a host function a kept declaration names becomes a declaration; an out-of-class host member definition goes", () => {
    const tu = [
      '# 1 "k.cu"',
      '# 1 "/usr/include/x.h" 1 3',
      "struct Big { int n; void grow(); };",
      "void Big::grow() { n++; }",
      '# 2 "k.cu" 2',
      "struct Ctx { Big b; };",
      "int host_count(Ctx& c) { c.b.grow(); return c.b.n; }",
      "__attribute__((host)) __attribute__((device)) inline int both(Ctx& c) { return host_count(c); }",
      "__attribute__((global)) void k(Ctx* c) { both(*c); }",
      "",
    ].join("\n");
    const out = pruneDeviceTU(tu).text.split("\n");
    expect(out[6]).toBe("int host_count(Ctx& c) ;"); // a declaration now
    expect(out[7]).toContain("inline int both(Ctx& c) { return host_count(c); }"); // host+device: compiled for the device
    expect(out[2]).toBe("struct Big { int n; void grow(); };");
    expect(out[3]).toBe(""); // Big::grow's host body
  });
});

describe("DevicePruner: an edit after the first call", () => {
  test("the analysis of what comes before the edit is reused; the result equals a fresh prune", () => {
    const p = new DevicePruner();
    p.prune(TU);
    const edited = TU.replace("float r = detail::scaled(p, a.v);", "float r = detail::scaled(p, a.v) + unused_helper(1.0f);");
    const again = p.prune(edited);
    expect(p.reused).toBeGreaterThan(5);
    expect(again.text).toBe(pruneDeviceTU(edited).text);
    // a namespace that appears: everything is read again (qualified names depend on the set)
    const ns = `${TU}namespace fresh { int z; }\n`;
    expect(p.prune(ns).text).toBe(pruneDeviceTU(ns).text);
    expect(p.reused).toBe(0);
  });
});

/** What `nvcc --dryrun -cubin -arch=sm_90` prints (CUDA 13.0), less most of its paths. */
const DRYRUN = [
  "#$ _NVVM_BRANCH_=nvvm",
  "#$ _SPACE_= ",
  "#$ CICC_PATH=/usr/local/cuda-13.0/bin/../nvvm/bin",
  "#$ PATH=/usr/local/cuda-13.0/bin/../nvvm/bin:/usr/local/cuda-13.0/bin:/usr/bin",
  '#$ INCLUDES="-I/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include"  ',
  '#$ SYSTEM_INCLUDES="-isystem" "/usr/local/cuda-13.0/bin/../targets/x86_64-linux/include/cccl"  ',
  '#$ gcc -std=c++17 -D__CUDA_ARCH__=900 -E -x c++ -O3 -I"src" -include "cuda_runtime.h" -m64 "/r/src/slice.cu" -o "/tmp/tmpxft_0000218b_00000000-7_slice.cpp1.ii" ',
  '#$ "$CICC_PATH/cicc" --c++17 --orig_src_file_name "/r/src/slice.cu" -arch compute_90 --gen_c_file_name "/tmp/tmpxft_0000218b_00000000-6_slice.cudafe1.c" "/tmp/tmpxft_0000218b_00000000-7_slice.cpp1.ii" -o "/tmp/tmpxft_0000218b_00000000-6_slice.ptx"',
  '#$ ptxas -arch=sm_90 -m64  "/tmp/tmpxft_0000218b_00000000-6_slice.ptx"  -o "/w/dryrun.cubin" ',
  "kerncap: compiling the slice",
].join("\n");

describe("parseDryrun", () => {
  test("gcc -E, cicc, ptxas: the preprocessor writes the full TU, cicc reads the pruned one, nvcc's temporaries and the output go to the work folder", () => {
    const p = parseDryrun(DRYRUN, "/w/dryrun.cubin", "/work/f");
    if ("reason" in p) throw new Error(p.reason);
    expect(p.preprocess).toContain('-o "/work/f/full.cpp1.ii"');
    expect(p.preprocess).toContain('"/r/src/slice.cu"');
    expect(p.compile).toContain('"/work/f/pruned.cpp1.ii" -o "/work/f/nv-6_slice.ptx"');
    expect(p.compile).toContain('--gen_c_file_name "/work/f/nv-6_slice.cudafe1.c"');
    expect(p.compile).toContain('ptxas -arch=sm_90 -m64  "/work/f/nv-6_slice.ptx"  -o "/work/f/kernel.cubin"');
    expect(p.compile).not.toContain("tmpxft");
    expect(p.source).toBe("/r/src/slice.cu");
    // nvcc's variables: the plain ones are set (quoted), the descriptive quoted lists are not
    expect(p.env).toContain("CICC_PATH='/usr/local/cuda-13.0/bin/../nvvm/bin'");
    expect(p.env.some((l) => l.startsWith("INCLUDES") || l.startsWith("SYSTEM_INCLUDES"))).toBe(false);
  });
  test("nvcc's LD_LIBRARY_PATH=<cuda>/lib: and a PATH with empty or relative entries: only the absolute entries are kept (the steps run in the capture folder, which an empty entry names)", () => {
    const withLd = DRYRUN.replace("#$ PATH=", "#$ LD_LIBRARY_PATH=/usr/local/cuda-13.0/bin/../lib:\n#$ PATH=.:lib::");
    const p = parseDryrun(withLd, "/w/dryrun.cubin", "/work/f");
    if ("reason" in p) throw new Error(p.reason);
    expect(p.env).toContain("LD_LIBRARY_PATH='/usr/local/cuda-13.0/bin/../lib'");
    expect(p.env).toContain("PATH='/usr/local/cuda-13.0/bin/../nvvm/bin:/usr/local/cuda-13.0/bin:/usr/bin'");
  });
  test("nvcc --threads: the steps' output redirections to temporary files are dropped (their messages reach the watch)", () => {
    const threaded = DRYRUN.split("\n")
      .map((l) =>
        l.startsWith("#$ gcc") || l.startsWith("#$ ptxas")
          ? `${l} > /tmp/tmpxft_0000218b_00000000-9_3215_stdout 2>/tmp/tmpxft_0000218b_00000000-9_3215_stderr`
          : l,
      )
      .join("\n");
    const p = parseDryrun(threaded, "/w/dryrun.cubin", "/work/f");
    if ("reason" in p) throw new Error(p.reason);
    expect(p.preprocess).toEndWith('-o "/work/f/full.cpp1.ii"');
    expect(p.compile).toEndWith('-o "/work/f/kernel.cubin"');
    expect(`${p.preprocess}${p.compile}`).not.toContain("_stdout");
  });
  test("any other shape of compile has no plan (a fatbinary step, no cicc)", () => {
    const four = `${DRYRUN}\n#$ fatbinary --create="/w/x.fatbin" -64 "--image3=kind=elf,sm=90,file=/w/dryrun.cubin"`;
    expect(parseDryrun(four, "/w/dryrun.cubin", "/work/f")).toEqual({ reason: expect.stringContaining("4 steps") });
    expect(parseDryrun(DRYRUN.replace('"$CICC_PATH/cicc"', "cudafe++"), "/w/dryrun.cubin", "/work/f")).toEqual({ reason: "nvcc's second step is not cicc" });
  });
});

describe.skipIf(!NVCC)("the pruned device-only build of a reproducer (nvcc)", () => {
  if (!NVCC) console.warn(NO_NVCC_REASON);
  test("a kernel header that pulls the STL and host structures: same kernel machine code as build.sh, a much smaller TU, and an edit reaches it", async () => {
    const out = join(WORK, "heavy-capture");
    const { kernel } = await makeHeavyReproducer(WORK, out);
    const env = { ...process.env, NVCC: NVCC! };
    const full = () => {
      const p = Bun.spawnSync(["bash", join(out, "build.sh")], { cwd: out, stdout: "pipe", stderr: "pipe", env });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      return new Uint8Array(readFileSync(p.stdout.toString().trim().split("\n").pop()!));
    };
    const work = join(WORK, "heavy-fast");
    const state = new FastBuildState();
    const pruner = state.pruner;
    await withEnv({ NVCC: NVCC! }, async () => {
      const f = await fastBuild(out, work, { force: false }, state);
      const first = new Uint8Array(readFileSync(f.module));
      expect(sameKernelCode(full(), first, kernel)).toBeNull();
      const lines = f.prune.lines();
      expect(lines.after * 2).toBeLessThan(lines.before); // the STL, the host structures: gone
      // an edit of the kernel reaches the pruned build (and matches build.sh's rebuild of it)
      const hdr = join(out, "src", "lib", "ops.cuh");
      writeFileSync(hdr, readFileSync(hdr, "utf8").replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      // onCompile: once per build, when cicc starts (after the preprocessing and the pruning: validate starts the replay's preparation then)
      let compileAt = 0;
      const g = await fastBuild(
        out,
        work,
        {
          force: false,
          onCompile: () => {
            expect(compileAt).toBe(0);
            compileAt = performance.now();
          },
        },
        state,
      );
      expect(compileAt).toBeGreaterThan(0);
      expect(g.steps.incremental, state.lastMiss ?? "").toBe(true); // only what follows the edit was preprocessed, and it was verified
      expect(g.steps.fullPreprocessMs).toBeGreaterThan(0);
      const second = new Uint8Array(readFileSync(g.module));
      expect(sameKernelCode(first, second, kernel)).not.toBeNull();
      expect(sameKernelCode(full(), second, kernel)).toBeNull();
      expect(pruner.reused).toBeGreaterThan(0);
      // a build its caller stops (the watch: a later save) is superseded, not failed: no build.sh instead, and the base (the
      // last whole-TU preprocessing and its sources) stays, so that the next save is still preprocessed incrementally
      const base = state.base;
      writeFileSync(hdr, `${readFileSync(hdr, "utf8")}// edit A\n`);
      const atCompile = new AbortController(); // stopped where its compiler would start (the speculative path)
      const quiet = async () => atCompile.abort();
      await expect(fastBuild(out, work, { force: false, signal: atCompile.signal, beforeCompile: quiet }, state)).rejects.toBeInstanceOf(BuildSuperseded);
      expect(state.base).toBe(base);
      state.misses = 3; // no speculation: stopped during the whole TU's gcc -E
      const early = new AbortController();
      setTimeout(() => early.abort(), 20);
      await expect(fastBuild(out, work, { force: false, signal: early.signal }, state)).rejects.toBeInstanceOf(BuildSuperseded);
      expect(state.base).toBe(base);
      state.misses = 0;
      writeFileSync(hdr, `${readFileSync(hdr, "utf8")}// edit B\n`);
      let waited = 0;
      const h = await fastBuild(out, work, { force: false, beforeCompile: async () => void waited++ }, state);
      expect(h.steps.incremental, state.lastMiss ?? "").toBe(true);
      expect(waited).toBe(1); // its compiler waited for the quiet once
      expect(sameKernelCode(second, new Uint8Array(readFileSync(h.module)), kernel)).toBeNull();
      // an edit that does not compile: the fast build says so (the watch then runs build.sh, which reports it)
      writeFileSync(hdr, readFileSync(hdr, "utf8").replace("int i =", "int i = undeclared_name +"));
      await expect(fastBuild(out, work, { force: false }, state)).rejects.toBeInstanceOf(FastBuildUnavailable);
    });
  }, 180_000);
});

describe.skipIf(!NVCC)("validate's rebuild: build.sh until the pruned build is checked, then the pruned TU (nvcc)", () => {
  test("the first validate checks side by side and records it; then edits build pruned; a compile error is build.sh's; a changed compile is checked again; --full-build", async () => {
    const out = join(WORK, "validate-capture");
    const { kernel, header } = await makeHeavyReproducer(WORK, out);
    const m = { kernel: { name: kernel, frontend: "cuda" } } as unknown as Manifest;
    const o: RebuilderOptions = { quiet: true, force: false, fullBuild: false, race: false, strategy: "race" }; // race: false: build.sh after the pruned build, so that which builds first is not a matter of load (the race whatever the measured costs: chooseStrategy is test/cpu/frontends.test.ts's)
    // the policy alone: the fixture's manifest has no parameter layout for the module check
    const buildForValidate = (dir: string, mm: Manifest, oo: RebuilderOptions) =>
      new Rebuilder(dir, mm, { ...cudaFrontend, checkRebuiltModule: undefined }, oo).rebuildOnce();
    const code = (f: string) => new Uint8Array(readFileSync(f));
    await withEnv({ NVCC: NVCC!, EXTRA_FLAGS: undefined }, async () => {
      const first = await buildForValidate(out, m, o);
      expect(first.builder).toBe("build.sh");
      expect(first.module).toBe(join(out, "build", "kernel.cubin"));
      const check = readPrunedCheck(out)!;
      expect(check).toMatchObject({ schema: "kerncap.pruned-check/1", kernel, same: true, reason: null });
      expect(check.prunedSeconds).toBeGreaterThan(0);
      const unchanged = code(first.module);
      const original = readFileSync(header, "utf8");
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      const edited = await buildForValidate(out, m, o);
      expect(edited).toMatchObject({ builder: "pruned", module: join(out, PRUNED_DIR, "kernel.cubin") });
      expect(edited.steps!.compileMs).toBeGreaterThan(0);
      expect(edited.steps!.incremental).toBe(true); // from the first validate's preprocessing, kept in build/pruned
      const editedCode = code(edited.module);
      expect(Buffer.compare(code(join(out, "build", "kernel.cubin")), editedCode)).toBe(0); // build.sh's output holds it too (replay --against DIR/build/kernel.cubin)
      expect(sameKernelCode(unchanged, editedCode, kernel)).not.toBeNull(); // the edit reached it
      const full = await buildForValidate(out, m, { ...o, fullBuild: true });
      expect(full.builder).toBe("build.sh");
      expect(sameKernelCode(code(full.module), editedCode, kernel)).toBeNull(); // build.sh's machine code
      // a compile error: build.sh's message; the record stays
      writeFileSync(header, original.replace("int i =", "int i = undeclared_name +"));
      const err = await buildForValidate(out, m, o).catch((e) => e);
      expect(err).toBeInstanceOf(KerncapError);
      expect(err.code).toBe("E_BUILD");
      expect(err.message).toContain("undeclared_name");
      expect(readPrunedCheck(out)!.same).toBe(true);
      writeFileSync(header, original);
      expect((await buildForValidate(out, m, o)).builder).toBe("pruned");
      // another compile (EXTRA_FLAGS): checked again side by side, then pruned
      process.env.EXTRA_FLAGS = "-DKERNCAP_TEST_FLAG=1";
      expect((await buildForValidate(out, m, o)).builder).toBe("build.sh");
      expect(readPrunedCheck(out)!.plan).not.toBe(check.plan);
      expect((await buildForValidate(out, m, o)).builder).toBe("pruned");
      // the race (what validate does): whichever builds first, the same machine code
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      const raced = await buildForValidate(out, m, { ...o, race: true });
      expect(["pruned", "build.sh"]).toContain(raced.builder);
      expect(sameKernelCode(code(raced.module), editedCode, kernel)).toBeNull();
      writeFileSync(header, original);
      // a record that says the machine code differed: build.sh
      const f = join(out, PRUNED_DIR, "check.json");
      writeFileSync(f, JSON.stringify({ ...readPrunedCheck(out)!, same: false, reason: "test" }));
      expect((await buildForValidate(out, m, o)).builder).toBe("build.sh");
    });
  }, 240_000);
});

/** Run fn with these environment variables set (undefined: unset), then put them back as they were. */
async function withEnv(vars: Record<string, string | undefined>, fn: () => Promise<void>): Promise<void> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (v: Record<string, string | undefined>) => {
    for (const [k, val] of Object.entries(v)) {
      if (val === undefined) delete process.env[k];
      else process.env[k] = val;
    }
  };
  set(vars);
  try {
    await fn();
  } finally {
    set(saved);
  }
}

/** A reproducer's build.sh for DIR/k.cu (nvcc -cubin sm_90 with `flags`; EXTRA_FLAGS appended), printing the cubin's path last. */
function writeBuildSh(dir: string, flags: string): void {
  writeFileSync(
    join(dir, "build.sh"),
    [
      "#!/usr/bin/env bash",
      "set -euo pipefail",
      'here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
      'out="${1:-$here/build/kernel.cubin}"',
      'mkdir -p "$(dirname "$out")"',
      `"$NVCC" -cubin -arch=sm_90 -x cu ${flags} \${EXTRA_FLAGS:-} "$here/k.cu" -o "$out" >&2`,
      'echo "$out"',
      "",
    ].join("\n"),
  );
}

/** gcc -E output: `sys` lines in a system header, then the primary file's `main` lines. */
const tuOf = (sys: string[], main: string[]) => ['# 1 "k.cu"', '# 1 "/usr/include/lib.h" 1 3', ...sys, '# 2 "k.cu" 2', ...main, ""].join("\n");

// libstdc++ 13's bits/exception_ptr.h (GCC's libstdc++-v3/libsupc++/exception_ptr.h; gcc 12's has
// no such line): after `} // namespace __exception_ptr`, whose last declarations are
//     /// @relates exception_ptr
//     inline void
//     swap(exception_ptr& __lhs, exception_ptr& __rhs)
//     { __lhs.swap(__rhs); }
// it says, at namespace std scope,
//   using __exception_ptr::swap; // So that std::swap(exp1, exp2) finds it.
// Any kept `swap` (bits/move.h's std::swap, which std::vector's members call) kept the
// using-declaration, while __exception_ptr::swap, a system-header overload of a class nothing
// needs, went: cicc on the H200 (gcc 13): `/usr/include/c++/13/bits/exception_ptr.h(243): error:
// namespace "std::__exception_ptr" has no member "swap"`.
const EXCEPTION_PTR = [
  "namespace std {",
  "template<typename _Tp> __attribute__((host)) __attribute__((device)) inline void swap(_Tp& __a, _Tp& __b) { _Tp __t = __a; __a = __b; __b = __t; }", // 3: bits/move.h (host/device here: the kernel calls it)
  "namespace __exception_ptr { class exception_ptr; }", // 4
  "using __exception_ptr::exception_ptr;", // 5
  "exception_ptr current_exception() noexcept;", // 6
  "void rethrow_exception(exception_ptr) __attribute__ ((__noreturn__));", // 7
  "namespace __exception_ptr {", // 8
  "using std::rethrow_exception;", // 9: "So that ADL finds it."
  "class exception_ptr { void* _M_exception_object; public: exception_ptr() noexcept; void swap(exception_ptr&) noexcept; };", // 10
  "inline exception_ptr::exception_ptr() noexcept : _M_exception_object(0) { }", // 11
  "inline void exception_ptr::swap(exception_ptr &__other) noexcept { void *__tmp = _M_exception_object; _M_exception_object = __other._M_exception_object; __other._M_exception_object = __tmp; }", // 12
  "inline void", // 13
  "swap(exception_ptr& __lhs, exception_ptr& __rhs)", // 14
  "{ __lhs.swap(__rhs); }", // 15
  "}", // 16
  "using __exception_ptr::swap;", // 17
  "}", // 18
];

describe("pruneDeviceTU: what real headers contain (CCCL, libstdc++, thrust, cooperative_groups)", () => {
  const keptLines = (tu: string) => pruneDeviceTU(tu).text.split("\n");
  test("a trailing return type names its type (CCCL is_swappable.h: `auto __swap(...) -> __hidden_friend_swap_found;`)", () => {
    const out = keptLines(
      tuOf(
        ["struct found_t {};", "__attribute__((device)) auto probe(...) -> found_t;", "struct member_only {};"],
        ["__attribute__((global)) void k(int* p) { p->member_only = sizeof(probe(1)); }"],
      ),
    );
    expect(out[2]).toBe("struct found_t {};");
    expect(out[4]).toBe(""); // after `p->`: a member
  });
  test("a pragma that applies to the next declaration goes with it; a pragma inside a dropped body goes", () => {
    const out = keptLines(
      tuOf(
        [
          "#pragma nv_exec_check_disable",
          "template <class T> __attribute__((device)) void unused_swap(T& a) { }",
          "#pragma GCC diagnostic push",
          "template <class T> struct U { __attribute__((device)) void f() {",
          "#pragma unroll",
          "for (int i = 0; i < 4; i++) { } } };",
          "#pragma GCC diagnostic pop",
        ],
        ["__attribute__((global)) void k(int* p) { }"],
      ),
    );
    expect(out[2]).toBe(""); // nv_exec_check_disable before what is dropped: cicc wants a declaration after it
    expect(out[4]).toBe("#pragma GCC diagnostic push"); // other pragmas at namespace scope stay
    expect(out[6]).toBe(""); // #pragma unroll of the dropped U::f
    expect(out[8]).toBe("#pragma GCC diagnostic pop");
  });
  test("a class head with a qualified name declares the last name (libstdc++: `class __cxx11:: collate`)", () => {
    const out = keptLines(
      tuOf(
        [
          "namespace std { namespace __cxx11 { template<typename _CharT> class collate; }",
          "template<typename _CharT> class __cxx11:: collate { public: static int id; };",
          "template<typename _CharT> int collate<_CharT>::id; }",
        ],
        ["__attribute__((global)) void k(int* p) { p[0] = std::collate<char>::id; }"],
      ),
    );
    expect(out[3]).toContain("class __cxx11:: collate {");
  });
  test("`<` after a non-type template parameter is a comparison (CCCL get.h: `enable_if_t<_Index<2, int> = 0>`): what follows is split as usual", () => {
    const out = keptLines(
      tuOf(
        [
          "template <bool, class T> struct en {}; template <class T> struct en<true, T> { using type = T; };",
          "template <unsigned long _Index, class _T, typename en<_Index<2, int>::type = 0> __attribute__((device)) int get(_T) { return 1; }",
          "struct unused_a { int x; };",
          "__attribute__((device)) int used_b(int v) { return v; }",
        ],
        ["__attribute__((global)) void k(int* p) { p[0] = used_b(get<0>(1)); }"],
      ),
    );
    expect(out[3]).toContain("int get(_T)");
    expect(out[4]).toBe(""); // a declaration of its own, dropped
    expect(out[5]).toContain("used_b");
  });
  test("`typedef __attribute__((…)) struct X {…} Y;` declares Y (CUDA's driver_types.h: cudaLaunchConfig_t)", () => {
    const out = keptLines(
      tuOf(
        ["typedef __attribute__((device_builtin)) struct cfg_st { int n; } cfg_t;"],
        ["int host_side(const cfg_t* c) { return c->n; }", "__attribute__((global)) void k(int* p) { }"],
      ),
    );
    expect(out[2]).toContain("cfg_t;");
  });
  test("a constructor's brace initializers are not its body (CCCL chrono: `X::X(…) noexcept : __y{…}, __m{…} {}`)", () => {
    const tu = tuOf(
      [
        "struct ymd { int __y, __m; __attribute__((device)) constexpr ymd(int a) noexcept; };",
        "__attribute__((device)) constexpr ymd::ymd(int a) noexcept",
        ": __y{a}",
        ", __m{a + 1}",
        "{}",
        "struct unused_c { int z; };",
      ],
      ["__attribute__((global)) void k(int* p) { ymd d(p[0]); p[1] = d.__m; }", "__attribute__((global)) void k2(int* p) { }"],
    );
    const out = keptLines(tu);
    expect(out.slice(3, 7)).toEqual(tu.split("\n").slice(3, 7)); // one declaration, kept whole
    expect(out[7]).toBe("");
    // unused: it goes whole (not a piece `, __m{a + 1}` left at namespace scope: "expected a declaration")
    expect(keptLines(tu.replace("k(int* p) { ymd d(p[0]); p[1] = d.__m; }", "k(int* p) { }")).slice(2, 7)).toEqual(["", "", "", "", ""]);
  });
  test("a qualified host definition goes whole, also when an attribute comes before its name or a namespace shares its class's name (thrust's namespace complex)", () => {
    const tu = tuOf(
      [
        "namespace thrust { namespace complex { int unrelated; } }",
        "namespace std { template<typename _Tp> struct complex { _Tp r; complex& operator=(const _Tp& t); int ext(int) const; };",
        "template<typename _Tp> complex<_Tp>& complex<_Tp>::operator=(const _Tp& t) { r = t; return *this; }",
        'template<typename _Tp> __attribute ((__abi_tag__ ("cxx11"))) int complex<_Tp>::ext(int) const { return 0; } }',
      ],
      ["int host_side(std::complex<float>& c) { c = 1.0f; return c.ext(1); }", "__attribute__((global)) void k(float* p) { }"],
    );
    const out = keptLines(tu);
    expect(out[3]).toContain("struct complex");
    expect(out[4]).toBe(""); // not `…::operator=(const _Tp& t) ;`: a member may not be redeclared outside its class
    expect(out[5]).toBe(" }");
  });
  test("a namespace alias qualifies (`namespace cg = cooperative_groups; cg::thread_block`)", () => {
    const out = keptLines(
      tuOf(
        ["namespace cooperative_groups { class thread_block { public: int r; }; }"],
        ["namespace cg = cooperative_groups;", "__attribute__((global)) void k(int* p) { cg::thread_block b; p[0] = b.r; }"],
      ),
    );
    expect(out[2]).toContain("class thread_block");
  });
  test("a using-declaration whose namespace's declarations of the name all went goes too (libstdc++ 13 exception_ptr.h: `using __exception_ptr::swap;`)", () => {
    const out = keptLines(tuOf(EXCEPTION_PTR, ["__attribute__((global)) void k(float* p) { std::swap(p[0], p[1]); }"]));
    expect(out[3]).toBe(EXCEPTION_PTR[1]!); // std::swap: the kernel calls it
    for (const i of [5, 6, 7, 9, 10, 11, 12, 13, 14, 15]) expect(out[i]).toBe(""); // exception_ptr: nothing needs it
    expect(out[17]).toBe(""); // so its swap went, and with it the using-declaration
    expect(out[8]).toBe("namespace __exception_ptr {"); // namespaces stay (an empty one is fine)
  });
  test("a using-declaration stays when what it names in its namespace stays (std::exception_ptr named: __exception_ptr::swap stays)", () => {
    const out = keptLines(
      tuOf(EXCEPTION_PTR, [
        "__attribute__((global)) void k(float* p) { std::swap(p[0], p[1]); }",
        "void h(std::exception_ptr& a, std::exception_ptr& b) { std::swap(a, b); }",
      ]),
    );
    expect(out[5]).toBe(EXCEPTION_PTR[3]!);
    expect(out[10]).toBe(EXCEPTION_PTR[8]!);
    expect(out.slice(13, 16)).toEqual(EXCEPTION_PTR.slice(11, 14).map((l, i) => (i === 2 ? ";" : l))); // a host-only body: a declaration
    expect(out[17]).toBe(EXCEPTION_PTR[15]!);
  });
  test("`using ::x;` counts declarations outside any namespace; a using-declaration that names a dropped one counts while kept (chains); an alias's is left as it is", () => {
    const sys = [
      "struct _IO_FILE; typedef struct _IO_FILE FILE;", // 2
      "extern int fclose (FILE *__stream);", // 3: <stdio.h>: gated on FILE, which nothing needs
      "namespace other { __attribute__((device)) inline int fclose(int v) { return v; } }", // 4
      "namespace std { using ::fclose; }", // 5: <cstdio>
      "namespace __gnu_cxx { using std::fclose; }", // 6: names only std's using-declaration
      "namespace al = other;", // 7
      "namespace x { using al::fclose; }", // 8: `al` is no namespace the TU opens: left as it is
    ];
    const out = keptLines(tuOf(sys, ["namespace al = other;", "__attribute__((global)) void k(int* p) { p[0] = al::fclose(1); }"]));
    expect(out[3]).toBe("");
    expect(out[4]).toBe(sys[2]!);
    expect(out[5]).toBe("namespace std {  }");
    expect(out[6]).toBe("namespace __gnu_cxx {  }");
    expect(out[8]).toBe(sys[6]!);
  });
  test("a requires-expression's braces in a requires-clause are no body (libstdc++ 12/13 <ostream> in C++20: `requires … && requires (_Os& __os, const _Tp& __t) { __os << __t; } using …`)", () => {
    const sys = [
      "template<typename _Tp> concept __derived_from_ios_base = __is_class(_Tp) && requires (_Tp* __t, int* __b) { __t; };", // 2
      "template<typename _Os, typename _Tp>", // 3
      "requires __derived_from_ios_base<_Os>", // 4
      "&& requires (_Os& __os, const _Tp& __t) { __os << __t; }", // 5
      "using __rvalue_stream_insertion_t = _Os&&;", // 6
      "template<typename _Tp> __attribute__((device)) int g(_Tp) requires (sizeof(_Tp) > 1) { return 1; }", // 7: a trailing requires-clause, then the body
    ];
    const named = keptLines(
      tuOf(sys, ["template <class O> __rvalue_stream_insertion_t<O, int> ins(O&& o);", "__attribute__((global)) void k(int* p) { p[0] = g(1); }"]),
    );
    expect(named.slice(2, 8)).toEqual(sys);
    const unnamed = keptLines(tuOf(sys, ["__attribute__((global)) void k(int* p) { }"]));
    expect(unnamed.slice(2, 8)).toEqual(["", "", "", "", "", ""]); // not `using __rvalue_stream_insertion_t = _Os&&;` alone: "identifier _Os is undefined"
  });
  test("a <<<…>>> launch in kept host code keeps __cudaPushCallConfiguration (cicc: unable to find its declaration)", () => {
    const out = keptLines(
      tuOf(
        ['extern "C" __attribute__((host)) __attribute__((device)) unsigned __cudaPushCallConfiguration(int g, int b, unsigned long s = 0, void* st = 0);'],
        ["template <class F> __attribute__((global)) void k(F f) { }", "void launch() { auto l = [] __attribute__((device)) (int) { }; k<<<1, 1>>>(l); }"],
      ),
    );
    expect(out[2]).toContain("__cudaPushCallConfiguration");
  });
});

describe.skipIf(!NVCC)("libstdc++ 13's `using __exception_ptr::swap;` in a pruned TU (nvcc)", () => {
  test('cicc compiles the pruned TU as it does the whole one (before: `namespace "…::__exception_ptr" has no member "swap"`)', () => {
    // `lib` for `std`: nvcc's cuda_runtime.h brings libstdc++'s own std::swap, which would make the call ambiguous
    const sys = EXCEPTION_PTR.map((l) => l.replace("namespace std {", "namespace lib {").replace("using std::", "using lib::"));
    const tu = tuOf(sys, ["__attribute__((global)) void k(float* p) { lib::swap(p[0], p[1]); }"]);
    const dir = join(WORK, "exception-ptr");
    mkdirSync(dir, { recursive: true });
    for (const [name, text] of [
      ["whole.cu", tu],
      ["pruned.cu", pruneDeviceTU(tu).text],
    ] as const) {
      writeFileSync(join(dir, name), text);
      const p = Bun.spawnSync([NVCC!, "-cubin", "-arch=sm_90", name, "-o", `${name}.cubin`], { cwd: dir, stdout: "pipe", stderr: "pipe" });
      expect(p.exitCode, `${name}: ${p.stderr.toString()}`).toBe(0);
    }
  }, 60_000);
});

describe("pruneDeviceTU: project headers (what a primary file's slice includes)", () => {
  const keptLines = (tu: string) => pruneDeviceTU(tu).text.split("\n");
  const proj = (hdr: string[], main: string[]) => ['# 1 "k.cu"', '# 1 "h.cuh" 1', ...hdr, '# 2 "k.cu" 2', ...main, ""].join("\n");
  test("a static data member defined out of class goes with its class (`template <class T> const int X<T>::n = 3;`)", () => {
    const out = keptLines(
      proj(
        [
          "template <class T> struct X { static const int n; };",
          "template <class T> const int X<T>::n = 3;",
          "struct Y { static const int k; };",
          "const int Y::k = 11;",
          "__attribute__((global)) void k(int* o) { o[0] = X<int>::n + Y::k; }",
        ],
        ["static void* kerncap_odr_use = (void*)&k;"],
      ),
    );
    expect(out[3]).toBe("template <class T> const int X<T>::n = 3;");
    expect(out[5]).toBe("const int Y::k = 11;");
  });
  test("`(float)::f(x)` and `a > ::f(x)` name the global f; `X<T>::f` does not", () => {
    const out = keptLines(
      proj(
        [
          "__attribute__((device)) float f1(float x) { return x; }",
          "__attribute__((device)) int f2(int x) { return x; }",
          "__attribute__((device)) int f3(int x) { return x; }",
          "template <class T> struct B { static int f3(int); };",
          "__attribute__((global)) void k(float* y) { y[0] = (float)::f1(y[1]); y[1] = y[2] > ::f2(1); y[2] = B<int>::f3(1); }",
        ],
        ["static void* kerncap_odr_use = (void*)&k;"],
      ),
    );
    expect(out[2]).toContain("f1");
    expect(out[3]).toContain("f2");
    expect(out[4]).toBe("");
  });
  test("every __device__ and __constant__ variable a header defines stays (ptxas writes their offsets into the kernel's code); extern, constexpr and template ones do not", () => {
    const out = keptLines(
      proj(
        [
          "__attribute__((constant)) float unused_table[64] = {1};",
          "__attribute__((device)) float unused_dev[32];",
          "__attribute__((device)) float (*unused_fp)(float) = 0;",
          "extern __attribute__((device)) int ext_dev;",
          "constexpr __attribute__((device)) int cx_dev = 1;",
          "template <class T> __attribute__((device)) T vt_dev;",
          "__attribute__((device)) float unused_fn(float x) { return x; }",
          "__attribute__((global)) void k(float* y) { y[0] = 1; }",
        ],
        ["static void* kerncap_odr_use = (void*)&k;"],
      ),
    );
    expect(out.slice(2, 5).every((l) => l.startsWith("__attribute__"))).toBe(true);
    expect(out.slice(5, 9)).toEqual(["", "", "", ""]);
  });
});

describe("pruneDeviceTU: the other kernels of the module", () => {
  const keptLines = (tu: string) => pruneDeviceTU(tu).text.split("\n");
  const proj = (hdr: string[], main: string[]) => ['# 1 "k.cu"', '# 1 "h.cuh" 1', ...hdr, '# 2 "k.cu" 2', ...main, ""].join("\n");
  test("every __global__ function defined outside a template stays with what it names (its assert strings take slots in the module's address table); kernel templates, declarations and host code do not", () => {
    const hdr = [
      "__attribute__((device)) inline int checked(int v) { return v; }", // 2: named by before_kern only
      "struct HostCfg { int n; };", // 3
      '__attribute__((global)) void before_kern(int* o) { if (o[0] != 32) __assertfail("o[0] == 32", "h.cuh", 3, __PRETTY_FUNCTION__, 1); o[1] = checked(o[2]); }', // 4
      "__attribute__((global)) void kern(float* y) { y[0] = 1; }", // 5
      "namespace ops { __attribute__((global)) void __attribute__((launch_bounds(128, 1))) in_ns(float* y) { y[0] = 2; } }", // 6
      'extern "C" __attribute__((global)) void c_kern(float* y) { y[0] = 3; }', // 7
      "template <int N> __attribute__((global)) void tk(float* y) { y[0] = N; }", // 8
      "template __attribute__((global)) void tk<4>(float* y);", // 9: an explicit instantiation: the module has tk<4>
      "template <int N> __attribute__((global)) void tk2(float* y) { y[0] = N; }", // 10: nothing instantiates it
      "__attribute__((global)) void declared_only(float* y);", // 11
      "void host_launch(HostCfg c, float* y) { tk2<8><<<1, 1>>>(y); }", // 12: host code: its body goes
    ];
    const out = keptLines(proj(hdr, ["static void* kerncap_odr_use = (void*)&kern;"]));
    for (const i of [2, 4, 5, 6, 7, 8, 9]) expect(out[i]).toBe(hdr[i - 2]!);
    for (const i of [3, 10, 11, 12]) expect(out[i]).toBe("");
  });
});

describe.skipIf(!NVCC)("the pruned build of a kernel whose header defines other kernels that assert (nvcc)", () => {
  test("the other kernels stay: each kernel gets the full build's machine code; without them the kernel's code differs (its constant-bank-4 slots move)", async () => {
    const dir = join(WORK, "asserts");
    mkdirSync(dir, { recursive: true });
    // KERN_ONLY leaves kern alone in the module, on the same line (its assert passes __LINE__)
    writeFileSync(
      join(dir, "h.cuh"),
      [
        "#pragma once",
        "#include <cassert>",
        "#ifndef KERN_ONLY",
        "__global__ void first_kernel(int* o) { assert(blockDim.x == 64); o[threadIdx.x] = 1; }",
        "#endif",
        "__global__ void kern(float* y, int n) { assert(blockDim.x == 32); if (threadIdx.x < n) y[threadIdx.x] *= 2; }",
        "#ifndef KERN_ONLY",
        "__global__ void last_kernel(float* y) { y[threadIdx.x] = 0; }",
        "#endif",
        "",
      ].join("\n"),
    );
    writeFileSync(join(dir, "k.cu"), ['#include "h.cuh"', "static void* kerncap_odr_use = (void*)&kern;", ""].join("\n"));
    writeBuildSh(dir, "-O3");
    await withEnv({ NVCC: NVCC! }, async () => {
      const build = (out: string, extra: string) => {
        const p = Bun.spawnSync(["bash", join(dir, "build.sh"), out], {
          cwd: dir,
          stdout: "pipe",
          stderr: "pipe",
          env: { ...process.env, NVCC: NVCC!, EXTRA_FLAGS: extra },
        });
        expect(p.exitCode, p.stderr.toString()).toBe(0);
        return new Uint8Array(readFileSync(out));
      };
      const full = build(join(dir, "build", "kernel.cubin"), "");
      const kern = "_Z4kernPfi";
      // the premise: the module's other kernels change kern's machine code
      expect(sameKernelCode(full, build(join(dir, "build", "alone.cubin"), "-DKERN_ONLY"), kern)).not.toBeNull();
      const f = await fastBuild(dir, join(WORK, "asserts-fast"), { force: false });
      const pruned = new Uint8Array(readFileSync(f.module));
      expect(cubinKernels(full).sort()).toEqual(["_Z11last_kernelPf", "_Z12first_kernelPi", kern]);
      expect(sameKernelCode(full, pruned, kern)).toBeNull();
      for (const k of cubinKernels(full)) expect(sameKernelCode(full, pruned, k)).toBeNull();
    });
  }, 120_000);
});

describe.skipIf(!NVCC)("the pruned build of kernels that use CUB, cooperative_groups, a launch and device tables (nvcc)", () => {
  test("it compiles and gives each kernel of the primary file the machine code of the full build", async () => {
    const dir = join(WORK, "cccl");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "h.cuh"),
      [
        "#pragma once",
        "#include <cub/cub.cuh>",
        "#include <cooperative_groups.h>",
        "#include <cooperative_groups/reduce.h>",
        "#include <cuda/std/tuple>",
        "namespace cg = cooperative_groups;",
        "__constant__ float unused_coeffs[64] = {1};",
        "__device__ float unused_scratch[32];",
        "__constant__ float coeffs[4] = {1, 2, 3, 4};",
        "template <int BLOCK> __global__ void block_sum(const float* in, float* out) {",
        "  using BR = cub::BlockReduce<float, BLOCK>;",
        "  __shared__ typename BR::TempStorage tmp;",
        "  float s = BR(tmp).Sum(in[threadIdx.x] * coeffs[threadIdx.x & 3]);",
        "  auto t = cuda::std::make_tuple(s, 1);",
        "  if (threadIdx.x == 0) out[0] = cuda::std::get<0>(t);",
        "}",
        "__global__ void tile_sum(const int* in, int* out) {",
        "  cg::thread_block b = cg::this_thread_block();",
        "  cg::thread_block_tile<32> w = cg::tiled_partition<32>(b);",
        "  int s = cg::reduce(w, in[b.thread_rank()], cg::plus<int>());",
        "  if (w.thread_rank() == 0) atomicAdd(out, s);",
        "}",
        "template <class F> __global__ void map(float* y, F f) { y[threadIdx.x] = f(y[threadIdx.x]); }",
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "k.cu"),
      [
        '#include "h.cuh"',
        "static void* kerncap_odr_use = (void*)&block_sum<256>;",
        "static void* kerncap_odr_use2 = (void*)&tile_sum;",
        "void launch(float* y) { map<<<1, 32>>>(y, [] __device__ (float v) { return 2 * v; }); }",
        "",
      ].join("\n"),
    );
    writeBuildSh(dir, "-O3 -std=c++17 -extended-lambda");
    await withEnv({ NVCC: NVCC! }, async () => {
      const p = Bun.spawnSync(["bash", join(dir, "build.sh")], { cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env, NVCC: NVCC! } });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      const full = new Uint8Array(readFileSync(join(dir, "build", "kernel.cubin")));
      const f = await fastBuild(dir, join(WORK, "cccl-fast"), { force: false });
      const pruned = new Uint8Array(readFileSync(f.module));
      const kernels = cubinKernels(full).filter((k) => !k.includes("cub")); // CUB's own EmptyKernel goes (no root names it)
      expect(kernels).toHaveLength(3);
      for (const k of kernels) expect(sameKernelCode(full, pruned, k)).toBeNull();
      expect(f.prune.lines().after * 2).toBeLessThan(f.prune.lines().before);
    });
  }, 180_000);
});
