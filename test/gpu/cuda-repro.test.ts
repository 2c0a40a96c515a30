/**
 * CUDA C++ reproducers end to end on a GPU: capture → reproducer project → `kerncap validate`
 * (rebuild + replay + compare), then edits.
 *
 * 1. test/apps/structs.cu built without line info, found by --source-root.
 * 2. test/apps/cuda_tmpl (a header-defined kernel template, compile_commands.json): slice mode;
 *    an edit that changes the parameter layout is refused before anything launches.
 * 3. ggml (ggml-org/ggml, 186 .cu files, trimmed tarball $KERNCAP_GGML_TAR, default
 *    .carry/ggml-src.tar.xz; $KERNCAP_LLAMA_TAR is read too): built with its own CMake/Ninja
 *    (sm_90 only), one mul_mat_q<q4_0,…> launch of `test-backend-ops -o MUL_MAT` captured,
 *    reproducer from compile_commands.json, validated bit-exact, then a codegen edit, a block
 *    constant (occupancy) and a tile constant (K_vram) edit in ggml's config table, and a tile edit
 *    that ggml's static_asserts reject (exit 2).
 *
 * Only bun:test, node:* and ./harness.ts imports; drives $KERNCAP_BIN. Skips without a GPU, kerncap binary,
 * nvcc, or (part 3) cmake/ninja/the tarball. The ggml build is kept in $KERNCAP_GGML_WORK
 * (default $TMPDIR/kerncap-ggml) so that a later call on a warm machine rebuilds incrementally;
 * scripts/bench-edit-loop.sh uses the same folder.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { APPS, BIN, json, kerncap, manifest, ROOT, run as runIn, skipReason, workDir } from "./harness.ts";

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const SKIP = !!skipReason("cuda-repro gpu tests", [[!NVCC, "no nvcc"]]);
const TAR = [process.env.KERNCAP_GGML_TAR, process.env.KERNCAP_LLAMA_TAR, join(ROOT, ".carry/ggml-src.tar.xz")].find((p): p is string => !!p && existsSync(p));
const GGML_WORK = process.env.KERNCAP_GGML_WORK ?? join(tmpdir(), "kerncap-ggml");
const SKIP_GGML = SKIP || !TAR || !Bun.which("cmake") || !Bun.which("ninja");
if (!SKIP && SKIP_GGML) console.warn(`[cuda-repro gpu tests] ggml part skipped: ${!TAR ? "no ggml tarball (KERNCAP_GGML_TAR)" : "cmake/ninja missing"}`);

const WORK = workDir("kerncap-cuda-repro-gpu-");
const measurements: Record<string, unknown> = {};

const run = (argv: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}) =>
  runIn(argv, { cwd: opts.cwd ?? WORK, env: opts.env, timeoutMs: opts.timeoutMs });
const kc = (args: string[], env: Record<string, string> = {}) => kerncap(WORK, args, env);
function edit(file: string, from: string | RegExp, to: string): void {
  const text = readFileSync(file, "utf8");
  const next = text.replace(from, to);
  if (next === text) throw new Error(`edit of ${file}: ${String(from)} not found`);
  writeFileSync(file, next);
}

afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "cuda-repro-measurements.json"), JSON.stringify(measurements, null, 2));
});

describe.skipIf(SKIP)("CUDA reproducer on small apps", () => {
  test("structs.cu without line info: --source-root finds it; validate matches; edits are judged", () => {
    const bin = join(WORK, "structs");
    const b = run([NVCC!, "-O2", "-arch=sm_90", "-o", bin, join(APPS, "structs.cu")]);
    expect(b.code, b.stderr).toBe(0);
    const out = join(WORK, "structs-axpy");
    const cap = kc(["run", "--kernel", "axpy_inplace", "--dispatch", "1", "--source-root", APPS, "--out", out, "--json", "--", bin, "3"]);
    expect(cap.code, cap.stderr).toBe(0);
    const m = manifest(out);
    expect(m.source.cuda.method).toBe("source-root");
    expect(m.source.cuda.tu).toBe(join(APPS, "structs.cu"));
    expect(m.source.cuda.flagsFrom).toBe("default");
    expect(existsSync(join(out, "build.sh"))).toBe(true);

    const v = kc(["validate", out, "--json"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    const r = json(v);
    expect(r.verdict).toBe("match");
    measurements.structsValidate = { rebuildSeconds: r.rebuild.seconds, replaySeconds: r.replaySeconds, wall: v.seconds };

    // codegen-only edit: still bit-exact
    edit(join(out, "src/structs.cu"), "#pragma unroll\n  for (int u = 0; u < UNROLL; u++)", "#pragma unroll 1\n  for (int u = 0; u < UNROLL; u++)");
    expect(kc(["validate", out]).code).toBe(0);
    // a wrong result: mismatch, exit 1
    edit(join(out, "src/structs.cu"), "y[i + u] = a * x[i + u] + y[i + u];", "y[i + u] = a * x[i + u] + y[i + u] + 1.0f;");
    const bad = kc(["validate", out, "--json"]);
    expect(bad.code).toBe(1);
    expect(json(bad).verdict).toBe("mismatch");
    // a compile error: exit 2 with the compiler's message
    edit(join(out, "src/structs.cu"), "+ 1.0f;", "+ not_declared;");
    const ce = kc(["validate", out]);
    expect(ce.code).toBe(2);
    expect(ce.stderr + ce.stdout).toContain("not_declared");
  }, 120_000);

  test("multi_kernels: a non-template kernel using assert() and printf() is sliced, rebuilt and validated; messages name the final folder", () => {
    const bin = join(WORK, "multi");
    const b = run([NVCC!, "-O2", "-lineinfo", "-arch=sm_90", "-o", bin, join(APPS, "multi_kernels/main.cu")]);
    expect(b.code, b.stderr).toBe(0);
    const out = join(WORK, "multi-checked");
    const cap = kc(["run", "--kernel", "checked_copy", "--out", out, "--", bin]);
    expect(cap.code, cap.stderr).toBe(0);
    expect(cap.stderr).toContain(`edit ${out}/src/main.cu`);
    expect(cap.stderr).not.toContain(".tmp-");
    const m = manifest(out);
    expect(m.source.cuda.slice.used).toBe(true);
    expect(m.source.cuda.slice.meta.kind).toBe("prefix");
    const v = kc(["validate", out, "--json"]);
    expect(v.code, v.stderr + v.stdout).toBe(0); // __assertfail and vprintf are the driver's: no E_RDC
    expect(json(v).verdict).toBe("match");
    measurements.multiKernelsValidate = { rebuildSeconds: json(v).rebuild.seconds };
    // an edit of the TU: validate remakes the slice; a changed result is a mismatch
    edit(join(out, "src/main.cu"), "if (i < n) y[i] = x[i];", "if (i < n) y[i] = x[i] + 1.0f;");
    const bad = kc(["validate", out, "--json"]);
    expect(bad.code, bad.stderr).toBe(1);
    expect(bad.stderr).not.toMatch(/compil(ing|ed) the whole TU/);
  }, 120_000);

  test("header template with compile_commands.json: slice; a parameter-layout edit is refused before launch", () => {
    const proj = join(WORK, "tmplproj");
    run(["cp", "-r", join(APPS, "cuda_tmpl"), proj]);
    const bdir = join(proj, "build");
    mkdirSync(bdir, { recursive: true });
    const argv = [NVCC!, "-DKC_SCALE=0.5f", `-I${proj}/include`, "-O3", "-std=c++17", "-arch=sm_90", "-o", join(bdir, "app"), join(proj, "main.cu")];
    const b = run(argv, { cwd: bdir });
    expect(b.code, b.stderr).toBe(0);
    writeFileSync(
      join(bdir, "compile_commands.json"),
      JSON.stringify([{ directory: bdir, arguments: argv.slice(0, -3).concat(["-c", join(proj, "main.cu"), "-o", "main.o"]), file: join(proj, "main.cu") }]),
    );
    const out = join(WORK, "tmpl-cap");
    const cap = kc([
      "run",
      "--kernel",
      "tiled_apply<float, 256",
      "--dispatch",
      "1",
      "--compile-commands",
      join(bdir, "compile_commands.json"),
      "--source-root",
      proj,
      "--out",
      out,
      "--",
      join(bdir, "app"),
      "3",
    ]);
    expect(cap.code, cap.stderr).toBe(0);
    const m = manifest(out);
    expect(m.source.cuda.method).toBe("compile-commands");
    expect(m.source.cuda.slice.used).toBe(true);
    const v = kc(["validate", out, "--json"]);
    expect(v.code, v.stderr + v.stdout).toBe(0);
    expect(json(v).verdict).toBe("match");

    edit(join(out, "src/kernels/tiled.cuh"), "  T a;\n};", "  T a;\n  T b;\n};");
    const lay = kc(["validate", out]);
    expect(lay.code).toBe(2);
    expect(lay.stderr + lay.stdout).toContain("parameter layout");
  }, 120_000);
});

describe.skipIf(SKIP_GGML)("ggml (real CUDA code base, own CMake build)", () => {
  const src = join(GGML_WORK, "ggml");
  const build = join(GGML_WORK, "build");
  const app = join(build, "bin/test-backend-ops");
  const cap = join(WORK, "ggml-mmq");
  const appArgs = [app, "-o", "MUL_MAT", "-b", "CUDA0", "-p", "type_a=q4_0,type_b=f32,m=16,n=16,"];
  const kernelRe = "mul_mat_q<\\(ggml_type\\)2,";

  test("builds with its own CMake/Ninja (sm_90 only)", () => {
    mkdirSync(GGML_WORK, { recursive: true });
    if (!existsSync(join(src, "CMakeLists.txt"))) expect(run(["tar", "-xJf", TAR!, "-C", GGML_WORK]).code).toBe(0);
    if (!existsSync(join(build, "build.ninja"))) {
      const c = run([
        "cmake",
        "-S",
        src,
        "-B",
        build,
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DGGML_CUDA=ON",
        "-DCMAKE_CUDA_ARCHITECTURES=90",
        "-DGGML_CUDA_FA=OFF",
        "-DGGML_CUDA_GRAPHS=ON",
        "-DGGML_NATIVE=OFF",
        "-DGGML_BUILD_TESTS=ON",
        "-DGGML_BUILD_EXAMPLES=OFF",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        `-DCMAKE_CUDA_COMPILER=${NVCC}`,
      ]);
      expect(c.code, c.stdout.slice(-3000) + c.stderr.slice(-3000)).toBe(0);
    }
    const b = run(["cmake", "--build", build, "-j16", "--target", "test-backend-ops"], { timeoutMs: 600_000 });
    measurements.ggmlBuildSeconds = b.seconds;
    expect(b.code, b.stdout.slice(-4000) + b.stderr.slice(-2000)).toBe(0);
    expect(existsSync(app)).toBe(true);
  }, 450_000);

  test("captures mul_mat_q<q4_0,…>, rebuilds the slice from compile_commands.json, validates bit-exact, then after edits", () => {
    expect(existsSync(app)).toBe(true);
    const c = kc(
      [
        "run",
        "--kernel",
        kernelRe,
        "--dispatch",
        "0",
        "--compile-commands",
        join(build, "compile_commands.json"),
        "--source-root",
        src,
        "--exit-after-capture",
        "--force",
        "--out",
        cap,
        "--json",
        "--",
        ...appArgs,
      ],
      { GGML_CUDA_DISABLE_GRAPHS: "1" },
    );
    expect(c.code, c.stderr.slice(-4000)).toBe(0);
    const m = manifest(cap);
    expect(m.kernel.demangled).toContain("mul_mat_q<(ggml_type)2,");
    expect(m.source.cuda.method).toBe("compile-commands");
    expect(m.source.cuda.flagsFrom).toBe("compile-commands");
    expect(m.source.cuda.definition).toBe(join(src, "src/ggml-cuda/mmq.cuh"));
    expect(m.source.cuda.slice.used).toBe(true);
    measurements.ggmlCapture = { kernel: m.kernel.demangled, seconds: c.seconds, regions: m.regions.length, beforeBytes: m.memory.beforeBytes };

    const v = kc(["validate", cap, "--json"]);
    expect(v.code, v.stderr.slice(-4000) + v.stdout).toBe(0);
    const r = json(v);
    expect(r.verdict).toBe("match");
    measurements.ggmlValidate = { rebuildSeconds: r.rebuild.seconds, replaySeconds: r.replaySeconds, medianUs: r.timing?.medianUs, wall: v.seconds };

    // the definition lives in the copy of the tree under src/
    const mmq = join(cap, "src/src/ggml-cuda/mmq.cuh");
    expect(existsSync(mmq)).toBe(true);
    // codegen-only edit (no unrolling of the kernel's tile loops): same arithmetic order, bit-exact
    const text = readFileSync(mmq, "utf8");
    writeFileSync(mmq, text.replaceAll("#pragma unroll\n", "#pragma unroll 1\n"));
    const v1 = kc(["validate", cap, "--json"]);
    expect(v1.code, v1.stderr.slice(-4000)).toBe(0);
    measurements.ggmlValidateUnroll1 = { rebuildSeconds: json(v1).rebuild.seconds, medianUs: json(v1).timing?.medianUs };

    writeFileSync(mmq, text);

    // Tile and block constants of the captured configuration (Q4_0, J=16, fallback) in ggml's
    // config table (mmq-config-ampere.cuh, used for sm_90): CASE(type, nthreads, occupancy, I, J,
    // sram_layout, K_vram, stream_k, fallback). nthreads and I shape the launch, which the host
    // computed and the capture fixed; occupancy (__launch_bounds__ blocks per SM) and K_vram (the
    // VRAM tile length along K) are the kernel's own.
    const cfg = join(cap, "src/src/ggml-cuda/mmq-config-ampere.cuh");
    const cfgText = readFileSync(cfg, "utf8");
    const line = "CASE(GGML_TYPE_Q4_0, 256, 1, 128,  16, GGML_CUDA_MMQ_SRAM_LAYOUT_Q8_0, MMQ_ITER_K, true, true);";
    expect(cfgText).toContain(line);
    try {
      // occupancy 1 → 2: register budget for 2 blocks of 256 threads per SM; same arithmetic, bit-exact
      writeFileSync(cfg, cfgText.replace(line, line.replace("256, 1, 128", "256, 2, 128")));
      const v2 = kc(["validate", cap, "--json"]);
      expect(v2.code, v2.stderr.slice(-4000)).toBe(0);
      expect(json(v2).numerics.verdict).toBe("bit-exact");
      measurements.ggmlValidateOccupancy2 = {
        rebuildSeconds: json(v2).rebuild.seconds,
        medianUs: json(v2).timing?.medianUs,
        verdict: json(v2).numerics.verdict,
      };
      // K_vram 256 → 512: twice the K depth per main-loop step. This case has k = 256, one step
      // either way, so the result is bit-exact (seen on the H200 node)
      writeFileSync(cfg, cfgText.replace(line, line.replace("MMQ_ITER_K", "512")));
      const v3 = kc(["validate", cap, "--json"]);
      expect(v3.code, v3.stderr.slice(-4000)).toBe(0);
      expect(json(v3).numerics.verdict).toBe("bit-exact");
      measurements.ggmlValidateKvram512 = {
        exit: v3.code,
        rebuildSeconds: json(v3).rebuild.seconds,
        medianUs: json(v3).timing?.medianUs,
        verdict: json(v3).numerics.verdict,
      };
    } finally {
      writeFileSync(cfg, cfgText);
    }

    // a tile constant that ggml's own static_asserts reject (MMQ_ITER_K 256 → 128: "bad K_vram"):
    // validate stops at the build with the compiler's message and exit 2, before anything launches
    writeFileSync(mmq, text.replace(/#define MMQ_ITER_K\s+256/, "#define MMQ_ITER_K             128"));
    let v4: ReturnType<typeof kc>;
    try {
      v4 = kc(["validate", cap, "--json"]);
    } finally {
      writeFileSync(mmq, text);
    }
    measurements.ggmlValidateIterK128 = { exit: v4.code, message: v4.stderr.slice(-600) };
    expect(v4.code).toBe(2);
    expect(v4.stderr).toContain("does not build");
    expect(v4.stderr).toContain("static assertion failed");
  }, 300_000);

  // ggml's CUDA backend with its default CUDA graphs (GGML_CUDA_GRAPHS on): in perf mode
  // test-backend-ops computes the same ggml graph for at least 1 s; after two direct (eager)
  // evaluations ggml stream-captures it into a CUDA graph and from then on only launches that graph
  // (ggml-cuda.cu, ggml_backend_cuda_graph_compute: warm-up, then cudaGraphLaunch). Each graph holds
  // quantize_mmq_q8_1 → mul_mat_q node pairs, so the captured node has a kernel ancestor.
  test("a mul_mat_q execution launched from ggml's own CUDA graph: counted as a graph execution, captured, replayed bit-exact", () => {
    expect(existsSync(app)).toBe(true);
    const perfArgs = [app, "perf", "-o", "MUL_MAT", "-b", "CUDA0", "-p", "type_a=q4_0,type_b=f32,m=4096,n=512,k=14336,"];
    const l = kc(["list", "--json", "--", ...perfArgs]);
    expect(l.code, l.stderr.slice(-3000)).toBe(0);
    const k = json(l).kernels.find((x: any) => /mul_mat_q<\(ggml_type\)2,/.test(x.demangled));
    expect(k, JSON.stringify(json(l).kernels.map((x: any) => [x.demangled?.slice(0, 60), x.count, x.graph]))).toBeDefined();
    expect(k.graph).toBeGreaterThan(0);
    const eager = k.count - k.graph;
    const out = join(WORK, "ggml-graph-mmq");
    const c = kc(["run", "--kernel", kernelRe, "--dispatch", String(eager + 1), "--exit-after-capture", "--force", "--out", out, "--json", "--", ...perfArgs]);
    expect(c.code, c.stderr.slice(-4000)).toBe(0);
    const m = manifest(out);
    expect(m.graph).toBeDefined();
    expect(m.kernel.demangled).toContain("mul_mat_q<(ggml_type)2,");
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr.slice(-3000)).toBe(0);
    expect(json(rep).verdict).toBe("match");
    measurements.ggmlGraph = {
      listedExecutions: k.count,
      fromGraphs: k.graph,
      dispatch: eager + 1,
      graph: m.graph,
      captureSeconds: c.seconds,
      replayMedianUs: json(rep).timing?.medianUs,
    };
  }, 200_000);
});
