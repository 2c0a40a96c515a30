/**
 * A second real CUDA code base with its own build system (issue 14 point 5): llm.c
 * (karpathy/llm.c; tarball $KERNCAP_LLMC_TAR, default .carry/llmc-src.tar.xz, made by
 * scripts/make-llmc-tarball.sh). train_gpt2.cu is one translation unit with its kernels in
 * llmc/*.cuh, built by its Makefile as one nvcc compile-and-link line, and writes no
 * compile_commands.json: the flags that matter (-DENABLE_BF16: floatX is bf16; --use_fast_math)
 * reach kerncap as the Makefile's dry run (`make -n -B train_gpt2cu …` → make-n.txt, read by
 * --compile-commands as a build log, src/frontends/cuda/locate.ts readBuildLog).
 *
 * 1. Built with its Makefile by scripts/bench-edit-loop-llmc.sh --prepare (unpack, random token
 *    shards in llmc/dataloader.h's format, the dry run, `make train_gpt2cu NO_MULTI_GPU=1
 *    USE_CUDNN=0 …`, timed); gpu-test.sh runs it in the background first, else this test does.
 * 2. layernorm_forward_kernel6 (llmc/layernorm.cuh, not a template; uses assert()) captured at
 *    its 2nd launch (the first training step's forward pass of a d6 GPT-2 built from its
 *    descriptor); the reproducer from the dry run's flags, sliced (train_gpt2.cu up to its
 *    #include of layernorm.cuh); validated unchanged (MATCH), after an edit of the kernel's
 *    epsilon (MISMATCH, exit 1), reverted (MATCH).
 * 3. build.sh's slice vs whole-TU rebuild times, into $KERNCAP_GPU_OUT/llmc-measurements.json.
 *
 * Only bun:test, node:* and ./harness.ts imports; drives $KERNCAP_BIN. Skips without a GPU,
 * kerncap binary, nvcc, make, python3 or the tarball. Works in $KERNCAP_LLMC_WORK (default
 * $TMPDIR/kerncap-llmc), shared with the benchmark.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { json, kerncap, manifest, ROOT, run, skipReason, workDir } from "./harness.ts";

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const TAR = [process.env.KERNCAP_LLMC_TAR, join(ROOT, ".carry/llmc-src.tar.xz")].find((p): p is string => !!p && existsSync(p));
const SKIP = !!skipReason("llm.c gpu tests", [
  [!NVCC, "no nvcc"],
  [!TAR, "no llm.c tarball (KERNCAP_LLMC_TAR, or scripts/make-llmc-tarball.sh)"],
  [!Bun.which("make") || !Bun.which("python3"), "make/python3 missing"],
]);
const LLMC_WORK = process.env.KERNCAP_LLMC_WORK ?? join(tmpdir(), "kerncap-llmc");
const SRC = join(LLMC_WORK, "llm.c");
const APP = join(SRC, "train_gpt2cu");
const DATA = join(LLMC_WORK, "data");
const MAKE_N = join(LLMC_WORK, "make-n.txt");
// the same run as scripts/bench-edit-loop-llmc.sh: one step of a d6 GPT-2, B=4, T=64, val at step 0
const APP_ARGS = [
  "-e",
  "d6",
  "-i",
  `${DATA}/train_*.bin`,
  "-j",
  `${DATA}/val_*.bin`,
  "-b",
  "4",
  "-t",
  "64",
  "-x",
  "1",
  "-v",
  "1000",
  "-s",
  "0",
  "-m",
  "1",
  "-h",
  "0",
];
const WORK = workDir("kerncap-llmc-gpu-");
const measurements: Record<string, unknown> = {};

afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "llmc-measurements.json"), JSON.stringify(measurements, null, 2));
});

/** LD_LIBRARY_PATH the prepare step found the program needs (cuBLAS), if any. */
function appEnv(): Record<string, string> {
  const f = join(LLMC_WORK, "ld-library-path");
  const extra = existsSync(f) ? readFileSync(f, "utf8").trim() : "";
  return extra ? { LD_LIBRARY_PATH: [extra, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":") } : {};
}

describe.skipIf(SKIP)("llm.c (real CUDA code base, own Makefile, no compile_commands.json)", () => {
  const cap = join(WORK, "llmc-layernorm");
  const kc = (args: string[]) => kerncap(WORK, args, appEnv());

  test("builds with its own Makefile (train_gpt2cu, NO_MULTI_GPU=1 USE_CUDNN=0, sm_90)", () => {
    let by = "gpu-test.sh's background prepare";
    if (!existsSync(APP) || !existsSync(MAKE_N) || !existsSync(join(LLMC_WORK, "build-seconds"))) {
      by = "this test";
      const p = run(["bash", join(ROOT, "scripts/bench-edit-loop-llmc.sh"), "--prepare"], {
        cwd: ROOT,
        env: { KERNCAP_LLMC_WORK: LLMC_WORK, ...(TAR ? { KERNCAP_LLMC_TAR: TAR } : {}) },
        timeoutMs: 400_000,
      });
      expect(p.code, p.stderr.slice(-4000)).toBe(0);
    }
    expect(
      existsSync(APP),
      `no ${APP}: ${existsSync(join(LLMC_WORK, "build.log")) ? readFileSync(join(LLMC_WORK, "build.log"), "utf8").slice(-3000) : "no build.log"}`,
    ).toBe(true);
    measurements.llmcMakeSeconds = Number(readFileSync(join(LLMC_WORK, "build-seconds"), "utf8"));
    measurements.llmcBuiltBy = by;
    // the dry run is the Makefile's one compile-and-link line
    const dry = readFileSync(MAKE_N, "utf8");
    expect(dry).toContain("train_gpt2.cu");
    expect(dry).toContain("-DENABLE_BF16");
    expect(dry).toContain("--use_fast_math");
  }, 420_000);

  test("captures layernorm_forward_kernel6 with the Makefile's flags (make -n), validates MATCH, an edit MISMATCH, the revert MATCH", () => {
    expect(existsSync(APP)).toBe(true);
    const c = kc([
      "run",
      "--kernel",
      "layernorm_forward_kernel6",
      "--dispatch",
      "1",
      "--compile-commands",
      MAKE_N,
      "--source-root",
      SRC,
      "--exit-after-capture",
      "--force",
      "--out",
      cap,
      "--json",
      "--",
      APP,
      ...APP_ARGS,
    ]);
    expect(c.code, c.stderr.slice(-4000)).toBe(0);
    const m = manifest(cap);
    expect(m.kernel.demangled).toContain("layernorm_forward_kernel6(");
    const s = m.source.cuda;
    expect(s.error, s.error).toBeUndefined();
    expect(s.method).toBe("compile-commands");
    expect(s.flagsFrom).toBe("compile-commands");
    expect(s.compileCommands).toBe(MAKE_N);
    expect(s.tu).toBe(join(SRC, "train_gpt2.cu"));
    expect(s.definition).toBe(join(SRC, "llmc/layernorm.cuh"));
    expect(s.flags).toEqual(expect.arrayContaining(["-DENABLE_BF16", "--use_fast_math", "-O3", "-std=c++17"]));
    expect(s.flags.some((f: string) => f.startsWith("-l"))).toBe(false); // the link words of the line are left out
    expect(s.slice.used).toBe(true);
    expect(s.slice.meta.kind).toBe("prefix");
    expect(c.stderr).toContain(`edit ${cap}/src/llmc/layernorm.cuh`);
    measurements.llmcCapture = {
      seconds: c.seconds,
      kernel: m.kernel.demangled,
      regions: m.regions.length,
      beforeBytes: m.memory.beforeBytes,
      grid: m.launch?.grid,
      block: m.launch?.block,
    };

    const v = kc(["validate", cap, "--json"]);
    expect(v.code, v.stderr.slice(-4000) + v.stdout.slice(-2000)).toBe(0); // assert() in the kernel: __assertfail is the driver's, no E_RDC
    const r = json(v);
    expect(r.verdict).toBe("match");
    measurements.llmcValidate = {
      rebuildSeconds: r.rebuild.seconds,
      replaySeconds: r.replaySeconds,
      medianUs: r.timing?.medianUs,
      wall: v.seconds,
      numerics: r.numerics?.verdict,
    };

    // build.sh alone: the slice, then the whole TU (the slice moved away: build.sh says so and compiles train_gpt2.cu)
    const slice = join(cap, "src", s.slice.meta.slice);
    const b1 = run(["bash", join(cap, "build.sh")], { cwd: cap, timeoutMs: 300_000 });
    expect(b1.code, b1.stderr.slice(-3000)).toBe(0);
    renameSync(slice, `${slice}.away`);
    let b2: ReturnType<typeof run>;
    try {
      b2 = run(["bash", join(cap, "build.sh")], { cwd: cap, timeoutMs: 300_000 });
    } finally {
      renameSync(`${slice}.away`, slice);
    }
    expect(b2.code, b2.stderr.slice(-3000)).toBe(0);
    expect(b2.stderr).toContain(`no usable slice (src/${s.slice.meta.slice}): compiling the whole TU src/train_gpt2.cu`);
    measurements.llmcRebuild = { sliceSeconds: b1.seconds, wholeTuSeconds: b2.seconds, ratio: b2.seconds / b1.seconds };
    console.log(
      `[llmc] make ${measurements.llmcMakeSeconds} s; reproducer rebuild: slice ${b1.seconds.toFixed(2)} s, whole TU ${b2.seconds.toFixed(2)} s; validate ${v.seconds.toFixed(2)} s`,
    );

    // an edit that changes results: layernorm's epsilon in kernel6 (1e-5 → 1e-2): rstd and out differ
    const file = join(cap, "src/llmc/layernorm.cuh");
    const text = readFileSync(file, "utf8");
    const at = text.indexOf("__global__ void layernorm_forward_kernel6(");
    const next = text.indexOf("__global__", at + 10);
    const eps = text.indexOf("const float eps = 1e-5f;", at);
    expect(at).toBeGreaterThan(0);
    expect(eps > at && eps < next).toBe(true);
    writeFileSync(file, text.slice(0, eps) + "const float eps = 1e-2f;" + text.slice(eps + "const float eps = 1e-5f;".length));
    let bad: ReturnType<typeof kc>;
    try {
      bad = kc(["validate", cap, "--json"]);
    } finally {
      writeFileSync(file, text);
    }
    expect(bad.code, bad.stderr.slice(-3000)).toBe(1);
    expect(json(bad).verdict).toBe("mismatch");
    measurements.llmcValidateEdited = { verdict: json(bad).verdict, rebuildSeconds: json(bad).rebuild.seconds, mismatches: json(bad).mismatches?.length };

    const back = kc(["validate", cap, "--json"]);
    expect(back.code, back.stderr.slice(-3000)).toBe(0);
    expect(json(back).verdict).toBe("match");
  }, 400_000);
});
