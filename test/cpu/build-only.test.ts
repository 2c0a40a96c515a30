/**
 * `kerncap validate --build-only` (src/ops/validate.ts buildOnce) and `--watch --build-only`
 * (src/rebuild/watch.ts builtCycle): the rebuild alone, no replay and no GPU, on the demo capture
 * (a real CUDA reproducer: needs nvcc). The MCP tool `build` runs the same command confined.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, realpathSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { machineConfinement } from "../../src/frontends/sandbox.ts";
import { gatedArgv, TOOLS } from "../../src/mcp/tools.ts";
import { tempDir } from "./fixtures.ts";

const NVCC = ["/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc", Bun.which("nvcc")].find((p): p is string => !!p && existsSync(p));
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

/** A demo capture in a fresh folder, with a state folder of the test's own (the demo's trust record goes there). */
function demo(): { dir: string; env: Record<string, string | undefined> } {
  const root = tempDir();
  const env = { ...process.env, XDG_STATE_HOME: join(root, "state"), KERNCAP_LIBCUDA: "" };
  const p = Bun.spawnSync([process.execPath, MAIN, "demo", join(root, "cap")], { cwd: root, env, stderr: "pipe" });
  expect(p.exitCode, p.stderr.toString()).toBe(0);
  return { dir: join(root, "cap"), env };
}

const kerncap = (args: string[], env: Record<string, string | undefined>) =>
  Bun.spawnSync([process.execPath, MAIN, ...args], { env, stdout: "pipe", stderr: "pipe" });

describe.skipIf(!NVCC)("validate --build-only", () => {
  test("says the kernel compiles, with its registers beside the captured module's, exit 0 with no GPU; a build error is exit 2; replay options are refused", () => {
    const { dir, env } = demo();
    const text = kerncap(["validate", dir, "--build-only"], env);
    expect(text.exitCode, text.stderr.toString()).toBe(0);
    expect(text.stdout.toString()).toMatch(
      /^BUILT saxpy\(Saxpy const\*\): the kernel compiles: \d+ registers, \d+-byte stack frame, no spill \(captured: \d+ registers, \d+-byte stack frame, no spill\)\n {2}rebuild [0-9.]+ s( \(pruned TU\))? by \/\S+\/nvcc, CUDA \d+\.\d+\.\d+: /,
    );
    expect(text.stdout.toString()).toContain("(no replay: --build-only)");
    expect(text.stderr.toString()).not.toContain("E_NO_GPU");

    const json = kerncap(["validate", dir, "--build-only", "--json"], env);
    expect(json.exitCode, json.stderr.toString()).toBe(0);
    const doc = JSON.parse(json.stdout.toString());
    expect(() => v.parse(DOCUMENTS["validate-build"], doc)).not.toThrow();
    expect(doc.schema).toBe("kerncap.validate-build/1");
    expect([doc.dir, doc.verdict]).toEqual([realpathSync(dir), "built"]); // as validate's and replay's documents say the folder; eval's word for built
    expect([doc.kernel, doc.symbol, doc.demangled]).toEqual(["_Z5saxpyPK5Saxpy", "_Z5saxpyPK5Saxpy", "saxpy(Saxpy const*)"]);
    // build.sh's module, or the pruned TU's once the first build showed it gives the same machine code (the cost model's choice on this machine)
    expect(doc.rebuild.module).toMatch(doc.rebuild.builder === "pruned" ? /build\/pruned\/kernel\.cubin$/ : /build\/kernel\.cubin$/);
    expect(existsSync(join(dir, "build/kernel.cubin"))).toBe(true); // the last rebuild's module, whichever build made it
    // the source is the captured one: the rebuilt kernel uses what the captured module's does
    expect(doc.rebuild.registers).toBeGreaterThan(0);
    expect(doc.rebuild.registers).toBe(doc.rebuild.captured.registers);
    expect(doc.rebuild).toMatchObject({ spillStoreBytes: 0, spillLoadBytes: 0, captured: { spillStoreBytes: 0, spillLoadBytes: 0 } });
    expect(doc.rebuild.nvcc).toMatch(/\/nvcc$/);
    expect(doc.rebuild.toolkit).toMatch(/^\d+\.\d+\.\d+$/);

    const src = join(dir, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("p->a * p->x.data[i]", "p->a * p->x.data[i] +* 2"));
    const broken = kerncap(["validate", dir, "--build-only", "--json"], env);
    expect(broken.exitCode).toBe(2);
    expect(JSON.parse(broken.stdout.toString()).error.code).toBe("E_BUILD");
    // no earlier module left where the docs say the last rebuild's is (nu12 #7: replay --against timed the old kernel)
    expect(existsSync(join(dir, "build/kernel.cubin"))).toBe(false);

    for (const opt of [["--runs", "3"], ["--flush-l2"], ["--rtol=1e-3"], ["--no-verify"]]) {
      const r = kerncap(["validate", dir, "--build-only", ...opt], env);
      expect(r.exitCode, opt.join(" ")).toBe(2);
      expect(r.stderr.toString()).toContain(`--build-only runs no replay: ${opt[0]!.split("=")[0]}`);
    }
  }, 60_000);

  test("a capture file cut short (the captured module): E_CHECKSUM naming it, exit 2, as eval's and check's build-only runs say it; the watch too (nu #1: built, exit 0, the captured registers silently missing)", () => {
    const { dir, env } = demo();
    const mod = join(dir, "kernel/module.fatbin");
    writeFileSync(mod, readFileSync(mod).subarray(0, 100));
    for (const args of [
      ["validate", dir, "--build-only", "--json"],
      ["validate", dir, "--watch", "--build-only", "--json"],
    ]) {
      const r = kerncap(args, env);
      expect(r.exitCode, args.join(" ")).toBe(2);
      // validate's kerncap.error/1, or the watch's error event (JSON Lines)
      const out = r.stdout.toString().trim();
      const doc = args.includes("--watch") ? JSON.parse(out.split("\n").at(-1)!) : JSON.parse(out).error;
      expect(doc.code).toBe("E_CHECKSUM");
      expect(doc.message).toContain("kernel/module.fatbin has 100 bytes");
    }
    // tune's one input is the capture: said so, not as an eval's input to leave out (nu #8)
    const t = kerncap(["tune", dir, "--maxrregcount", "32", "--build-only", "--json"], env);
    expect(t.exitCode).toBe(2);
    const e = JSON.parse(t.stdout.toString()).error;
    expect([e.code, e.message.includes("eval"), e.hint.includes("eval")]).toEqual(["E_CHECKSUM", false, false]);
    expect(e.message).toContain("is damaged: kernel/module.fatbin has 100 bytes");
  }, 60_000);

  // adversary 35: five at once shared the pruned build's preprocessed TU; one compiler never ended, others found
  // build/kernel.cubin removed or truncated (E_IO, E_ELF). The capture's build lock (src/util/build-lock.ts) takes them in turn.
  test("five validate --build-only at once on one fresh capture: each builds (exit 0, the same registers), none hangs", async () => {
    const { dir, env } = demo();
    const runs = Array.from({ length: 5 }, () =>
      Bun.spawn([process.execPath, MAIN, "validate", dir, "--build-only", "--json"], { env, stdout: "pipe", stderr: "pipe" }),
    );
    const killer = setTimeout(() => runs.forEach((r) => r.kill("SIGKILL")), 100_000);
    try {
      const docs = await Promise.all(
        runs.map(async (r) => {
          const [out, err, code] = await Promise.all([new Response(r.stdout).text(), new Response(r.stderr).text(), r.exited]);
          expect(code, err).toBe(0);
          return JSON.parse(out);
        }),
      );
      expect(new Set(docs.map((d) => d.rebuild.registers)).size).toBe(1);
      expect(docs[0].rebuild.registers).toBe(docs[0].rebuild.captured.registers);
    } finally {
      clearTimeout(killer);
    }
  }, 120_000);

  test("--arch builds for another GPU architecture, its figures that one's; without --build-only, or an arch nvcc does not take, a usage error; -arch in EXTRA_FLAGS says to use --arch (nu12 #4)", () => {
    const { dir, env } = demo();
    const r = kerncap(["validate", dir, "--build-only", "--arch", "sm_80", "--json"], env);
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const doc = JSON.parse(r.stdout.toString());
    expect(() => v.parse(DOCUMENTS["validate-build"], doc)).not.toThrow();
    expect(doc.rebuild).toMatchObject({ targetArch: "sm_80", builder: "build.sh" });
    expect(doc.rebuild.registers).toBeGreaterThan(0);
    expect(doc.rebuild.captured.registers).toBeGreaterThan(0);
    // beside the captured architecture's build/kernel.cubin, never over it (replay --against runs that one: a new user's finding)
    expect(doc.rebuild.module).toBe(join(realpathSync(dir), "build/sm_80/kernel.cubin"));
    expect(existsSync(join(dir, "build/kernel.cubin"))).toBe(false);
    for (const [args, said] of [
      [["--arch", "sm_80"], "--arch sm_80 goes with --build-only"],
      [["--build-only", "--watch", "--arch", "sm_80"], "goes with --build-only alone, not with --watch"],
      [["--build-only", "--arch", "80"], "is no GPU architecture nvcc takes as -arch"],
      [["--build-only", "--arch", "sm_999"], "--arch sm_999: the build's nvcc does not compile for it"], // nvcc's refusal, the command line's fault
    ] as const) {
      const bad = kerncap(["validate", dir, ...args], env);
      expect(bad.exitCode).toBe(2);
      expect(bad.stderr.toString()).toContain(`E_USAGE: `);
      expect(bad.stderr.toString()).toContain(said);
    }
    expect(existsSync(join(dir, "build/sm_999"))).toBe(false); // a usage error leaves nothing behind (a new user's finding: build/sm_10/ stayed)
    expect(existsSync(join(dir, "build/sm_80/kernel.cubin"))).toBe(true); // the folder of an architecture built before stays
    // NVCC naming no file: the catalogue's E_NO_NVCC before build.sh runs (a new user's finding: E_BUILD, exit 127)
    const noNvcc = kerncap(["validate", dir, "--build-only", "--json"], { ...env, NVCC: "/nonexistent/nvcc" });
    expect(noNvcc.exitCode).toBe(2);
    expect(JSON.parse(noNvcc.stdout.toString()).error).toMatchObject({
      code: "E_NO_NVCC",
      message: expect.stringContaining("NVCC=/nonexistent/nvcc names no file"),
    });
    const flags = kerncap(["validate", dir, "--build-only", "--json"], { ...env, EXTRA_FLAGS: "-arch=sm_80" });
    const e = JSON.parse(flags.stdout.toString()).error;
    expect(e.message).toContain("is built for sm_80, not the captured sm_90");
    expect(e.hint).toContain(`run kerncap validate ${dir} --build-only --arch sm_80`); // the folder, not a literal DIR (a new user's finding)
  }, 60_000);

  test("an editor's lock link (Emacs' dangling .#saxpy.cu) and swap file under src/ are passed over, as pack and export leave them out; another link is still refused", () => {
    const { dir, env } = demo();
    symlinkSync("root@vm.4242:1733380000", join(dir, "src", ".#saxpy.cu"));
    writeFileSync(join(dir, "src", ".saxpy.cu.swp"), "b0VIM 9.0 root vm /home/x/saxpy.cu");
    const ok = kerncap(["validate", dir, "--build-only"], env);
    expect(ok.exitCode, ok.stderr.toString()).toBe(0);
    symlinkSync("/etc/hostname", join(dir, "src", "extra.h"));
    const refused = kerncap(["validate", dir, "--build-only", "--json"], env);
    expect(refused.exitCode).toBe(2);
    expect(refused.stdout.toString() + refused.stderr.toString()).toContain("E_UNSAFE_PATH");
  });

  test("a changed parameter list: E_PARAM_LAYOUT naming what the module defines, with no note on the pruned build before it (nu9 #12)", () => {
    const { dir, env } = demo();
    const src = join(dir, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("__global__ void saxpy(const Saxpy *p) {", "__global__ void saxpy(const Saxpy *p, int n) {"));
    const r = kerncap(["validate", dir, "--build-only"], env);
    expect(r.exitCode).toBe(2);
    const err = r.stderr.toString();
    // the kernel under another parameter list: E_PARAM_LAYOUT, as eval's layout-change says it (nu16 #2: E_KERNEL_NOT_FOUND here)
    expect(err).toContain("E_PARAM_LAYOUT: the edit changed the kernel's parameter list; nothing was launched: the capture launched saxpy(Saxpy const*)");
    expect(err).toContain("it defines saxpy(Saxpy const*, int) (_Z5saxpyPK5Saxpyi)");
    expect(err).not.toContain("validate rebuilds with build.sh");
    expect(err).not.toContain("pruned TU");
    // nothing was recorded of a comparison that could not be made: the next build that defines the kernel checks the pruned build
    expect(existsSync(join(dir, "build/pruned/check.json"))).toBe(false);
  }, 60_000);

  test("a confined build compiles the whole TU on purpose: build.sh's 'no usable slice' note is said with --verbose only, the user's own build compiles the slice", () => {
    const { dir, env } = demo();
    const confined = kerncap(["validate", dir, "--build-only", "--confine"], env);
    expect(confined.exitCode, confined.stderr.toString()).toBe(0);
    expect(confined.stderr.toString()).not.toContain("no usable slice");
    const verbose = kerncap(["validate", dir, "--build-only", "--confine", "--verbose"], env);
    expect(verbose.exitCode).toBe(0);
    expect(verbose.stderr.toString()).toContain("build.sh: no usable slice (src/saxpy.kerncap-slice.cu): compiling the whole TU src/saxpy.cu");
    // the user's own build: the slice made again and compiled, no note of a whole TU
    const own = kerncap(["validate", dir, "--build-only"], env);
    expect(own.exitCode).toBe(0);
    expect(own.stderr.toString()).not.toContain("no usable slice");
  }, 60_000);

  test("a slice edited by hand: said once before the build, whichever build compiles it (the pruned build runs no build.sh to say it), and inspect and pack list it as edited (a new user's finding)", () => {
    const { dir, env } = demo();
    expect(kerncap(["validate", dir, "--build-only"], env).exitCode).toBe(0); // the check: the pruned build may compile the next
    const slice = join(dir, "src/saxpy.kerncap-slice.cu");
    writeFileSync(slice, readFileSync(slice, "utf8").replace("p->a * p->x.data[i]", "2.0f * p->a * p->x.data[i]"));
    for (const extra of [[], ["--full-build"]]) {
      const r = kerncap(["validate", dir, "--build-only", ...extra], env);
      expect(r.exitCode, r.stderr.toString()).toBe(0);
      const said = r.stderr
        .toString()
        .split("\n")
        .filter((l) => l.includes("saxpy.kerncap-slice.cu was edited by hand"));
      expect(said.length, `${extra}: ${r.stderr}`).toBe(1);
    }
    const doc = JSON.parse(kerncap(["inspect", dir, "--json"], env).stdout.toString());
    expect(doc.reproducer.sources.edited).toContain("src/saxpy.kerncap-slice.cu");
    const pack = kerncap(["pack", dir, "--dry-run", "-o", join(dir, "../x.zip")], env);
    expect(pack.stderr.toString()).toContain("src/ differs from the source the captured module was built from: src/saxpy.kerncap-slice.cu (edited)");
  }, 60_000);

  test("a missing #include: E_BUILD with the fix hint, not the toolchain's (nu10 #30), its diagnostic structured; confined, a compile error saying the preprocessor stopped, none of the compiler's words (nu10 #29)", () => {
    const { dir, env } = demo();
    const src = join(dir, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("#include <cstdio>", '#include <cstdio>\n#include "missing_header.h"'));
    const r = kerncap(["validate", dir, "--build-only", "--json"], env);
    expect(r.exitCode).toBe(2);
    const e = JSON.parse(r.stdout.toString()).error;
    expect(e.code).toBe("E_BUILD");
    expect(e.message).toContain("missing_header.h: No such file or directory");
    expect(e.hint).toBe("Fix the compile error in the edited source and run validate again.");
    expect(e.details.diagnostics).toContainEqual({
      file: "src/saxpy.cu",
      line: 8,
      column: 10,
      severity: "fatal",
      text: "missing_header.h: No such file or directory",
    });
    // confined by the scan alone (KERNCAP_SANDBOX=0): nothing of the compiler's, not even the line (#error lines under #if of
    // an outside file's values would tell a bit of it per line); nor its words: they could tell whether a file outside exists
    const c = kerncap(["validate", dir, "--build-only", "--json", "--confine"], { ...env, KERNCAP_SANDBOX: "0" });
    expect(c.exitCode).toBe(2);
    const ce = JSON.parse(c.stdout.toString()).error;
    expect(ce.code).toBe("E_BUILD");
    expect(ce.message).toBe(
      "the reproducer does not build (build.sh exit 1): the preprocessor stopped before the dependency list (a missing or unreadable #include, or #error): check the files the edit includes",
    );
    expect(ce.details.diagnostics).toEqual([]);
    // in the sandbox, where no file outside can be read, the line it stopped at (a line to fix: nu89 #10), still none of its words
    if (machineConfinement() !== "scan") {
      const sb = JSON.parse(kerncap(["validate", dir, "--build-only", "--json", "--confine"], env).stdout.toString()).error;
      expect(sb.details.diagnostics).toEqual([
        {
          file: "src/saxpy.cu",
          line: 8,
          column: null,
          severity: "error",
          text: "the preprocessor stopped here (an #include not found or unreadable, or #error)",
        },
      ]);
      expect(sb.message).not.toContain("missing_header.h");
    }
    expect(`${ce.message}${ce.hint}`).not.toContain("missing_header.h");
    // no compiler at all (nothing preprocessed): said as the toolchain's, not as the edit's #include
    const gone = kerncap(["validate", dir, "--build-only", "--json", "--confine"], { ...env, NVCC: "/nonexistent/nvcc" });
    const ge = JSON.parse(gone.stdout.toString()).error;
    expect(ge.code).toBe("E_NO_NVCC"); // the toolchain's, before anything runs
    expect(ge.message).not.toContain("#include"); // a program build.sh calls that is missing otherwise: test/cpu/cli.test.ts (exit 127)
  }, 60_000);

  test("a syntax error: nvcc's diagnostics structured alike on the command line (absolute paths) and confined (src/…: nu10 #2); the confined slice note names no command line (nu10 #16)", () => {
    const { dir, env } = demo();
    const src = join(dir, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("p->a * p->x.data[i]", "p->a * p->x.data[i] undefined_fn(i)"));
    const docs = [[], ["--confine"]].map((extra) => {
      const r = kerncap(["validate", dir, "--build-only", "--json", ...extra], env);
      expect(r.exitCode).toBe(2);
      return JSON.parse(r.stdout.toString()).error;
    });
    expect(docs[0].message).toContain(`${dir}/src/saxpy.cu(22): error: expected a ";"`); // nvcc's own form, on the command line
    for (const e of docs) {
      expect(e.code).toBe("E_BUILD");
      expect(e.details.diagnostics).toContainEqual({ file: "src/saxpy.cu", line: 22, column: null, severity: "error", text: 'expected a ";"' });
    }
    expect(docs[1].details.diagnostics).toEqual(docs[0].details.diagnostics);
    expect(docs[1].message).not.toContain("on the command line");
    // the edit's error, not the slice: no note on the slice when the whole TU fails too (nu12 #2), none naming its log (nu10 #16)
    for (const e of docs) expect(e.message).not.toContain("kerncap: the slice");
    // nor the confined build's "no usable slice", which it means (the whole TU on purpose): the error's first line is the compiler's
    expect(docs[1].message).toBe('the reproducer does not build (build.sh exit 1):\nsrc/saxpy.cu:22: error: expected a ";"');
    expect(docs[1].message).not.toContain("slice-build.log");
  }, 60_000);

  test("KERNCAP_BUILD_TIMEOUT ends the whole validate: a header that includes itself twice per level (gcc -E's output grows without end) stops build.sh at the limit and the pruned build beside it, nothing left running (adversary 29: validate ran on 7 min past a 4 s limit, its gcc -E writing 900 MB)", () => {
    const { dir, env } = demo();
    writeFileSync(join(dir, "src/r.h"), '#if __INCLUDE_LEVEL__ < 40\n#include "r.h"\n#include "r.h"\n#endif\nstatic const int kerncap_r_line = __LINE__;\n');
    const src = join(dir, "src/saxpy.cu");
    writeFileSync(src, `#include "r.h"\n${readFileSync(src, "utf8")}`);
    const t0 = performance.now();
    const r = Bun.spawnSync([process.execPath, MAIN, "validate", dir, "--build-only", "--json"], {
      env: { ...env, KERNCAP_BUILD_TIMEOUT: "3" },
      stdout: "pipe",
      stderr: "pipe",
      timeout: 90_000,
    });
    const seconds = (performance.now() - t0) / 1000;
    expect(r.exitCode, r.stderr.toString()).toBe(2);
    expect(JSON.parse(r.stdout.toString()).error.message).toContain("timed out after 3 s");
    expect(seconds).toBeLessThan(30);
    // no preprocessor of it left running, and what the pruned build wrote stayed small
    expect(
      Bun.spawnSync(["pgrep", "-f", join(dir, "src")])
        .stdout.toString()
        .trim(),
    ).toBe("");
    const full = join(dir, "build/pruned/full.cpp1.ii");
    if (existsSync(full)) expect(statSync(full).size).toBeLessThan(1 << 30);
  }, 120_000);

  test("validate --json without a GPU: E_NO_GPU's details.rebuild is --build-only's rebuild, nvcc and all (nu10 #10)", () => {
    const { dir, env } = demo();
    const built = kerncap(["validate", dir, "--build-only", "--json", "--full-build"], env);
    expect(built.exitCode, built.stderr.toString()).toBe(0);
    const rebuild = JSON.parse(built.stdout.toString()).rebuild;
    const r = kerncap(["validate", dir, "--json", "--full-build"], env);
    expect(r.exitCode).toBe(2);
    const e = JSON.parse(r.stdout.toString()).error;
    expect(e.code).toBe("E_NO_GPU");
    expect(e.details.rebuild.nvcc).toMatch(/\/nvcc$/);
    expect(Object.keys(e.details.rebuild).sort()).toEqual(Object.keys(rebuild).sort());
    expect(e.details.rebuild.nvcc).toBe(rebuild.nvcc);
  }, 60_000);

  test("the spills of a rebuild under -maxrregcount (EXTRA_FLAGS) are ptxas -v's, beside the captured module's none; in the text, --json and the watch's built line (nu9 #6)", async () => {
    const { dir, env } = demo();
    const src = join(dir, "src/saxpy.cu");
    // 64 live floats: spilled under 24 registers
    const body = `  if (i >= p->y.n) return;
  float t[64];
#pragma unroll
  for (int k = 0; k < 64; k++) t[k] = p->x.data[(i + k) % p->y.n] * k;
  float s = 0;
#pragma unroll
  for (int j = 0; j < 4; j++)
#pragma unroll
    for (int k = 0; k < 64; k++) s += t[k] * t[(k * 7 + j) % 64];
  p->y.data[i] = p->a * p->x.data[i] + s;`;
    const text = readFileSync(src, "utf8");
    const line = text.split("\n").find((l) => l.startsWith("  if (i < p->y.n)"))!;
    writeFileSync(src, text.replace(line, body));
    const capped = { ...env, EXTRA_FLAGS: "-maxrregcount=24" };
    // ptxas's own figures for the same build
    const ptxas = Bun.spawnSync(["bash", join(dir, "build.sh"), "build/ptxas-v.cubin"], {
      env: { ...capped, EXTRA_FLAGS: "-maxrregcount=24 -Xptxas -v" },
      stderr: "pipe",
      stdout: "pipe",
    });
    expect(ptxas.exitCode, ptxas.stderr.toString()).toBe(0);
    const [, frame, stores, loads] =
      /Function properties for _Z5saxpyPK5Saxpy\n\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads/.exec(ptxas.stderr.toString())!;
    expect(Number(stores)).toBeGreaterThan(0);
    const r = kerncap(["validate", dir, "--build-only"], capped);
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    expect(r.stdout.toString()).toContain(
      `: 24 registers, ${frame}-byte stack frame, ${stores} bytes spill stores, ${loads} bytes spill loads (captured: 14 registers, 0-byte stack frame, no spill)\n`,
    );
    const json = kerncap(["validate", dir, "--build-only", "--json"], capped);
    const doc = JSON.parse(json.stdout.toString());
    expect(() => v.parse(DOCUMENTS["validate-build"], doc)).not.toThrow();
    expect(doc.rebuild).toMatchObject({ registers: 24, spillStoreBytes: Number(stores), spillLoadBytes: Number(loads), captured: { spillStoreBytes: 0 } });
    // the watch's built line says them too
    const w = Bun.spawn([process.execPath, MAIN, "validate", dir, "--watch", "--build-only"], { env: capped, stdout: "pipe", stderr: "pipe" });
    let out = "";
    for await (const chunk of w.stdout as unknown as AsyncIterable<Uint8Array>) {
      out += new TextDecoder().decode(chunk);
      if (out.includes("\n")) break;
    }
    w.kill("SIGINT");
    await w.exited;
    expect(out).toMatch(new RegExp(`BUILT {2}24 registers, ${frame}-byte stack frame, ${stores} bytes spill stores, ${loads} bytes spill loads \\(captured: `));
  }, 90_000);

  test("--watch --build-only: a built line at start and at each save, a build error is a line and the watch goes on, Ctrl-C ends it (130)", async () => {
    const { dir, env } = demo();
    const p = Bun.spawn([process.execPath, MAIN, "validate", dir, "--watch", "--build-only", "--json", "--full-build"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const lines: Record<string, unknown>[] = [];
    const reader = (async () => {
      let buf = "";
      for await (const chunk of p.stdout as unknown as AsyncIterable<Uint8Array>) {
        buf += new TextDecoder().decode(chunk);
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
          lines.push(JSON.parse(buf.slice(0, nl)));
          buf = buf.slice(nl + 1);
        }
      }
    })();
    let err = "";
    const errReader = (async () => {
      for await (const chunk of p.stderr as unknown as AsyncIterable<Uint8Array>) err += new TextDecoder().decode(chunk);
    })();
    const until = async (n: number, what: string) => {
      for (let i = 0; i < 600 && lines.length < n; i++) await Bun.sleep(100);
      expect(lines.length, `${what}: ${err}`).toBeGreaterThanOrEqual(n);
    };
    await until(1, "the start's line");
    for (let i = 0; i < 100 && !err.includes("watching "); i++) await Bun.sleep(100);
    expect(lines[0]).toMatchObject({ schema: "kerncap.validate-watch/1", event: "built", trigger: "start", kernel: "_Z5saxpyPK5Saxpy" });
    const first = lines[0] as { registers: number; captured: { registers: number } };
    expect(first.registers).toBe(first.captured.registers);
    for (const l of lines) expect(() => v.parse(DOCUMENTS["validate-watch"], l)).not.toThrow();

    const src = join(dir, "src/saxpy.cu");
    const original = readFileSync(src, "utf8");
    writeFileSync(src, original.replace("p->a * p->x.data[i]", "p->a * p->x.data[i] +* 2"));
    await until(2, "the broken save's line");
    expect(lines[1]).toMatchObject({ event: "build-error", trigger: "save", files: ["saxpy.cu"], code: "E_BUILD" });
    // the watch rebuilds at each save: its hint says to save, not to run validate (nu9 #12)
    expect(lines[1]!.hint).toBe("Fix the compile error in the edited source and save it: the watch rebuilds at each save.");

    writeFileSync(src, original.replace("p->a * p->x.data[i]", "__fmul_rn(p->a, p->x.data[i])"));
    await until(3, "the mended save's line");
    expect(lines[2]).toMatchObject({ event: "built", trigger: "save", files: ["saxpy.cu"] });
    expect((lines[2] as { buildSeconds: number }).buildSeconds).toBeGreaterThan(0);

    p.kill("SIGINT");
    expect(await p.exited).toBe(130);
    await reader;
    await errReader;
    expect(err).not.toContain("E_NO_GPU");
    expect(err).toContain("a save rebuilds, no replay");
  }, 90_000);
});

test.skipIf(!NVCC)(
  "a build where neither the slice nor the whole TU compiles (no compiler: NVCC=/nonexistent/nvcc) does not mark the slice as failed: the next build compiles the slice again (trial 7 #19)",
  () => {
    const { dir, env } = demo();
    const gone = Bun.spawnSync(["bash", join(dir, "build.sh")], { env: { ...env, NVCC: "/nonexistent/nvcc" }, stdout: "pipe", stderr: "pipe" });
    expect(gone.exitCode).not.toBe(0);
    expect(existsSync(join(dir, "build/slice-failed.sha256"))).toBe(false);
    const ok = Bun.spawnSync(["bash", join(dir, "build.sh")], { env: { ...env, NVCC }, stdout: "pipe", stderr: "pipe" });
    expect(ok.exitCode, ok.stderr.toString()).toBe(0);
    expect(ok.stderr.toString()).not.toContain("the slice did not build for this text");
    expect(ok.stderr.toString()).not.toContain("compiling the whole TU");
  },
);

test("the MCP tool build runs validate --build-only, confined like validate", () => {
  const argv = gatedArgv("build", { dir: "d" }, TOOLS.build.argv({ dir: "d" }), false);
  expect(argv).toEqual(["validate", "d", "--json", "--build-only", "--confine"]);
  expect(gatedArgv("build", { dir: "d" }, TOOLS.build.argv({ dir: "d" }), true)).toContain("--trust");
  expect(TOOLS.build.output).toBe("validate-build");
});

describe.skipIf(!NVCC)("tune --build-only", () => {
  test("builds every config and judges none (no GPU): rows built with their registers or compile-error, no winner, exit 0; --report refused; MCP's tune passes it", () => {
    const { dir, env } = demo();
    // a macro that breaks the kernel's build at 1: one config a compile error
    const src = join(dir, "src/saxpy.cu");
    writeFileSync(
      src,
      readFileSync(src, "utf8").replace("  int i = blockIdx", "#if defined(BROKEN) && BROKEN\n#error broken on purpose\n#endif\n  int i = blockIdx"),
    );
    const flags = ["--maxrregcount", "16", "--define", "BROKEN=0,1"];
    const json = kerncap(["tune", dir, "--build-only", ...flags, "--json"], env);
    expect(json.exitCode, json.stderr.toString()).toBe(0);
    const doc = JSON.parse(json.stdout.toString());
    expect(() => v.parse(DOCUMENTS.tune, doc)).not.toThrow();
    expect([doc.buildOnly, doc.winner, doc.paste, doc.seconds.replay]).toEqual([true, null, null, 0]);
    const by = Object.fromEntries(doc.rows.map((r: { label: string }) => [r.label, r]));
    expect(by["captured module"]).toMatchObject({ captured: true, verdict: "built", medianUs: null });
    expect(by["build.sh"]).toMatchObject({ verdict: "built", medianUs: null });
    expect(by["build.sh"].registers).toBe(by["captured module"].registers); // the captured source, rebuilt
    const capped = doc.rows.find((r: { config: { defines: Record<string, string> } }) => r.config.defines.BROKEN === "0");
    expect(capped).toMatchObject({ verdict: "built" });
    expect(capped.registers).toBeLessThanOrEqual(16);
    // below ptxas's floor for sm_90 (24): what ptxas did is the row's note (nu16 #16: it built quietly)
    expect(capped.note).toContain("ptxas raised -maxrregcount 16 to its floor of 24 registers for this architecture");
    const broken = doc.rows.find((r: { config: { defines: Record<string, string> } }) => r.config.defines.BROKEN === "1");
    expect(broken).toMatchObject({ verdict: "compile-error" });
    expect(broken.error).toContain("broken on purpose");
    expect(json.stderr.toString()).not.toContain("E_NO_GPU"); // nothing went to a GPU

    const text = kerncap(["tune", dir, "--build-only", "--maxrregcount", "16"], env);
    expect(text.exitCode, text.stderr.toString()).toBe(0);
    expect(text.stdout.toString()).toContain("2 of 2 configs built; none judged or timed (--build-only)");
    expect(text.stdout.toString()).toMatch(/maxrregcount=16 +built +- +- +\d+\n/); // the table: no time, its registers

    const report = kerncap(["tune", dir, "--build-only", "--maxrregcount", "16", "--report", join(dir, "..", "r.html"), "--json"], env);
    expect(report.exitCode).toBe(2);
    expect(JSON.parse(report.stdout.toString()).error).toMatchObject({ code: "E_USAGE" });
    expect(existsSync(join(dir, "..", "r.html"))).toBe(false);

    expect(TOOLS.tune.argv({ dir: "d", buildOnly: true })).toContain("--build-only");

    // a received capture: the refusal offers the tune's own command line, every option kept, with the digest
    const packed = join(dir, "..", "cap.zip");
    expect(kerncap(["pack", dir, "-o", packed], env).exitCode).toBe(0);
    const theirs = join(dir, "..", "theirs");
    expect(kerncap(["unpack", packed, "-o", theirs], env).exitCode).toBe(0);
    const refused = kerncap(["tune", theirs, "--build-only", "--maxrregcount", "16", "--json"], env);
    expect(refused.exitCode).toBe(2);
    const e = JSON.parse(refused.stdout.toString()).error;
    expect(e.code).toBe("E_UNTRUSTED");
    expect(e.details.trust.command).toMatch(
      new RegExp(`^kerncap tune ${theirs.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} --build-only --maxrregcount 16 --json --trust=[0-9a-f]{64}$`),
    );
  }, 120_000);
});
