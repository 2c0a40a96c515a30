/**
 * `kerncap eval --build-only` building its candidates from the pruned TU (src/eval/pruned.ts:
 * the CUDA fast build, confined as build.sh's build is: src/frontends/confined-steps.ts), on the
 * demo capture with a heavy header in its TU (cub), so that the pruned build is the cheaper; a
 * real nvcc, no GPU.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { EvalRecord } from "../../src/format/eval-record.ts";
import { sameKernelCode, statements } from "../../src/frontends/cuda/fast-build.ts";
import { prunedUnfit } from "../../src/eval/pruned.ts";
import { tempDir } from "./fixtures.ts";

const NVCC = ["/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const KERNEL = "_Z5saxpyPK5Saxpy";

/** The demo capture with cub's headers included by its TU (gcc -E and cicc then read ~2 MB the kernel never uses). */
function heavyDemo(): { root: string; dir: string; env: Record<string, string | undefined> } {
  const root = tempDir();
  const env = { ...process.env, XDG_STATE_HOME: join(root, "state"), KERNCAP_LIBCUDA: "" };
  const p = Bun.spawnSync([process.execPath, MAIN, "demo", join(root, "cap")], { cwd: root, env, stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  const dir = join(root, "cap");
  const src = join(dir, "src/saxpy.cu");
  writeFileSync(src, readFileSync(src, "utf8").replace("#include", "#include <cub/cub.cuh>\n#include"));
  return { root, dir, env };
}

/** A candidate folder `name` holding the TU with `edit` applied to the kernel's line. */
function candidate(root: string, dir: string, name: string, edit: (line: string) => string): string {
  const d = join(root, "cands", name);
  mkdirSync(d, { recursive: true });
  const text = readFileSync(join(dir, "src/saxpy.cu"), "utf8");
  expect(text).toContain("p->a * p->x.data[i]");
  writeFileSync(join(d, "saxpy.cu"), text.replace("p->a * p->x.data[i]", edit("p->a * p->x.data[i]")));
  return join(d, "saxpy.cu");
}

const records = (out: string) =>
  out
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l))
    .filter((d) => d.schema === "kerncap.eval-record/1");

describe.skipIf(!NVCC)("eval builds candidates from the pruned TU", () => {
  test("checked once against build.sh, then each candidate's device code from the pruned TU (builder pruned, build.sh's machine code); a compile error is build.sh's message, an #include outside still refused; --full-build uses build.sh", () => {
    const { root, dir, env } = heavyDemo();
    const twice = candidate(root, dir, "twice", (l) => `${l} * 2.0f`);
    const broken = candidate(root, dir, "broken", (l) => `${l} +* 2`);
    const outside = join(root, "cands", "outside", "saxpy.cu");
    mkdirSync(join(outside, ".."), { recursive: true });
    writeFileSync(outside, `#include "/etc/passwd"\n${readFileSync(twice, "utf8")}`);

    const r = Bun.spawnSync([process.execPath, MAIN, "eval", dir, twice, broken, outside, "--build-only", "--json", "--verbose", "--jobs", "1", "--pruned"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
      timeout: 240_000,
    });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(2); // a candidate refused by the confinement is an error: exit 2
    expect(err).toMatch(
      /eval builds the candidates from the pruned TU \(device code only; its machine code for the kernel is build\.sh's: [\d.]+ s against [\d.]+ s\)/,
    );
    const recs = records(r.stdout.toString());
    for (const x of recs) expect(v.safeParse(EvalRecord, x).success).toBe(true);
    const by = (label: string) => recs.find((x) => x.label === label)!;

    const t = by("twice/saxpy.cu");
    expect(t).toMatchObject({ verdict: "built", build: { builder: "pruned", module: "build/pruned/kernel.cubin" } });
    expect(t.build.registers).toBeGreaterThan(0);
    const prunedModule = readFileSync(join(t.copy, t.build.module)); // the next eval's copy of this candidate takes the same folder
    // a compile error: the pruned build's failure left to build.sh, whose confined message is the capture's own diagnostic
    const b = by("broken/saxpy.cu");
    expect(b).toMatchObject({ verdict: "compile-error", code: "E_BUILD" });
    expect(b.reason).toContain("src/saxpy.cu:");
    expect(b.reason).toContain("operand of");
    // an #include of a file outside: refused before anything runs, as a build.sh build is (no word of the file)
    const o = by("outside/saxpy.cu");
    expect(o).toMatchObject({ verdict: "error", code: "E_CONFINED" });
    expect(o.reason).not.toContain("root:");

    // the same candidate by build.sh (the default: no --pruned): the kernel's machine code is the pruned build's
    const f = Bun.spawnSync([process.execPath, MAIN, "eval", dir, twice, "--build-only", "--json", "--gpus", "0", "--timeout=30"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(f.exitCode, f.stderr.toString()).toBe(0);
    // the GPU workers' options do nothing with --build-only: said, and in the document's warnings (a new user's finding)
    const unused = "--gpus, --timeout: the GPU workers' options do nothing with --build-only, which starts none";
    expect(f.stderr.toString()).toContain(unused);
    expect(JSON.parse(f.stdout.toString().trim().split("\n").at(-1)!).warnings).toContain(unused);
    const ft = records(f.stdout.toString())[0];
    expect(ft).toMatchObject({ verdict: "built", build: { builder: "build.sh", module: "build/kernel.cubin", registers: t.build.registers } });
    expect(f.stderr.toString()).not.toContain("pruned TU");
    // too few candidates to repay a check of its own (under two rounds of --jobs builds, no record of validate's): build.sh alone
    const few = Bun.spawnSync([process.execPath, MAIN, "eval", dir, twice, "--build-only", "--json", "--verbose", "--jobs", "2", "--pruned"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(few.exitCode, few.stderr.toString()).toBe(0);
    expect(few.stderr.toString()).toContain("eval builds with build.sh: 1 candidate on 2 build jobs do not repay a check of the pruned build");
    expect(records(few.stdout.toString())[0].build.builder).toBe("build.sh");
    expect(sameKernelCode(readFileSync(join(ft.copy, ft.build.module)), prunedModule, KERNEL)).toBeNull();
    // one kernel, one kernel digest, whichever build made the module (their bytes differ: cub's internal symbols are named after the TU's path)
    expect(ft.build.kernelSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(ft.build.kernelSha256).toBe(t.build.kernelSha256);
  }, 300_000);

  test("validate's check record of a prefix slice says nothing of the candidates' builds (they compile the whole TU: adversary 44): eval checks its own, then builds them pruned", () => {
    const { root, dir, env } = heavyDemo();
    const v1 = Bun.spawnSync([process.execPath, MAIN, "validate", dir, "--build-only", "--json"], { env, stdout: "pipe", stderr: "pipe" });
    expect(v1.exitCode, v1.stderr.toString()).toBe(0);
    const checkFile = join(dir, "build/pruned/check.json");
    const rec = JSON.parse(readFileSync(checkFile, "utf8"));
    expect(rec.same).toBe(true);
    // the cost the record says would decide; make it say the pruned build is the cheaper (the machine's load varies)
    writeFileSync(checkFile, JSON.stringify({ ...rec, costs: { cpus: rec.costs.cpus, buildSh: 9, pruned: 1 } }));
    const twice = candidate(root, dir, "twice", (l) => `${l} * 2.0f`);
    const thrice = candidate(root, dir, "thrice", (l) => `${l} * 3.0f`);
    const r = Bun.spawnSync([process.execPath, MAIN, "eval", dir, twice, thrice, "--build-only", "--json", "--verbose", "--jobs", "1", "--pruned"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
      timeout: 240_000,
    });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    expect(r.stderr.toString()).not.toContain("as validate's check of");
    expect(r.stderr.toString()).toContain("its machine code for the kernel is build.sh's"); // its own check, of the whole TU
    expect(r.stderr.toString()).toContain("compiles the whole TU");
    expect(records(r.stdout.toString()).map((x) => x.build.builder)).toEqual(["pruned", "pruned"]);
  }, 300_000);
});

// adversary 37: what the pruned TU takes out (host-only bodies, what line markers place in system headers) could change a
// candidate's meaning or hide its error; such candidates are built by build.sh
describe("which candidates the pruned TU does not build", () => {
  const pair = (capture: Record<string, string>, cand: Record<string, string>) => {
    const root = tempDir();
    for (const [side, files] of [
      ["cap", capture],
      ["cand", cand],
    ] as const)
      for (const [rel, text] of Object.entries(files)) {
        mkdirSync(join(root, side, "src", rel, ".."), { recursive: true });
        writeFileSync(join(root, side, "src", rel), text);
      }
    return { cap: join(root, "cap"), cand: join(root, "cand") };
  };
  const k = "__global__ void k(float* y) { y[0] = 1; }\n";

  test("a GNU line marker or #line directive in a source (not in the slice kerncap generates) sends the candidate to build.sh", () => {
    for (const line of ['# 1 "/usr/include/stdio.h" 1 3', '#line 1 "x.h"', "  #  12", "#line 7"]) {
      const { cap, cand } = pair({ "k.cu": k }, { "k.cu": `${line}\n${k}` });
      expect(prunedUnfit(cap, cand, [])).toBe("src/k.cu holds a #line directive or a line marker");
    }
    // kerncap's own slice carries #line directives back to its TU: not read (its TU is)
    const { cap, cand } = pair(
      { "k.cu": k, "k.kerncap-slice.cu": `#line 1 "src/k.cu"\n${k}` },
      { "k.cu": `${k}// edit\n`, "k.kerncap-slice.cu": `#line 1 "src/k.cu"\n${k}` },
    );
    expect(prunedUnfit(cap, cand, ["k.kerncap-slice.cu"])).toBeUndefined();
    // an #include or #define is no marker
    const plain = pair({ "k.cu": k }, { "k.cu": `#include "h.h"\n#define N 3\n${k}`, "h.h": "#pragma once\n" });
    expect(prunedUnfit(plain.cap, plain.cand, [])).toBeUndefined();
  });

  test("a friend the capture's source does not declare (an edited or added file) sends the candidate to build.sh; the capture's own friends do not", () => {
    const added = pair(
      { "k.cu": `struct A { friend int f(A); };\n${k}` },
      { "k.cu": `struct A { friend int f(A); };\ntemplate <int> struct W { friend constexpr int g(); };\n${k}` },
    );
    expect(prunedUnfit(added.cap, added.cand, [])).toBe("src/k.cu declares a friend its capture's source does not");
    const kept = pair({ "k.cu": `struct A { friend int f(A); };\n${k}` }, { "k.cu": `struct A { friend int f(A); };\n${k.replace("1", "2")}` });
    expect(prunedUnfit(kept.cap, kept.cand, [])).toBeUndefined();
    const newFile = pair({ "k.cu": k }, { "k.cu": k, "n.h": "struct B { friend void h(B); };\n" });
    expect(prunedUnfit(newFile.cap, newFile.cand, [])).toBe("src/n.h declares a friend its capture's source does not");
  });

  test("the statement count that bounds the pruner's memory stops at its cap", () => {
    expect(statements("int a; { b; }", 100)).toBe(4);
    expect(statements(";".repeat(5000), 10)).toBe(11);
  });
});

test("a confined fast build's steps share one time limit (KERNCAP_BUILD_TIMEOUT), as build.sh's one run does: a step that runs past what is left is FastBuildTimedOut", async () => {
  const { confinedStepsFor, FastBuildTimedOut } = await import("../../src/frontends/confined-steps.ts");
  const dir = tempDir();
  const saved = process.env.KERNCAP_BUILD_TIMEOUT;
  process.env.KERNCAP_BUILD_TIMEOUT = "2";
  try {
    // a Triton manifest: confined by the scan alone (no sandbox needed for `sleep`)
    const steps = confinedStepsFor(dir, { kernel: { frontend: "triton", name: "k" }, source: {} } as never);
    const first = await steps.run(["sleep", "1.2"], dir, { PATH: process.env.PATH });
    expect(first.code).toBe(0);
    // 0.8 s left (rounded up to 1 s): a second 1.2 s step is stopped there
    let thrown: unknown;
    await steps.run(["sleep", "1.2"], dir, { PATH: process.env.PATH }).catch((e: unknown) => (thrown = e));
    expect(thrown).toBeInstanceOf(FastBuildTimedOut);
    expect((thrown as InstanceType<typeof FastBuildTimedOut>).limit).toEqual({ seconds: 2, set: true });
  } finally {
    if (saved === undefined) delete process.env.KERNCAP_BUILD_TIMEOUT;
    else process.env.KERNCAP_BUILD_TIMEOUT = saved;
  }
});
