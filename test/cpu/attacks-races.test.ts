/**
 * Races another local user sharing a folder can run against kerncap's writers and readers
 * (docs/security.md, "Folders swapped while kerncap works"), made deterministic: the folder on
 * the way is swapped for a link between kerncap's check and its write or read, at a point the
 * test chooses (after openTempBeside opened the folder; in pack's progress callback, between the
 * walk and the reads). Each must write nothing where the link points and read nothing from there.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../../src/errors.ts";
import { packCapture } from "../../src/format/archive.ts";
import { mkdirInCapture, openFileWalk, readInCapture, writeInCapture } from "../../src/format/paths.ts";
import { commitTemp, openTempBeside, writeFileAtomic } from "../../src/util/write-file.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

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
    }).then(() => undefined, (e) => e);
    expect(swapped).toBe(true);
    expect(err).toBeInstanceOf(KerncapError);
    expect(err.code).toBe("E_UNSAFE_PATH");
    expect(err.message).toContain("changed while kerncap was reading it");
    expect(existsSync(join(d, "out.zip"))).toBe(false);
  });

  test("pack refuses a FIFO in the capture, naming it (it was left out silently)", async () => {
    const d = tempDir();
    const cap = join(d, "cap");
    await makeCapture(cap);
    execFileSync("mkfifo", [join(cap, "pipe")]);
    const err = await packCapture(cap, join(d, "out.zip")).then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(KerncapError);
    expect(err.code).toBe("E_PACK_LINK");
    expect(err.message).toContain("pipe is a FIFO");
  });
});

describe("CSV outputs", () => {
  test("a cell's C0/C1 controls, DEL and bidi overrides are escaped as the terminal escapes them", async () => {
    const { csv } = await import("../../src/util/html-report.ts");
    const out = csv([["kernel"], ["k\x1b]0;pwned\x07\x9b2J\x7f\u202eevil"]]);
    expect(out).not.toMatch(/[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u202e]/);
    expect(out).toContain("k\\x1b]0;pwned\\x07\\x9b2J\\x7f\\u202eevil");
  });
});
