/**
 * Races another local user sharing a folder can run against kerncap's writers and readers
 * (docs/security.md, "Folders swapped while kerncap works"), made deterministic: the folder on
 * the way is swapped for a link between kerncap's check and its write or read, at a point the
 * test chooses (after openTempBeside opened the folder; in pack's progress callback, between the
 * walk and the reads). Each must write nothing where the link points and read nothing from there.
 * And an agent's edit of src/ while a build runs (kerncap mcp runs calls concurrently): the
 * compiler reads the private copy made before the build, the bytes the confined scan read.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../../src/errors.ts";
import { packCapture } from "../../src/format/archive.ts";
import { mkdirInCapture, openFileWalk, readInCapture, writeInCapture } from "../../src/format/paths.ts";
import { commitTemp, makePrivateTemp, openTempBeside, writeFileAtomic } from "../../src/util/write-file.ts";
import { tempFor } from "../../src/leftovers.ts";
import { unpackArchive } from "../../src/format/unpack.ts";
import { exportCapture } from "../../src/export/export.ts";
import { writeDemo } from "../../src/capture/demo.ts";
import { evaluateRefusal, makeCapture, tempDir } from "./fixtures.ts";

function refused(f: () => unknown): KerncapError {
  try {
    f();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("not refused");
}

describe("a folder in the middle of a path swapped for a link", () => {
  test("the writer refuses a path whose middle component is a link below its root", () => {
    const d = tempDir();
    const victim = join(d, "victim");
    mkdirSync(victim);
    mkdirSync(join(d, "cap"));
    symlinkSync(victim, join(d, "cap", "build"));
    const e = refused(() => writeFileAtomic(join(d, "cap", "build", "kernel.cubin"), "x", { root: join(d, "cap") }));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("build is a symbolic link");
    expect(readdirSync(victim)).toEqual([]);
  });

  test("a swap after the folder was opened: the file lands in the folder opened, never where the link points", () => {
    const d = tempDir();
    const victim = join(d, "victim");
    mkdirSync(victim);
    mkdirSync(join(d, "cap", "build"), { recursive: true });
    const target = join(d, "cap", "build", "kernel.cubin");
    const { fd, tmp } = openTempBeside(target, join(d, "cap"));
    // the attacker's move, between the check and the write: build/ away, a link in its place
    renameSync(join(d, "cap", "build"), join(d, "cap", "build.old"));
    symlinkSync(victim, join(d, "cap", "build"));
    writeFileSync(fd, "cubin");
    commitTemp(fd, tmp, target);
    expect(readdirSync(victim)).toEqual([]);
    expect(readFileSync(join(d, "cap", "build.old", "kernel.cubin"), "utf8")).toBe("cubin");
  });

  test("writeInCapture and mkdirInCapture refuse a link on the way, and create nothing through it", () => {
    const d = tempDir();
    const victim = join(d, "victim");
    mkdirSync(victim);
    mkdirSync(join(d, "cap"));
    symlinkSync(victim, join(d, "cap", "profile"));
    expect(refused(() => writeInCapture(join(d, "cap"), "profile/a/report.txt", "r")).code).toBe("E_UNSAFE_PATH");
    expect(refused(() => mkdirInCapture(join(d, "cap"), "profile/a")).code).toBe("E_UNSAFE_PATH");
    expect(readdirSync(victim)).toEqual([]);
  });

  test("a read through a folder that is a link is refused (openFileWalk), and readInCapture reads no file swapped after its check", () => {
    const d = tempDir();
    const secret = join(d, "secret");
    mkdirSync(secret);
    writeFileSync(join(secret, "saxpy.cu"), "ROOT_ONLY\n");
    mkdirSync(join(d, "cap"));
    symlinkSync(secret, join(d, "cap", "src"));
    expect(refused(() => openFileWalk(join(d, "cap"), "src/saxpy.cu")).code).toBe("E_UNSAFE_PATH");
    expect(refused(() => readInCapture(join(d, "cap"), "src/saxpy.cu", 1 << 20)).code).toBe("E_UNSAFE_PATH");
  });

  test("pack: src/ swapped for a link to a private folder between the walk and the reads is refused, the private file never archived", async () => {
    const d = tempDir();
    const cap = join(d, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src", "saxpy.cu"), "AAAAAAAAAA\n");
    const secret = join(d, "secret");
    mkdirSync(secret);
    writeFileSync(join(secret, "saxpy.cu"), "ROOT_ONLY\n\n"); // same size
    let swapped = false;
    const err = await packCapture(cap, join(d, "out.zip"), {
      onProgress: (phase) => {
        if (phase !== "packing" || swapped) return;
        swapped = true;
        renameSync(join(cap, "src"), join(d, "src.away"));
        symlinkSync(secret, join(cap, "src"));
      },
    }).then(
      () => undefined,
      (e) => e,
    );
    expect(swapped).toBe(true);
    expect(err).toBeInstanceOf(KerncapError);
    expect(err.code).toBe("E_UNSAFE_PATH");
    expect(err.message).toMatch(/src.* (is a symbolic link|changed while kerncap was reading it)/);
    expect(existsSync(join(d, "out.zip"))).toBe(false);
  });

  test("pack refuses a FIFO in the capture, naming it (it was left out silently)", async () => {
    const d = tempDir();
    const cap = join(d, "cap");
    await makeCapture(cap);
    execFileSync("mkfifo", [join(cap, "pipe")]);
    const err = await packCapture(cap, join(d, "out.zip")).then(
      () => undefined,
      (e) => e,
    );
    expect(err).toBeInstanceOf(KerncapError);
    expect(err.code).toBe("E_PACK_LINK");
    expect(err.message).toContain("pipe is a FIFO");
  });
});

describe("an edit of src/ while a build runs", () => {
  test("the compiler reads the private copy made before the build (the bytes a confined build's scan read), never the capture's src/ edited meanwhile", async () => {
    const root = tempDir();
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    const scanned = "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n";
    writeFileSync(join(cap, "src/kernel.cu"), scanned);
    const [started, go] = [join(root, "started"), join(root, "go")];
    // a build that stands for the compiler: it starts, waits until the test has edited the capture, then reads src/
    writeFileSync(
      join(cap, "build.sh"),
      `#!/usr/bin/env bash\ntouch ${JSON.stringify(started)}\nfor i in $(seq 200); do [ -e ${JSON.stringify(go)} ] && break; sleep 0.05; done\nmkdir -p build\ncat src/kernel.cu > build/seen.cu\necho build/seen.cu\n`,
      { mode: 0o755 },
    );
    const { buildReproducer } = await import("../../src/frontends/build.ts");
    const built = buildReproducer(cap, { quiet: true, force: true });
    for (let i = 0; i < 200 && !existsSync(started); i++) await Bun.sleep(50);
    expect(existsSync(started)).toBe(true);
    // what an agent's concurrent edit_file does: a probe the scan never saw
    writeFileSync(join(cap, "src/kernel.cu"), '#if __has_include("/etc/hostname")\n#error probe\n#endif\n');
    writeFileSync(go, "");
    const b = await built;
    expect(readFileSync(b.module, "utf8")).toBe(scanned);
  }, 30_000);

  test("a link or FIFO under src/ is refused when the build copies src/, naming it; nothing runs", async () => {
    for (const kind of ["link", "fifo"]) {
      const root = tempDir();
      const cap = join(root, "cap");
      await makeCapture(cap);
      mkdirSync(join(cap, "src/inc"), { recursive: true });
      writeFileSync(join(cap, "src/kernel.cu"), '#include "inc/x.h"\n');
      if (kind === "link") symlinkSync("/etc/hostname", join(cap, "src/inc/x.h"));
      else execFileSync("mkfifo", [join(cap, "src/inc/x.h")]);
      const ran = join(root, "ran");
      writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\ntouch ${JSON.stringify(ran)}\necho build/k.o\n`, { mode: 0o755 });
      const { buildReproducer } = await import("../../src/frontends/build.ts");
      const e = await buildReproducer(cap, { quiet: true, force: true }).then(
        () => undefined,
        (x) => x,
      );
      expect(e?.code, kind).toBe("E_UNSAFE_PATH");
      expect(e?.message, kind).toContain("src/inc/x.h");
      expect(existsSync(ran), kind).toBe(false);
    }
  }, 30_000);
});

describe("CSV outputs", () => {
  test("a cell's C0/C1 controls, DEL and bidi overrides are escaped as the terminal escapes them", async () => {
    const { csv } = await import("../../src/util/html-report.ts");
    const out = csv([["kernel"], ["k\x1b]0;pwned\x07\x9b2J\x7f\u202eevil"]]);
    expect(out).not.toMatch(/[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u202e]/);
    expect(out).toContain("k\\x1b]0;pwned\\x07\\x9b2J\\x7f\\u202eevil");
  });
});

describe("an MCP agent's confined build and candidates", () => {
  test("a confined build that fails with no dependency list (stopped in the preprocessor) is E_BUILD saying so, its compiler messages not shown, no diagnostic", async () => {
    const { buildReproducer } = await import("../../src/frontends/build.ts");
    const { readManifest } = await import("../../src/format/capture-dir.ts");
    const { recordRendered } = await import("./fixtures.ts");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    // the preprocessor's #error under #if: one bit of a file's content per build, in a message naming a file of the capture
    writeFileSync(join(dir, "build.sh"), `#!/usr/bin/env bash\necho "src/kernel.cu:3:2: error: #error FOO_IS_ONE" >&2\nexit 1\n`, { mode: 0o755 });
    recordRendered(dir);
    // confined by the scan alone (a machine with no sandbox): there no line is named either, since #error lines under #if of
    // an outside file's values would tell a bit of it per line (in the sandbox no file outside can be read: nu89 #10)
    const { overrideSandboxSupport } = await import("../../src/frontends/sandbox.ts");
    overrideSandboxSupport(null);
    const e = await buildReproducer(dir, { quiet: true, force: false, confine: readManifest(dir) })
      .then(
        () => undefined,
        (x) => x,
      )
      .finally(() => overrideSandboxSupport(undefined));
    expect(e).toBeInstanceOf(KerncapError);
    expect(e.code).toBe("E_BUILD"); // the source's fault, an eval's compile-error (nu10 #29)
    expect(e.message).toContain("the preprocessor stopped before the dependency list");
    expect(`${e.message}\n${e.hint}`).not.toContain("FOO_IS_ONE");
    expect(e.details).toEqual({ diagnostics: [] });
  }, 60_000);

  test("candidate patches that make a link or change a mode are refused; so is a patch candidate that leaves a link in src/", async () => {
    const { patchModeProblem, parseCandidate } = await import("../../src/eval/candidates.ts");
    const link =
      "diff --git a/evil.h b/evil.h\nnew file mode 120000\nindex 0000000..845ec15\n--- /dev/null\n+++ b/evil.h\n@@ -0,0 +1 @@\n+/etc/hostname\n\\ No newline at end of file\n";
    expect(patchModeProblem(link)).toContain("symbolic link");
    expect(patchModeProblem("diff --git a/k.cu b/k.cu\nold mode 100644\nnew mode 100755\n")).toContain("mode");
    expect(patchModeProblem("diff --git a/n.cu b/n.cu\nnew file mode 100755\n")).toContain("100755");
    expect(patchModeProblem("diff --git a/n.cu b/n.cu\nnew file mode 100644\n--- /dev/null\n+++ b/n.cu\n@@ -0,0 +1 @@\n+int x;\n")).toBeUndefined();
    const d = tempDir();
    writeFileSync(join(d, "sym.patch"), link);
    expect(refused(() => parseCandidate(join(d, "sym.patch"))).code).toBe("E_PATCH"); // the candidate's own record (nu7 #3), never applied
  });

  test("a candidate patch that copies or renames a file is refused: git apply would read a copy's source outside the capture (copy from /abs)", async () => {
    const { patchModeProblem, parseCandidate, materialise } = await import("../../src/eval/candidates.ts");
    const root = tempDir();
    const secret = join(root, "secret.txt");
    writeFileSync(secret, "TOPSECRET_7f3a9c\n", { mode: 0o600 });
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "int k;\n");
    const copy = `diff --git a/kernel.cu b/leak.cu\nsimilarity index 100%\ncopy from ${secret}\ncopy to leak.cu\n`;
    const rename = "diff --git a/kernel.cu b/x.sh\nsimilarity index 100%\nrename from kernel.cu\nrename to x.sh\n";
    expect(patchModeProblem(copy)).toContain("copy from");
    expect(patchModeProblem(rename)).toContain("rename from");
    writeFileSync(join(root, "copy.patch"), copy);
    expect(refused(() => parseCandidate(join(root, "copy.patch"))).code).toBe("E_PATCH");
    expect(evaluateRefusal(cap, { name: "c", patch: copy }).code).toBe("E_PATCH"); // its record's error, nothing of it written
    // applied past the parse (a candidate made by hand): git apply is never reached, nothing is copied in
    const dest = join(root, "cand");
    const e = await materialise(cap, { id: "c@0", label: "copy.patch", kind: "patch", path: join(root, "copy.patch") }, dest).then(
      () => undefined,
      (x) => x,
    );
    expect(e?.code).toBe("E_PATCH");
    expect(existsSync(join(dest, "src/leak.cu"))).toBe(false);
  });

  test("evaluate's files and patches follow edit_file's rule (no src/x.sh, no build.sh at any depth) and its patch no link", async () => {
    const cap = join(tempDir(), "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    // each refused as its own record (nothing of it written: evaluateRefusal), the others still evaluated
    expect(evaluateRefusal(cap, { name: "sh", files: { "src/x.sh": "id\n" } }).code).toBe("E_NOT_SOURCE");
    expect(evaluateRefusal(cap, { name: "bs", files: { "src/a/build.sh": "id\n" } }).code).toBe("E_NOT_SOURCE");
    expect(evaluateRefusal(cap, { name: "p", patch: "--- /dev/null\n+++ b/x.sh\n@@ -0,0 +1 @@\n+id\n" }).code).toBe("E_NOT_SOURCE");
    expect(
      evaluateRefusal(cap, {
        name: "l",
        patch: "diff --git a/evil.h b/evil.h\nnew file mode 120000\n--- /dev/null\n+++ b/evil.h\n@@ -0,0 +1 @@\n+/etc/hostname\n",
      }).code,
    ).toBe("E_PATCH");
    expect(() => evaluateRefusal(cap, { name: "k", files: { "src/kernel.cu": "__global__ void scale(float* x, int n) { x[0] *= 3.0f; }\n" } })).toThrow(
      "not refused",
    );
  });
});

describe("a link that changes while pack reads the folder", () => {
  test("no longer a link when its target is read (readlink's EINVAL): E_UNSAFE_PATH naming it, not an internal error", async () => {
    const { linkTarget } = await import("../../src/format/pack.ts");
    const d = tempDir();
    symlinkSync("/etc/hostname", join(d, "l"));
    expect(linkTarget(d, "l")).toContain("/etc/hostname");
    writeFileSync(join(d, "f"), "now a file"); // what the lstat saw as a link is a file by the readlink
    const e = refused(() => linkTarget(d, "f"));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("changed while kerncap was reading it");
    expect(e.exitCode).toBe(2);
  });
});

/**
 * Another local user who can write the folder an output goes into (a 0777 shared folder, a 2770
 * team folder: not sticky) renames kerncap's temp folder `OUT.tmp-<pid>-<token>` away while it is
 * written, and puts at its name a folder of links (README.md -> ~/.bashrc). The attacker's moves are
 * made in-process at a point inside the write (unpack's progress callback, export's iteration of
 * its trusted files). kerncap writes through the folder it holds open, never the name: nothing
 * lands where the links point, and the folder at the name is not placed.
 */
describe("the temp folder of unpack, export and demo swapped for a folder of links (a shared, not sticky parent)", () => {
  /** The attacker: `tmp` renamed to `stolen`, a folder at its name whose `links` point at the victim's files. */
  const swap = (tmp: string, stolen: string, links: Record<string, string>) => {
    renameSync(tmp, stolen);
    mkdirSync(tmp);
    for (const [name, target] of Object.entries(links)) symlinkSync(target, join(tmp, name));
  };
  const tempOf = (dir: string, out: string) => {
    const n = readdirSync(dir).find((x) => x.startsWith(`${out}.tmp-`));
    if (!n) throw new Error(`no temp folder of ${out} in ${dir}`);
    return join(dir, n);
  };

  test("makePrivateTemp: writes go into the folder held (not through the links at its name), placeAt refuses the folder at the name, messages show no /proc/self/fd path", () => {
    const d = tempDir();
    chmodSync(d, 0o777);
    const bashrc = join(d, "bashrc");
    writeFileSync(bashrc, "mine\n");
    const out = join(d, "out");
    const t = makePrivateTemp(tempFor(out));
    expect(statSync(t.path).mode & 0o7777).toBe(0o700);
    try {
      swap(t.path, join(d, "stolen"), { "README.md": bashrc });
      writeFileSync(join(t.at, "README.md"), "written by kerncap\n");
      mkdirSync(join(t.at, "src"));
      writeFileSync(join(t.at, "src", "k.cu"), "k\n");
      expect(readFileSync(bashrc, "utf8")).toBe("mine\n");
      expect(readFileSync(join(d, "stolen", "README.md"), "utf8")).toBe("written by kerncap\n");
      const e = refused(() => t.placeAt(out));
      expect(e.code).toBe("E_UNSAFE_PATH");
      expect(e.message).toContain("nothing was placed");
      expect(e.hint).toContain("only you can write");
      expect(existsSync(out)).toBe(false);
      // an error inside the folder names the output, never the fd path
      let err: unknown;
      try {
        writeFileSync(join(t.at, "missing", "x"), "x");
      } catch (x) {
        err = t.unfd(x, out);
      }
      expect(String((err as Error).message)).toContain(join(out, "missing", "x"));
      expect(String((err as Error).message)).not.toContain("/proc/self/fd");
    } finally {
      t.dispose();
    }
    expect(readdirSync(join(d, "stolen"))).toEqual([]); // what kerncap wrote is removed, through the fd
    expect(readFileSync(bashrc, "utf8")).toBe("mine\n");
  });

  test("makePrivateTemp: a folder left in place is placed (the check passes for the folder itself)", () => {
    const d = tempDir();
    const out = join(d, "out");
    const t = makePrivateTemp(tempFor(out));
    try {
      writeFileSync(join(t.at, "a"), "a\n");
      t.placeAt(out);
    } finally {
      t.dispose();
    }
    expect(readFileSync(join(out, "a"), "utf8")).toBe("a\n");
    expect(readdirSync(d)).toEqual(["out"]);
  });

  test("unpack: the temp folder swapped mid-unpack: no file written through the links, nothing placed (E_UNSAFE_PATH)", async () => {
    const d = tempDir();
    await makeCapture(join(d, "cap"));
    const zip = join(d, "cap.zip");
    await packCapture(join(d, "cap"), zip);
    const shared = join(d, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const bashrc = join(d, "bashrc");
    writeFileSync(bashrc, "mine\n");
    const victim = join(d, "victim");
    mkdirSync(victim);
    let swapped = false;
    let e: unknown;
    try {
      await unpackArchive(zip, join(shared, "got"), {
        onProgress: (stage) => {
          if (stage !== "unpacking" || swapped) return;
          swapped = true;
          swap(tempOf(shared, "got"), join(shared, "stolen"), { "kerncap.json": bashrc, kernel: victim, memory: victim, ".kerncap-received": bashrc });
        },
      });
    } catch (x) {
      e = x;
    }
    expect(swapped).toBe(true);
    expect(e).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_UNSAFE_PATH");
    expect((e as KerncapError).message).not.toContain("/proc/self/fd");
    expect(readFileSync(bashrc, "utf8")).toBe("mine\n");
    expect(readdirSync(victim)).toEqual([]);
    expect(existsSync(join(shared, "got"))).toBe(false);
  });

  test("export: the temp folder swapped mid-export: README.md and the export's document not written through the links, nothing placed (E_UNSAFE_PATH)", async () => {
    const d = tempDir();
    const cap = writeDemo(join(d, "cap"), false).dir;
    // a folder of the user's own (export refuses one others can write before it starts): the in-process swap stands for a process of the user's
    const shared = join(d, "shared");
    mkdirSync(shared);
    const bashrc = join(d, "bashrc");
    writeFileSync(bashrc, "mine\n");
    const victim = join(d, "victim");
    mkdirSync(victim);
    let swapped = false;
    // the attacker's moment: when the export iterates its trusted files (data/, capture.h, build.sh, src/ written; README.md and the document not yet)
    const attack = {
      *[Symbol.iterator]() {
        swapped = true;
        swap(tempOf(shared, "exp"), join(shared, "stolen"), { "README.md": bashrc, "kerncap-export.json": join(victim, "doc"), hsa: victim });
      },
    } as unknown as { name: string; bytes: Buffer }[];
    let e: unknown;
    try {
      exportCapture(cap, join(shared, "exp"), { trustedFiles: attack });
    } catch (x) {
      e = x;
    }
    expect(swapped).toBe(true);
    expect(e).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_UNSAFE_PATH");
    expect((e as KerncapError).message).not.toContain("/proc/self/fd");
    expect(readFileSync(bashrc, "utf8")).toBe("mine\n");
    expect(readdirSync(victim)).toEqual([]);
    expect(existsSync(join(shared, "exp"))).toBe(false);
  });

  test("demo in a shared folder, left alone, still writes its folder (modes kept); export there is refused before it starts (another user could put a folder of theirs at its name before make)", () => {
    const d = tempDir();
    const shared = join(d, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const cap = writeDemo(join(shared, "demo"), false).dir;
    expect(statSync(cap).mode & 0o7777).toBe(0o755);
    let e: unknown;
    try {
      exportCapture(cap, join(shared, "exp"));
    } catch (x) {
      e = x;
    }
    expect((e as KerncapError).code).toBe("E_UNSAFE_PATH");
    expect((e as KerncapError).message).toContain(`${shared} is writable by other users`);
    expect(readdirSync(shared).sort()).toEqual(["demo"]);
    const mine = join(d, "mine");
    mkdirSync(mine);
    exportCapture(cap, join(mine, "exp"));
    expect(statSync(join(mine, "exp")).mode & 0o022).toBe(0);
  });
});

describe("a FIFO renamed over a file after kerncap opened it (adversary 68)", () => {
  const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
  const swapper = join(tempDir(), "swap-on-open");
  const hasGcc = Bun.spawnSync(["gcc", "-O1", "-o", swapper, join(import.meta.dir, "helpers/swap-on-open.c")]).exitCode === 0;

  /** Run `kerncap ARGS` while swap-on-open renames `src` over `dst` at the `nth` open of `dir/name`; kerncap gets 20 s (SIGKILL after). */
  async function raced(args: string[], watch: { dir: string; name: string; nth: number; src: string; dst: string }) {
    const w = Bun.spawn([swapper, watch.dir, watch.name, String(watch.nth), watch.src, watch.dst], { stdout: "pipe", stderr: "ignore" });
    const reader = w.stdout.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain("ready");
    const t0 = performance.now();
    const k = Bun.spawn([process.execPath, MAIN, ...args], { stdout: "pipe", stderr: "pipe", timeout: 20_000, killSignal: "SIGKILL" });
    const code = await k.exited;
    const err = await new Response(k.stderr).text();
    w.kill();
    return { code, err, seconds: (performance.now() - t0) / 1000, swapped: (await w.exited) === 0 };
  }

  test.skipIf(!hasGcc)("pack: a source file turned FIFO after its first open is refused at once, never waited on (it hung past SIGTERM)", async () => {
    const d = tempDir();
    const cap = join(d, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src", "saxpy.cu"), "__global__ void k() {}\n");
    execFileSync("mkfifo", [join(d, "fifo")]);
    const r = await raced(["pack", cap, "-o", join(d, "out.zip")], {
      dir: join(cap, "src"),
      name: "saxpy.cu",
      nth: 1,
      src: join(d, "fifo"),
      dst: join(cap, "src", "saxpy.cu"),
    });
    expect(r.swapped).toBe(true);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/E_UNSAFE_PATH|E_PACK_LINK|changed while/);
    expect(r.seconds).toBeLessThan(15);
    expect(existsSync(join(d, "out.zip"))).toBe(false);
  });

  test.skipIf(!hasGcc)("unpack: the archive renamed over by a FIFO after its open is read from the descriptor opened: unpacked whole", async () => {
    const d = tempDir();
    const cap = join(d, "cap");
    const m = await makeCapture(cap);
    const zip = join(d, "drop", "cap.zip");
    mkdirSync(join(d, "drop"));
    await packCapture(cap, zip);
    execFileSync("mkfifo", [join(d, "drop", "fifo")]);
    const r = await raced(["unpack", zip, "-o", join(d, "got")], { dir: join(d, "drop"), name: "cap.zip", nth: 1, src: join(d, "drop", "fifo"), dst: zip });
    expect(r.swapped).toBe(true);
    expect(r.code, r.err).toBe(0);
    expect(Buffer.compare(readFileSync(join(d, "got", m.memory.before)), readFileSync(join(cap, m.memory.before)))).toBe(0);
  });
});
