/**
 * NVTX range selection (`run`/`list` --nvtx-include/--nvtx-exclude): one table of expressions run
 * through both parsers — the capture library's (c/cuda/kc_nvtx_filter.c, through
 * c/test/nvtx_main.c built here with gcc) and kerncap's check before the application starts
 * (src/capture/nvtx.ts) — which must accept and refuse the same ones and spell them alike; one
 * table of NVTX call sequences run through the library's real NVTX injection (c/cuda/kc_nvtx.c,
 * loaded by NVTX 3's own loader), each launch's verdict checked; and the plumbing from the command
 * line to the application's environment; and the capture library itself on a stand-in libcuda,
 * its NVTX loaded by NVTX_INJECTION64_PATH. The C parts skip without gcc, NVTX 3's or CUPTI's headers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { nvtxEnv, nvtxSelection, parseNvtxExpr } from "../../src/capture/nvtx.ts";
import { listKernels } from "../../src/capture/session.ts";
import { readCensus } from "../../src/capture/census.ts";
import { nvtxOption } from "../../src/cli/args.ts";
import { captureLibraryEnv, withoutCaptureSettings } from "../../src/env.ts";

const ROOT = resolve(import.meta.dir, "../..");
const NVTX_INC = [process.env.CUDA_HOME ?? "", "/usr/local/cuda"]
  .filter(Boolean)
  .map((h) => `${h}/include`)
  .find((d) => existsSync(join(d, "nvtx3/nvToolsExt.h")));
const canBuild = !!Bun.which("gcc") && !!NVTX_INC;

/** expression → its canonical spelling, or null when both parsers must refuse it */
const PARSE: [string, string | null][] = [
  ["A/", "A/"],
  ["A/B/", "A/B/"],
  ["A/*/B/", "A/*/B/"],
  ["A/+/B/", "A/+/B/"],
  ["[A/B/", "[A/B/"],
  ["[A", "[A/"],
  ["A]", "A]"],
  ["A/B]", "A/B]"],
  ["[A]", "[A]"],
  ["A]/", "A]"],
  ["A", "A"],
  ["A,B", "A,B"],
  ["dom@A/", "dom@A/"],
  ["dom@A,B", "dom@A,B"],
  ["regex:step_[0-9]+/", "regex:step_\\[0-9\\]+/"],
  ["regex:step_\\[0-9\\]+/", "regex:step_\\[0-9\\]+/"],
  ["regex:d.*@x+/", "regex:d.*@x+/"],
  ["aten::mm\\, seq = 3/", "aten::mm\\, seq = 3/"],
  ["aten::mm, seq = 3/", null],
  ["a\\/b/", "a\\/b/"],
  ["a\\,b", "a\\,b"],
  ["a\\@b/", "a\\@b/"],
  ["a\\\\/", "a\\\\/"],
  ["\\*/", "\\*/"],
  ["", null],
  ["regex:", null],
  ["@A/", null],
  ["d@e@A/", null],
  ["A//", null],
  ["/A/", null],
  ["/", null],
  ["A/B", null],
  ["A,B/", null],
  ["A,,B", null],
  ["A[B/", null],
  ["A]B/", null],
  ["regex:(/", null],
  ["regex:a\\.b/", "regex:a\\.b/"],
];

/** include, exclude, NVTX calls (c/test/nvtx_main.c's events), the verdict expected at each "launch" */
const MATCH: { include?: string[]; exclude?: string[]; events: string[]; want: number[] }[] = [
  { include: ["A/"], events: ["launch", "push:A", "launch", "push:B", "launch", "pop", "pop", "launch"], want: [0, 1, 1, 0] },
  { include: ["A/B/"], events: ["push:A", "launch", "push:B", "launch", "push:C", "launch", "pop", "pop", "push:X", "push:B", "launch"], want: [0, 1, 1, 0] },
  { include: ["A/*/C/"], events: ["push:A", "push:B", "push:C", "launch", "pop", "pop", "push:C", "launch"], want: [1, 1] },
  { include: ["A/+/C/"], events: ["push:A", "push:C", "launch", "pop", "push:B", "push:C", "launch"], want: [0, 1] },
  { include: ["[B/"], events: ["push:A", "push:B", "launch", "pop", "pop", "push:B", "launch"], want: [0, 1] },
  { include: ["A]"], events: ["push:A", "launch", "push:B", "launch", "pop", "launch"], want: [1, 0, 1] },
  { include: ["[A]"], events: ["push:X", "push:A", "launch", "pop", "pop", "push:A", "launch"], want: [0, 1] },
  // a domain's ranges are their own stack; the default domain is not a named one
  { include: ["dom@A/"], events: ["push:A", "launch", "push:dom@A", "launch", "pop:dom", "launch"], want: [0, 1, 0] },
  { include: ["A/"], events: ["push:dom@A", "launch", "pushw:A", "launch"], want: [0, 1] },
  { include: ["dom@[A/B]"], events: ["push:dom@A", "push:C", "pushreg:dom@B", "launch", "pop:dom", "launch"], want: [1, 0] },
  // a pop of the default domain leaves a named domain's range open
  { include: ["dom@A/"], events: ["push:dom@A", "push:X", "pop", "launch"], want: [1] },
  // start/end ranges: every name open, in any thread
  { include: ["S,T"], events: ["start:S", "launch", "start:T", "launch", "end:1", "launch"], want: [0, 1, 0] },
  { include: ["dom@S"], events: ["start:S", "launch", "start:dom@S", "launch"], want: [0, 1] },
  // regexes, unanchored as --kernel
  { include: ["regex:^step_[0-9]+$/"], events: ["push:step_12", "launch", "pop", "push:step_x", "launch"], want: [1, 0] },
  { include: ["regex:^aten::mm/"], events: ["push:aten::mm, seq = 4, op_id = 9", "launch"], want: [1] },
  // any include; every exclude
  { include: ["A/", "B/"], events: ["push:B", "launch"], want: [1] },
  { include: ["A/"], exclude: ["A/warmup/"], events: ["push:A", "launch", "push:warmup", "launch", "pop", "launch"], want: [1, 0, 1] },
  { exclude: ["warmup/"], events: ["launch", "push:warmup", "launch"], want: [1, 0] },
  // a pop with nothing pushed changes nothing
  { include: ["A/"], events: ["pop", "push:A", "launch"], want: [1] },
];

describe("NVTX range expressions", () => {
  let tmp = "";
  let driver = "";
  const build = () => {
    if (driver) return driver;
    tmp = mkdtempSync(join(tmpdir(), "kerncap-nvtx-"));
    driver = join(tmp, "nvtx_main");
    const cc = Bun.spawnSync(
      [
        "gcc",
        "-std=gnu11",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-Werror",
        `-I${NVTX_INC}`,
        `-I${join(ROOT, "c/common")}`,
        "-o",
        driver,
        join(ROOT, "c/test/nvtx_main.c"),
        join(ROOT, "c/cuda/kc_nvtx.c"),
        join(ROOT, "c/cuda/kc_nvtx_filter.c"),
        "-ldl",
        "-lpthread",
      ],
      { stderr: "pipe" },
    );
    expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    return driver;
  };

  // gcc on a loaded machine may take more than a test's 5 s
  beforeAll(() => void (canBuild && build()), 120_000);
  afterAll(() => void (tmp && rmSync(tmp, { recursive: true, force: true })));

  test("kerncap's check accepts, refuses and spells them as the table says", () => {
    for (const [expr, want] of PARSE) {
      if (want === null) expect(() => parseNvtxExpr(expr), expr).toThrow(expect.objectContaining({ code: "E_USAGE" }));
      else expect(parseNvtxExpr(expr).canonical, expr).toBe(want);
    }
    expect(parseNvtxExpr("dom@A/").kind).toBe("push/pop");
    expect(parseNvtxExpr("A,B").kind).toBe("start/end");
  });

  test.skipIf(!canBuild)("the capture library's parser agrees with kerncap's on every expression", () => {
    const r = Bun.spawnSync([build(), "parse", ...PARSE.map(([e]) => e)], { stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const lines = r.stdout.toString().trimEnd().split("\n");
    expect(lines.length).toBe(PARSE.length);
    PARSE.forEach(([expr, want], i) => expect(lines[i], expr).toEqual(want === null ? expect.stringMatching(/^error /) : `ok ${want}`));
  });

  test.skipIf(!canBuild)("the library's NVTX injection selects exactly the launches inside the ranges", () => {
    const bin = build();
    for (const c of MATCH) {
      const env = {
        PATH: process.env.PATH ?? "",
        ...(c.include ? { KERNCAP_NVTX_INCLUDE: c.include.join("\n") } : {}),
        ...(c.exclude ? { KERNCAP_NVTX_EXCLUDE: c.exclude.join("\n") } : {}),
      };
      const r = Bun.spawnSync([bin, "run", ...c.events], { env, stdout: "pipe", stderr: "pipe" });
      const label = `include ${JSON.stringify(c.include ?? [])} exclude ${JSON.stringify(c.exclude ?? [])}: ${c.events.join(" ")}`;
      expect(r.exitCode, `${label}\n${r.stderr}`).toBe(0);
      expect(r.stdout.toString().trim().split("\n").map(Number), label).toEqual(c.want);
    }
  });

  test.skipIf(!canBuild)("per-nvtx summary: each launch counted by its thread's open ranges (named domains marked) and kernel, after the filter", () => {
    const bin = build();
    const summary = (env: Record<string, string>, events: string[]) => {
      const r = Bun.spawnSync([bin, "run", ...events], { env: { KERNCAP_NVTX_SUMMARY: "1", ...env }, stdout: "pipe", stderr: "pipe" });
      expect(r.exitCode, r.stderr.toString()).toBe(0);
      const doc = JSON.parse(r.stdout.toString().trim().split("\n").at(-1)!);
      return {
        dropped: doc.ranges_dropped,
        ranges: (doc.ranges as { range: string; kernel: string; count: number }[]).sort((a, b) =>
          a.range !== b.range ? (a.range < b.range ? -1 : 1) : a.kernel < b.kernel ? -1 : 1,
        ),
      };
    };
    expect(summary({}, ["note:k1", "push:A", "note:k1", "note:k2", "push:lib@X", "note:k1", "pop:lib", "push:B", "note:k1", "pop", "pop", "note:k1"])).toEqual({
      dropped: 0,
      ranges: [
        { range: "", kernel: "k1", count: 2 },
        { range: "A/", kernel: "k1", count: 1 },
        { range: "A/", kernel: "k2", count: 1 },
        { range: "A/B/", kernel: "k1", count: 1 },
        { range: "A/lib@X/", kernel: "k1", count: 1 },
      ],
    });
    // with a filter, only the launches it keeps
    expect(summary({ KERNCAP_NVTX_INCLUDE: "A/" }, ["note:k1", "push:A", "note:k1", "note:k1"]).ranges).toEqual([{ range: "A/", kernel: "k1", count: 2 }]);
  });

  test.skipIf(!canBuild)("an expression the library cannot parse is its set-up error (nothing filtered)", () => {
    const r = Bun.spawnSync([build(), "run", "launch"], { env: { KERNCAP_NVTX_INCLUDE: "A//" }, stdout: "pipe" });
    expect(r.exitCode).toBe(1);
    expect(r.stdout.toString()).toContain("empty range name");
  });
});

// The capture library itself on the stand-in libcuda/libcupti (c/test/fake_cuda.c), its launches
// played by c/test/launch_main.c between real NVTX calls, NVTX_INJECTION64_PATH naming the library.
const CUDA_LIB = join(ROOT, "c/build/libkerncap_cuda.so");
const CUDA_INC = ["/usr/local/cuda", process.env.CUDA_HOME ?? ""]
  .filter(Boolean)
  .flatMap((h) => [`${h}/include`, `${h}/extras/CUPTI/include`])
  .filter((d) => existsSync(d));
const canRunLib = canBuild && existsSync(CUDA_LIB) && CUDA_INC.some((d) => existsSync(join(d, "cupti.h")));
describe.skipIf(!canRunLib)("the CUDA capture library with an NVTX selection (stand-in libcuda)", () => {
  let dir = "";
  let n = 0;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "kerncap-nvtx-lib-"));
    const gcc = (args: string[]) => {
      const cc = Bun.spawnSync(["gcc", "-std=gnu11", "-O1", ...args], { stderr: "pipe" });
      expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    };
    gcc(["-shared", "-fPIC", "-DFAKE_LIBCUDA", "-o", join(dir, "libcuda.so.1"), join(ROOT, "c/test/fake_cuda.c")]);
    gcc(["-shared", "-fPIC", "-DFAKE_LIBCUPTI", "-o", join(dir, "libcupti.so"), join(ROOT, "c/test/fake_cuda.c")]);
    gcc([
      ...CUDA_INC.map((d) => `-I${d}`),
      "-o",
      join(dir, "launch_main"),
      join(ROOT, "c/test/launch_main.c"),
      `-L${dir}`,
      "-l:libcupti.so",
      `-Wl,-rpath,${dir}`,
      "-ldl",
      "-lpthread",
    ]);
  }, 120_000);
  afterAll(() => void (dir && rmSync(dir, { recursive: true, force: true })));

  /** Play the events with these settings; the output folder. */
  const play = (settings: Record<string, string>, events: string[]): string => {
    const out = join(dir, `out-${n++}`);
    mkdirSync(join(out, "kernel"), { recursive: true });
    mkdirSync(join(out, "memory"));
    const env = {
      PATH: process.env.PATH ?? "",
      LD_LIBRARY_PATH: dir,
      KERNCAP_OUT: out,
      KERNCAP_CUPTI_PATH: join(dir, "libcupti.so"),
      NVTX_INJECTION64_PATH: CUDA_LIB,
      ...settings,
    };
    const p = Bun.spawnSync([join(dir, "launch_main"), CUDA_LIB, "nvtx", ...events], { env, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    expect(
      readdirSync(out).filter((f) => f.startsWith("error.")),
      p.stderr.toString(),
    ).toEqual([]);
    return out;
  };
  const EVENTS = ["_Z2k1v", "push:A", "_Z2k1v", "_Z2k2v", "push:B", "_Z2k2v", "pop", "pop", "_Z2k2v"];

  test("list: only the launches inside the range are counted; the census says how many were left out, and the per-range counts", () => {
    const out = play({ KERNCAP_MODE: "list", KERNCAP_NVTX_INCLUDE: "A/", KERNCAP_NVTX_SUMMARY: "1" }, EVENTS);
    const c = readCensus(out);
    expect(Object.fromEntries(c.kernels.map((k) => [k.name, k.count]))).toEqual({ _Z2k1v: 1, _Z2k2v: 2 });
    expect(c.launches).toBe(3);
    const nv = c.processes[0]!.nvtx!;
    expect({ injected: nv.injected, filteredOut: nv.filteredOut }).toEqual({ injected: true, filteredOut: 2 });
    expect(nv.ranges!.map((r) => `${r.range} ${r.kernel} ${r.count}`).sort()).toEqual(["A/ _Z2k1v 1", "A/ _Z2k2v 1", "A/B/ _Z2k2v 1"]);
  });

  test("capture: --dispatch counts only the launches inside the range", () => {
    const out = play({ KERNCAP_MODE: "capture", KERNCAP_KERNEL: "k2", KERNCAP_DISPATCH: "1", KERNCAP_NVTX_INCLUDE: "A/" }, EVENTS);
    const raw = JSON.parse(readFileSync(join(out, "raw.json"), "utf8"));
    expect(raw.kernel).toMatchObject({ name: "_Z2k2v", match_index: 1 });
    expect(raw.launch.grid).toEqual([4, 1, 1]); // launch_main's 4th launch (grid 1 + its ordinal): k2 inside A/B
  });

  test("without a selection every launch counts and the census has no nvtx part", () => {
    const c = readCensus(play({ KERNCAP_MODE: "list" }, EVENTS));
    expect(c.launches).toBe(5);
    expect(c.processes[0]!.nvtx).toBeUndefined();
  });
});

describe("NVTX options to the application's environment", () => {
  test("--nvtx-include and --nvtx-exclude are repeatable, imply --nvtx, and are checked", () => {
    expect(nvtxOption({ nvtx: false }, ["--kernel", "k", "--", "app", "--nvtx-include", "X/"])).toBeUndefined();
    expect(nvtxOption({ nvtx: true }, ["--nvtx", "--", "app"])).toEqual({ include: [], exclude: [] });
    expect(nvtxOption({ nvtx: false }, ["--nvtx-include", "A/", "--nvtx-include=B/", "--nvtx-exclude", "A/w/", "--", "app", "--nvtx-include", "C/"])).toEqual({
      include: ["A/", "B/"],
      exclude: ["A/w/"],
    });
    expect(() => nvtxOption({}, ["--nvtx-include", "A//"])).toThrow(expect.objectContaining({ code: "E_USAGE" }));
    expect(() =>
      nvtxSelection(
        true,
        Array.from({ length: 33 }, (_, i) => `r${i}/`),
        [],
      ),
    ).toThrow(/more than 32/);
  });

  test("the library gets the expressions one per line, and NVTX names the library", () => {
    expect(nvtxEnv({ include: [], exclude: [], summary: true }, "/l.so", {}).env).toEqual({ NVTX_INJECTION64_PATH: "/l.so", KERNCAP_NVTX_SUMMARY: "1" });
    const e = nvtxEnv({ include: ["A/", "dom@B,C"], exclude: ["w/"] }, "/cache/libkerncap_cuda.so", {});
    expect(e.env).toEqual({ NVTX_INJECTION64_PATH: "/cache/libkerncap_cuda.so", KERNCAP_NVTX_INCLUDE: "A/\ndom@B,C", KERNCAP_NVTX_EXCLUDE: "w/" });
    expect(e.warnings).toEqual([]);
    expect(nvtxEnv({ include: [], exclude: [] }, "/l.so", { NVTX_INJECTION64_PATH: "/opt/nsys/libToolsInjection64.so" }).warnings[0]).toContain(
      "libToolsInjection64.so",
    );
    // an outer run's expressions never reach the application
    expect(withoutCaptureSettings({ KERNCAP_NVTX_INCLUDE: "A/", KERNCAP_NVTX_EXCLUDE: "B/", KERNCAP_NVTX_SUMMARY: "1", HOME: "/h" })).toEqual({ HOME: "/h" });
    expect(captureLibraryEnv({ out: "/o", mode: "list" })).not.toHaveProperty("KERNCAP_NVTX_INCLUDE");
  });

  test("list hands the selection to the application (a stand-in injection; the app records its environment)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kerncap-nvtx-app-"));
    try {
      const app = join(dir, "app.sh");
      writeFileSync(app, `#!/bin/sh\nenv > ${join(dir, "env.txt")}\n`);
      chmodSync(app, 0o755);
      const prepare = async () => ({ env: { CUDA_INJECTION64_PATH: "/stand-in/libkerncap_cuda.so" } });
      await expect(
        listKernels({ argv: [app], verbose: false, stdoutToStderr: false, nvtx: { include: ["step/"], exclude: ["warmup/"] } }, prepare),
      ).rejects.toMatchObject({ code: "E_NO_KERNELS" });
      const env = readFileSync(join(dir, "env.txt"), "utf8");
      expect(env).toContain("NVTX_INJECTION64_PATH=/stand-in/libkerncap_cuda.so");
      expect(env).toContain("KERNCAP_NVTX_INCLUDE=step/");
      expect(env).toContain("KERNCAP_NVTX_EXCLUDE=warmup/");
      // the HSA library follows no NVTX: refused before anything runs
      await expect(
        listKernels({ argv: [app], runtime: "hsa", verbose: false, stdoutToStderr: false, nvtx: { include: ["step/"], exclude: [] } }, prepare),
      ).rejects.toMatchObject({ code: "E_USAGE" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
