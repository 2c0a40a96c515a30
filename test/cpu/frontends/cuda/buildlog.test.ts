/**
 * Build logs as the compile commands of a project without compile_commands.json (issue 14 point
 * 5: a Makefile project): readBuildLog on make's dry-run output (llm.c's compile-and-link line,
 * make -w folders, cd && chains, continuations, several .cu in one command), and with nvcc a tiny
 * Makefile project whose kernel depends on a -D define and on --use_fast_math: located through the
 * log, rendered, rebuilt by build.sh with those flags and not the default set.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cubinKernels } from "../../../../src/codeobj/cubin.ts";
import { pickCubin } from "../../../../src/codeobj/fatbin.ts";
import { NO_NVCC_REASON, NVCC } from "../../../nvcc-fixtures.ts";
import { KerncapError } from "../../../../src/errors.ts";
import { readBuildLog, readCompileCommands } from "../../../../src/frontends/cuda/compile-commands.ts";
import { cudaFlagsFromCommand } from "../../../../src/frontends/cuda/flags.ts";
import { renderCudaReproducer } from "../../../../src/frontends/cuda/repro.ts";
import { locateKernelSource } from "../../../../src/frontends/cuda/locate.ts";

const WORK = mkdtempSync(join(tmpdir(), "kerncap-buildlog-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

describe("build logs as compile commands", () => {
  test("llm.c's make -n output: the compile-and-link line gives the device compile's flags", () => {
    const log = join(WORK, "llmc", "make-n.txt");
    mkdirSync(join(WORK, "llmc"), { recursive: true });
    // what `make -n -B train_gpt2cu NO_MULTI_GPU=1 USE_CUDNN=0` prints (its $(info) lines included)
    writeFileSync(
      log,
      [
        "---------------------------------------------",
        "→ cuDNN is manually disabled by default, run make with `USE_CUDNN=1` to try to enable",
        "✓ nvcc found, including GPU/CUDA support",
        "---------------------------------------------",
        "/usr/local/cuda/bin/nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 --generate-code arch=compute_90,code=[compute_90,sm_90] -DENABLE_BF16 train_gpt2.cu build/cudnn_att.o -lcublas -lcublasLt -lnvidia-ml -L /opt/lib -Xlinker -rpath -Xlinker /opt/lib   -o train_gpt2cu",
        "",
      ].join("\n"),
    );
    const cmds = readCompileCommands(log); // not JSON: read as a build log
    expect(cmds).toHaveLength(1);
    const c = cmds[0]!;
    expect(c.file).toBe(join(WORK, "llmc", "train_gpt2.cu"));
    expect(c.directory).toBe(join(WORK, "llmc"));
    expect(c.from).toBe(log);
    const f = cudaFlagsFromCommand(c.argv, c.directory, c.file);
    expect(f.words.map((w) => w.text)).toEqual(["--threads=0", "-t=0", "--use_fast_math", "-std=c++17", "-O3", "-DENABLE_BF16"]);
    expect(f.originalArch).toEqual(["--generate-code arch=compute_90,code=[compute_90,sm_90]"]);
  });

  test("make -w folders, cd && chains, launchers, continuations, several sources in one command", () => {
    const text = [
      "make: Entering directory '/p/a'",
      "ccache /usr/bin/nvcc -O2 -DA=1 \\",
      "  -Isrc -c k1.cu -o k1.o",
      "make[1]: Entering directory '/p/b'",
      "cd build && env CUDA_X=1 nvcc-12.4 -DB -c ../k2.cu -o k2.o",
      "nvcc -DC x.cu y.cu -o both",
      "g++ -c host.cpp -o host.o",
      "make[1]: Leaving directory '/p/b'",
      "nvcc -DD -c k3.cu",
      "make: Leaving directory '/p/a'",
    ].join("\n");
    const cmds = readBuildLog("/logs/build.log", text);
    expect(cmds.map((c) => [c.file, c.directory])).toEqual([
      ["/p/a/k1.cu", "/p/a"],
      ["/p/b/k2.cu", "/p/b/build"],
      ["/p/b/x.cu", "/p/b"],
      ["/p/b/y.cu", "/p/b"],
      ["/p/a/k3.cu", "/p/a"],
    ]);
    expect(cudaFlagsFromCommand(cmds[0]!.argv, cmds[0]!.directory, cmds[0]!.file).words.map((w) => w.text)).toEqual(["-O2", "-DA=1", "-I/p/a/src"]);
    expect(cmds[1]!.argv).toEqual(["nvcc-12.4", "-DB", "-c", "../k2.cu", "-o", "k2.o"]);
    expect(cmds[2]!.argv).toEqual(["nvcc", "-DC", "x.cu", "-o", "both"]); // the other source is left out
    expect(cmds[3]!.argv).toEqual(["nvcc", "-DC", "y.cu", "-o", "both"]);
  });

  test("a file that is neither JSON nor a log with an nvcc command: E_COMPILE_COMMANDS with the make -n hint", () => {
    const p = join(WORK, "notes.txt");
    writeFileSync(p, "g++ -c main.cpp\nmake: Nothing to be done for 'all'.\n");
    let err: unknown;
    try {
      readCompileCommands(p);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KerncapError);
    expect((err as KerncapError).code).toBe("E_COMPILE_COMMANDS");
    expect((err as KerncapError).hint).toContain("make -n -B");
  });
});

describe.skipIf(!NVCC)("a Makefile project located through make -n (nvcc)", () => {
  if (!NVCC) console.warn(NO_NVCC_REASON);
  test("the kernel in a header, its TU compiled and linked in one nvcc line: the reproducer builds with the Makefile's -D and fast-math flags", async () => {
    const proj = join(WORK, "mkproj");
    mkdirSync(join(proj, "lib"), { recursive: true });
    // SCALE_TYPE comes only from the Makefile: without it the header does not compile
    writeFileSync(
      join(proj, "lib", "ops.cuh"),
      "#pragma once\n__global__ void scale_rows(SCALE_TYPE* y, const SCALE_TYPE* x, float a, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = (SCALE_TYPE)(__expf(a) * (float)x[i] / 3.0f);\n}\n__global__ void other_kernel(float* p) { p[0] = 1.0f; }\n",
    );
    writeFileSync(
      join(proj, "app.cu"),
      '#include <cstdio>\n#include "lib/ops.cuh"\n__global__ void after_kernel(float* p) { p[1] = 2.0f; }\nint main() { printf("ok\\n"); return 0; }\n',
    );
    writeFileSync(
      join(proj, "Makefile"),
      `NVCC ?= ${NVCC}\nFLAGS = -O3 --use_fast_math -std=c++17 -DSCALE_TYPE=float\napp: app.cu\n\t$(NVCC) $(FLAGS) --generate-code arch=compute_90,code=[compute_90,sm_90] $^ -lcublas -o $@\n`,
    );
    const dry = Bun.spawnSync(["make", "-n", "-B", "-w", "app"], { cwd: proj, stdout: "pipe", stderr: "pipe" });
    expect(dry.exitCode, dry.stderr.toString()).toBe(0);
    const log = join(WORK, "mkproj-make-n.txt"); // written elsewhere: the folder comes from make -w
    writeFileSync(log, dry.stdout.toString());
    // the "captured" module: what the Makefile's line compiles (device part only: no link here)
    const fat = join(WORK, "mkproj.fatbin");
    const b = Bun.spawnSync(
      [
        NVCC!,
        "-fatbin",
        "-O3",
        "--use_fast_math",
        "-std=c++17",
        "-DSCALE_TYPE=float",
        "-gencode",
        "arch=compute_90,code=sm_90",
        "-o",
        fat,
        join(proj, "app.cu"),
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    expect(b.exitCode, b.stderr.toString()).toBe(0);
    const module = new Uint8Array(readFileSync(fat));
    const kernel = cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("scale_rows"))!;
    expect(kernel).toBeDefined();
    const loc = await locateKernelSource({
      kernel,
      demangled: "scale_rows(float*, float const*, float, int)",
      module,
      arch: "sm_90",
      sourceRoot: proj,
      compileCommands: log,
    });
    expect(loc.method).toBe("compile-commands");
    expect(loc.tu).toBe(join(proj, "app.cu"));
    expect(loc.definition).toBe(join(proj, "lib", "ops.cuh"));
    expect(loc.compileCommand?.from).toBe(log);
    const out = join(WORK, "mkproj-capture");
    const r = renderCudaReproducer({
      outDir: out,
      kernelName: kernel,
      demangledName: "scale_rows(float*, float const*, float, int)",
      arch: "sm_90",
      location: loc,
      sourceRoot: proj,
    });
    expect(r.flags.from).toBe("compile-commands");
    expect(r.flags.words.map((w) => w.text)).toEqual(["-O3", "--use_fast_math", "-std=c++17", "-DSCALE_TYPE=float"]);
    expect(r.slice.used).toBe(true);
    const script = readFileSync(join(out, "build.sh"), "utf8");
    expect(script).toContain("--use_fast_math");
    expect(script).not.toContain("-lcublas");
    const p = Bun.spawnSync(["bash", join(out, "build.sh")], { cwd: out, stdout: "pipe", stderr: "pipe", env: { ...process.env, NVCC: NVCC! } });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const cubin = p.stdout.toString().trim().split("\n").pop()!;
    // the slice: the TU up to the include of ops.cuh (after_kernel is cut; the header is compiled as it is)
    expect(cubinKernels(new Uint8Array(readFileSync(cubin))).sort()).toEqual(
      [kernel, cubinKernels(pickCubin(module, "sm_90").cubin).find((k) => k.includes("other_kernel"))!].sort(),
    );
  }, 120_000);
});
