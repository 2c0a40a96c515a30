/**
 * A CMake project on a GPU (issue 25): test/apps/cmake_umbrella built with its own CMake (Unix
 * Makefiles: the include folders reach nvcc in a response file; no -lineinfo), sgemm_tiled<128,
 * 128, 8, 8, 8> captured at its first launch with `--compile-commands BUILD_DIR --source-root SRC`.
 * The kernel template lives in src/kernels/tiled_gemm.cuh, reached from src/gemm_128.cu only
 * through src/umbrella.cuh, and two more TUs name the template (gemm_64.cu, the sweep): the
 * reproducer must come from gemm_128.cu (its PTX has the captured entry), with the response
 * file's include folders. Then `validate` MATCH, an edit of the kernel MISMATCH (exit 1), the
 * revert MATCH.
 *
 * The build is scripts/bench-edit-loop-cmake.sh --prepare's, in $KERNCAP_CMAKE_WORK (default
 * $TMPDIR/kerncap-cmake), shared with that benchmark. Only bun:test, node:* and ./harness.ts
 * imports; drives $KERNCAP_BIN. Skips without a GPU, kerncap binary, nvcc or cmake.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { APPS, json, kerncap, manifest, ROOT, run, skipReason, workDir } from "./harness.ts";

const NVCC = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const SKIP = !!skipReason("cmake gpu tests", [
  [!NVCC, "no nvcc"],
  [!Bun.which("cmake") || !Bun.which("python3"), "cmake/python3 missing"],
]);
const SRC = join(APPS, "cmake_umbrella");
const CMAKE_WORK = process.env.KERNCAP_CMAKE_WORK ?? join(tmpdir(), "kerncap-cmake");
const BUILD = join(CMAKE_WORK, "build-cmake_umbrella");
const APP = join(BUILD, "umbrella_app");
const WORK = workDir("kerncap-cmake-gpu-");
const measurements: Record<string, unknown> = {};

afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "cmake-measurements.json"), JSON.stringify(measurements, null, 2));
});

describe.skipIf(SKIP)("a CMake project: kernel template behind an umbrella header, includes in a response file", () => {
  const cap = join(WORK, "cmake-sgemm128");
  const kc = (args: string[]) => kerncap(WORK, args);

  test("builds with its own CMake (Unix Makefiles, sm_90) and runs", () => {
    if (!existsSync(APP)) {
      const p = run(["bash", join(ROOT, "scripts/bench-edit-loop-cmake.sh"), "--prepare"], {
        cwd: ROOT,
        env: { KERNCAP_CMAKE_WORK: CMAKE_WORK },
        timeoutMs: 300_000,
      });
      expect(p.code, p.stderr.slice(-4000)).toBe(0);
    }
    expect(existsSync(APP)).toBe(true);
    measurements.cmakeBuildSeconds = Number(readFileSync(join(CMAKE_WORK, "build-seconds"), "utf8"));
    expect(readFileSync(join(BUILD, "compile_commands.json"), "utf8")).toContain("--options-file");
    const r = run([APP, "2"], { cwd: WORK });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^checksum -?\d+\.\d+/);
  }, 320_000);

  test("captures sgemm_tiled<128,…> with --compile-commands BUILD_DIR: the reproducer from gemm_128.cu; validate MATCH, an edit MISMATCH, the revert MATCH", () => {
    expect(existsSync(APP)).toBe(true);
    const c = kc([
      "run",
      "--kernel",
      "sgemm_tiled<128",
      "--dispatch",
      "0",
      "--compile-commands",
      BUILD,
      "--source-root",
      SRC,
      "--exit-after-capture",
      "--force",
      "--out",
      cap,
      "--json",
      "--",
      APP,
      "2",
    ]);
    expect(c.code, c.stderr.slice(-4000)).toBe(0);
    expect(c.stderr).not.toContain("no reproducer project");
    const m = manifest(cap);
    expect(m.kernel.demangled).toContain("sgemm_tiled<128, 128, 8, 8, 8>");
    const s = m.source.cuda;
    expect(s.error, s.error).toBeUndefined();
    expect(s.method).toBe("compile-commands");
    expect(s.compileCommands).toBe(join(BUILD, "compile_commands.json"));
    expect(s.tu).toBe(join(SRC, "src/gemm_128.cu"));
    expect(s.definition).toBe(join(SRC, "src/kernels/tiled_gemm.cuh"));
    expect(s.tuCertain).toBe(true);
    expect(s.tuReason).toContain("has the captured entry");
    expect(s.responseFiles).toEqual([join(BUILD, "CMakeFiles/umbrella_kernels.dir/includes_CUDA.rsp")]);
    expect(s.flags).toEqual(expect.arrayContaining(["-DUMB_ACC_TYPE=float", "--use_fast_math", `-I${join(SRC, "include")}`]));
    expect(s.slice.used).toBe(true);
    expect(c.stderr).toContain(`edit ${cap}/src/src/kernels/tiled_gemm.cuh`);
    measurements.cmakeCapture = {
      seconds: c.seconds,
      kernel: m.kernel.demangled,
      tuReason: s.tuReason,
      regions: m.regions.length,
      grid: m.launch?.grid,
      block: m.launch?.block,
    };

    const v = kc(["validate", cap, "--json"]);
    expect(v.code, v.stderr.slice(-4000) + v.stdout.slice(-2000)).toBe(0);
    expect(json(v).verdict).toBe("match");
    measurements.cmakeValidate = { rebuildSeconds: json(v).rebuild.seconds, wall: v.seconds, medianUs: json(v).timing?.medianUs };

    // an edit that changes results: C gets 1 added to every element
    const file = join(cap, "src/src/kernels/tiled_gemm.cuh");
    const text = readFileSync(file, "utf8");
    const line = "*c = alpha * (float)acc[m * TN + n] + beta * *c;";
    expect(text).toContain(line);
    writeFileSync(file, text.replace(line, "*c = alpha * (float)acc[m * TN + n] + beta * *c + 1.0f;"));
    let bad: ReturnType<typeof kc>;
    try {
      bad = kc(["validate", cap, "--json"]);
    } finally {
      writeFileSync(file, text);
    }
    expect(bad.code, bad.stderr.slice(-3000)).toBe(1);
    expect(json(bad).verdict).toBe("mismatch");

    const back = kc(["validate", cap, "--json"]);
    expect(back.code, back.stderr.slice(-3000)).toBe(0);
    expect(json(back).verdict).toBe("match");
    measurements.cmakeValidateReverted = { rebuildSeconds: json(back).rebuild.seconds, wall: back.seconds };
  }, 300_000);
});
