/**
 * Issue 23: what a received capture, another local user or an MCP agent could make kerncap do on
 * the CPU, one test per attack, each failing on the code before the capture path rule
 * (src/format/paths.ts), the slice meta check, received-capture trust (src/format/trust.ts) and
 * the confined MCP build (src/frontends/confine.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { runCommand } from "citty";
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  realpathSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { commands } from "../../src/cli/main.ts";
import { KerncapError } from "../../src/errors.ts";
import { packCapture, unpackArchive } from "../../src/format/archive.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { createMcpServer } from "../../src/mcp/server.ts";
import { buildReproducer, CONFINED_DATA_KIB } from "../../src/frontends/build.ts";
import { remakeStaleSlice } from "../../src/frontends/cuda/slice.ts";
import { receivedBecause } from "../../src/format/received.ts";
import { requireTrustedBuild } from "../../src/format/trust.ts";
import { makeCapture, recordRendered, tempDir, trustDigest } from "./fixtures.ts";

const SECRET = "TOPSECRET_hunter2";
let state: string;
let savedState: string | undefined;
beforeAll(() => {
  // the trust record goes to a state folder of this test's own
  savedState = process.env.XDG_STATE_HOME;
  state = tempDir("kerncap-state-");
  process.env.XDG_STATE_HOME = state;
});
afterAll(() => {
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

/** A capture made here, with a CUDA slice recorded in its manifest and src/main.cu. */
async function sliced(meta: Record<string, unknown>): Promise<{ root: string; dir: string }> {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/main.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  m.source = {
    cuda: { slice: { used: true, meta: { kind: "prefix", tu: "main.cu", slice: "main.kerncap-slice.cu", base: "scale", definitionName: "main.cu", ...meta } } },
  };
  writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
  return { root, dir };
}

async function thrown(f: () => unknown): Promise<KerncapError> {
  try {
    await f();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no error thrown");
}

async function mcp(trustBuilds = false): Promise<Client> {
  const [a, b] = InMemoryTransport.createLinkedPair();
  await createMcpServer(undefined, { trustBuilds }).connect(a);
  const c = new Client({ name: "test", version: "1" });
  await c.connect(b);
  return c;
}
const doc = (r: any) => r.structuredContent as Record<string, any>;

/** A build.sh compiling src/kernel.cu with g++ (the flags a confined build adds come through EXTRA_FLAGS, as in templates/cuda/build.sh.hbs); it leaves a mark when it runs. */
/** Run `f` with process.stderr.write captured; @returns what it wrote. */
function captureStderr(f: () => void): string {
  let out = "";
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((c: string | Uint8Array) => ((out += typeof c === "string" ? c : new TextDecoder().decode(c)), true)) as typeof process.stderr.write;
  try {
    f();
  } finally {
    process.stderr.write = orig;
  }
  return out;
}

function gxxBuild(dir: string): void {
  writeFileSync(
    join(dir, "build.sh"),
    `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nmkdir -p "$here/build"\necho ran >"$here/build/ran"\n# shellcheck disable=SC2086\ng++ -c -x c++ \${EXTRA_FLAGS:-} "$here/src/kernel.cu" -o "$here/build/kernel.o" >&2\necho "$here/build/kernel.o"\n`,
    { mode: 0o755 },
  );
  recordRendered(dir); // stands for the build.sh kerncap wrote: a confined build runs no other
}

describe("a received capture's manifest", () => {
  test("source.cuda.slice.meta.slice ../../x: validate refuses (exit 2) and writes nothing outside the folder", async () => {
    const { root, dir } = await sliced({ slice: "../../x", odrUse: 'scale\n#include "/etc/passwd"' });
    const e = await thrown(async () => runCommand(await commands.validate(), { rawArgs: [dir] }));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.exitCode).toBe(2);
    expect(e.message).toContain("source.cuda.slice.meta.slice");
    expect(existsSync(join(root, "x"))).toBe(false); // src/../../x
  });

  test("odrUse, cutInclude or definitionName with a line of their own, a base that is no identifier: refused before any write", async () => {
    for (const meta of [
      { odrUse: 'scale<int>;\n#include "/etc/passwd"\nvoid* y = 0' },
      { cutInclude: '#include "k.h"\n#include "/etc/shadow"' },
      { definitionName: "k.cu)\n#include </etc/passwd>" },
      { base: "scale;system" },
      { tu: 'main.cu"\n#include "/etc/passwd' },
    ]) {
      const { dir } = await sliced(meta);
      writeFileSync(join(dir, "src/main.cu"), "// edited\n__global__ void scale(float* x, int n) {}\n"); // a stale slice: validate would remake it
      const e = await thrown(() => remakeStaleSlice(dir, readManifest(dir)));
      expect(e.code, JSON.stringify(meta)).toBe("E_MANIFEST");
      expect(existsSync(join(dir, "src/main.kerncap-slice.cu")), JSON.stringify(meta)).toBe(false);
    }
    // what kerncap writes itself still goes through: a template instantiation and an include line
    const { dir } = await sliced({ odrUse: "ns::scale<(Kind)2, 64, false>", base: "scale" });
    expect(() => remakeStaleSlice(dir, readManifest(dir))).not.toThrow();
  });

  test("the slice a symbolic link to a file outside: its target is not written", async () => {
    const { root, dir } = await sliced({});
    writeFileSync(join(root, "victim"), "keep");
    symlinkSync(join(root, "victim"), join(dir, "src/main.kerncap-slice.cu"));
    const e = await thrown(() => remakeStaleSlice(dir, readManifest(dir)));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("src/main.kerncap-slice.cu");
    expect(readFileSync(join(root, "victim"), "utf8")).toBe("keep");
  });

  test("kerncap.json a FIFO: inspect refuses at once (no hang); a link to /dev/zero: refused, not ENOMEM; past 64 MiB: refused", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    rmSync(join(dir, "kerncap.json"));
    expect(Bun.spawnSync(["mkfifo", join(dir, "kerncap.json")]).exitCode).toBe(0);
    const t0 = performance.now();
    const fifo = await thrown(() => readManifest(dir));
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(fifo).toMatchObject({ code: "E_UNSAFE_PATH", exitCode: 2 });
    expect(fifo.message).toContain("kerncap.json");
    expect(fifo.message).toContain("a FIFO");
    const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "inspect", dir], { stderr: "pipe", timeout: 20_000 });
    expect(p.exitCode).toBe(2);
    rmSync(join(dir, "kerncap.json"));
    symlinkSync("/dev/zero", join(dir, "kerncap.json"));
    const zero = await thrown(() => readManifest(dir));
    expect(zero.code).toBe("E_UNSAFE_PATH");
    expect(zero.message).toContain("symbolic link");
    rmSync(join(dir, "kerncap.json"));
    writeFileSync(join(dir, "kerncap.json"), "");
    truncateSync(join(dir, "kerncap.json"), (64 << 20) + 1);
    const big = await thrown(() => readManifest(dir));
    expect(big.code).toBe("E_UNSAFE_PATH");
    expect(big.message).toContain("reads at most");
  });

  test("a memory image that is a hard link: replay's checks refuse it, naming it", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    linkSync(join(dir, "memory/after.bin"), join(root, "elsewhere.bin"));
    const e = await thrown(async () => runCommand(await commands.inspect(), { rawArgs: [dir] }));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("memory/after.bin");
    expect(e.message).toContain("hard link");
  });
});

describe("MCP file tools", () => {
  async function withSrc(): Promise<{ root: string; dir: string }> {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/kernel.cu"), "int k() { return 1; }\n");
    return { root, dir };
  }

  test("edit_file on a dangling link inside src/: refused; the file it names is not created", async () => {
    const c = await mcp();
    const { root, dir } = await withSrc();
    symlinkSync(join(root, "created-outside"), join(dir, "src/link.cu"));
    const r = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/link.cu", content: "x" } });
    expect(doc(r).error.code).toBe("E_UNSAFE_PATH");
    expect(doc(r).error.message).toContain("src/link.cu");
    expect(doc(r).error.message).toContain("symbolic link");
    expect(existsSync(join(root, "created-outside"))).toBe(false);
    await c.close();
  });

  test("edit_file on a hard link inside src/: refused; the outside file is unchanged", async () => {
    const c = await mcp();
    const { root, dir } = await withSrc();
    writeFileSync(join(root, "outside.cu"), "keep\n");
    linkSync(join(root, "outside.cu"), join(dir, "src/hl.cu"));
    for (const args of [{ content: "x" }, { oldText: "keep", newText: "x" }]) {
      const r = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/hl.cu", ...args } });
      expect(doc(r).error.code).toBe("E_UNSAFE_PATH");
      expect(doc(r).error.message).toContain("hard link");
    }
    expect(readFileSync(join(root, "outside.cu"), "utf8")).toBe("keep\n");
    await c.close();
  });

  test("a NUL byte in a path, a dir or an app argument: a usage error naming it, never an internal error", async () => {
    const c = await mcp();
    const { dir } = await withSrc();
    for (const [name, args] of [
      ["edit_file", { dir, path: "src/a\0b.cu", content: "x" }],
      ["read_file", { dir, path: "src/kernel.cu\0" }],
      ["read_file", { dir: `${dir}\0`, path: "src/kernel.cu" }],
      ["inspect", { dir: `${dir}\0x` }],
      ["run", { app: ["true\0"] }],
    ] as const) {
      const r = await c.callTool({ name, arguments: args });
      expect(r.isError, name).toBe(true);
      expect(doc(r).error.code, name).toBe("E_USAGE");
      expect(doc(r).error.message, name).toContain("NUL byte");
    }
    // a lone surrogate ("\udcff" in the JSON-RPC text) has no UTF-8 form: read_file read src/k\uFFFD.h in its place (adversary 69)
    writeFileSync(join(dir, "src", "k\ufffd.h"), "OTHER\n");
    for (const [name, args] of [
      ["read_file", { dir, path: "src/k\udcff.h" }],
      ["edit_file", { dir, path: "src/k\udcff.h", content: "x" }],
    ] as const) {
      const r = await c.callTool({ name, arguments: args });
      expect(r.isError, name).toBe(true);
      expect(doc(r).error.code, name).toBe("E_USAGE");
      expect(doc(r).error.message, name).toContain("lone UTF-16 surrogate");
    }
    expect(readFileSync(join(dir, "src", "k\ufffd.h"), "utf8")).toBe("OTHER\n");
    await c.close();
  });
});

describe("MCP validate: the build reads nothing outside the capture", () => {
  test("an #include of a file outside: refused (E_CONFINED), the file's content not echoed; an ordinary compile error keeps only the capture's diagnostics (g++)", async () => {
    const { root, dir } = await (async () => {
      const root = tempDir();
      const dir = join(root, "cap");
      await makeCapture(dir);
      mkdirSync(join(dir, "src"));
      writeFileSync(join(dir, "src/kernel.cu"), "int k() { return 1; }\n");
      gxxBuild(dir);
      return { root, dir };
    })();
    writeFileSync(join(root, "secret"), `${SECRET} is the password\n`);
    const c = await mcp();
    const edit = await c.callTool({
      name: "edit_file",
      arguments: { dir, path: "src/kernel.cu", oldText: "int k()", newText: `#include "${join(root, "secret")}"\nint k()` },
    });
    expect(edit.isError, JSON.stringify(edit)).toBe(false);
    const v = await c.callTool({ name: "validate", arguments: { dir } });
    const all = JSON.stringify(v);
    expect(doc(v).error.code, all).toBe("E_CONFINED");
    expect(doc(v).error.message).toContain(join(root, "secret"));
    expect(all).not.toContain(SECRET);
    // the same source on the command line (not confined): the compiler's message, which quotes the file
    const full = await thrown(() => buildReproducer(dir, { quiet: true, force: false }));
    expect(full.message).toContain(SECRET);
    // an error in the capture's own file: file:line and the error's text, no quoted source line
    writeFileSync(join(dir, "src/kernel.cu"), "int k() { return undefined_name_here; }\n");
    const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) }));
    expect(e.code).toBe("E_BUILD");
    expect(e.message).toMatch(/src\/kernel\.cu:1: error: .*undefined_name_here/);
    expect(e.message).not.toContain("int k() {");
    await c.close();
  }, 60_000);

  test.skipIf(!Bun.which("g++"))(
    "a confined build runs under a data-size limit (an #include of /dev/zero once took 21 GB); an unconfined one does not",
    async () => {
      const root = tempDir();
      const dir = join(root, "cap");
      await makeCapture(dir);
      mkdirSync(join(dir, "src"));
      writeFileSync(join(dir, "src/kernel.cu"), "int k() { return 1; }\n");
      gxxBuild(dir);
      writeFileSync(
        join(dir, "build.sh"),
        readFileSync(join(dir, "build.sh"), "utf8").replace('echo ran >"$here/build/ran"', 'ulimit -d >"$here/build/limit"'),
      );
      recordRendered(dir);
      await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) });
      expect(readFileSync(join(dir, "build/limit"), "utf8").trim()).toBe(String(CONFINED_DATA_KIB));
      await buildReproducer(dir, { quiet: true, force: false });
      expect(readFileSync(join(dir, "build/limit"), "utf8").trim()).not.toBe(String(CONFINED_DATA_KIB));
    },
    60_000,
  );

  test.skipIf(!Bun.which("nvcc"))(
    "the same with nvcc: an #include of a file outside is refused without its content",
    async () => {
      const root = tempDir();
      const dir = join(root, "cap");
      await makeCapture(dir);
      mkdirSync(join(dir, "src"));
      writeFileSync(join(root, "secret"), `${SECRET} is the password\n`);
      writeFileSync(join(dir, "src/kernel.cu"), `#include "${join(root, "secret")}"\n__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n`);
      writeFileSync(
        join(dir, "build.sh"),
        `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nmkdir -p "$here/build"\n# shellcheck disable=SC2086\nnvcc -cubin -arch=sm_90 -x cu \${EXTRA_FLAGS:-} "$here/src/kernel.cu" -o "$here/build/kernel.cubin" >&2\necho "$here/build/kernel.cubin"\n`,
        { mode: 0o755 },
      );
      recordRendered(dir);
      const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) }));
      expect(e.code).toBe("E_CONFINED");
      expect(e.message).not.toContain(SECRET);
    },
    60_000,
  );
});

describe("received captures: build.sh runs only after --trust", () => {
  async function received(): Promise<{ root: string; dir: string }> {
    const root = tempDir();
    const made = join(root, "made");
    await makeCapture(made);
    mkdirSync(join(made, "src"));
    writeFileSync(join(made, "src/kernel.cu"), "int k() { return 1; }\n");
    gxxBuild(made);
    // a forged trust record inside the archive trusts nothing: the record lives in the user's state folder
    writeFileSync(join(made, "trusted-builds.json"), JSON.stringify({ builds: [{ dir: join(root, "got"), buildSh: "x" }] }));
    const p = await packCapture(made, join(root, "cap.zip"));
    const u = await unpackArchive(p.archive, join(root, "got"));
    return { root, dir: u.dir };
  }

  test("an unpacked capture: validate prints build.sh and refuses (exit 2); --trust runs it and is remembered; a changed build.sh asks again", async () => {
    const { dir } = await received();
    expect(receivedBecause(dir, readManifest(dir))).toStartWith("it was unpacked from an archive");
    const e = await thrown(async () => runCommand(await commands.validate(), { rawArgs: [dir] }));
    expect(e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(e.message).toContain("--trust");
    expect(existsSync(join(dir, "build/ran"))).toBe(false);
    // --trust=DIGEST (a hand-written build.sh: plain --trust is not enough, docs/security.md): past the gate (the build runs; the replay then needs a GPU)
    await thrown(async () => runCommand(await commands.validate(), { rawArgs: [dir, `--trust=${trustDigest(dir)}`] })).catch(() => undefined);
    expect(existsSync(join(dir, "build/ran"))).toBe(true);
    expect(() => requireTrustedBuild(dir, readManifest(dir), false)).not.toThrow(); // remembered
    expect(existsSync(join(state, "kerncap/trusted-builds.json"))).toBe(true);
    writeFileSync(join(dir, "build.sh"), readFileSync(join(dir, "build.sh"), "utf8") + "# changed\n");
    expect((await thrown(() => requireTrustedBuild(dir, readManifest(dir), false))).code).toBe("E_UNTRUSTED");
    // in the error's message (kerncap mcp's validate): escaped as on stderr, and bounded
    writeFileSync(join(dir, "build.sh"), `#!/bin/bash\necho \x1b[31m\n# ${"x".repeat(70 << 10)}\n`);
    const big = await thrown(() => requireTrustedBuild(dir, readManifest(dir), false, { inMessage: true }));
    expect(big.code).toBe("E_UNTRUSTED");
    expect(big.message).toContain("echo \\x1b[31m");
    expect(big.message).not.toContain("\x1b");
    // bounded, then the src/ files a hand-written build.sh can reach, listed by name and digest
    expect(big.message).toMatch(
      /… \(\d+ bytes more, not shown here: read build.sh whole before you trust it; read_file reads it\)\n──── end of build.sh ────\n──── src\/kernel.cu \(22 bytes, sha256 [0-9a-f]{64}; build.sh can reach it: part of the digest, not printed\) ────$/,
    );
    expect(big.message.length).toBeLessThan(66 << 10);
  }, 60_000);

  test("a Triton capture without build.sh still asks (pinned.json names the interpreter tune runs); a change to pinned.json asks again", async () => {
    const root = tempDir();
    const dir = join(root, "tri");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.host = { name: "elsewhere", machineId: "0123456789abcdef0123456789abcdef" };
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(dir, "pinned.json"), JSON.stringify({ fnName: "k", python: "/opt/kc-missing/python3", kernelFile: "k.py" }));
    const err = captureStderr(() =>
      expect(() => requireTrustedBuild(dir, readManifest(dir), false, { command: `kerncap tune ${dir}` })).toThrow(
        /received capture .* what its build runs \(pinned.json, the interpreter pinned.json names: shown above; the digest of all of it: sha256 [0-9a-f]{64}\)/,
      ),
    );
    expect(err).toContain("──── the interpreter pinned.json names (run with kerncap's repro.py) ────\n/opt/kc-missing/python3\n");
    requireTrustedBuild(dir, readManifest(dir), true); // trusted, remembered
    expect(() => requireTrustedBuild(dir, readManifest(dir), false)).not.toThrow();
    writeFileSync(join(dir, "pinned.json"), JSON.stringify({ fnName: "k", python: "/opt/kc-other/python3", kernelFile: "k.py" }));
    captureStderr(() => expect(() => requireTrustedBuild(dir, readManifest(dir), false)).toThrow(/E_UNTRUSTED|received capture/));
  });

  test("a capture inside a folder unpacked from an archive is received; a manifest with this host's name but no machine-id is received", async () => {
    const root = tempDir();
    const outer = join(root, "outer");
    mkdirSync(outer);
    writeFileSync(join(outer, "kerncap-received.json"), "{}");
    const dir = join(outer, "sub");
    await makeCapture(dir);
    expect(receivedBecause(dir, readManifest(dir))).toBe(`it lies inside ${realpathSync(outer)}, which was unpacked from an archive`);
    const own = join(root, "own");
    await makeCapture(own);
    expect(receivedBecause(own, readManifest(own))).toBeUndefined();
    const m = JSON.parse(readFileSync(join(own, "kerncap.json"), "utf8"));
    if (m.host?.machineId) {
      m.host = { name: m.host.name, machineId: null };
      writeFileSync(join(own, "kerncap.json"), JSON.stringify(m));
      expect(receivedBecause(own, readManifest(own))).toBe(
        `its manifest names host ${JSON.stringify(m.host.name)} but no machine-id (an archive and an export carry none: pack leaves it out)`,
      );
    }
  });

  test("a build/ folder, or the pruned build's plan, that every user may write makes the capture received (the plan's commands run as written)", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "build/pruned"), { recursive: true });
    expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
    chmodSync(join(dir, "build"), 0o777);
    expect(receivedBecause(dir, readManifest(dir))).toContain("build can be written by every user");
    chmodSync(join(dir, "build"), 0o755);
    writeFileSync(join(dir, "build/pruned/plan.json"), "{}", { mode: 0o666 });
    chmodSync(join(dir, "build/pruned/plan.json"), 0o666);
    expect(receivedBecause(dir, readManifest(dir))).toContain("build/pruned/plan.json can be written by every user");
  });

  test("a folder another local user owns, or one every user may write, is received whatever its manifest says", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/kernel.cu"), "int k() { return 1; }\n");
    gxxBuild(dir);
    expect(receivedBecause(dir, readManifest(dir))).toBeUndefined(); // made here, by this user
    chmodSync(join(dir, "build.sh"), 0o757);
    expect(receivedBecause(dir, readManifest(dir))).toBe("build.sh can be written by every user (mode 757)");
    chmodSync(join(dir, "build.sh"), 0o755);
    chmodSync(join(dir, "src"), 0o777);
    expect(receivedBecause(dir, readManifest(dir))).toContain("src can be written by every user");
    chmodSync(join(dir, "src"), 0o755);
    expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
    if (process.geteuid?.() === 0) {
      // root is handed a folder that user 65534 (nobody) wrote: its build.sh is nobody's to change
      chownSync(dir, 65534, 65534);
      expect(receivedBecause(dir, readManifest(dir))).toBe("the folder belongs to another user (uid 65534; you are uid 0)");
      // a link of one's own to that folder does not make it one's own
      const link = join(root, "mine");
      symlinkSync(dir, link);
      expect(receivedBecause(link, readManifest(link))).toBe("the folder belongs to another user (uid 65534; you are uid 0)");
      chownSync(dir, 0, 0);
      chownSync(join(dir, "build.sh"), 65534, 65534);
      expect(receivedBecause(dir, readManifest(dir))).toContain("build.sh belongs to another user (uid 65534");
      expect(() => requireTrustedBuild(dir, readManifest(dir), false)).toThrow(/belongs to another user/);
    }
  }, 60_000);

  test("MCP tune of a received capture: E_UNTRUSTED as self-contained as validate's (what would run in the message, the tune's own command, --trust-builds)", async () => {
    // found by a new user: MCP tune said "printed above" (nothing reached the agent), "you pass --trust", and a hint naming validate
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/kernel.cu"), "int k() { return A; }\n");
    gxxBuild(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.host = { name: "elsewhere", machineId: "0123456789abcdef0123456789abcdef" };
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const c = await mcp(false);
    const script = readFileSync(join(dir, "build.sh"), "utf8");
    // (profile's build gets the same message, after its ncu check: not seen on a machine without ncu)
    // a dir given relative to the server's folder: the command offered names it by its absolute path (nu16 #15)
    for (const [name, args, command] of [
      ["tune", { dir, define: ["A=1"] }, `kerncap tune ${dir} --trust=`],
      ["tune", { dir: relative(process.cwd(), dir), define: ["A=1"] }, `kerncap tune ${dir} --trust=`],
    ] as const) {
      const e = doc(await c.callTool({ name, arguments: args })).error;
      expect(e.code, name).toBe("E_UNTRUSTED");
      expect(e.message).not.toContain("shown above");
      expect(e.message).not.toContain("you pass --trust");
      expect(e.message).toContain(`──── end of build.sh ────`);
      expect(e.message).toContain(script);
      expect(e.hint).toContain(command);
      expect(e.hint).toContain("kerncap mcp with --trust-builds");
      expect(e.hint).not.toContain("validate");
    }
    expect(existsSync(join(dir, "build/ran"))).toBe(false);
    await c.close();
  }, 60_000);

  test("a folder whose manifest says another host made it is received; the MCP server runs its build only with --trust-builds", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/kernel.cu"), "int k() { return 1; }\n");
    gxxBuild(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    expect(receivedBecause(dir, readManifest(dir))).toBeUndefined();
    m.host = { name: "elsewhere", machineId: "0123456789abcdef0123456789abcdef" };
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    expect(receivedBecause(dir, readManifest(dir))).toContain('host "elsewhere"');
    const c = await mcp(false);
    const v = await c.callTool({ name: "validate", arguments: { dir } });
    expect(doc(v).error.code).toBe("E_UNTRUSTED");
    expect(doc(v).error.hint).toContain("--trust-builds");
    // the agent sees the error document, not kerncap's stderr: build.sh is in the message, with its folder, size and SHA-256, and the digest to trust
    const script = readFileSync(join(dir, "build.sh"));
    expect(doc(v).error.message).not.toContain("shown above");
    expect(doc(v).error.message).toMatch(new RegExp(`what its build runs \\(build.sh, src/kernel.cu in ${realpathSync(dir)}; sha256 [0-9a-f]{64}; below\\)`));
    expect(doc(v).error.message).toContain(
      `──── build.sh (${script.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(script).digest("hex")}) ────\n${script.toString("utf8")}──── end of build.sh ────`,
    );
    expect((v.content as { text: string }[])[0]!.text).toContain('echo ran >\\"$here/build/ran\\"');
    expect(existsSync(join(dir, "build/ran"))).toBe(false);
    await c.close();
    // --trust-builds runs a received build.sh that is kerncap's own template only: this one is hand-written, so even then it is refused (docs/security.md: only --trust=DIGEST on the command line runs it)
    const t = await mcp(true);
    const v2 = await t.callTool({ name: "validate", arguments: { dir } });
    expect(doc(v2).error?.code).toBe("E_UNTRUSTED");
    expect(doc(v2).error.message).toContain("plain --trust is not enough here: build.sh is not the one this kerncap writes");
    expect(existsSync(join(dir, "build/ran"))).toBe(false);
    await t.close();
  }, 60_000);
});

describe("writes through the path rule", () => {
  test("edit_file replaces a file by a rename: its permission bits kept, no temporary file left, a new file created under src/", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/gen.h"), "echo a\n", { mode: 0o750 });
    const c = await mcp();
    const r = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/gen.h", oldText: "echo a", newText: "echo b" } });
    expect(r.isError, JSON.stringify(r)).toBe(false);
    expect(readFileSync(join(dir, "src/gen.h"), "utf8")).toBe("echo b\n");
    expect(statSync(join(dir, "src/gen.h")).mode & 0o777).toBe(0o750);
    const n = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/sub/new.cu", content: "x\n" } });
    expect(n.isError, JSON.stringify(n)).toBe(false);
    expect(readFileSync(join(dir, "src/sub/new.cu"), "utf8")).toBe("x\n");
    expect(readdirSync(join(dir, "src")).filter((f) => f.includes(".tmp-"))).toEqual([]);
    await c.close();
  });
});
