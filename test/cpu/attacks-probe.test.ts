/**
 * The attack of "a file's existence" (docs/security.md): an MCP agent edits a source so that the
 * preprocessor looks up a file outside the capture and the build's result says whether it exists
 * (`#if __has_include("/home/u/.ssh/id_rsa")`, and every other spelling: a macro, `<…>`,
 * `#include_next`, `..`, a path stringized from tokens, a query pasted together, `#pragma GCC
 * dependency`, `_Pragma`, raw strings, digraphs, line splices). A confined build refuses each
 * before anything runs (E_CONFINED), and leaves ordinary code alone.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { probeProblems } from "../../src/frontends/confine-sources.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
/** A build.sh line that writes the dependency list a confined build asks for in EXTRA_FLAGS (-MF FILE), as nvcc -MD would before a compile error: such a build fails as E_BUILD (a build with no list is E_CONFINED). */
const DEPS_LIST =
  'd=$(sed -n "s/.*-MF \\([^ ]*\\).*/\\1/p" <<<"${EXTRA_FLAGS:-}"); if [ -n "$d" ]; then mkdir -p "$(dirname "$d")"; echo "kernel.o:" >"$d"; fi\n';
import { makeCapture, recordRendered, tempDir, sandboxOffForMarkers } from "./fixtures.ts";

/** What a confined build reads: the capture /cap and the system's headers (a stand-in for confinedReadable). */
const readable = (p: string) => p === "/cap" || p.startsWith("/cap/") || p.startsWith("/usr/include/");
const problems = (text: string) => probeProblems(text, "src/k.cu", "/cap/src/k.cu", readable);

describe("the sources of a confined build", () => {
  const ATTACKS: Record<string, string> = {
    "a literal __has_include": '#if __has_include("/home/u/.ssh/id_rsa")\n#error yes\n#endif\n',
    __has_include_next: '#if __has_include_next("/etc/shadow")\n#endif\n',
    "a macro naming the path (#define P then __has_include(P))": '#define P "/home/u/.ssh/id_rsa"\n#if __has_include(P)\nint yes;\n#endif\n',
    "<…> with an absolute path": "#if __has_include(</home/u/.ssh/id_rsa>)\n#endif\n",
    "<…> climbing with ..": "#if __has_include(<../../../../home/u/.ssh/id_rsa>)\n#endif\n",
    "a quoted name climbing out of the capture": '#if __has_include("../../home/u/.ssh/id_rsa")\n#endif\n',
    "#include_next of an absolute path": '#include_next "/etc/hostname"\n',
    "#include of a macro holding the path": '#define H "/etc/hostname"\n#include H\n',
    "a path stringized from tokens": "#define S(x) #x\n#define X(x) S(x)\n#if __has_include(X(/home/u/.ssh/id_rsa))\n#endif\n",
    "a query pasted together": '#define C(a, b) a##b\n#if C(__has_, include)("/etc/hostname")\n#endif\n',
    "a pasted query over a stringized path": "#define C(a, b) a##b\n#define S(x) #x\n#if C(__has_, include)(S(/etc/hostname))\n#endif\n",
    "a stringized path climbing with ..": "#define S(x) #x\n#if __has_include(S(a/../../../../etc/hostname))\n#endif\n",
    "#pragma GCC dependency": '#pragma GCC dependency "/etc/hostname"\n',
    _Pragma: '_Pragma("GCC dependency \\"/etc/hostname\\"")\n',
    // ??/ is a backslash under -std=c++14: the string does not end where the scan thinks (a trial)
    // gcc joins a line ending in a backslash and blanks (a trial: the scan did not, and a __has_include got past it)
    "a backslash and a space at a line's end": '// \\ \n/*\n#if __has_include("/home/u/.ssh/id_rsa")\n#endif\n// */\n',
    // the build compiles a copy of src/: an absolute name of the capture's own file reaches the live one, which an edit changes after the scan (a trial's race)
    "an absolute path to a file of the capture itself": '#include "/cap/src/inner.h"\n',
    "a .. out of src/ into the capture's own files": '#if __has_include("../memory/before.bin")\n#endif\n',
    "a trigraph that moves where a string ends": 'const char* s = "??/"; /* ";\n#if __has_include("/home/u/.ssh/id_rsa")\n#endif\n/* */\n',
    "a raw string": '#define P R"x(/etc/hostname)x"\n',
    "a digraph directive": '%:include "/etc/hostname"\n',
    "a line splice inside the query": '#if __has_inc\\\nlude("/etc/ho\\\nstname")\n#endif\n',
    "a macro body starting with /": "#define P /etc/hostname\n#define S(x) #x\n#define X(x) S(x)\n#if __has_include(X(P))\n#endif\n",
    "a home folder": '#if __has_include("~/.ssh/id_rsa")\n#endif\n',
    // an empty macro before the / hides the path from the scan: a computed operand is refused whatever it expands to
    "a stringized path behind an empty macro (__has_include)":
      "#define E\n#define S(a) #a\n#define X(a) S(a)\n#if __has_include(X(E/etc/shadow))\n#error yes\n#endif\n",
    "a stringized path behind an empty macro (#include)": "#define E\n#define S(a) #a\n#define X(a) S(a)\n#include X(E/work/secret3.h)\n",
    "a query inside a macro (its operand comes from the caller)": "#define HAS(x) __has_include(x)\n#if HAS(<cuda_bf16.h>)\n#endif\n",
  };
  for (const [name, text] of Object.entries(ATTACKS)) {
    test(`refused: ${name}`, () => {
      const p = problems(text);
      expect(p.length, text).toBeGreaterThan(0);
      expect(p[0]).toStartWith("src/k.cu:");
    });
  }

  test("ordinary sources pass: headers of the capture and the system, queries of the compiler, division, an operator passed to a macro, comments", () => {
    const ok = [
      '#include "../src/common.h"\n#include "detail/x.cuh"\n#include <cuda_fp16.h>\n#include </usr/include/stdio.h>\n',
      "#if defined(__has_include)\n#if __has_include(<cuda_fp8.h>) && __has_builtin(__builtin_expect)\n#endif\n#endif\n#ifdef __has_include\n#endif\n",
      "__global__ void k(float* x, int n) { x[0] = x[1] / 2.0f; int a = (n) / 4; float r = 1.f/x[2]; }\n",
      "#define DIV(a, b) ((a) / (b))\n#define OP(o, f) f\nOP(/, divides)\nOP(/=, div_assign)\n",
      '// #include "/etc/hostname"\n/* __has_include("/etc/shadow") */\nconst char* s = "1/2 ../ a";\nconst char* t = "/";\n',
      'const char* u = R"(not a path)";\nint v = 0x1.8p3 + 1e-3;\n',
    ];
    for (const text of ok) expect(problems(text), text).toEqual([]);
  });
});

/** The demo capture, and the scan a confined build runs on its sources first (assertNoProbes): its refusal, or undefined. */
async function scannedDemo(): Promise<{ cap: string; refusal: () => { code: string; message: string } | undefined }> {
  const { assertNoProbes } = await import("../../src/frontends/confine-sources.ts");
  const { readManifest } = await import("../../src/format/capture-dir.ts");
  const { writeDemo } = await import("../../src/capture/demo.ts");
  const cap = join(tempDir(), "cap");
  writeDemo(cap, false);
  const m = readManifest(cap);
  const refusal = () => {
    try {
      assertNoProbes(cap, m);
    } catch (e) {
      return e as { code: string; message: string };
    }
    return undefined;
  };
  return { cap, refusal };
}

describe("the files a confined build's sources can include", () => {
  test("every file under src/ is scanned whatever its name: a p.txt (or a file with no suffix) that the TU includes is refused, naming it, and a text file that names nothing passes", async () => {
    const { cap, refusal } = await scannedDemo();
    writeFileSync(join(cap, "src/notes.txt"), "the kernel adds a*x to y\n");
    expect(refusal()).toBeUndefined();
    // a trial: the TU includes "p.txt", whose __has_include the build's result answered (a file-existence oracle)
    for (const name of ["p.txt", "inc/probe"]) {
      mkdirSync(join(cap, "src/inc"), { recursive: true });
      writeFileSync(join(cap, "src", name), '#if __has_include("/etc/hostname")\n#error PROBE_HIT\n#endif\n');
      const err = refusal()!;
      expect(err?.code, name).toBe("E_CONFINED");
      expect(err.message).toContain(`src/${name}:1: the string names "/etc/hostname"`);
      rmSync(join(cap, "src", name));
    }
  });
});

describe("a query of a relative name where the user's own build searches folders the sandbox hides (adversary 49: CPATH, an include folder of build.sh outside src/)", () => {
  test("__has_include(<kcm.h>) passes where only src/ and the toolchain are searched, and is refused (E_CONFINED) under CPATH, NVCC_APPEND_FLAGS or an -I outside", async () => {
    const { cap, refusal } = await scannedDemo();
    writeFileSync(join(cap, "src/q.h"), "#if __has_include(<kcm.h>)\n#define KCM 1\n#endif\n");
    expect(refusal()).toBeUndefined();
    for (const [k, v, said] of [
      ["CPATH", "/home/u/include", "the folders CPATH adds"],
      ["NVCC_APPEND_FLAGS", "-I/home/u/include", "the folders NVCC_APPEND_FLAGS adds"],
      ["EXTRA_FLAGS", "--system-include=/home/u/include", "the include folders of EXTRA_FLAGS"], // nvcc's long spelling (adversary 51)
      ["EXTRA_FLAGS", "-Xcompiler -iwithprefix/u", "the include folders of EXTRA_FLAGS"],
    ] as const) {
      const saved = process.env[k];
      process.env[k] = v;
      try {
        const e = refusal();
        expect(e?.code).toBe("E_CONFINED");
        expect(e?.message).toContain(`src/q.h:1: __has_include: your own build also searches ${said}`);
      } finally {
        if (saved === undefined) delete process.env[k];
        else process.env[k] = saved;
      }
    }
    const script = readFileSync(join(cap, "build.sh"), "utf8");
    writeFileSync(join(cap, "build.sh"), script.replace('-I"$here/src"', '-I"$here/src" -I/home/u/include'));
    expect(refusal()?.message).toContain('the include folder "/home/u/include" of build.sh');
  });
});

describe("kerncap mcp: the agent's edit that asks whether a file exists", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  let savedState: string | undefined;
  let client: Client;
  let cap: string;
  let ran: string;
  beforeAll(async () => {
    savedState = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
    const root = tempDir();
    cap = join(root, "cap");
    ran = join(root, "build-ran");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    // kerncap's build as far as this test needs: it marks that it ran (the preprocessor would have looked the file up)
    writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\ntouch ${JSON.stringify(ran)}\n${DEPS_LIST}echo "no compiler in this test" >&2\nexit 1\n`, {
      mode: 0o755,
    });
    recordRendered(cap);
    const [a, b] = InMemoryTransport.createLinkedPair();
    await createMcpServer(undefined, { trustBuilds: false }).connect(a);
    client = new Client({ name: "probe", version: "1" });
    await client.connect(b);
  });
  afterAll(async () => {
    await client?.close();
    if (savedState === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = savedState;
  });

  test('edit_file writes #define P "/etc/hostname" + __has_include(P); validate, tune, profile and evaluate refuse it (E_CONFINED) before build.sh runs, naming the line, not the answer', async () => {
    const probe = '#define P "/etc/hostname"\n#if __has_include(P)\n#error exists\n#endif\n__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n';
    const w = await client.callTool({ name: "edit_file", arguments: { dir: cap, path: "src/kernel.cu", content: probe } });
    expect(w.isError).toBeFalsy();
    for (const [name, args] of [
      ["validate", { dir: cap }],
      ["tune", { dir: cap, maxrregcount: [32] }],
      ["profile", { dir: cap, build: true }],
    ] as const) {
      const r = await client.callTool({ name, arguments: args });
      const d = r.structuredContent as Record<string, any>;
      if (name === "profile" && d.error?.code === "E_NO_NCU") continue; // no Nsight Compute here: refused before any build too
      expect(d.error?.code, name).toBe("E_CONFINED");
      expect(d.error.message).toContain("src/kernel.cu:1:");
      expect(existsSync(ran)).toBe(false);
    }
    const e = await client.callTool({
      name: "evaluate",
      arguments: { dir: cap, candidates: [{ name: "v1", files: { "src/kernel.cu": probe.replace("/etc/hostname", "/etc/nonexistent-file") } }] },
    });
    const ed = e.structuredContent as Record<string, any>;
    expect(JSON.stringify(ed)).toContain("E_CONFINED");
    expect(existsSync(ran)).toBe(false);
    // an ordinary edit builds (here: build.sh runs and fails, as it does)
    await client.callTool({
      name: "edit_file",
      arguments: { dir: cap, path: "src/kernel.cu", content: readFileSync(join(cap, "src/kernel.cu"), "utf8").replace(/^#.*\n/gm, "") },
    });
    const ok = await client.callTool({ name: "validate", arguments: { dir: cap } });
    expect((ok.structuredContent as Record<string, any>).error?.code).toBe("E_BUILD");
    expect(existsSync(ran)).toBe(true);
  }, 120_000);
});

describe("what a confined build's messages name", () => {
  test("build.sh's note on the slice's log is kept, without pointing the agent at a build output read_file refuses, nor at a command line it has not (nu10 #16)", async () => {
    const { captureDiagnostics } = await import("../../src/frontends/confine.ts");
    const dir = tempDir();
    const out = captureDiagnostics(
      dir,
      "kerncap: the slice src/k.kerncap-slice.cu does not build (nvcc failed on it: build/slice-build.log): compiling the whole TU src/k.cu\nother line\n",
    );
    expect(out).toEqual([
      "kerncap: the slice src/k.kerncap-slice.cu does not build (its messages are not shown to a confined build: the whole TU's build, next, says any error to fix): compiling the whole TU src/k.cu",
    ]);
  });
});

describe("a received capture's manifest widens nothing", () => {
  test("its source.cuda.projectRoot and referencedOutsideRoot are the sender's: a confined build may not read there (a trial's named /home/victim)", async () => {
    const { confinedReadable } = await import("../../src/frontends/confine.ts");
    const { readManifest } = await import("../../src/format/capture-dir.ts");
    const { markReceived } = await import("../../src/format/received.ts");
    const root = tempDir();
    const home = join(root, "home");
    mkdirSync(home);
    writeFileSync(join(home, "secret.h"), "x");
    const dir = join(root, "cap");
    await makeCapture(dir);
    const m = readManifest(dir);
    m.source = { cuda: { projectRoot: home, referencedOutsideRoot: [join(home, "secret.h")] } } as unknown as typeof m.source;
    expect(confinedReadable(dir, m)(join(home, "secret.h"))).toBe(true); // made here: the user's own project
    markReceived(dir, "cap.zip");
    expect(confinedReadable(dir, m)(join(home, "secret.h"))).toBe(false);
    expect(confinedReadable(dir, m)(join(dir, "src", "k.cu"))).toBe(true);
  });

  test("of the capture, a confined build reads src/ only: not build/, whose logs quote what a refused build read (a trial included build/slice-build.log in a second build), nor kerncap.json", async () => {
    const { confinedReadable, captureDiagnostics } = await import("../../src/frontends/confine.ts");
    const { readManifest } = await import("../../src/format/capture-dir.ts");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const readable = confinedReadable(dir, readManifest(dir));
    expect(readable(join(dir, "src", "k.cu"))).toBe(true);
    for (const f of ["build/slice-build.log", "build/kernel.cubin", "kerncap.json", "README.md"]) expect(readable(join(dir, f)), f).toBe(false);
    // the compiler's messages about a file under build/ (the log included) are not shown; those about src/ are
    const shown = captureDiagnostics(
      dir,
      `${join(dir, "build/slice-build.log")}(3): error: identifier "SECRET" is undefined\n${join(dir, "src/k.cu")}(7): error: expected a ";"`,
    );
    expect(shown).toEqual(['src/k.cu:7: error: expected a ";"']);
  });

  test("a quoted name with two leading slashes is a path (//home/u/x is /home/u/x to the preprocessor): refused before the build", async () => {
    const { probeProblems } = await import("../../src/frontends/confine-sources.ts");
    const readable = (p: string) => p.startsWith("/cap/src/");
    for (const inc of ['#include "//home/victim/secret.txt"', '#include "///etc/machine-id"', 'int x = 0 +\n#include "//cap/build/slice-build.log"\n;'])
      expect(probeProblems(`${inc}\n`, "src/k.cu", "/cap/src/k.cu", readable).length, inc).toBeGreaterThan(0);
    expect(probeProblems('const char *s = "// not a path";\n', "src/k.cu", "/cap/src/k.cu", readable)).toEqual([]);
  });
});
