/**
 * The confined build's sandbox (src/frontends/sandbox.ts, c/common/kc_confine.c): a confined CUDA
 * build runs in a file tree holding only its sources and the toolchain (a user + mount + network
 * namespace), under Landlock too where the kernel has it.
 *
 * The leak it closes (docs/security.md): a query operator assembled by token pasting, which the
 * source scan cannot see, `CAT(__has_,include)(XSTR(E/path))`, told the agent whether a path
 * outside exists, one bit per build (here: `#error` when it does). Landlock alone does not close
 * it: it refuses the open (EACCES) of a file that exists, while one that does not still fails
 * ENOENT, and gcc's __has_include tells the two apart (EACCES is a fatal error). In the tree both
 * paths are absent: the same answer.
 *
 * Skipped where the machine cannot make the sandbox (`kerncap doctor`'s confined-build check):
 * a kernel without Landlock, or without unprivileged user namespaces (CI's may lack them); the
 * tests that need only Landlock skip only without it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { isKerncapError, type KerncapError } from "../../../src/errors.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { DOCUMENTS } from "../../../src/format/documents.ts";
import { homeOrAbove } from "../../../src/format/paths.ts";
import { buildReproducer } from "../../../src/frontends/build.ts";
import { confinementFor, overrideSandboxSupport, sandboxPaths, sandboxSupport } from "../../../src/frontends/sandbox.ts";
import { NVCC } from "../../nvcc-fixtures.ts";
import { makeCapture, recordRendered, tempDir } from "../fixtures.ts";

const GXX = Bun.which("g++");
const HERE = sandboxSupport();
const NAMESPACE = confinementFor("cuda") === "namespace";
const LANDLOCK = (HERE?.abi ?? 0) >= 1;
const MAIN = join(import.meta.dir, "../../../src/cli/main.ts");

afterEach(() => overrideSandboxSupport(undefined)); // a test that pretended another machine: asked again

/**
 * A capture at `dir` whose build.sh (recorded as kerncap's: a confined build runs no other) runs
 * `before` (bash) and then compiles src/kernel.cu with g++ and the dependency list EXTRA_FLAGS asks for.
 */
async function gxxCapture(dir: string, kernel: string, before = ""): Promise<void> {
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), kernel);
  writeFileSync(
    join(dir, "build.sh"),
    `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nmkdir -p "$here/build"\n${before}\n# shellcheck disable=SC2086\ng++ -c -x c++ \${EXTRA_FLAGS:-} "$here/src/kernel.cu" -o "$here/build/kernel.o" >&2\necho "$here/build/kernel.o"\n`,
    { mode: 0o755 },
  );
  recordRendered(dir);
}

/**
 * The token-pasted probe of `path`: `#error` when __has_include says it exists. The scan sees no
 * query operator and no path (an empty macro before the `/`), so only the build can answer.
 */
const probe = (path: string) =>
  `#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n#define E\n#if CAT(__has_, include)(XSTR(E${path}))\n#error found\n#endif\nint k() { return 2; }\n`;

/** A confined build's outcome as the agent sees it: "built", or the error's code. */
async function outcome(dir: string): Promise<string> {
  try {
    await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir), confinedBy: "validate --confine" });
    return "built";
  } catch (e) {
    if (isKerncapError(e)) return e.code;
    throw e;
  }
}

/** The outcomes of the probe of a file outside that exists and of one that does not. */
async function probeOutcomes(): Promise<{ exists: string; missing: string }> {
  const outside = tempDir();
  writeFileSync(join(outside, "present.h"), "int secret;\n");
  const a = join(tempDir(), "cap");
  const b = join(tempDir(), "cap");
  await gxxCapture(a, probe(join(outside, "present.h")));
  await gxxCapture(b, probe(join(outside, "absent.h")));
  return { exists: await outcome(a), missing: await outcome(b) };
}

describe.skipIf(!GXX)("the token-pasted __has_include probe of a path outside (docs/security.md's one bit per build)", () => {
  test.skipIf(!NAMESPACE)(
    "in the sandbox: a file that exists and one that does not get the same answer (neither is there)",
    async () => {
      expect(await probeOutcomes()).toEqual({ exists: "built", missing: "built" });
    },
    60_000,
  );

  test.skipIf(!LANDLOCK)(
    "Landlock alone does not close it: an existing file is refused (EACCES, gcc's fatal error: the preprocessor stopped), a missing one is not there (ENOENT)",
    async () => {
      overrideSandboxSupport({ ...HERE!, hide: false });
      expect(confinementFor("cuda")).toBe("landlock");
      expect(await probeOutcomes()).toEqual({ exists: "E_BUILD", missing: "built" });
    },
    60_000,
  );

  test("without a sandbox (the source scan and the dependency list alone) the bit shows: why the sandbox is there", async () => {
    overrideSandboxSupport(null);
    expect(confinementFor("cuda")).toBe("scan");
    // gcc's #error is not fatal: it goes on and writes the dependency list, so the build is E_BUILD
    expect(await probeOutcomes()).toEqual({ exists: "E_BUILD", missing: "built" });
  }, 60_000);
});

describe("sandboxPaths: a host compiler outside /usr", () => {
  const saved = process.env.HOME;
  afterEach(() => {
    if (saved === undefined) delete process.env.HOME;
    else process.env.HOME = saved;
  });
  test("a wrapper at ~/x/gcc or ~/gcc binds the wrapper file, never ~ or a folder above it (its __has_include would answer for every path in ~)", () => {
    const home = join(tempDir(), "home");
    for (const f of ["x/gcc", "g++"]) {
      mkdirSync(join(home, f, ".."), { recursive: true });
      writeFileSync(join(home, f), '#!/bin/sh\nexec /usr/bin/gcc "$@"\n', { mode: 0o755 });
    }
    process.env.HOME = home;
    const { ro } = sandboxPaths({
      folder: join(tempDir(), "cap"),
      tmp: tempDir(),
      recorded: { files: [] },
      env: { PATH: `${join(home, "x")}:${home}:/usr/bin:/bin` },
    });
    expect(ro).toContain(join(home, "x/gcc"));
    expect(ro).toContain(join(home, "g++"));
    for (const p of ro) expect(homeOrAbove(p), p).toBe(false);
    expect(ro).not.toContain(home);
    expect(ro).not.toContain("/");
  });

  test("an nvcc wrapper in a prefix that is no toolkit (/usr/local/bin/nvcc execing the toolkit's): the wrapper alone, never the prefix or its bin/ (adversary 28: __has_include answered for /usr/local/etc); the toolkit it runs whole", () => {
    const root = tempDir();
    const prefix = join(root, "local");
    const toolkit = join(root, "cuda-13.0");
    for (const d of ["bin", "include", "etc"]) mkdirSync(join(prefix, d), { recursive: true });
    writeFileSync(join(prefix, "etc/npmrc"), "x");
    writeFileSync(join(prefix, "bin/nvcc"), `#!/bin/sh\nexec ${toolkit}/bin/nvcc "$@"\n`, { mode: 0o755 });
    for (const d of ["bin", "nvvm/bin", "include"]) mkdirSync(join(toolkit, d), { recursive: true });
    for (const f of ["bin/nvcc", "nvvm/bin/cicc"]) writeFileSync(join(toolkit, f), "#!/bin/sh\n", { mode: 0o755 });
    const paths = (NVCC: string) =>
      sandboxPaths({ folder: join(root, "cap"), tmp: tempDir(), recorded: { files: [] }, env: { PATH: "/usr/bin:/bin", NVCC } }).ro;
    const wrapped = paths(join(prefix, "bin/nvcc"));
    expect(wrapped).toContain(join(prefix, "bin/nvcc"));
    expect(wrapped).not.toContain(prefix);
    expect(wrapped).not.toContain(join(prefix, "bin"));
    const real = paths(join(toolkit, "bin/nvcc"));
    expect(real).toContain(toolkit);
    expect(real).toContain(join(toolkit, "bin"));
  });
});

describe.skipIf(!GXX || !NAMESPACE)("what a sandboxed build cannot do", () => {
  test("its programs read no file outside, write none outside, and reach no TCP port; its own folders work", async () => {
    const outside = tempDir();
    writeFileSync(join(outside, "secret.txt"), "SECRET_LINE\n");
    let connected = false;
    const server = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open() {
          connected = true;
        },
        data() {},
      },
    });
    try {
      const dir = join(tempDir(), "cap");
      // build.sh is kerncap's own here, but what it runs (the compiler, a tool it calls) is bounded all the same
      await gxxCapture(
        dir,
        "int k() { return 2; }\n",
        [
          `cat '${join(outside, "secret.txt")}' >"$here/build/read.txt" 2>&1 || echo "read refused" >>"$here/build/read.txt"`,
          `echo x >'${join(outside, "written.txt")}' 2>/dev/null || echo "write refused" >"$here/build/write.txt"`,
          `(exec 3<>/dev/tcp/127.0.0.1/${server.port}) 2>/dev/null || echo "connect refused" >"$here/build/net.txt"`,
          `echo ok >"$TMPDIR/own" && cat "$TMPDIR/own" >"$here/build/tmp.txt"`,
        ].join("\n"),
      );
      expect(await outcome(dir)).toBe("built");
      expect(readFileSync(join(dir, "build/read.txt"), "utf8")).not.toContain("SECRET_LINE");
      expect(readFileSync(join(dir, "build/read.txt"), "utf8")).toContain("read refused");
      expect(readFileSync(join(dir, "build/write.txt"), "utf8")).toBe("write refused\n");
      expect(existsSync(join(outside, "written.txt"))).toBe(false);
      expect(readFileSync(join(dir, "build/net.txt"), "utf8")).toBe("connect refused\n");
      expect(connected).toBe(false);
      expect(readFileSync(join(dir, "build/tmp.txt"), "utf8")).toBe("ok\n");
    } finally {
      server.stop(true);
    }
  }, 60_000);
});

describe.skipIf(!GXX || !NAMESPACE)("a sandboxed build leaves no process behind", () => {
  test("a `setsid cmd &` started by the build is killed when the build ends (PID namespace under an init); the build's exit code is kept", async () => {
    const tag = `${77000 + Math.floor(Math.random() * 999)}.${process.pid}`;
    const dir = join(tempDir(), "cap");
    await gxxCapture(dir, "int k() { return 2; }\n", `(setsid sleep ${tag} </dev/null >/dev/null 2>&1 &)\necho $$ >"$here/build/pid.txt"`);
    expect(await outcome(dir)).toBe("built");
    // the build ran in a PID namespace of its own (a pid of a few, below its init, pid 1), and its detached sleep is gone with it
    expect(Number(readFileSync(join(dir, "build/pid.txt"), "utf8").trim())).toBeLessThan(10);
    await Bun.sleep(200);
    const left = Bun.spawnSync(["pgrep", "-f", `sleep ${tag}`])
      .stdout.toString()
      .trim();
    expect(left).toBe("");
  }, 60_000);

  test("kerncap-confine forwards SIGTERM to the program (exit 143), and its own SIGKILL takes the whole namespace with it", async () => {
    const confine = join(import.meta.dir, "../../../c/build/kerncap-confine");
    const roots = ["/usr", "/bin", "/lib", "/lib64"].filter(existsSync).flatMap((p) => ["--ro", p]);
    const cwd = tempDir();
    const term = Bun.spawn([confine, "--hide", ...roots, "--rw", cwd, "--", "sleep", "30"], { cwd, stderr: "pipe" });
    await Bun.sleep(300);
    term.kill("SIGTERM");
    expect(await term.exited).toBe(143);
    const tag = `${78000 + Math.floor(Math.random() * 999)}.${process.pid}`;
    const killed = Bun.spawn([confine, "--hide", ...roots, "--rw", cwd, "--", "bash", "-c", `(setsid sleep ${tag} </dev/null >/dev/null 2>&1 &); sleep 30`], {
      cwd,
      stderr: "pipe",
    });
    await Bun.sleep(300);
    killed.kill("SIGKILL");
    await killed.exited;
    await Bun.sleep(300);
    expect(
      Bun.spawnSync(["pgrep", "-f", `sleep ${tag}`])
        .stdout.toString()
        .trim(),
    ).toBe("");
  }, 30_000);
});

describe.skipIf(!GXX || !NAMESPACE)("a header outside in the sandbox", () => {
  test("an -I folder elsewhere (not the recorded source root) is not there: a compile error with none of the compiler's messages, the hint saying why", async () => {
    const other = tempDir();
    writeFileSync(join(other, "util.h"), "#define TWO 2 // SECRET_LINE\n");
    const dir = join(tempDir(), "cap");
    await gxxCapture(dir, "#include <util.h>\nint k() { return TWO; }\n");
    writeFileSync(join(dir, "build.sh"), readFileSync(join(dir, "build.sh"), "utf8").replace("g++ -c", `g++ -I'${other}' -c`));
    recordRendered(dir);
    const e = await confinedRefusal(dir, "E_BUILD");
    expect(e.message).toContain("the preprocessor stopped before the dependency list");
    expect(`${e.message} ${e.hint}`).not.toContain("SECRET_LINE");
    expect(e.hint).toContain(
      "a sandbox that holds only src/, the project's headers its capture recorded and the toolchain: a file elsewhere is not found there",
    );
  }, 60_000);
});

/** The E_CONFINED (or `code`) error a confined build of capture `dir` ends in (the test fails when it builds, or ends in another error). */
async function confinedRefusal(dir: string, code: KerncapError["code"] = "E_CONFINED"): Promise<KerncapError> {
  try {
    await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) });
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    expect(e.code).toBe(code);
    return e;
  }
  throw new Error("the confined build built");
}

describe.skipIf(!GXX)("a sandbox that cannot be made", () => {
  test("kerncap-confine's own failure (exit 123 and its reason) is E_CONFINED saying so, with KERNCAP_SANDBOX=0 in the hint; nothing was built", async () => {
    const fake = join(tempDir(), "kerncap-confine");
    writeFileSync(fake, '#!/bin/sh\necho "kerncap-confine: bind /x: Invalid argument" >&2\nexit 123\n', { mode: 0o755 });
    overrideSandboxSupport({ helper: fake, abi: 7, hide: true });
    const dir = join(tempDir(), "cap");
    await gxxCapture(dir, "int k() { return 2; }\n");
    const e = await confinedRefusal(dir);
    expect(e.message).toBe("the confined build's sandbox (namespace) could not be made, so nothing was built: bind /x: Invalid argument");
    expect(e.hint).toContain("KERNCAP_SANDBOX=0");
    expect(existsSync(join(dir, "build/kernel.o"))).toBe(false);
  });

  test("KERNCAP_SANDBOX=0: the scan alone, whatever the machine allows", () => {
    const saved = process.env.KERNCAP_SANDBOX;
    process.env.KERNCAP_SANDBOX = "0";
    try {
      overrideSandboxSupport({ helper: "/nonexistent", abi: 7, hide: true });
      expect(confinementFor("cuda")).toBe("scan");
    } finally {
      if (saved === undefined) delete process.env.KERNCAP_SANDBOX;
      else process.env.KERNCAP_SANDBOX = saved;
    }
    expect(confinementFor("cuda")).toBe("namespace");
  });
});

describe.skipIf(!NVCC || !NAMESPACE)("a normal confined build in the sandbox", () => {
  test("the demo builds with nvcc under validate --confine --build-only, and the document says which sandbox ran", () => {
    const root = tempDir();
    const env = { ...process.env, XDG_STATE_HOME: join(root, "state"), KERNCAP_LIBCUDA: "" };
    const d = Bun.spawnSync([process.execPath, MAIN, "demo", join(root, "cap")], { cwd: root, env, stderr: "pipe" });
    expect(d.exitCode, d.stderr.toString()).toBe(0);
    const r = Bun.spawnSync([process.execPath, MAIN, "validate", join(root, "cap"), "--confine", "--build-only", "--json"], {
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const doc = JSON.parse(r.stdout.toString());
    expect(() => v.parse(DOCUMENTS["validate-build"], doc)).not.toThrow();
    expect(doc.rebuild.confinement).toBe("namespace");
    expect(doc.rebuild.registers).toBeGreaterThan(0);
    // unconfined: no sandbox, nothing said
    const plain = Bun.spawnSync([process.execPath, MAIN, "validate", join(root, "cap"), "--build-only", "--json"], { env, stdout: "pipe", stderr: "pipe" });
    expect(plain.exitCode, plain.stderr.toString()).toBe(0);
    expect(JSON.parse(plain.stdout.toString()).rebuild.confinement).toBeUndefined();
  }, 120_000);
});

describe.skipIf(!NVCC || !NAMESPACE)("a received capture's trusted build in the sandbox", () => {
  test("its source's #include of a file of the receiver's finds nothing (the build.sh the user trusted is kerncap's; the sender's source is not shown): the secret is neither printed nor compiled; an honest one builds", () => {
    const root = tempDir();
    const env = { ...process.env, XDG_STATE_HOME: join(root, "state"), KERNCAP_LIBCUDA: "" };
    const kc = (args: string[]) => Bun.spawnSync([process.execPath, MAIN, ...args], { cwd: root, env, stdout: "pipe", stderr: "pipe" });
    writeFileSync(join(root, "secret.txt"), "TOPSECRET_RECEIVER_LINE\n", { mode: 0o600 });
    expect(kc(["demo", join(root, "cap")]).exitCode).toBe(0);
    const src = join(root, "cap/src/saxpy.cu");
    writeFileSync(src, `#include "${join(root, "secret.txt")}"\n${readFileSync(src, "utf8")}`);
    expect(kc(["pack", join(root, "cap"), "-o", join(root, "cap.zip")]).exitCode).toBe(0);
    expect(kc(["unpack", join(root, "cap.zip"), "-o", join(root, "got")]).exitCode).toBe(0);
    const refused = kc(["validate", join(root, "got"), "--build-only", "--json"]);
    expect(refused.exitCode).toBe(2);
    const digest = JSON.parse(refused.stdout.toString()).error.details.trust.digest;
    const r = kc(["validate", join(root, "got"), "--build-only", "--json", `--trust=${digest}`]);
    const said = r.stdout.toString() + r.stderr.toString();
    expect(r.exitCode).toBe(2);
    expect(JSON.parse(r.stdout.toString()).error.code).toBe("E_BUILD");
    expect(said).not.toContain("TOPSECRET_RECEIVER_LINE");
    expect(said).toContain("secret.txt"); // not found there: the compiler says so
    // the same capture without the line: it builds in the sandbox
    writeFileSync(join(root, "cap/src/saxpy.cu"), readFileSync(src, "utf8").split("\n").slice(1).join("\n"));
    expect(kc(["pack", join(root, "cap"), "-o", join(root, "ok.zip")]).exitCode).toBe(0);
    expect(kc(["unpack", join(root, "ok.zip"), "-o", join(root, "ok")]).exitCode).toBe(0);
    const digest2 = JSON.parse(kc(["validate", join(root, "ok"), "--build-only", "--json"]).stdout.toString()).error.details.trust.digest;
    const ok = kc(["validate", join(root, "ok"), "--build-only", "--json", `--trust=${digest2}`]);
    expect(ok.exitCode, ok.stderr.toString()).toBe(0);
  }, 120_000);
});
