/**
 * src/eval/build.ts: a candidate that does not fit src/ is never built and is an error with its
 * code (E_PATCH, E_CANDIDATE), not a compile-error (a script reading the verdict would think the
 * kernel failed to compile); and, with nvcc, a build that stops in the preprocessor is a
 * compile-error, with the compiler's diagnostics on the command line and none of its words confined.
 */
import { expect, test } from "bun:test";
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildCandidate, buildVerdict } from "../../../src/eval/build.ts";
import { parseCandidate } from "../../../src/eval/candidates.ts";
import { KerncapError } from "../../../src/errors.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { writeDemo } from "../../../src/capture/demo.ts";
import { makeCapture, tempDir } from "../fixtures.ts";
import { NVCC } from "../../nvcc-fixtures.ts";
import { machineConfinement, overrideSandboxSupport } from "../../../src/frontends/sandbox.ts";

test("the verdict of a build's error: the candidate's misfit and a confined build's refusal are error with their code; the compiler's, compile-error", () => {
  expect(buildVerdict(new KerncapError("E_PATCH", "does not apply"))).toBe("error");
  expect(buildVerdict(new KerncapError("E_CANDIDATE", "src/ has no file named x.cu"))).toBe("error");
  expect(buildVerdict(new KerncapError("E_BUILD", "x"))).toBe("compile-error");
  expect(buildVerdict(new KerncapError("E_CONFINED", "x"))).toBe("error"); // nothing failed to compile: the build was refused
  expect(buildVerdict(new KerncapError("E_PARAM_LAYOUT", "x"))).toBe("layout-change");
});

test("a patch that does not apply and a replacement file src/ lacks: each its own error record, alike, nothing built", async () => {
  const cap = join(tempDir(), "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
  writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\necho built >&2\nexit 1\n", { mode: 0o755 });
  const d = tempDir();
  writeFileSync(join(d, "bad.patch"), "--- a/nothere.cu\n+++ b/nothere.cu\n@@ -1 +1 @@\n-x\n+y\n");
  writeFileSync(join(d, "other.cu"), "x");
  const m = readManifest(cap);
  const out = await Promise.all(
    ["bad.patch", "other.cu"].map((n) => buildCandidate(cap, m, parseCandidate(join(d, n)), join(d, `copy-${n}`), { force: false })),
  );
  expect(out.map((b) => ("failed" in b ? [b.failed.verdict, b.failed.code] : "built"))).toEqual([
    ["error", "E_PATCH"],
    ["error", "E_CANDIDATE"],
  ]);
});

test("a candidate whose build runs past KERNCAP_BUILD_TIMEOUT is a compile-error 'timed out after N s' (nu10 #24), not an unjudged error", async () => {
  const cap = join(tempDir(), "cap");
  await makeCapture(cap);
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
  writeFileSync(join(cap, "build.sh"), "#!/usr/bin/env bash\nset -e\nmkdir -p build\nsleep 30\n: >build/k.o\necho build/k.o\n", { mode: 0o755 });
  const d = tempDir();
  writeFileSync(join(d, "kernel.cu"), "__global__ void scale(float* x, int n) { x[0] = n; }\n");
  const before = process.env.KERNCAP_BUILD_TIMEOUT;
  process.env.KERNCAP_BUILD_TIMEOUT = "1";
  try {
    const b = await buildCandidate(cap, readManifest(cap), parseCandidate(join(d, "kernel.cu")), join(d, "copy"), { force: false });
    if (!("failed" in b)) throw new Error("built");
    expect(b.failed).toMatchObject({ verdict: "compile-error", code: "E_BUILD", diagnostics: [] });
    expect(b.failed.reason).toContain("build.sh timed out after 1 s (the limit --build-timeout or KERNCAP_BUILD_TIMEOUT sets)");
    expect(b.failed.seconds).toBeLessThan(10);
  } finally {
    if (before === undefined) delete process.env.KERNCAP_BUILD_TIMEOUT;
    else process.env.KERNCAP_BUILD_TIMEOUT = before;
  }
}, 30_000);

test.skipIf(!NVCC)(
  "a build stopped in the preprocessor: on the command line a compile-error with the compiler's message (nu7 #17) and its diagnostics (nu10 #2); under --confine (kerncap mcp) a compile-error saying the preprocessor stopped, no word of the compiler's (nu10 #29)",
  async () => {
    const cap = join(tempDir(), "cap");
    writeDemo(cap, false);
    const d = tempDir();
    cpSync(join(cap, "src"), join(d, "inc"), { recursive: true });
    writeFileSync(join(d, "inc/saxpy.cu"), `#include "nothere.h"\n${readFileSync(join(cap, "src/saxpy.cu"), "utf8")}`);
    cpSync(join(cap, "src"), join(d, "perr"), { recursive: true });
    writeFileSync(join(d, "perr/saxpy.cu"), `#error tile size unsupported\n${readFileSync(join(cap, "src/saxpy.cu"), "utf8")}`);
    for (const name of ["inc", "perr"]) {
      const mine = await buildCandidate(cap, readManifest(cap), parseCandidate(join(d, name)), join(d, `mine-${name}`), { force: false });
      if (!("failed" in mine)) throw new Error("built");
      expect(mine.failed).toMatchObject({ verdict: "compile-error", code: "E_BUILD" });
      expect(mine.failed.reason).toContain(
        name === "inc" ? "src/saxpy.cu:1: fatal error: nothere.h: No such file or directory" : "#error tile size unsupported",
      );
      expect(mine.failed.diagnostics?.[0]).toMatchObject(
        name === "inc"
          ? { file: "src/saxpy.cu", line: 1, column: 10, severity: "fatal", text: "nothere.h: No such file or directory" }
          : { file: "src/saxpy.cu", line: 1, severity: "error", text: "#error tile size unsupported" },
      );
    }
    // confined by the scan alone (no sandbox): no word of the compiler's, not even the line; in the machine's sandbox (where no
    // file outside can be read) the line it stopped at, without its words (nu89 #10)
    const modes: ("scan" | "sandbox")[] = machineConfinement() === "scan" ? ["scan"] : ["scan", "sandbox"];
    for (const mode of modes)
      for (const name of ["inc", "perr"]) {
        if (mode === "scan") overrideSandboxSupport(null);
        try {
          const b = await buildCandidate(cap, readManifest(cap), parseCandidate(join(d, name)), join(d, `copy-${mode}-${name}`), {
            force: false,
            confine: true,
          });
          if (!("failed" in b)) throw new Error("built");
          // the candidate's fault, a compile-error, not an unjudged error
          const stop = "the preprocessor stopped here (an #include not found or unreadable, or #error)";
          expect(b.failed).toMatchObject({
            verdict: "compile-error",
            code: "E_BUILD",
            diagnostics: mode === "scan" ? [] : [{ file: "src/saxpy.cu", line: 1, column: null, severity: "error", text: stop }],
          });
          expect(b.failed.reason).toBe(
            `the reproducer does not build (build.sh exit 1): the preprocessor stopped before the dependency list (a missing or unreadable #include, or #error)${mode === "scan" ? ": check the files the edit includes" : `:\nsrc/saxpy.cu:1: error: ${stop}`}`,
          );
          expect(b.failed.reason).not.toMatch(/nothere|tile size/);
        } finally {
          overrideSandboxSupport(undefined);
        }
      }
  },
  60_000,
);

test.skipIf(!NVCC)(
  "a candidate's src/p.txt, included by its TU, asking __has_include of an outside path: refused before the build, alike whether the file exists (a trial's oracle)",
  async () => {
    const cap = join(tempDir(), "cap");
    writeDemo(cap, false);
    const d = tempDir();
    const outcome = async (name: string, path: string) => {
      cpSync(join(cap, "src"), join(d, name), { recursive: true });
      writeFileSync(join(d, name, "p.txt"), `#if __has_include("${path}")\n#error PROBE_HIT\n#endif\n`);
      writeFileSync(join(d, name, "saxpy.cu"), `#include "p.txt"\n${readFileSync(join(cap, "src/saxpy.cu"), "utf8")}`);
      const b = await buildCandidate(cap, readManifest(cap), parseCandidate(join(d, name)), join(d, `copy-${name}`), { force: false });
      return "failed" in b ? [b.failed.code, b.failed.reason.slice(0, b.failed.reason.indexOf(": src/"))] : ["built"];
    };
    const exists = await outcome("exists", "/etc/hostname");
    const absent = await outcome("absent", "/etc/no-such-file-kerncap");
    expect(exists[0]).toBe("E_CONFINED");
    expect(absent).toEqual(exists);
    expect(exists[1]).toStartWith("the sources could make the preprocessor look up a file");
  },
  60_000,
);
