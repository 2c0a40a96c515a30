/**
 * The attack suite of "what runs is what was trusted" and "names are data" (docs/security.md), on
 * the CPU: one test per attack, each run as an attacker would (another local user who can write
 * the folder, a colleague's archive), each failing on the code before the trust digest, the
 * private copy, the portable archive names and build.sh's relative nvcc paths.
 *  - build.sh replaced between the E_UNTRUSTED refusal and `--trust=DIGEST`: refused (E_TRUST_CHANGED);
 *  - build.sh rewritten in place while the compiler runs: the appended tail never runs;
 *  - an archive whose root folder is `cap$(id>X)`: refused at unpack, no folder made; a capture
 *    folder the user renamed so, built with kerncap's stock build.sh: nothing runs;
 *  - a received Triton capture whose pinned.json names `../.notes/readme.py`: refused, nothing runs.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { runCommand } from "citty";
import {
  appendFileSync,
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { copyReproducer } from "../../src/eval/reproducer-copy.ts";
import { commands } from "../../src/cli/main.ts";
import { KerncapError } from "../../src/errors.ts";
import { PACK_INDEX, packCapture, readPackIndex, unpackArchive, type PackIndex } from "../../src/format/archive.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { requireTrustedBuild } from "../../src/format/trust.ts";
import { acceptCommand } from "../../src/replay/judge-settings.ts";
import { markReceived } from "../../src/format/received.ts";
import { buildReproducer, CONFINED_DATA_KIB, CONFINED_FILE_KIB } from "../../src/frontends/build.ts";
import { templateEngine } from "../../src/frontends/templates.ts";
import { overrideSandboxSupport } from "../../src/frontends/sandbox.ts";
import { fakeTritonSite, makeCapture, recordRendered, stockBuildSh, tempDir, trustDigest } from "./fixtures.ts";
import { exportOp } from "../../src/ops/export.ts";
import { rawZip, readRawZip, storedEntry } from "./zip-fixture.ts";

const saved: Record<string, string | undefined> = {};
beforeAll(() => {
  // the trust record goes to a state folder of this test's own
  for (const k of ["XDG_STATE_HOME", "PATH", "NVCC"]) saved[k] = process.env[k];
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
});
afterEach(() => overrideSandboxSupport(undefined));
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function thrown(f: () => unknown): Promise<KerncapError> {
  try {
    await f();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no error thrown");
}

/** Run `f` with process.stderr.write captured; @returns what it wrote and f's error. */
async function quietly(f: () => unknown): Promise<{ err: string; e: KerncapError }> {
  let err = "";
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((c: string | Uint8Array) => ((err += typeof c === "string" ? c : new TextDecoder().decode(c)), true)) as typeof process.stderr.write;
  try {
    const e = await thrown(f);
    return { err, e };
  } finally {
    process.stderr.write = orig;
  }
}

/** A capture made in `made` (its build.sh `script`), packed and unpacked into ROOT/got: received. */
async function received(root: string, script: string, more: (made: string) => void = () => {}): Promise<string> {
  const made = join(root, "made");
  await makeCapture(made);
  mkdirSync(join(made, "src"));
  writeFileSync(join(made, "src/kernel.cu"), "int k() { return 1; }\n");
  writeFileSync(join(made, "build.sh"), script, { mode: 0o755 });
  more(made);
  try {
    const p = await packCapture(made, join(root, "cap.zip"));
    return (await unpackArchive(p.archive, join(root, "got"))).dir;
  } catch (e) {
    // files no archive carries now (a top-level json.py, a .notes/ folder): received another way (a copy, tar), as unpack marks it
    if ((e as KerncapError).code !== "E_PACK_NAME") throw e;
    const got = join(root, "got");
    cpSync(made, got, { recursive: true });
    markReceived(got, join(root, "cap.zip"));
    return got;
  }
}

/** Make the capture in `made` a Triton one: its manifest's frontend, kerncap's repro.py, `pinned` as pinned.json (text as given), src/k.py `kernel`. */
function asTriton(made: string, pinned: string, kernel: string): void {
  const m = JSON.parse(readFileSync(join(made, "kerncap.json"), "utf8"));
  m.kernel.frontend = "triton";
  writeFileSync(join(made, "kerncap.json"), JSON.stringify(m));
  cpSync(resolve(import.meta.dir, "../../templates/triton/repro.py"), join(made, "repro.py"));
  writeFileSync(join(made, "pinned.json"), pinned);
  writeFileSync(join(made, "src/k.py"), kernel);
}

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** A build.sh that marks that it ran and prints a module it made. */
const HONEST = `#!/usr/bin/env bash\nset -euo pipefail\nmkdir -p build\necho ran >build/ran\n: >build/k.o\necho build/k.o\n`;

/** A folder on PATH holding an executable `name` with `body`. */
function fakeTool(name: string, body: string): string {
  const bin = tempDir("kerncap-bin-");
  writeFileSync(join(bin, name), `#!/usr/bin/env bash\n${body}`, { mode: 0o755 });
  return bin;
}

describe("what runs is what was trusted", () => {
  test("another user replaces build.sh between the refusal and --trust=DIGEST: refused (E_TRUST_CHANGED), the new script never runs; plain --trust is not enough in a folder every user can write", async () => {
    const root = tempDir();
    const marker = join(root, "attacker-ran");
    const dir = await received(root, HONEST);
    chmodSync(dir, 0o777); // a folder another local user can write (a shared /tmp hand-over)
    const refused = await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir] }));
    expect(refused.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    const digest = /sha256 ([0-9a-f]{64})/.exec(refused.e.message)?.[1] ?? sha256(readFileSync(join(dir, "build.sh")));
    // the attacker swaps build.sh after the user read it
    writeFileSync(join(dir, "build.sh"), `#!/usr/bin/env bash\ntouch ${JSON.stringify(marker)}\necho build/k.o\n`);
    const changed = await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir, `--trust=${digest}`] }));
    expect(existsSync(marker)).toBe(false);
    expect(refused.e.hint).toContain(`--trust=${digest}`);
    expect(changed.e).toMatchObject({ code: "E_TRUST_CHANGED", exitCode: 2 });
    expect(changed.e.message).toContain("changed since they were shown");
    expect(changed.err).toContain(`touch ${JSON.stringify(marker)}`); // shown again, for the user to read
    // plain --trust would run whatever lies there now: refused where another user can write
    const plain = await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir, "--trust"] }));
    expect(plain.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(plain.e.message).toContain("plain --trust is not enough");
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(dir, "build/ran"))).toBe(false);
    // the digest of what lies there now runs exactly that
    writeFileSync(join(dir, "build.sh"), HONEST);
    await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir, `--trust=${digest}`] }));
    expect(existsSync(join(dir, "build/ran"))).toBe(true);
    chmodSync(dir, 0o755);
  }, 60_000);

  test("a received capture's build runs under the confined build's data-size limit (its source may #include /dev/zero); one made here does not", async () => {
    overrideSandboxSupport(null); // a machine that cannot make the sandbox (the received build's sandbox: test/cpu/frontends/sandbox.test.ts); its stand-in tools write outside
    const root = tempDir();
    const limitOf = `#!/usr/bin/env bash\nset -euo pipefail\nmkdir -p build\nulimit -d >build/limit\nulimit -f >build/flimit\n: >build/k.o\necho build/k.o\n`;
    const dir = await received(root, limitOf);
    requireTrustedBuild(dir, readManifest(dir), trustDigest(dir)); // the user read it and trusted its digest
    await buildReproducer(dir, { quiet: true, force: false });
    expect(readFileSync(join(dir, "build/limit"), "utf8").trim()).toBe(String(CONFINED_DATA_KIB));
    // and the file-size limit (trial 25: a macro bomb made the preprocessor write 3 GiB in 20 s)
    expect(readFileSync(join(dir, "build/flimit"), "utf8").trim()).toBe(String(CONFINED_FILE_KIB));
    // the capture it was packed from, made here: the user's own build, no limit
    await buildReproducer(join(root, "made"), { quiet: true, force: false });
    expect(readFileSync(join(root, "made/build/limit"), "utf8").trim()).not.toBe(String(CONFINED_DATA_KIB));
    // a step stopped at the file-size limit (here a lower one, as 1 GiB takes long to write): E_CONFINED saying so, not a compile error
    const big = await received(
      join(root, "big"),
      `#!/usr/bin/env bash\nset -euo pipefail\nmkdir -p build\n(ulimit -f 4; sh -c 'head -c 100000 /dev/zero >build/huge')\necho build/k.o\n`,
    );
    requireTrustedBuild(big, readManifest(big), trustDigest(big));
    const e = await thrown(() => buildReproducer(big, { quiet: true, force: false }));
    expect(e).toMatchObject({ code: "E_CONFINED", message: expect.stringContaining("wrote a file past 512 MiB") });
  }, 60_000);

  test("build.sh rewritten in place while the compiler runs: the appended tail does not run (the build executes a private copy)", async () => {
    overrideSandboxSupport(null); // a machine that cannot make the sandbox (the received build's sandbox: test/cpu/frontends/sandbox.test.ts); its stand-in tools write outside
    const root = tempDir();
    const started = join(root, "nvcc-started");
    const marker = join(root, "tail-ran");
    // nvcc that takes a while: bash reads a script as it goes, so a line appended meanwhile would run next
    process.env.PATH = `${fakeTool("nvcc", `touch ${JSON.stringify(started)}\nsleep 3\n`)}${delimiter}${saved.PATH}`;
    const dir = await received(root, `#!/usr/bin/env bash\nset -euo pipefail\nnvcc -cubin src/kernel.cu\nmkdir -p build\n: >build/k.o\necho build/k.o\n`);
    requireTrustedBuild(dir, readManifest(dir), trustDigest(dir)); // the user read it and trusted its digest (a build.sh of its own: plain --trust is not enough)
    const build = buildReproducer(dir, { quiet: true, force: false });
    for (let i = 0; i < 200 && !existsSync(started); i++) await Bun.sleep(25);
    expect(existsSync(started)).toBe(true);
    appendFileSync(join(dir, "build.sh"), `touch ${JSON.stringify(marker)}\n`);
    const b = await build;
    expect(b.module).toBe(join(realpathSync(dir), "build/k.o"));
    expect(existsSync(marker)).toBe(false);
    // the next build reads the files again: changed since trusted, refused before it runs
    expect((await thrown(() => buildReproducer(dir, { quiet: true, force: false }))).code).toBe("E_TRUST_CHANGED");
    expect(existsSync(marker)).toBe(false);
    process.env.PATH = saved.PATH;
  }, 60_000);

  test("the refusal of a received Triton capture shows every file its compile runs (build.sh, pinned.json, repro.py, the kernel file, the interpreter) and one digest; an edit of the kernel file changes it", async () => {
    const root = tempDir();
    const dir = await received(root, HONEST, (made) =>
      asTriton(made, JSON.stringify({ fnName: "k", python: "/opt/py/bin/python3", kernelFile: "k.py" }), "import os  # the kernel's module: code that runs\n"),
    );
    const { err, e } = await quietly(() => requireTrustedBuild(dir, readManifest(dir), false, { command: `kerncap tune ${dir}` }));
    expect(e.code).toBe("E_UNTRUSTED");
    for (const name of ["build.sh", "pinned.json", "repro.py", "src/k.py"])
      expect(err).toMatch(new RegExp(`──── ${name} \\(\\d+ bytes, sha256 [0-9a-f]{64}\\) ────\\n`));
    expect(err).toContain("import os  # the kernel's module");
    expect(err).toContain("──── the interpreter pinned.json names (run with the folder's repro.py) ────\n/opt/py/bin/python3\n");
    const digest = /sha256 ([0-9a-f]{64})\)/.exec(e.message)?.[1];
    expect(err).toContain(`what the build would run (one digest of all of it: sha256 ${digest})`);
    expect(e.hint).toContain(`kerncap tune ${dir} --trust=${digest}`);
    writeFileSync(join(dir, "src/k.py"), "import os; os.system('id')\n");
    const changed = await quietly(() => requireTrustedBuild(dir, readManifest(dir), digest!));
    expect(changed.e.code).toBe("E_TRUST_CHANGED");
    // what --trust takes: a digest, or nothing
    expect((await thrown(async () => runCommand(await commands.validate(), { rawArgs: [dir, "--trust=yes"] }))).code).toBe("E_USAGE");
    expect((await thrown(async () => runCommand(await commands.check(), { rawArgs: [dir, "--rebuild", `--trust=${digest}`] }))).code).toBe("E_USAGE");
  }, 60_000);

  test("the refusal says exactly which files a --trust is remembered for: kerncap's build.sh alone (an edit under src/ does not ask again), or every file under src/ with a build.sh of its own; export's says it runs nothing itself (nu9 #9)", async () => {
    const root = tempDir();
    const stock = await received(root, stockBuildSh(), recordRendered);
    const { e } = await quietly(() => requireTrustedBuild(stock, readManifest(stock), false));
    expect(e.code).toBe("E_UNTRUSTED");
    expect(e.hint).toContain(
      "(kerncap's own build.sh: plain --trust is enough; remembered for this folder and this exact file (build.sh): a change to it asks again; an edit of the other sources under src/ does not)",
    );
    expect(e.hint).not.toContain("a change to any asks again");
    expect(e.message).toContain("would run with your rights, so kerncap runs it only once you pass --trust");
    // export runs nothing: its refusal says whose command would
    const exp = await quietly(() => exportOp(stock, join(root, "out"), { trust: false }));
    expect(exp.e.code).toBe("E_UNTRUSTED");
    expect(exp.e.message).toContain("would run with the rights of whoever runs the export's make run-src");
    expect(exp.e.message).toContain("export itself runs nothing");
    expect(exp.e.message).not.toContain("kerncap runs it");
    expect(exp.e.message).toContain("unconfined: the compile reads whatever the sources #include");
    // trusted, it exports, and says that the export's make run-src is not confined as kerncap's builds are (adversary 80 #08)
    let said = "";
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((c: string | Uint8Array) => (
      (said += typeof c === "string" ? c : new TextDecoder().decode(c)), true
    )) as typeof process.stderr.write;
    try {
      exportOp(stock, join(root, "out"), { trust: true });
    } finally {
      process.stderr.write = write;
    }
    expect(said).toContain("its make run-src compiles the sender's sources with your rights and no confinement");
    // a hand-written build.sh can run any file under src/: all of them are in the digest, and the hint names them
    const own = await received(join(root, "b"), HONEST);
    const hand = await quietly(() => requireTrustedBuild(own, readManifest(own), false));
    expect(hand.e.hint).toContain("(remembered for this folder and these exact files (build.sh, src/kernel.cu): a change to any of them asks again)");
  }, 60_000);

  test("a received Triton capture whose stock build.sh runs another Python than pinned.json names: build.sh is shown whole, the two named (adversary 79 #02)", async () => {
    const root = tempDir();
    const tpl = readFileSync(resolve(import.meta.dir, "../../templates/triton/build.sh.hbs"), "utf8");
    const render = (python: string) =>
      templateEngine().compile(tpl, { strict: true, noEscape: true })({ kernelName: "k", kernelFile: "k.py", tritonVersion: "3.0.0", python });
    const triton = (python: string) => (made: string) => {
      asTriton(made, JSON.stringify({ fnName: "k", python: "/usr/bin/python3", kernelFile: "k.py" }), "pass\n");
      writeFileSync(join(made, "build.sh"), render(python), { mode: 0o755 });
    };
    // the same Python: kerncap's own build.sh, not printed
    const same = await received(join(root, "a"), HONEST, triton("/usr/bin/python3"));
    const honest = await quietly(() => requireTrustedBuild(same, readManifest(same), false));
    expect(honest.e.code).toBe("E_UNTRUSTED");
    expect(honest.err).not.toContain("captured_py=");
    // another program in build.sh's slot (one root owns, which the program check lets through): the script is printed whole
    const other = await received(join(root, "b"), HONEST, triton("/usr/bin/id"));
    const { err, e } = await quietly(() => requireTrustedBuild(other, readManifest(other), false));
    expect(e.code).toBe("E_UNTRUSTED");
    expect(err).toContain("\ncaptured_py=/usr/bin/id\n");
    expect(err + e.message).toContain('build.sh runs the interpreter "/usr/bin/id", not "/usr/bin/python3", the interpreter pinned.json names');
  }, 60_000);

  test("a received Triton capture whose pinned.json is {} or [] (no kernel file named): E_MANIFEST before anything is shown or runs (adversary 79 #21)", async () => {
    for (const [k, pinned] of ["{}", "[]", '{"python":"/usr/bin/python3"}'].entries()) {
      const dir = await received(join(tempDir(), `p${k}`), HONEST, (made) => asTriton(made, pinned, "pass\n"));
      const { err, e } = await quietly(() => requireTrustedBuild(dir, readManifest(dir), false));
      expect(e.code, pinned).toBe("E_MANIFEST");
      expect(e.message, pinned).toContain("pinned.json is malformed at");
      expect(existsSync(join(dir, "build/ran")), pinned).toBe(false);
      expect(err, pinned).not.toContain("──── build.sh");
    }
  }, 60_000);

  test("a received Triton capture whose pinned.json kernelFile is ../.notes/readme.py: refused before anything runs", async () => {
    const root = tempDir();
    const marker = join(root, "readme-ran");
    // a Triton stand-in: repro.py imports these before it imports the kernel file
    const site = fakeTritonSite();
    const dir = await received(
      root,
      `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nPYTHONPATH=${JSON.stringify(site)} exec python3 "$here/repro.py" "$@"\n`,
      (made) => {
        const m = JSON.parse(readFileSync(join(made, "kerncap.json"), "utf8"));
        m.kernel.frontend = "triton";
        writeFileSync(join(made, "kerncap.json"), JSON.stringify(m));
        cpSync(resolve(import.meta.dir, "../../templates/triton/repro.py"), join(made, "repro.py"));
        writeFileSync(
          join(made, "pinned.json"),
          JSON.stringify({
            fnName: "k",
            python: "python3",
            tritonVersion: "3.0.0",
            kernelFile: "../.notes/readme.py",
            constexprs: [],
            signature: {},
            attrs: [],
            options: {},
            target: {},
            kernelName: "k",
          }),
        );
        mkdirSync(join(made, ".notes"));
        writeFileSync(join(made, ".notes/readme.py"), `open(${JSON.stringify(marker)}, "w").close()\n`);
      },
    );
    const { e } = await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir, "--trust"] }));
    expect(existsSync(marker)).toBe(false);
    expect(e).toMatchObject({ code: "E_UNSAFE_PATH", exitCode: 2 });
    expect(e.message).toContain("../.notes/readme.py");
    expect(e.message).toContain("runs only files under src/");
    expect(existsSync(join(dir, "build"))).toBe(false);
  }, 60_000);
});

/** kerncap's own CUDA build.sh (templates/cuda/build.sh.hbs) for src/k.cu with an include folder under src/, as a capture renders it. */
function stockCudaBuildSh(): string {
  const text = readFileSync(resolve(import.meta.dir, "../../templates/cuda/build.sh.hbs"), "utf8");
  return templateEngine().compile(text, { strict: true, noEscape: true })({
    kernelName: "k",
    flagsFrom: "defaults",
    overlay: false,
    arch: "sm_90",
    sliced: false,
    rdc: false,
    flags: '-I"$here/src"/include',
    tuSource: "k.cu",
    compiledSource: "k.cu",
    sliceKind: "none",
  });
}

describe("the build's folder, outputs and environment hold nothing the capture controls", () => {
  const env0: Record<string, string | undefined> = {};
  beforeAll(() => {
    for (const k of ["LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "NVCC"]) env0[k] = process.env[k];
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(env0)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  const KERNEL = "__global__ void k(float* x) { x[0] = 1.0f; }\n";

  test("a received archive carrying a top-level libzstd.so.1, kerncap's stock build.sh trusted: nvcc's LD_LIBRARY_PATH (`<cuda>/lib:`, the empty entry the working folder) never loads it", async () => {
    const nvcc = Bun.which("nvcc");
    const gcc = Bun.which("gcc");
    const zstd = "/usr/lib/x86_64-linux-gnu/libzstd.so.1";
    if (!nvcc || !gcc || !existsSync(zstd)) return; // the real toolchain's own loading is the attack (nvcc and gcc are on the CPU test machine)
    const root = tempDir();
    const marker = join(root, "library-ran");
    const evil = join(root, "evil.c");
    writeFileSync(
      evil,
      `#include <stdio.h>\n__attribute__((constructor)) static void pwn(void) { FILE *f = fopen(${JSON.stringify(marker)}, "a"); if (f) { fputs("ran\\n", f); fclose(f); } }\n`,
    );
    const dir = await received(root, stockCudaBuildSh(), (made) => {
      writeFileSync(join(made, "src/k.cu"), KERNEL);
      const cc = Bun.spawnSync([gcc, "-shared", "-fPIC", "-o", join(made, "libzstd.so.1"), evil, "-Wl,-soname,libzstd.so.1", "-Wl,--no-as-needed", zstd], {
        stderr: "pipe",
      });
      expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    });
    expect(existsSync(join(dir, "libzstd.so.1"))).toBe(true); // the archive brought it
    requireTrustedBuild(dir, readManifest(dir), true); // what the prompt showed: kerncap's own build.sh
    process.env.NVCC = nvcc;
    delete process.env.LD_LIBRARY_PATH;
    const b = await buildReproducer(dir, { quiet: true, force: false });
    expect(existsSync(b.module)).toBe(true);
    expect(existsSync(marker)).toBe(false);
  }, 120_000);

  test("the build's working folder holds only the trusted copies, src and a private build/; LD_LIBRARY_PATH, LD_PRELOAD, PYTHONPATH entries that are empty, relative or in the capture are dropped; KERNCAP_RESULTS_KEY is not passed on", async () => {
    overrideSandboxSupport(null); // a machine that cannot make the sandbox (the received build's sandbox: test/cpu/frontends/sandbox.test.ts); its stand-in tools write outside
    const root = tempDir();
    const seen = join(root, "seen");
    const dir = await received(root, stockCudaBuildSh(), (made) => {
      writeFileSync(join(made, "src/k.cu"), KERNEL);
      writeFileSync(join(made, "libzstd.so.1"), "x");
      writeFileSync(join(made, "json.py"), "x");
    });
    requireTrustedBuild(dir, readManifest(dir), true);
    // nvcc's stand-in says where it runs, what lies there and what it was given to load from
    process.env.NVCC = join(
      fakeTool(
        "nvcc",
        `{ ls -A; echo "LD=$LD_LIBRARY_PATH"; echo "PRE=\${LD_PRELOAD:-}"; echo "PY=\${PYTHONPATH:-}"; echo "SAFE=\${PYTHONSAFEPATH:-}"; echo "KEY=\${KERNCAP_RESULTS_KEY:-}"; echo "PATH=$PATH"; } >${JSON.stringify(seen)}\n${SHELL_NVCC}`,
      ),
      "nvcc",
    );
    process.env.LD_LIBRARY_PATH = `/usr/local/cuda/lib64::lib:${dir}/lib:${realpathSync(dir)}`;
    process.env.LD_PRELOAD = `${dir}/evil.so ./x.so`;
    process.env.PYTHONPATH = `${dir}/py:/opt/site`;
    // a relative PATH entry is the build's folder, where the capture's src/ lies (a trial's git and python3 came from there)
    const pathBefore = process.env.PATH;
    process.env.PATH = `.:node_modules/.bin:src:${pathBefore}`;
    // the secret that authenticates results records: a build that read it could write records --merge takes
    const keyBefore = process.env.KERNCAP_RESULTS_KEY;
    process.env.KERNCAP_RESULTS_KEY = "7c1e9a4f2b6d08e35f9a1c7b4e2d6f08a3c5e7b9d1f2a4c6e8b0d3f5a7c9e1b2";
    try {
      await buildReproducer(dir, { quiet: true, force: false });
    } finally {
      process.env.PATH = pathBefore;
      if (keyBefore === undefined) delete process.env.KERNCAP_RESULTS_KEY;
      else process.env.KERNCAP_RESULTS_KEY = keyBefore;
    }
    const lines = readFileSync(seen, "utf8").split("\n");
    const listing = lines
      .slice(
        0,
        lines.findIndex((l) => l.startsWith("LD=")),
      )
      .sort();
    expect(listing).toEqual(["build", "build.sh", "src"]);
    expect(lines).toContain("LD=/usr/local/cuda/lib64");
    expect(lines).toContain("PRE=");
    expect(lines).toContain("PY=/opt/site");
    expect(lines).toContain("SAFE=1");
    expect(lines).toContain("KEY=");
    const path = lines
      .find((l) => l.startsWith("PATH="))!
      .slice(5)
      .split(":");
    expect(path.filter((e) => !e.startsWith("/"))).toEqual([]);
  }, 60_000);

  test("a received Triton capture with a top-level json.py (never shown) and PYTHONPATH naming a folder in it: --trust runs neither", async () => {
    const root = tempDir();
    const marker = join(root, "json-ran");
    const marker2 = join(root, "sitecustomize-ran");
    const site = fakeTritonSite();
    const dir = await received(
      root,
      `#!/usr/bin/env bash\nset -euo pipefail\nhere="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"\nPYTHONPATH="\${PYTHONPATH:+$PYTHONPATH:}"${JSON.stringify(site)} exec python3 "$here/repro.py" "$@"\n`,
      (made) => {
        const m = JSON.parse(readFileSync(join(made, "kerncap.json"), "utf8"));
        m.kernel.frontend = "triton";
        writeFileSync(join(made, "kerncap.json"), JSON.stringify(m));
        cpSync(resolve(import.meta.dir, "../../templates/triton/repro.py"), join(made, "repro.py"));
        writeFileSync(
          join(made, "pinned.json"),
          JSON.stringify({
            fnName: "k",
            python: "python3",
            tritonVersion: "3.0.0",
            kernelFile: "k.py",
            constexprs: [],
            signature: {},
            attrs: [],
            options: {},
            target: {},
            kernelName: "k",
          }),
        );
        writeFileSync(join(made, "src/k.py"), "import triton\n");
        // repro.py's second import, from the script's folder when that is first on sys.path
        writeFileSync(join(made, "json.py"), `open(${JSON.stringify(marker)}, "w").close()\n`);
        mkdirSync(join(made, "lib"));
        writeFileSync(join(made, "lib/sitecustomize.py"), `open(${JSON.stringify(marker2)}, "w").close()\n`);
      },
    );
    process.env.PYTHONPATH = join(dir, "lib");
    const refused = await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir] }));
    expect(refused.err).not.toContain("json.py"); // not among what the build runs: it must not run
    await quietly(async () => runCommand(await commands.validate(), { rawArgs: [dir, "--trust"] }));
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(marker2)).toBe(false);
    delete process.env.PYTHONPATH;
  }, 60_000);

  test("build/kernel.cubin (and build/ran) planted as links to a file outside by someone who can write build/: the build's outputs never go through them (E_UNSAFE_PATH naming the link)", async () => {
    const root = tempDir();
    const victim = join(root, "victim.txt");
    const created = join(root, "created.txt");
    writeFileSync(victim, "VICTIM ORIGINAL\n");
    process.env.NVCC = join(fakeTool("nvcc", SHELL_NVCC), "nvcc");
    // a received capture the user trusted, and a capture of the user's own
    const got = await received(root, stockCudaBuildSh(), (made) => writeFileSync(join(made, "src/k.cu"), KERNEL));
    requireTrustedBuild(got, readManifest(got), true);
    const own = join(root, "own");
    await makeCapture(own);
    mkdirSync(join(own, "src"));
    writeFileSync(join(own, "src/k.cu"), KERNEL);
    writeFileSync(join(own, "build.sh"), stockCudaBuildSh(), { mode: 0o755 });
    for (const dir of [got, own]) {
      mkdirSync(join(dir, "build"), { recursive: true });
      symlinkSync(victim, join(dir, "build/kernel.cubin"));
      const e = await thrown(() => buildReproducer(dir, { quiet: true, force: false }));
      expect(e).toMatchObject({ code: "E_UNSAFE_PATH", exitCode: 2 });
      expect(e.message).toContain("build/kernel.cubin");
      expect(readFileSync(victim, "utf8")).toBe("VICTIM ORIGINAL\n");
      // a dangling link: nothing created where it points
      rmSync(join(dir, "build/kernel.cubin"));
      symlinkSync(created, join(dir, "build/kernel.cubin"));
      expect((await thrown(() => buildReproducer(dir, { quiet: true, force: false }))).code).toBe("E_UNSAFE_PATH");
      expect(existsSync(created)).toBe(false);
      // the link gone, the build writes its module into build/ as before
      rmSync(join(dir, "build/kernel.cubin"));
      const b = await buildReproducer(dir, { quiet: true, force: false });
      expect(b.module).toBe(join(realpathSync(dir), "build/kernel.cubin"));
      expect(readFileSync(b.module, "utf8")).toBe(KERNEL);
    }
    // a script's own write (build.sh's `echo >build/ran`): through no link either
    const honest = await received(join(root, "h"), HONEST);
    requireTrustedBuild(honest, readManifest(honest), trustDigest(honest));
    mkdirSync(join(honest, "build"));
    symlinkSync(victim, join(honest, "build/ran"));
    expect((await thrown(() => buildReproducer(honest, { quiet: true, force: false }))).code).toBe("E_UNSAFE_PATH");
    expect(readFileSync(victim, "utf8")).toBe("VICTIM ORIGINAL\n");
  }, 60_000);
});

/** A stand-in for nvcc that runs its step as nvcc does: through `sh -c`, with the paths it was given and the source's absolute path (`--orig_src_path_name "/cwd/src/k.cu"`) pasted into the command line. */
const SHELL_NVCC = `src= out=\nwhile [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift 2;; -*) shift;; *) src="$1"; shift;; esac; done\ncase "$src" in /*) abs="$src" ;; *) abs="$(pwd -P)/$src" ;; esac\nsh -c "cp \\"$abs\\" $out"\n`;

describe("names are data", () => {
  const HOSTILE = "cap$(id>X)";

  /**
   * An archive as pack writes it for a capture holding note.txt, then with its root folder renamed
   * `root` and note.txt renamed `note` in the index and the entries (kerncap pack refuses such names:
   * an attacker writes the zip by hand).
   */
  async function craftedArchive(root: string, note = "note.txt", dirs: string[] = []): Promise<{ dir: string; archive: string }> {
    const dir = tempDir();
    await makeCapture(join(dir, "cap"));
    writeFileSync(join(dir, "cap/note.txt"), "x");
    const p = await packCapture(join(dir, "cap"), join(dir, "cap.zip"));
    const entries = readRawZip(p.archive);
    const idx = JSON.parse(new TextDecoder().decode(Bun.inflateSync(entries[0]!.data as Uint8Array<ArrayBuffer>))) as PackIndex;
    const rename = (n: string) => `${root}${n.slice("cap".length)}`.replace(/\/note\.txt$/, `/${note}`);
    const files = idx.files.map((f) => ({ ...f, path: f.path === "note.txt" ? note : f.path, entry: rename(f.entry) }));
    const archive = join(dir, "evil.zip");
    writeFileSync(
      archive,
      rawZip([
        storedEntry(`${root}/${PACK_INDEX}`, JSON.stringify({ ...idx, root, files, dirs: [...idx.dirs, ...dirs] })),
        ...entries.slice(1).map((e) => ({ ...e, name: rename(e.name) })),
        // a folder entry for each folder added, as pack writes one for each it lists (unpack refuses a folder without one)
        ...dirs.map((d) => ({ ...storedEntry(`${root}/${d}/`, ""), mode: 0o40755 })),
      ]),
    );
    return { dir, archive };
  }

  /** unpack's error for `archive` unpacked with no -o in the folder `cwd` (the archive names the folder it makes there). */
  async function refusedUnpackIn(cwd: string, archive: string): Promise<KerncapError> {
    const prev = process.cwd();
    process.chdir(cwd);
    try {
      return await thrown(() => unpackArchive(archive, undefined));
    } finally {
      process.chdir(prev);
    }
  }

  test("an archive whose root is a hidden folder (.vim, .ssh: unpacked in the home folder, the user's own configuration) or that holds git's files: refused at unpack and at pack", async () => {
    for (const root of [".vim", ".ssh"]) {
      const a = await craftedArchive(root);
      const out = join(a.dir, "home");
      mkdirSync(out);
      const e = await refusedUnpackIn(out, a.archive);
      expect(e).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
      expect(e.message).toContain(`root folder name "${root}" starts with . (a hidden folder`);
      expect(readdirSync(out)).toEqual([]);
    }
    // an AI agent's and an editor's too (adversary 52: Claude Code's hooks, MCP servers, cuda-gdb's and neovim's start-up files)
    for (const entry of [
      ".git/config",
      "src/.gitattributes",
      "src/sub/.GIT/hooks/x",
      ".hg/hgrc",
      "src/.cargo/config.toml",
      ".npmrc",
      "src/.claude/settings.json",
      "src/.mcp.json",
      "src/.cursor/mcp.json",
      "src/.cuda-gdbinit",
      "src/.nvim.lua",
      "src/.clangd",
      "CLAUDE.md",
      "AGENTS.md",
    ]) {
      const b = await craftedArchive("cap", entry);
      const e = await thrown(() => unpackArchive(b.archive, join(b.dir, "out")));
      expect(e, entry).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
      expect(e.message).toContain("names a tool's own files");
      expect(existsSync(join(b.dir, "out"))).toBe(false);
    }
    // a hidden source: pack and export leave it out, so a build that read one would compile otherwise from the archive
    const h = await craftedArchive("cap", "src/.fast.cuh");
    expect((await thrown(() => unpackArchive(h.archive, join(h.dir, "out")))).message).toContain("is a hidden name");
    // the sender learns it at pack time
    const root = tempDir();
    const hidden = join(root, ".vim");
    await makeCapture(hidden);
    expect((await thrown(() => packCapture(hidden, join(root, "v.zip")))).message).toContain("starts with . (a hidden folder");
    const git = join(root, "cap");
    await makeCapture(git);
    mkdirSync(join(git, ".git"));
    writeFileSync(join(git, ".git/config"), "[filter]\n");
    expect((await thrown(() => packCapture(git, join(root, "g.zip")))).code).toBe("E_PACK_NAME");
  }, 60_000);

  test("Python's bytecode cache (adversary 58: an unchecked-hash .pyc beside the kernel file ran in its place): unpack refuses one, pack leaves it out, eval's copy and a build's copy hold none", async () => {
    for (const entry of ["src/__pycache__/k.cpython-311.pyc", "src/k.pyc", "src/sub/K.PYO"]) {
      const b = await craftedArchive("cap", entry);
      const e = await thrown(() => unpackArchive(b.archive, join(b.dir, "out")));
      expect(e, entry).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
      expect(e.message).toContain("is Python's bytecode cache");
      expect(existsSync(join(b.dir, "out"))).toBe(false);
    }
    const root = tempDir();
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src/__pycache__"), { recursive: true });
    writeFileSync(join(cap, "src/k.py"), "x = 1\n");
    writeFileSync(join(cap, "src/__pycache__/k.cpython-311.pyc"), "bytecode");
    writeFileSync(join(cap, "src/old.pyc"), "bytecode");
    const p = await packCapture(cap, join(root, "cap.zip"));
    const shipped = (await readPackIndex(p.archive)).files.map((f: { path: string }) => f.path);
    expect(shipped).toContain("src/k.py");
    expect(shipped.filter((f: string) => f.includes("pyc"))).toEqual([]);
    expect(p.leftOut.map((l) => l.path).sort()).toEqual(["kerncap-made-here.json", "src/__pycache__", "src/old.pyc"].sort()); // the seal: never shipped
    copyReproducer(cap, join(root, "copy"));
    expect(existsSync(join(root, "copy/src/k.py"))).toBe(true);
    expect(existsSync(join(root, "copy/src/__pycache__"))).toBe(false);
    expect(existsSync(join(root, "copy/src/old.pyc"))).toBe(false);
  }, 60_000);

  test("an archive's index makes no folder a capture does not hold: build/, node_modules/, processes/1/, a hidden one (adversary 54: listed in dirs alone, they were made); pack refuses such a folder", async () => {
    for (const [dir, why] of [
      ["build", "is build/ or lies in it"],
      ["build/pruned", "is build/ or lies in it"],
      ["bin", "is no folder of a capture"],
      ["node_modules", "names a tool's own files"],
      ["processes/1", "lies in processes/, which holds only one file per process"],
      ["kernel/.hidden", "is a hidden name"],
    ] as const) {
      const a = await craftedArchive("cap", "note.txt", [dir]);
      const e = await thrown(() => unpackArchive(a.archive, join(a.dir, "out")));
      expect(e, dir).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
      expect(e.message).toContain(why);
      expect(existsSync(join(a.dir, "out"))).toBe(false);
    }
    // a capture's own folders and what lies under them stay: memory/x, src/sub
    const ok = await craftedArchive("cap", "note.txt", ["memory/x", "src/sub"]);
    await unpackArchive(ok.archive, join(ok.dir, "out"));
    expect(existsSync(join(ok.dir, "out/memory/x"))).toBe(true);
    // pack never lists one: left empty it is left out (and said), with a file in it refused
    const root = tempDir();
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "bin/sub"), { recursive: true });
    const packed = await packCapture(cap, join(root, "c.zip"));
    expect(packed.leftOut.map((l) => l.path)).toEqual(["bin/", "bin/sub/", "kerncap-made-here.json"]); // and the seal, never shipped
    await unpackArchive(packed.archive, join(root, "back"));
    expect(existsSync(join(root, "back/bin"))).toBe(false);
    writeFileSync(join(cap, "bin/sub/tool"), "x");
    const p = await thrown(() => packCapture(cap, join(root, "d.zip")));
    expect(p).toMatchObject({ code: "E_PACK_NAME" });
    expect(p.message).toContain("lies in bin/, which is no folder of a capture");
  }, 60_000);

  test("an archive holds a capture's files only: no module or program outside src/ (a root json with __init__.py, node_modules with lodash/index.js, unpacked where Python or Node look, were imported)", async () => {
    for (const [root, entry, why] of [
      ["json", "__init__.py", "is a program or a module by its name"],
      ["pip", "__main__.py", "is a program or a module by its name"],
      ["node_modules", "lodash/index.js", "names a tool's own files"],
      // a capture's own folders under a root named node_modules: Node served require("src") from it (adversary 79 #27); at any depth too
      ["node_modules", "src/index.js", "names a tool's own files"],
      ["cap", "src/node_modules/x/index.js", "names a tool's own files"],
      ["cap", "lodash/index.js", "lies in lodash/, which is no folder of a capture"],
      ["cap", "tools/python3", "lies in tools/, which is no folder of a capture"],
      ["cap", "kernel/__init__.py", "is a program or a module by its name"],
      ["cap", "memory/sitecustomize.py", "is a program or a module by its name"],
      ["cap", "src/conftest.py", "names a tool's own files"],
      // under src/ too, at any depth (adversary 28: src/pytest.ini's addopts loaded src/kcplug.py when pytest ran there)
      ["cap", "src/pytest.ini", "names a tool's own files"],
      ["cap", "src/sub/tox.ini", "names a tool's own files"],
      ["cap", "src/setup.cfg", "names a tool's own files"],
      ["cap", "src/bunfig.toml", "names a tool's own files"],
      ["cap", "src/.pdbrc", "names a tool's own files"],
      ["cap", "src/.github/workflows/x.yml", "names a tool's own files"],
      ["cap", ".env", "names a tool's own files"],
      // a bare repository under src/: HEAD, config (core.fsmonitor), objects/, refs/ ran the sender's command at `git status` there (adversary 38)
      ["cap", "src/HEAD", "a bare repository's HEAD"],
      ["cap", "src/sub/HEAD", "a bare repository's HEAD"],
      // build/ is what builds write where the capture lies; pack leaves it out (adversary 34: a module at build/ unpacked)
      ["cap", "build/kernel.cubin", "lies in build/, which holds what builds write"],
      ["cap", "build/eval/c1/src/k.cu", "lies in build/, which holds what builds write"],
      ["cap", "processes/run.py", "holds only one file per process"],
      ["cap", "processes/0/x", "holds only one file per process"],
      // other tools' configuration at the top (trial 14 F4: pytest.ini's addopts ran the sender's module)
      ["cap", "pytest.ini", "names a tool's own files"], // refused at any depth since adversary 28
      ["cap", "GNUmakefile", "names a build tool's or test runner's configuration"],
      ["cap", "pyproject.toml", "names a tool's own files"],
      ["cap", ".gdbinit", "names a tool's own files"],
      ["cap", ".pdbrc", "names a tool's own files"],
      ["cap", "memory/.lldbinit", "names a tool's own files"],
    ] as const) {
      const a = await craftedArchive(root, entry);
      const e = await thrown(() => unpackArchive(a.archive, join(a.dir, "out")));
      expect(e, `${root}/${entry}`).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
      expect(e.message).toContain(why);
      expect(existsSync(join(a.dir, "out"))).toBe(false);
    }
    // the sender learns it at pack time; notes and a capture set's members are fine
    const root = tempDir();
    const json = join(root, "json");
    await makeCapture(json);
    writeFileSync(join(json, "__init__.py"), "import os\n");
    expect((await thrown(() => packCapture(json, join(root, "j.zip")))).code).toBe("E_PACK_NAME");
    const notes = join(root, "notes");
    await makeCapture(notes);
    writeFileSync(join(notes, "NOTES.md"), "what I tried\n");
    mkdirSync(join(notes, "src"));
    writeFileSync(join(notes, "src/tool.py"), "print(1)\n");
    writeFileSync(join(notes, "src/Makefile"), "all:\n"); // the sources' own build files lie under src/
    // processes/<n>: the capture library numbers each process of the job there (c/common/kc_process.c; the fixture has 0)
    writeFileSync(join(notes, "processes/1"), "");
    const ok = await packCapture(notes, join(root, "n.zip"));
    expect((await unpackArchive(ok.archive, join(root, "n-back"))).files).toBeGreaterThan(0);
    expect(readdirSync(join(root, "n-back/processes")).sort()).toEqual(["0", "1"]);
  }, 60_000);

  test("an archive whose root folder is named cap$(id>X): unpack refuses it (exit 2, the name escaped), and makes no folder; pack refuses such names too", async () => {
    const a = await craftedArchive(HOSTILE);
    const out = join(a.dir, "out");
    mkdirSync(out);
    const e = await refusedUnpackIn(out, a.archive);
    expect(e).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
    expect(e.message).toContain(`root folder name "${HOSTILE}"`);
    expect(readdirSync(out)).toEqual([]);
    // an entry name with terminal controls: refused, escaped in the message, never raw
    const b = await craftedArchive("cap", "note\u202e\u009b2J.txt"); // a bidi override, a C1 CSI
    const e2 = await thrown(() => unpackArchive(b.archive, join(out, "esc")));
    expect(e2).toMatchObject({ code: "E_ARCHIVE", exitCode: 2 });
    expect(e2.message).toContain("note\\u202e\\x9b2J.txt");
    expect(e2.message).not.toMatch(/[\u202e\u009b]/);
    expect(readdirSync(out)).toEqual([]);
    // the sender learns it at pack time
    const named = join(a.dir, HOSTILE);
    await makeCapture(named);
    expect((await thrown(() => packCapture(named, join(a.dir, "named.zip")))).code).toBe("E_PACK_NAME");
    const spaced = join(a.dir, "spaced");
    await makeCapture(spaced);
    writeFileSync(join(spaced, "my notes.txt"), "x");
    expect((await thrown(() => packCapture(spaced, join(a.dir, "spaced.zip")))).message).toContain('"my notes.txt": the name holds a character outside');
  }, 60_000);

  test("a capture folder the user renamed cap$(id>X), built with kerncap's stock build.sh: nvcc never sees the name, nothing runs", async () => {
    const root = tempDir();
    const dir = join(root, HOSTILE);
    await makeCapture(dir);
    mkdirSync(join(dir, "src/include"), { recursive: true });
    writeFileSync(join(dir, "src/k.cu"), "__global__ void k(float* x) { x[0] = 1.0f; }\n");
    writeFileSync(join(dir, "build.sh"), stockCudaBuildSh(), { mode: 0o755 });
    process.env.NVCC = join(fakeTool("nvcc", SHELL_NVCC), "nvcc");
    try {
      const b = await buildReproducer(dir, { quiet: true, force: false });
      expect(b.module).toBe(join(dir, "build/kernel.cubin"));
      expect(readFileSync(b.module, "utf8")).toContain("__global__ void k");
      // tune's builds pass their module's path: relative to the folder, off the compiler's command line too
      const t = await buildReproducer(dir, { quiet: true, force: false, out: join(dir, "build/tune/cuda-0/kernel.cubin") });
      expect(t.module).toBe(join(dir, "build/tune/cuda-0/kernel.cubin"));
      // the same build.sh run by hand in that folder: it compiles from a plainly named temporary folder
      const byHand = Bun.spawnSync(["bash", "./build.sh"], { cwd: dir, env: { ...process.env }, stdout: "pipe", stderr: "pipe" });
      expect(byHand.exitCode, byHand.stderr.toString()).toBe(0);
      expect(byHand.stdout.toString().trim()).toBe(join(dir, "build/kernel.cubin"));
    } finally {
      delete process.env.NVCC;
    }
    for (const d of [root, dir, process.cwd()]) expect(existsSync(join(d, "X"))).toBe(false);
    // the real nvcc, where there is one (it runs its steps through sh)
    const nvcc = Bun.which("nvcc");
    if (nvcc) {
      process.env.NVCC = nvcc;
      try {
        const b = await buildReproducer(dir, { quiet: true, force: false });
        expect(existsSync(b.module)).toBe(true);
      } finally {
        delete process.env.NVCC;
      }
      for (const d of [root, dir, process.cwd()]) expect(existsSync(join(d, "X"))).toBe(false);
    }
  }, 120_000);
});

describe("the interpreter pinned.json names (a re-attack: an interpreter in another user's folder, swapped after the digest)", () => {
  test("one inside the capture, or reached through a folder others can write or another user owns, is refused; root's own is not", async () => {
    const { interpreterProblem } = await import("../../src/format/what-runs.ts");
    const { mkdtempSync, mkdirSync, writeFileSync, chmodSync, chownSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const base = mkdtempSync(join(tmpdir(), "kc-interp-"));
    const cap = join(base, "cap");
    mkdirSync(join(cap, ".venv/bin"), { recursive: true });
    writeFileSync(join(cap, ".venv/bin/python3"), "#!/bin/sh\n");
    expect(interpreterProblem(cap, join(cap, ".venv/bin/python3"))).toBe("lies inside the capture folder");
    const shared = join(base, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    writeFileSync(join(shared, "python3"), "#!/bin/sh\n");
    expect(interpreterProblem(cap, join(shared, "python3"))).toContain("its group or every user can write");
    if (process.getuid?.() === 0) {
      const theirs = join(base, "theirs");
      mkdirSync(theirs);
      writeFileSync(join(theirs, "python3"), "#!/bin/sh\n");
      chownSync(theirs, 65534, 65534);
      expect(interpreterProblem(cap, join(theirs, "python3"))).toContain("belongs to another user");
      // a link of theirs in a sticky folder anyone may write, naming root's python3: its real path is root's alone, but
      // they could flip the link between the check and the build's exec (adversary 39 #19, #20: -ccbin too)
      const { lchownSync, symlinkSync: link } = await import("node:fs");
      const sticky = join(base, "tmp");
      mkdirSync(sticky);
      chmodSync(sticky, 0o1777);
      const real = ["/usr/bin/python3", "/bin/sh"].find((x) => existsSync(x))!;
      link(real, join(sticky, "py"));
      lchownSync(join(sticky, "py"), 65534, 65534);
      expect(interpreterProblem(cap, join(sticky, "py"))).toContain("a link that belongs to another user (uid 65534)");
      link(real, join(sticky, "mine"));
      expect(interpreterProblem(cap, join(sticky, "mine"))).toBeUndefined();
    }
    expect(interpreterProblem(cap, "/bin/sh")).toBeUndefined();
    expect(interpreterProblem(cap, "python3")).toBeUndefined(); // found on PATH, the user's own
    // a relative path names a file by where the build runs (a trial: ../../../tmp/B/python3, another user's, passed every check)
    for (const rel of ["../../../../tmp/B/python3", "tools/python3", "./python3"])
      expect(interpreterProblem(cap, rel)).toContain("a relative path with a folder in it");
    // a per-process path names the build's folder in the build (a trial: /proc/self/cwd/../../../usr/bin/python3)
    for (const p of ["/proc/self/cwd/../../../usr/bin/python3", "/proc/thread-self/cwd/python3", "/dev/fd/3", "//proc/self/root/usr/bin/python3"])
      expect(interpreterProblem(cap, p)).toContain("under /proc, /dev or /sys");
    const { symlinkSync } = await import("node:fs");
    symlinkSync("/proc/self/cwd", join(base, "here"));
    expect(interpreterProblem(cap, join(base, "here/python3"))).toBeDefined(); // the link leads elsewhere in the build
  });
});

describe("adversary 60: a host compiler folder or a missing interpreter in a folder others may add to", () => {
  test("-ccbin naming a sticky folder anyone may write is refused (nvcc runs its gcc); so is one holding another user's gcc, and a missing interpreter where others may create it", async () => {
    const { interpreterProblem } = await import("../../src/format/what-runs.ts");
    const { mkdtempSync, mkdirSync, writeFileSync, chmodSync, symlinkSync, lchownSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const base = mkdtempSync(join(tmpdir(), "kc-ccbin-"));
    chmodSync(base, 0o755);
    const cap = join(base, "cap");
    mkdirSync(cap);
    const sticky = join(base, "shared");
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    // the folder itself: anyone may add gcc to it, before or after the check
    expect(interpreterProblem(cap, sticky)).toContain("its group or every user can write (mode 1777)");
    expect(interpreterProblem(cap, join(sticky, "python3"))).toContain("does not exist, and");
    expect(interpreterProblem(cap, join(sticky, "python3"))).toContain(`${sticky}, where it would be made, can be written by another user`);
    // a folder of the user's own: its programs are checked as an interpreter is
    const mine = join(base, "bin");
    mkdirSync(mine);
    expect(interpreterProblem(cap, mine)).toBeUndefined();
    symlinkSync("/usr/bin/gcc", join(mine, "gcc"));
    expect(interpreterProblem(cap, mine)).toBeUndefined();
    symlinkSync(".", join(mine, "g++")); // a link back to the folder: no program, no loop
    expect(interpreterProblem(cap, mine)).toBeUndefined();
    if (process.getuid?.() === 0) {
      symlinkSync("/bin/sh", join(mine, "cc"));
      lchownSync(join(mine, "cc"), 65534, 65534);
      expect(interpreterProblem(cap, mine)).toContain("holds cc, which is named through");
    }
    // a missing one in a folder of the user's own is left to the build
    expect(interpreterProblem(cap, join(mine, "python9"))).toBeUndefined();
    if (process.getuid?.() === 0) {
      // a missing one named through another user's link (to root's /usr/lib): they may point it elsewhere before the run (adversary 61)
      symlinkSync("/usr/lib", join(base, "lnk"));
      lchownSync(join(base, "lnk"), 65534, 65534);
      expect(interpreterProblem(cap, join(base, "lnk/nope/python3"))).toContain("a link that belongs to another user (uid 65534)");
    }
  });
});

describe("commands kerncap suggests quote the folder's name (adversary 29: a handed-over folder named `$(touch PWNED)cap` ran `touch` when its suggested command was pasted)", () => {
  test("the trust refusal's command and hint, the judging settings' accept command, the read-only folder's cp: each a shell word", async () => {
    const root = tempDir();
    const dir = await received(join(root, "in"), HONEST);
    const evil = join(root, "$(touch PWNED)cap");
    renameSync(dir, evil);
    const e = await thrown(() => requireTrustedBuild(evil, readManifest(evil), false));
    expect(e.code).toBe("E_UNTRUSTED");
    const quoted = `'${evil}'`;
    expect(e.hint).toContain(`kerncap validate ${quoted} --trust=`);
    expect(e.hint).not.toContain(`kerncap validate ${evil}`);
    expect((e.details as { trust: { command: string } }).trust.command).toContain(`kerncap validate ${quoted} --trust=`);
    expect(acceptCommand(evil, "ab".repeat(32))).toBe(`kerncap judge ${quoted} --accept=${"ab".repeat(32)}`);
    // pasted into a shell, the suggested command names the folder: nothing runs
    const sh = Bun.spawnSync(["bash", "-c", `cd ${JSON.stringify(root)} && printf '%s\\n' ${acceptCommand(evil)}`], { stdout: "pipe" });
    expect(sh.stdout.toString()).toContain(evil);
    expect(existsSync(join(root, "PWNED"))).toBe(false);
  });
});
