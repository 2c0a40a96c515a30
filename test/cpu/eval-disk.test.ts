/**
 * The disk an evaluate takes (adv21 finding 3: kerncap mcp's evaluate wrote a full copy of src/
 * per candidate up front, and eval kept every candidate's copy until the call ended; 40 tiny
 * candidates of a 57 MB src/ filled a 1.5 GiB TMPDIR). Now: the MCP writes a `files` candidate
 * as its files only (an overlay: src/mcp/evaluate.ts), eval copies src/ for it only when its
 * build starts (src/eval/candidates.ts materialise), and a confined eval removes each copy once
 * built, keeping only its module until it is judged, and its private folder at a stop signal
 * (src/eval/eval.ts candidateFolders). No GPU: in-process or fake workers, stand-in builds.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { OpenRunner } from "../../src/check/pool.ts";
import { listedCandidates, materialise } from "../../src/eval/candidates.ts";
import type { EvalOptions } from "../../src/eval/eval.ts";
import type { EvalTask } from "../../src/eval/worker.ts";
import type { EvalOutcome } from "../../src/format/eval-record.ts";
import { writeCandidates } from "../../src/mcp/evaluate.ts";
import { runEval } from "../../src/ops/eval.ts";
import { fakeEvalOptions } from "./eval-child.ts";
import { captureWithSource, recordRendered, tempDir } from "./fixtures.ts";
import { NVCC } from "../nvcc-fixtures.ts";

/** Bytes of the regular files under `dir`, and how many there are. */
function usage(dir: string): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        bytes += statSync(p).size;
        files++;
      }
    }
  };
  walk(dir);
  return { bytes, files };
}

/** A capture whose src/ holds kernel.cu and a 2 MB header (an agent's edit_file can grow src/ to 64 MiB). */
async function bigCapture(): Promise<string> {
  const cap = await captureWithSource();
  writeFileSync(join(cap, "src/pad.h"), `/* ${"x".repeat(2 << 20)} */\n`);
  return cap;
}

/** Runners in this process: every module that says "match S" matches, S× faster, after `ms`. */
function inProcess(ms: number): () => OpenRunner<EvalTask, EvalOutcome> {
  return () => () => ({
    run: async (t) => {
      await Bun.sleep(ms);
      const s = Number(readFileSync(t.module, "utf8").split(" ")[1] ?? 1);
      return {
        candidate: t.candidate,
        input: t.input,
        code: null,
        runSeconds: ms / 1000,
        device: { name: "fake GPU", arch: "sm_90" },
        verdict: "match",
        reason: null,
        numerics: "bit-exact",
        timing: { baselineMedianUs: 10, candidateMedianUs: 10 / s, speedup: s, low: s * 0.98, high: s * 1.02, verdict: "same", text: "" },
      };
    },
    kill() {},
    close: async () => {},
  });
}

describe("MCP evaluate's candidates: overlays, not copies of src/", () => {
  test("30 files candidates of a capture with a 2 MB src/: each written as its own file only (no copy of src/), an overlay eval reads and copies only when built", async () => {
    const cap = await bigCapture();
    const n = 30;
    const { folder, args } = writeCandidates(
      cap,
      Array.from({ length: n }, (_, i) => ({ name: `c${i}`, files: { [`src/note${i}.h`]: `// ${i}\n` } })),
    );
    try {
      // before the fix: 30 copies of src/ (60 MB, 90 files) before anything was built
      const u = usage(folder);
      expect(u.files).toBe(n + 1); // each candidate's one file, and the list
      expect(u.bytes).toBeLessThan(64 << 10);
      const list = JSON.parse(readFileSync(join(folder, "candidates.json"), "utf8"));
      expect(list.candidates[3]).toEqual({ label: "c3", overlay: join(folder, "3") });
      expect(args).toEqual([`--candidate-list=${join(folder, "candidates.json")}`]);
      const cs = listedCandidates(join(folder, "candidates.json"));
      expect(cs.map((c) => c.kind)).toEqual(Array(n).fill("overlay"));
      // its copy, made when its build starts: the capture's src/ with the file added; the capture untouched
      const dest = join(tempDir(), "copy");
      await materialise(cap, cs[3]!, dest);
      expect(readFileSync(join(dest, "src/note3.h"), "utf8")).toBe("// 3\n");
      expect(statSync(join(dest, "src/pad.h")).size).toBe(statSync(join(cap, "src/pad.h")).size);
      expect(readFileSync(join(dest, "src/kernel.cu"), "utf8")).toBe(readFileSync(join(cap, "src/kernel.cu"), "utf8"));
      expect(existsSync(join(cap, "src/note3.h"))).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  test("an overlay's file replaces the one of src/; the checks a tree gets: its digest read once and held, links refused, src/ only, editable sources only (no copy made of a refused one)", async () => {
    const cap = await captureWithSource();
    const { folder } = writeCandidates(cap, [{ name: "a", files: { "src/kernel.cu": "// edited\n" } }]);
    const list = join(folder, "candidates.json");
    try {
      const [a] = listedCandidates(list);
      const dest = join(tempDir(), "copy");
      await materialise(cap, a!, dest);
      expect(readFileSync(join(dest, "src/kernel.cu"), "utf8")).toBe("// edited\n");
      // changed after eval read it: refused, not built
      writeFileSync(join(folder, "0/src/kernel.cu"), "// swapped\n");
      expect(materialise(cap, a!, join(tempDir(), "copy"))).rejects.toMatchObject({ code: "E_CANDIDATE", message: expect.stringContaining("changed after") });
      // a list that names an overlay with a link, a file outside src/, or none: that candidate's refusal (its record's error), never built
      const bad = (name: string, make: (d: string) => void) => {
        const d = join(tempDir(), name);
        mkdirSync(join(d, "src"), { recursive: true });
        make(d);
        const f = join(dirname(d), "list.json");
        writeFileSync(f, JSON.stringify({ candidates: [{ label: "x", overlay: d }] }));
        return listedCandidates(f)[0]!;
      };
      expect(bad("link", (d) => symlinkSync("/etc/passwd", join(d, "src/kernel.cu")))).toMatchObject({
        kind: "overlay",
        refused: { code: "E_CANDIDATE", reason: expect.stringContaining("symbolic link") },
      });
      expect(bad("outside", (d) => writeFileSync(join(d, "build.sh"), "echo\n")).refused?.reason).toContain("not under src/");
      expect(bad("empty", () => {}).refused?.reason).toContain("holds no files");
      /** An overlay of one file at `rel` (a listed candidate), materialised: refused with `code`, no copy left. */
      const refusedOverlay = async (label: string, rel: string, code: string) => {
        const o = join(tempDir(), label);
        mkdirSync(join(o, dirname(rel)), { recursive: true });
        writeFileSync(join(o, rel), "//\n");
        const list = join(dirname(o), "list.json");
        writeFileSync(list, JSON.stringify({ candidates: [{ label, overlay: o }] }));
        const dest = join(tempDir(), "copy");
        await expect(materialise(cap, listedCandidates(list)[0]!, dest)).rejects.toMatchObject({ code });
        expect(existsSync(dest)).toBe(false);
      };
      // a path no candidate may write (a list not made by the MCP): refused when its build starts, before any copy
      await refusedOverlay("sh", "src/run.sh", "E_NOT_SOURCE");
      // a file written where src/ holds a file as a folder: refused, its copy removed
      await refusedOverlay("u", "src/kernel.cu/x.cu", "E_CANDIDATE");
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });
});

describe("a confined eval's copies: as many as the builds running at once", () => {
  test("12 overlay candidates, 2 build jobs, a slow GPU: at most 2 copies of src/ at any time, few modules waiting, everything removed at the end", async () => {
    const cap = await bigCapture();
    const n = 12;
    const { folder } = writeCandidates(
      cap,
      Array.from({ length: n }, (_, i) => ({ name: `c${i}`, files: { "src/kernel.cu": `// ${i}\n` } })),
    );
    const seen: { copies: number; modules: number }[] = [];
    let work = "";
    const buildWith: NonNullable<EvalOptions["buildWith"]> = async (d, _m, c, dest) => {
      work = dirname(dest);
      await materialise(d, c, dest);
      await Bun.sleep(5);
      const names = readdirSync(work);
      seen.push({ copies: names.filter((x) => !x.endsWith(".module")).length, modules: names.filter((x) => x.endsWith(".module")).length });
      mkdirSync(join(dest, "build"));
      writeFileSync(join(dest, "build/kernel.cubin"), "match 1.5");
      writeFileSync(join(dest, "build/kernel.cubin.json"), "{}");
      return { built: { module: join(dest, "build/kernel.cubin"), seconds: 0, registers: 32, stackFrameBytes: 0 } };
    };
    const modules: string[] = [];
    const open = inProcess(40);
    try {
      const r = await runEval(
        fakeEvalOptions([cap], [], {
          candidates: listedCandidates(join(folder, "candidates.json")),
          confine: true,
          jobs: 2,
          slots: [null],
          buildWith,
          open: (say, w) => {
            const o = open();
            return (slot, gpu) => {
              const runner = o(slot, gpu);
              return {
                ...runner,
                run: async (t) => {
                  modules.push(t.module);
                  // what the worker reads is there: the module and a Triton module's metadata beside it
                  expect(readFileSync(`${t.module}.json`, "utf8")).toBe("{}");
                  return runner.run(t);
                },
              };
            };
          },
        }),
      );
      expect(r.records.filter((x) => x.verdict === "match").length).toBe(n);
      expect(seen.length).toBe(n);
      // before the fix: every copy stayed until the end (up to 12 here)
      expect(Math.max(...seen.map((s) => s.copies))).toBeLessThanOrEqual(2);
      // builds wait while jobs + workers tasks wait for the GPU: the modules kept are few, each removed once judged
      expect(Math.max(...seen.map((s) => s.modules))).toBeLessThanOrEqual(2 + 2 * 1); // jobs + 2 × workers
      expect(modules.every((m) => basename(dirname(m)).endsWith(".module"))).toBe(true);
      expect(existsSync(work)).toBe(false);
      expect(existsSync(join(cap, "build/eval"))).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }, 30_000);

  test("a stop signal removes the private folder at once, while a build is still running (a cancelled MCP evaluate)", async () => {
    const cap = await captureWithSource();
    const { folder } = writeCandidates(cap, [{ name: "a", files: { "src/kernel.cu": "// a\n" } }]);
    const tmp = tempDir("kerncap-tmpdir-");
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "eval-disk-child.ts"), cap, join(folder, "candidates.json"), "60000"], {
      stdout: "ignore",
      stderr: "pipe",
      env: { ...process.env, TMPDIR: tmp },
    });
    try {
      const ours = () => readdirSync(tmp).filter((x) => x.startsWith(`kerncap-eval-${child.pid}-`));
      const reader = child.stderr.getReader();
      let err = "";
      while (!err.includes("building")) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the eval ended before its build: ${err}`);
        err += new TextDecoder().decode(value);
      }
      expect(ours().length).toBe(1);
      expect(lstatSync(join(tmp, ours()[0]!, readdirSync(join(tmp, ours()[0]!))[0]!, "src/kernel.cu")).isFile()).toBe(true);
      child.kill("SIGTERM");
      const t0 = Date.now();
      while (ours().length && Date.now() - t0 < 5000) await Bun.sleep(20);
      // before the fix: the folder stayed until the running build ended (here 60 s), or past a SIGKILL until the next eval
      expect(ours()).toEqual([]);
      expect(child.exitCode).toBeNull(); // the build under way has not ended yet
    } finally {
      child.kill("SIGKILL");
      await child.exited;
      rmSync(folder, { recursive: true, force: true });
    }
  }, 30_000);
});

describe.skipIf(!NVCC)("a confined eval with nvcc (no GPU)", () => {
  test("overlay candidates built confined in a private folder: the worker reads each module from its kept folder, the copies gone; a compile error its record", async () => {
    const cap = await captureWithSource();
    writeFileSync(
      join(cap, "build.sh"),
      `#!/usr/bin/env bash
set -euo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
out="\${1:-$here/build/kernel.cubin}"
mkdir -p "$(dirname "$out")"
"${NVCC}" -cubin -arch=sm_90 \${EXTRA_FLAGS:-} "$here/src/kernel.cu" -o "$out" >&2
echo "$out"
`,
      { mode: 0o755 },
    );
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    m.kernel.name = "scale";
    m.source = { cuda: { method: "source-root" } };
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(cap, "src/kernel.cu"), 'extern "C" __global__ void scale(float* x, int n) { x[threadIdx.x] *= 2.0f; }\n');
    recordRendered(cap); // this build.sh stands for the one kerncap wrote: a confined build runs only that
    const { folder } = writeCandidates(cap, [
      { name: "ok", files: { "src/kernel.cu": 'extern "C" __global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }\n' } },
      { name: "bad", files: { "src/kernel.cu": 'extern "C" __global__ void scale(float* x, int n) { x[0] = oops }\n' } },
    ]);
    const seen: { module: string; elf: boolean; copies: string[] }[] = [];
    try {
      const r = await runEval(
        fakeEvalOptions([cap], [], {
          candidates: listedCandidates(join(folder, "candidates.json")),
          confine: true,
          jobs: 2,
          buildWith: undefined,
          open: () => () => ({
            run: async (t) => {
              const bytes = readFileSync(t.module);
              const work = dirname(dirname(t.module));
              seen.push({
                module: t.module,
                elf: bytes.subarray(0, 4).toString("latin1") === "\x7fELF",
                copies: readdirSync(work).filter((x) => !x.endsWith(".module")),
              });
              return {
                candidate: t.candidate,
                input: t.input,
                verdict: "match",
                reason: null,
                code: null,
                numerics: "bit-exact",
                timing: null,
                runSeconds: 0,
                device: null,
              };
            },
            kill() {},
            close: async () => {},
          }),
        }),
      );
      const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
      expect(by["ok"]).toMatchObject({ verdict: "match", kind: "overlay" });
      expect(by["bad"]).toMatchObject({ verdict: "compile-error", code: "E_BUILD" });
      expect(seen.length).toBe(1);
      expect(seen[0]!.elf).toBe(true);
      expect(basename(dirname(seen[0]!.module))).toEndWith(".module");
      expect(seen[0]!.copies.length).toBeLessThanOrEqual(1); // ok's copy gone; bad's at most, still building
      expect(existsSync(dirname(dirname(seen[0]!.module)))).toBe(false);
      expect(existsSync(join(cap, "build/eval"))).toBe(false);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  }, 120_000);
});
