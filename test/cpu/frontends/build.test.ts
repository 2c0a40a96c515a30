/**
 * src/frontends/build.ts's reading of a failed build.sh: which hint a failure gets (a compiler's
 * "No such file or directory" about a header is the source's error, only the shell's is a missing
 * toolchain: nu10 #30), the structured diagnostics of E_BUILD in both compilers' forms (nu10 #2:
 * src/frontends/confine.ts parseDiagnostics), and KERNCAP_BUILD_TIMEOUT's limit on build.sh (nu10 #24).
 */
import { expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isKerncapError } from "../../../src/errors.ts";
import { buildFailureHint, buildReproducer, buildTimeout, CONFINED_SECONDS, FIX_AND_VALIDATE } from "../../../src/frontends/build.ts";
import { DIAGNOSTICS_MAX, parseDiagnostics } from "../../../src/frontends/confine.ts";
import { makeCapture, tempDir, kerncapErrorOf } from "../fixtures.ts";

const thrown = kerncapErrorOf;

test("a compiler's 'No such file or directory' about a header is a compile error to fix; the shell's about a program, or exit 126/127, a missing toolchain (nu10 #30)", () => {
  const missingHeader =
    "kerncap: the slice src/saxpy.kerncap-slice.cu does not build (nvcc failed on it: build/slice-build.log): compiling the whole TU src/saxpy.cu\n" +
    "/tmp/cap/src/saxpy.cu:20:10: fatal error: missing_header.h: No such file or directory\n" +
    '   20 | #include "missing_header.h"\n      |          ^~~~~~~~~~~~~~~~~~\ncompilation terminated.';
  expect(buildFailureHint(1, missingHeader)).toBe(FIX_AND_VALIDATE);
  expect(buildFailureHint(1, 'src/k.cu(3): catastrophic error: cannot open source file "h.h"')).toBe(FIX_AND_VALIDATE);
  expect(buildFailureHint(1, "src/k.cu:3:10: fatal error: sub/h.h: No such file or directory")).toBe(FIX_AND_VALIDATE);
  // a source line the compiler quotes (indented) is the source's, whatever it says
  expect(buildFailureHint(1, 'src/k.cu:3:2: error: #error "x"\n    3 | #error x: command not found')).toBe(FIX_AND_VALIDATE);
  const toolchain = /^build\.sh could not run a program it calls/;
  expect(buildFailureHint(1, "/tmp/cap/build.sh: line 39: /nonexistent/nvcc: No such file or directory")).toMatch(toolchain);
  expect(buildFailureHint(1, "bash: line 1: nvcc: command not found")).toMatch(toolchain);
  expect(buildFailureHint(1, "/usr/bin/env: 'python3': No such file or directory")).toMatch(toolchain);
  expect(buildFailureHint(127, "whatever")).toMatch(toolchain);
  expect(buildFailureHint(126, "")).toMatch(toolchain);
  expect(buildFailureHint(1, "sh: 1: nvcc: not found")).toMatch(toolchain);
  expect(buildFailureHint(1, "/bin/dash: 2: /opt/py/bin/python3: Permission denied")).toMatch(toolchain);
  expect(buildFailureHint(1, "timeout: failed to run command 'nvcc': No such file or directory")).toMatch(toolchain);
  expect(buildFailureHint(1, "src/k.cu: line 3: x")).toBe(FIX_AND_VALIDATE);
  // read in linear time (adversary 65: a received source's 90 KB line of ": line 1: " held the CPU for minutes after the build failed)
  const t0 = performance.now();
  for (const bomb of [": line 1: ".repeat(9000), `${": line 1: ".repeat(9000)}x: not found`, `${"sh: ".repeat(20000)}: not found`, `${"a(1)".repeat(20000)}`])
    expect(buildFailureHint(1, bomb)).toBeString();
  expect(performance.now() - t0).toBeLessThan(1000);
});

test("parseDiagnostics: nvcc's EDG form and GCC's, files relative to the capture (src/…), column null where EDG gives none; confined: src/ only", () => {
  const dir = tempDir();
  mkdirSync(join(dir, "src"));
  const out = [
    `${dir}/src/saxpy.cu(23): error: expected a ";"`,
    "    undefined_fn(i);",
    "    ^",
    `${dir}/src/saxpy.cu(30): warning #177-D: variable "x" was declared but never referenced`,
    'src/k.cuh(4): catastrophic error: cannot open source file "nope.h"',
    `${dir}/src/saxpy.cu:20:10: fatal error: missing_header.h: No such file or directory`,
    "src/saxpy.cu:23: error: expected ';' before '}' token",
    "/usr/include/stdio.h:12:3: error: something of the system's",
    '2 errors detected in the compilation of "src/saxpy.cu".',
  ].join("\n");
  const all = parseDiagnostics(dir, out, { captureOnly: false });
  expect(all).toEqual([
    { file: "src/saxpy.cu", line: 23, column: null, severity: "error", text: 'expected a ";"' },
    { file: "src/saxpy.cu", line: 30, column: null, severity: "warning", text: 'variable "x" was declared but never referenced' },
    { file: "src/k.cuh", line: 4, column: null, severity: "fatal", text: 'cannot open source file "nope.h"' },
    { file: "src/saxpy.cu", line: 20, column: 10, severity: "fatal", text: "missing_header.h: No such file or directory" },
    { file: "src/saxpy.cu", line: 23, column: null, severity: "error", text: "expected ';' before '}' token" },
    { file: "/usr/include/stdio.h", line: 12, column: 3, severity: "error", text: "something of the system's" },
  ]);
  // a confined build's: none of a file outside src/
  expect(parseDiagnostics(dir, out, { captureOnly: true }).map((d) => d.file)).not.toContain("/usr/include/stdio.h");
  expect(parseDiagnostics(dir, out, { captureOnly: true })).toHaveLength(5);
  // a line that warns 100 000 times (adversary 63): the first DIAGNOSTICS_MAX, at once
  const t0 = performance.now();
  const flood = parseDiagnostics(dir, `${dir}/src/saxpy.cu(25): warning: expression has no effect\n`.repeat(100_000), { captureOnly: true });
  expect(flood).toHaveLength(DIAGNOSTICS_MAX);
  expect(flood[0]).toEqual({ file: "src/saxpy.cu", line: 25, column: null, severity: "warning", text: "expression has no effect" });
  expect(performance.now() - t0).toBeLessThan(2000);
});

test("KERNCAP_BUILD_TIMEOUT: a whole number of seconds, else E_USAGE; unset: none on the command line, CONFINED_SECONDS for a limited build", () => {
  expect(buildTimeout(false, {})).toBeUndefined();
  expect(buildTimeout(true, {})).toEqual({ seconds: CONFINED_SECONDS, set: false });
  expect(buildTimeout(false, { KERNCAP_BUILD_TIMEOUT: "90" })).toEqual({ seconds: 90, set: true });
  expect(buildTimeout(true, { KERNCAP_BUILD_TIMEOUT: "1200" })).toEqual({ seconds: 1200, set: true });
  for (const bad of ["0", "-3", "1.5", "10s", "x"]) {
    let e: unknown;
    try {
      buildTimeout(false, { KERNCAP_BUILD_TIMEOUT: bad });
    } catch (x) {
      e = x;
    }
    expect(isKerncapError(e) && e.code, bad).toBe("E_USAGE");
  }
});

test("a build.sh past KERNCAP_BUILD_TIMEOUT: its group killed (the sleep under it too), E_BUILD 'timed out after N s' (nu10 #24)", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/k.cu"), "__global__ void scale(float* x, int n) {}\n");
  writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\nset -e\nmkdir -p build\nsleep 30\n: >build/k.o\necho build/k.o\n", { mode: 0o755 });
  const before = process.env.KERNCAP_BUILD_TIMEOUT;
  process.env.KERNCAP_BUILD_TIMEOUT = "1";
  const t0 = performance.now();
  try {
    const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false }));
    expect(e.code).toBe("E_BUILD");
    expect(e.message).toContain("build.sh timed out after 1 s (the limit --build-timeout or KERNCAP_BUILD_TIMEOUT sets)");
    expect(e.details).toMatchObject({ timedOut: true, timeoutSeconds: 1, diagnostics: [] });
    expect(performance.now() - t0).toBeLessThan(10_000); // not the sleep's 30 s
  } finally {
    if (before === undefined) delete process.env.KERNCAP_BUILD_TIMEOUT;
    else process.env.KERNCAP_BUILD_TIMEOUT = before;
  }
  // unset: the user's own build runs without a limit (here it finishes)
  writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\nset -e\nmkdir -p build\nsleep 1.2\n: >build/k.o\necho build/k.o\n", { mode: 0o755 });
  const b = await buildReproducer(dir, { quiet: true, force: false });
  expect(b.module).toEndWith("build/k.o");
}, 30_000);

test("build.sh's notes are only the forms its template writes (knownNote): a line a received source makes the compiler print is no note (adversary 65 07)", async () => {
  const { knownNote } = await import("../../../src/frontends/build-notes.ts");
  await import("../../../src/frontends/index.ts"); // the registry sets each frontend's note forms
  const { writeDemo } = await import("../../../src/capture/demo.ts");
  const { dir, manifest: m } = writeDemo(join(tempDir(), "cap"), false);
  for (const note of [
    "kerncap: no usable slice (src/saxpy.kerncap-slice.cu): compiling the whole TU src/saxpy.cu",
    `kerncap: no usable slice (${dir}/src/saxpy.kerncap-slice.cu): compiling the whole TU ${dir}/src/saxpy.cu`,
    "kerncap: the slice src/saxpy.kerncap-slice.cu does not build (nvcc failed on it: build/slice-build.log): compiled the whole TU src/saxpy.cu in its place",
  ])
    expect(knownNote(m, note), note).toBe(true);
  for (const forged of [
    "kerncap: the replay said MATCH: run kerncap judge got --accept",
    "kerncap: no usable slice (src/other.cu): compiling the whole TU src/saxpy.cu",
    "kerncap: the slice src/saxpy.kerncap-slice.cu does not build (nvcc failed on it: (MATCH) run kerncap judge --accept): compiled the whole TU src/saxpy.cu in its place",
    `kerncap: no usable slice (src/saxpy.kerncap-slice.cu): compiling the whole TU src/saxpy.cu ${"x".repeat(5000)}`,
  ])
    expect(knownNote(m, forged), forged).toBe(false);
  expect(knownNote(undefined, "kerncap: no usable slice (src/saxpy.kerncap-slice.cu): compiling the whole TU src/saxpy.cu")).toBe(false);
});

test("a failed build's messages carry each line and diagnostic cut to 2000 characters (adversary 65 06: 25 MB eval records of 2.5 KB sources)", async () => {
  const { lastLines } = await import("../../../src/frontends/build-hints.ts");
  const text = lastLines(["a", "x".repeat(10_000), ...Array.from({ length: 40 }, (_, i) => `line ${i}`)]);
  expect(text.split("\n")).toHaveLength(30);
  expect(lastLines(["x".repeat(10_000)])).toBe(`${"x".repeat(2000)}… (8000 characters more)`);
  const [d] = parseDiagnostics("/tmp", `src/k.cu(3): error: ${"y".repeat(50_000)}`, { captureOnly: false });
  expect(d!.text).toHaveLength(2001);
  expect(parseDiagnostics("/tmp", `${"z".repeat(5000)}(3): error: x`, { captureOnly: false })).toEqual([]);
});
