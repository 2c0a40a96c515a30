/**
 * kerncap pack / unpack (src/format/archive.ts) on synthetic captures: bit-exact round trip,
 * holes kept, checksums verify after unpack, zip-slip, damage and overwrite refusals,
 * decompression bombs, altered memory chunks, masked modes, SIGINT/SIGTERM and stale temps.
 */
import { TEMPLATE_ESCAPES } from "../../src/frontends/templates.ts";
import { describe, expect, spyOn, test } from "bun:test";
import { runCommand } from "citty";
import { zipSync, strToU8 } from "fflate";
import {
  chmodSync,
  closeSync,
  existsSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { basename, join, resolve } from "node:path";
import { constants as zc, deflateRawSync } from "node:zlib";
import { commands } from "../../src/cli/main.ts";
import * as v from "valibot";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { KerncapError } from "../../src/errors.ts";
import { log } from "../../src/log.ts";
import { filesNotIn, isPackArchive, packCapture, PACK_INDEX, portabilityWarnings, readPackIndex, unpackArchive } from "../../src/format/archive.ts";
import { readManifest, verifyRegions } from "../../src/format/capture-dir.ts";
import { dataExtents } from "../../src/format/sparse-extents.ts";
import { hostIdentity, RECEIVED_MARK } from "../../src/format/received.ts";
import { MADE_HERE_SEAL } from "../../src/format/file-names.ts";
import { hostname } from "node:os";
import { deadPid, grepTree, makeCapture, PLANTED, plantPrivate, tempDir } from "./fixtures.ts";
import { writeDemo } from "../../src/capture/demo.ts";
import { rawZip, readRawZip } from "./zip-fixture.ts";

async function fresh(): Promise<{ root: string; dir: string }> {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  return { root, dir };
}

async function error(fn: () => unknown): Promise<KerncapError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("did not throw");
}

/** Every file under dir: relative path → bytes. */
function tree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const go = (rel: string) => {
    for (const n of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${n.name}` : n.name;
      if (n.isDirectory()) go(r);
      else out.set(r, readFileSync(join(dir, r)));
    }
  };
  go("");
  return out;
}

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");

/** A raw deflate stream of `mib` MiB of zeros (about 1 KiB per MiB): sync-flushed pieces, then a final empty block. */
function zeroBomb(mib: number): Buffer {
  const piece = deflateRawSync(Buffer.alloc(1 << 20), { finishFlush: zc.Z_SYNC_FLUSH });
  return Buffer.concat([...Array.from({ length: mib }, () => piece), deflateRawSync(Buffer.alloc(0))]);
}

/**
 * The archive of a synthetic capture with cap/kernel/module.cubin's entry (8 bytes, as the index
 * and the manifest say) replaced by one that inflates to `mib` MiB; `cdSize`: what the central
 * directory declares.
 */
async function bombArchive(path: string, mib: number, cdSize: number): Promise<void> {
  const { root, dir } = await fresh();
  const p = await packCapture(dir, join(root, "cap.zip"));
  const entries = readRawZip(p.archive).map((e) =>
    e.name === "cap/kernel/module.cubin" ? { ...e, data: zeroBomb(mib), method: 8 as const, crc: 0, usize: cdSize } : e,
  );
  writeFileSync(path, rawZip(entries));
}
const PACK_INDEX_SCHEMA = "kerncap.pack/1";

/**
 * Alter one byte of a stored entry's data in the zip at `path` and write the entry's new CRC-32
 * into the central directory, so that only the capture's own checks can see the change.
 */
function alterStoredEntry(path: string, name: string, at: number): void {
  const b = readFileSync(path);
  const eocd = b.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]));
  const count = b.readUInt16LE(eocd + 10);
  let o = b.readUInt32LE(eocd + 16);
  for (let k = 0; k < count; k++) {
    const nlen = b.readUInt16LE(o + 28);
    const n = b.subarray(o + 46, o + 46 + nlen).toString();
    if (n === name) {
      expect(b.readUInt16LE(o + 10)).toBe(0); // stored
      const lo = b.readUInt32LE(o + 42);
      const start = lo + 30 + b.readUInt16LE(lo + 26) + b.readUInt16LE(lo + 28);
      const data = b.subarray(start, start + b.readUInt32LE(o + 20));
      data[at] ^= 0x5a;
      b.writeUInt32LE(Bun.hash.crc32(data) >>> 0, o + 16);
      writeFileSync(path, b);
      return;
    }
    o += 46 + nlen + b.readUInt16LE(o + 30) + b.readUInt16LE(o + 32);
  }
  throw new Error(`${name} is not in ${path}`);
}

/** A file of `bytes` non-zero data (stored, dense), so that pack and unpack take a moment. */
function denseFile(path: string, bytes: number): void {
  const piece = new Uint8Array(4 << 20).map((_, i) => (i * 131) & 0xff || 1);
  piece[0] = 0; // binary: stored, not deflated
  const fd = openSync(path, "w");
  for (let o = 0; o < bytes; o += piece.length) writeSync(fd, piece, 0, Math.min(piece.length, bytes - o), o);
  closeSync(fd);
}

/** Poll until `pred` holds (every 5 ms, up to ms). */
async function until(pred: () => boolean, ms = 20_000): Promise<void> {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error("timed out waiting");
    await Bun.sleep(5);
  }
}

describe("pack / unpack", () => {
  test("round trip: every file bit-exact, modes kept, checksums verify (inspect --verify)", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\necho build/kernel.cubin\n", { mode: 0o755 });
    const p = await packCapture(dir, join(root, "cap.zip"));
    expect(p.files).toBe(7); // kerncap.json, build.sh, kernel/ (2), memory/ (2), processes/0
    const u = await unpackArchive(p.archive, join(root, "back"));
    const a = tree(dir);
    const b = tree(u.dir);
    // the packer's seal of a capture made here stays out (src/format/made-here.ts); unpack marks the folder received (src/format/received.ts)
    expect(a.has(MADE_HERE_SEAL)).toBe(true);
    expect([...b.keys()].sort()).toEqual([...[...a.keys()].filter((k) => k !== MADE_HERE_SEAL), RECEIVED_MARK].sort());
    for (const [k, v] of a) if (k !== "kerncap.json" && k !== MADE_HERE_SEAL) expect(Buffer.compare(b.get(k)!, v), k).toBe(0);
    // the manifest ships without this machine's id (a recipient who knew it could send back a folder counted as made here)
    const sent = JSON.parse(b.get("kerncap.json")!.toString());
    const kept = JSON.parse(a.get("kerncap.json")!.toString());
    expect(sent.host.machineId).toBeNull();
    expect({ ...sent, host: { ...sent.host, machineId: kept.host.machineId } }).toEqual(kept);
    expect(statSync(join(u.dir, "build.sh")).mode & 0o777).toBe(0o644); // unpack makes nothing executable: kerncap runs build.sh with bash
    verifyRegions(u.dir, readManifest(u.dir)); // every region's SHA-256
    const r = await runCommand(await commands.inspect(), { rawArgs: [u.dir, "--verify"] });
    expect(r.result).toBe(0);
  });

  test("pack --redact: a command line the README quotes escaped (a newline as \\n in a code span, as the Triton README writes it) is replaced too", async () => {
    const root = tempDir();
    const { dir } = writeDemo(join(root, "cap"), false);
    const mp = join(dir, "kerncap.json");
    const m = JSON.parse(readFileSync(mp, "utf8"));
    m.command = ["python", "-c", 'import train\ntrain.run(api_key="S3CR3TKEY42")\t# x'];
    writeFileSync(mp, JSON.stringify(m, null, 2));
    const quoted = TEMPLATE_ESCAPES.mdCode!(m.command.join(" "));
    expect(quoted).toContain("\\n"); // the template's escape: the joined string is not in the README as it is
    writeFileSync(
      join(dir, "README.md"),
      `${readFileSync(join(dir, "README.md"), "utf8")}\nCaptured from ${quoted}; as text: ${TEMPLATE_ESCAPES.mdText!(m.command.join(" "))}\n`,
    );
    const p = await packCapture(dir, join(root, "red.zip"), { redact: true });
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(grepTree(u.dir, ["S3CR3TKEY42"])).toEqual([]);
  });

  test("pack --redact: the planted host, user, command line, job environment and GPU identity are in no file of the archive; it unpacks, verifies and inspects clean", async () => {
    const root = tempDir();
    const { dir } = writeDemo(join(root, "cap"), false);
    plantPrivate(dir);
    // without --redact the archive ships them, and pack says so in one line naming them and the flag
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      await runCommand(await commands.pack(), { rawArgs: [dir, "-o", join(root, "plain.zip")] });
    } finally {
      spy.mockRestore();
    }
    const notice = warned.filter((w) => w.includes("kerncap pack --redact leaves them out"));
    expect(notice).toHaveLength(1);
    for (const what of ["host name", "command line", "job environment", "GPU UUID"]) expect(notice[0]).toContain(what);
    const plain = await unpackArchive(join(root, "plain.zip"), join(root, "plain"));
    expect(grepTree(plain.dir, PLANTED).length).toBeGreaterThan(0);

    const p = await packCapture(dir, join(root, "red.zip"), { redact: true });
    expect(p.redacted).toBe(true);
    expect(p.privateFields).toEqual([]);
    // every entry's bytes, the index included
    const zipText = readFileSync(join(root, "red.zip")).toString("latin1");
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(grepTree(u.dir, PLANTED)).toEqual([]);
    for (const n of ["CLASSIFIED_run42", "0000:3b:00.0"]) expect(zipText.includes(n)).toBe(false); // no stored entry holds them
    // the index (not unpacked as a file): its warnings name the header outside the project without its folder
    const ix = JSON.stringify(await readPackIndex(p.archive));
    expect(ix).toContain("/redacted/x.h");
    for (const n of PLANTED) expect(ix.includes(n), n).toBe(false);
    const m = readManifest(u.dir);
    verifyRegions(u.dir, m);
    expect(m.host).toEqual({ name: "(redacted)", machineId: null });
    expect(m.device.name).toBe("NVIDIA H200");
    expect((m.source as { cuda: { flags: string[]; projectRoot: string } }).cuda.flags).toContain("-DLAB_FLAG=1");
    expect((m.source as { cuda: { projectRoot: string } }).cuda.projectRoot).toBe("/redacted/project");
    expect(readFileSync(join(u.dir, "README.md"), "utf8")).toContain("/redacted/project");
    const r = await runCommand(await commands.inspect(), { rawArgs: [u.dir, "--verify"] });
    expect(r.result).toBe(0);
    // packed again by its recipient: nothing private left to name
    expect((await packCapture(u.dir, join(root, "again.zip"))).privateFields).toEqual([]);
  });

  test("editor temporaries: a vim swap file and an Emacs backup, autosave and lock link are left out of the archive and named in one warning (a backup refused the pack before)", async () => {
    const root = tempDir();
    const { dir } = writeDemo(join(root, "cap"), false);
    writeFileSync(join(dir, "src/.saxpy.cu.swp"), "b0VIM 9.0 jdoe gpu-node /home/jdoe/saxpy.cu");
    writeFileSync(join(dir, "src/saxpy.cu~"), "old");
    writeFileSync(join(dir, "src/#saxpy.cu#"), "autosave");
    symlinkSync("jdoe@gpu-node.4242:1700000000", join(dir, "src/.#saxpy.cu")); // Emacs's lock: a dangling link
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      const r = await runCommand(await commands.pack(), { rawArgs: [dir, "-o", join(root, "t.zip")] });
      expect(r.result).toBe(0);
    } finally {
      spy.mockRestore();
    }
    expect(warned.filter((w) => w.includes("left out 4 editor temporaries, backups or hidden files"))).toHaveLength(1);
    const u = await unpackArchive(join(root, "t.zip"), join(root, "back"));
    expect(readdirSync(join(u.dir, "src")).sort()).toEqual(["saxpy.cu", "saxpy.kerncap-slice.cu"]);
  });

  test("build/ (the rebuild's outputs and the pruned build's plan, which names the packer's PATH) stays out of the archive", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "build", "pruned"), { recursive: true });
    writeFileSync(join(dir, "build", "pruned", "plan.json"), JSON.stringify({ env: { PATH: "/home/someone/.cargo/bin:/usr/bin" } }));
    writeFileSync(join(dir, "build", "kernel.cubin"), "x");
    const p = await packCapture(dir, join(root, "cap.zip"));
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(existsSync(join(u.dir, "build"))).toBe(false);
    expect([...tree(u.dir).keys()].sort()).toEqual(
      [...[...tree(dir).keys()].filter((k) => !k.startsWith("build/") && k !== MADE_HERE_SEAL), RECEIVED_MARK].sort(),
    );
  });

  test("pack -o a folder (existing, or a name ending in /) writes DIR.zip inside it; a missing folder/ is E_USAGE; a name not ending in .zip is warned of (nu83 #6)", async () => {
    const { root, dir } = await fresh();
    const pack = (...a: string[]) => Bun.spawnSync([process.execPath, MAIN, "pack", dir, ...a], { stdout: "pipe", stderr: "pipe" });
    const missing = pack("-o", join(root, "nowhere") + "/");
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr.toString()).toContain("E_USAGE");
    expect(existsSync(join(root, "nowhere"))).toBe(false);
    mkdirSync(join(root, "out"));
    for (const o of [join(root, "out") + "/", join(root, "out")]) {
      const p = pack("-o", o, "--force");
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      expect(statSync(join(root, "out", `${basename(dir)}.zip`)).isFile()).toBe(true);
    }
    const tar = pack("-o", join(root, "cap.tar"));
    expect(tar.exitCode).toBe(0);
    expect(tar.stderr.toString()).toContain("the archive is a .zip whatever its name");
    expect((await unpackArchive(join(root, "cap.tar"), join(root, "back"))).dir).toBe(join(root, "back"));
  });

  test("pack lists every file it packs (path, bytes) and what it leaves out and why, in --json and the text; --dry-run lists them and writes nothing (nu9 #5)", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "build"), { recursive: true });
    writeFileSync(join(dir, "build", "kernel.cubin"), "x");
    writeFileSync(join(dir, "NOTES.txt"), "private notes\n"); // an extra file: packed, and now listed
    const out = join(root, "cap.zip");
    const dry = Bun.spawnSync([process.execPath, MAIN, "pack", dir, "-o", out, "--dry-run"], { stdout: "pipe", stderr: "pipe" });
    expect(dry.exitCode, dry.stderr.toString()).toBe(0);
    expect(existsSync(out)).toBe(false);
    const text = dry.stdout.toString();
    expect(text).toStartWith(`would pack `);
    expect(text).toContain(`into ${out} (`);
    expect(text).toMatch(/\n +14 B {2}NOTES\.txt\n/);
    expect(text).toContain("  left out: build/ (the rebuild's outputs and scratch, made again by the next build)\n");
    const json = Bun.spawnSync([process.execPath, MAIN, "pack", dir, "-o", out, "--dry-run", "--json"], { stdout: "pipe", stderr: "pipe" });
    const doc = JSON.parse(json.stdout.toString());
    expect(() => v.parse(DOCUMENTS.pack, doc)).not.toThrow();
    expect(doc).toMatchObject({ dryRun: true, bytes: { archive: 0 } });
    expect(existsSync(out)).toBe(false);
    // the list is what packing writes: the archive's own index, file for file
    const p = await packCapture(dir, out);
    expect(p.dryRun).toBe(false);
    const index = (await readPackIndex(p.archive)).files.map((f: { path: string; size: number }) => ({ path: f.path, bytes: f.size }));
    expect(p.list).toEqual(index);
    expect(doc.list).toEqual(index);
    expect(p.list).toContainEqual({ path: "NOTES.txt", bytes: 14 });
    expect(p.list.map((f) => f.path)).not.toContain("build/kernel.cubin");
    expect(p.leftOut).toEqual([
      { path: "build/", why: "the rebuild's outputs and scratch, made again by the next build" },
      // the seal of a capture made here: never shipped, and listed as left out (a new user's finding: in neither list)
      { path: "kerncap-made-here.json", why: "the seal that makes the capture yours on this machine: never shipped, the recipient's copy is received" },
    ]);
    // a received folder: unpack's mark is left out, and said
    const u = await unpackArchive(p.archive, join(root, "back"));
    const again = await packCapture(u.dir, join(root, "again.zip"), { dryRun: true });
    expect(again.leftOut).toEqual([{ path: RECEIVED_MARK, why: "unpack's mark of a received capture: the recipient's unpack writes its own" }]);
    expect(existsSync(join(root, "again.zip"))).toBe(false);
  });

  test("a sparse memory image: packed as its data extents, unpacked with the same holes", async () => {
    const { root, dir } = await fresh();
    // the fixture's image: 4 KiB of region 0, a hole to 64 KiB, 8 KiB of region 1
    const img = join(dir, "memory/before.bin");
    const bytes = readFileSync(img);
    rmSync(img);
    const fd = openSync(img, "w");
    writeSync(fd, bytes, 0, 4096, 0);
    writeSync(fd, bytes, 65536, 8192, 65536);
    closeSync(fd);
    if (!dataExtents(img).sparse) return; // a file system without holes: nothing to measure
    const p = await packCapture(dir, join(root, "cap.zip"));
    expect(p.sparseFiles).toBe(1);
    expect((await readPackIndex(p.archive)).files.find((f) => f.path === "memory/before.bin")).toMatchObject({
      method: "sparse",
      entry: "cap/memory/before.bin.kcsparse",
    });
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(dataExtents(join(u.dir, "memory/before.bin")).extents).toEqual(dataExtents(img).extents);
    expect(Buffer.compare(readFileSync(join(u.dir, "memory/before.bin")), bytes)).toBe(0);
  });

  test("a 1 GiB file with 4 MiB of data outside the manifest: stored whole, yet neither the archive nor the unpacked file takes more than its data on disk", async () => {
    const { root, dir } = await fresh();
    const big = join(dir, "big.bin");
    const fd = openSync(big, "w");
    ftruncateSync(fd, 1 << 30);
    const data = new Uint8Array(1 << 20).map((_, i) => (i * 31 + 7) & 0xff);
    const offs = [0, 256 << 20, 700 << 20, (1 << 30) - (1 << 20)];
    for (const o of offs) writeSync(fd, data, 0, data.length, o);
    closeSync(fd);
    if (!dataExtents(big).sparse) return; // a file system without holes: nothing to measure
    const p = await packCapture(dir, join(root, "cap.zip"));
    // only a memory image may be sparse in an archive (unpack bounds its size by the manifest's regions)
    expect(p.sparseFiles).toBe(0);
    expect(statSync(p.archive).size).toBeGreaterThan(1 << 30);
    expect(statSync(p.archive).blocks * 512).toBeLessThan(16 << 20); // its pieces of zeros are holes
    const u = await unpackArchive(p.archive, join(root, "back"));
    const st = statSync(join(u.dir, "big.bin"));
    expect(st.size).toBe(1 << 30);
    expect(st.blocks * 512).toBeLessThan(16 << 20); // holes stayed holes
    const back = openSync(join(u.dir, "big.bin"), "r");
    try {
      for (const o of [...offs, 100 << 20]) {
        const got = new Uint8Array(data.length);
        require("node:fs").readSync(back, got, 0, got.length, o);
        expect(Buffer.compare(got, o === 100 << 20 ? new Uint8Array(data.length) : data)).toBe(0);
      }
    } finally {
      closeSync(back);
    }
  });

  test("the archive's index lists every file; the default target is the packed folder's name", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "x.zip"));
    const idx = await readPackIndex(p.archive);
    expect(idx.root).toBe("cap");
    expect(idx.files.map((f) => f.path)).toContain("kerncap.json");
    const cwd = process.cwd();
    const other = tempDir();
    process.chdir(other);
    try {
      expect((await unpackArchive(p.archive, undefined)).dir).toBe(join(other, "cap"));
    } finally {
      process.chdir(cwd);
    }
  });

  test("a symbolic link anywhere in the folder (a listed file, a source, memory/ -> .., kerncap.json): pack refuses, naming it; no archive", async () => {
    // issue 23: `memory -> ..` archived the parent folder (a home's .ssh/ went into the zip); a link to a file outside archived that file
    const plant: [string, (root: string, dir: string) => void, string][] = [
      [
        "a module that is a link to a file outside",
        (root, dir) => (
          renameSync(join(dir, "kernel/module.cubin"), join(root, "module.cubin")), symlinkSync(join(root, "module.cubin"), join(dir, "kernel/module.cubin"))
        ),
        "kernel/module.cubin",
      ],
      [
        "a source that is a link to /etc/hostname",
        (_root, dir) => (mkdirSync(join(dir, "src")), symlinkSync("/etc/hostname", join(dir, "src/elsewhere.h"))),
        "src/elsewhere.h",
      ],
      [
        "memory/ a link to the parent folder",
        (root, dir) => (
          mkdirSync(join(root, ".ssh")),
          writeFileSync(join(root, ".ssh/id_rsa"), "SECRET"),
          renameSync(join(dir, "memory"), join(root, "mem")),
          symlinkSync("..", join(dir, "memory"))
        ),
        "memory",
      ],
      [
        "kerncap.json a link to a file outside",
        (root, dir) => (renameSync(join(dir, "kerncap.json"), join(root, "km.json")), symlinkSync(join(root, "km.json"), join(dir, "kerncap.json"))),
        "kerncap.json",
      ],
      [
        "kernel/ a link to nothing",
        (root, dir) => (renameSync(join(dir, "kernel"), join(root, "kernel-elsewhere")), symlinkSync(join(root, "gone"), join(dir, "kernel"))),
        "kernel",
      ],
    ];
    for (const [what, make, named] of plant) {
      const { root, dir } = await fresh();
      make(root, dir);
      const e = await error(() => packCapture(dir, join(root, "cap.zip")));
      expect(["E_PACK_LINK", "E_UNSAFE_PATH"], what).toContain(e.code);
      expect(e.exitCode, what).toBe(2);
      expect(e.message, what).toContain(`${named}`);
      expect(e.message, what).toContain("symbolic link");
      expect(existsSync(join(root, "cap.zip")), what).toBe(false);
    }
  });

  test("a hard link in the folder (a name of a file outside too): pack refuses, naming it", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "src"));
    writeFileSync(join(root, "secret.txt"), "SECRET");
    linkSync(join(root, "secret.txt"), join(dir, "src/notes.txt"));
    const e = await error(() => packCapture(dir, join(root, "cap.zip")));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("src/notes.txt");
    expect(e.message).toContain("hard link");
    expect(existsSync(join(root, "cap.zip"))).toBe(false);
  });

  test("pack -o and unpack -o through symbolic links: the archive inside the folder it packs / is unpacked into is refused", async () => {
    const { root, dir } = await fresh();
    symlinkSync(dir, join(root, "caplink"));
    const e = await error(() => packCapture(dir, join(root, "caplink/inside.zip")));
    expect(e.code).toBe("E_USAGE");
    expect(e.message).toContain("would be inside the capture folder it packs");
    expect(existsSync(join(dir, "inside.zip"))).toBe(false);
    const p = await packCapture(dir, join(root, "cap.zip"));
    const u = await unpackArchive(p.archive, join(root, "cap2"));
    renameSync(p.archive, join(u.dir, "src.zip"));
    symlinkSync(join(u.dir, "src.zip"), join(root, "link.zip"));
    const e2 = await error(() => unpackArchive(join(root, "link.zip"), u.dir, { force: true }));
    expect(e2.code).toBe("E_USAGE");
    expect(e2.message).toContain("lies inside");
    expect(existsSync(join(u.dir, "src.zip"))).toBe(true); // the archive it reads is not removed
  });

  test("an empty folder at the target is called an empty folder, not a previous capture", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    mkdirSync(join(root, "emp"));
    const e = await error(() => unpackArchive(p.archive, join(root, "emp")));
    expect(e.code).toBe("E_EXISTS");
    expect(e.message).toContain("already exists (an empty folder)");
  });

  test("a FIFO or a folder where a manifest-listed file should be: pack refuses, exit 2, naming the file", async () => {
    const { root, dir } = await fresh();
    rmSync(join(dir, "kernel/module.cubin"));
    expect(Bun.spawnSync(["mkfifo", join(dir, "kernel/module.cubin")]).exitCode).toBe(0);
    const p = Bun.spawnSync([process.execPath, MAIN, "pack", dir, "-o", join(root, "cap.zip")], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
    expect(p.exitCode).toBe(2);
    expect(p.stderr.toString()).toContain("kernel/module.cubin");
    expect(p.stderr.toString()).toContain("a FIFO");
    expect(p.stderr.toString()).not.toContain("internal error");
    rmSync(join(dir, "kernel/module.cubin"));
    mkdirSync(join(dir, "kernel/module.cubin"));
    const e = await error(() => packCapture(dir, join(root, "cap.zip")));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("kernel/module.cubin");
    expect(e.message).toContain("a folder");
    expect(existsSync(join(root, "cap.zip"))).toBe(false);
  });

  test("a file name that is not UTF-8: pack refuses, naming it escaped and saying to rename it", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "src"));
    writeFileSync(Buffer.concat([Buffer.from(join(dir, "src/bad")), Buffer.from([0xff]), Buffer.from("name.cu")]), "__global__ void k() {}\n");
    const e = await error(() => packCapture(dir, join(root, "cap.zip")));
    expect(e.code).toBe("E_PACK_NAME");
    expect(e.message).toContain("src/bad\\xffname.cu");
    expect(e.message).toContain("not UTF-8");
    expect(e.hint).toContain("Rename it");
    expect(existsSync(join(root, "cap.zip"))).toBe(false);
  });

  test("names that unpack would refuse are refused at pack: a backslash, a name colliding with a sparse file's entry", async () => {
    for (const [name, msg] of [
      ["a\\b.cu", "backslash"],
      ["a.bin.kcsparse", "when that file is sparse"],
    ] as const) {
      const { root, dir } = await fresh();
      mkdirSync(join(dir, "src"));
      writeFileSync(join(dir, "src/a.bin"), "x");
      writeFileSync(join(dir, "src", name), "y");
      const e = await error(() => packCapture(dir, join(root, "cap.zip")));
      expect(e.code, name).toBe("E_PACK_NAME");
      expect(e.message, name).toContain(msg);
      expect(existsSync(join(root, "cap.zip"))).toBe(false);
    }
  });

  test("a folder whose name unpack would refuse as a root (a space): refused with the way out, and packed under --name; a bad --name is refused", async () => {
    const root = tempDir();
    const spaced = join(root, "my cap");
    await makeCapture(spaced);
    const e = await error(() => packCapture(spaced, join(root, "a.zip")));
    expect(e.code).toBe("E_PACK_NAME");
    expect(e.hint).toContain("--name NAME");
    // a newline in the name stays in the message's one line (adversary 46: a forged line after it)
    const forged = join(root, "x\nFAKE ok line");
    await makeCapture(forged);
    const f = await error(() => packCapture(forged, join(root, "f.zip")));
    expect(f.code).toBe("E_PACK_NAME");
    expect(f.message).not.toContain("\nFAKE");
    const p = await packCapture(spaced, join(root, "a.zip"), { root: "my-cap" });
    expect((await readPackIndex(p.archive)).root).toBe("my-cap");
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(readManifest(u.dir).kernel.name).toBe(readManifest(spaced).kernel.name);
    for (const bad of ["a b", ".hidden", "x/y", "$(id)"]) {
      const b = await error(() => packCapture(spaced, join(root, "b.zip"), { root: bad }));
      expect(b.code, bad).toBe("E_PACK_NAME");
      expect(b.message, bad).toContain("--name");
      expect(existsSync(join(root, "b.zip"))).toBe(false);
    }
  });

  test("unpack's mark names no machine-id, and pack leaves it out: a received folder packed again does not carry this machine's id (trial 14 F6)", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    const u = await unpackArchive(p.archive, join(root, "back"));
    const mark = readFileSync(join(u.dir, RECEIVED_MARK), "utf8");
    expect(JSON.parse(mark).by).toEqual({ name: hostname() });
    expect(JSON.parse(mark).archive).toBe("cap.zip"); // its file name only: an MCP agent reads the mark, not the user's folders (trial 16)
    expect(mark).not.toContain(root);
    const id = hostIdentity().machineId;
    if (id) expect(mark).not.toContain(id);
    const again = await packCapture(u.dir, join(root, "again.zip"));
    const entries = (await readPackIndex(again.archive)).files.map((f: { path: string }) => f.path);
    expect(entries).not.toContain(RECEIVED_MARK);
    expect(entries).toContain("kerncap.json");
  });

  test("refuses to overwrite without --force; --force replaces only a capture", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    expect((await error(() => packCapture(dir, p.archive))).code).toBe("E_EXISTS");
    await packCapture(dir, p.archive, { force: true });
    expect((await error(() => unpackArchive(p.archive, dir))).code).toBe("E_EXISTS");
    writeFileSync(join(dir, "thesis.tex"), "mine"); // a file the archive does not hold: --force removes it, and says so
    expect(filesNotIn(dir, new Set((await readPackIndex(p.archive)).files.map((f: any) => f.path)))).toEqual(["thesis.tex"]);
    await unpackArchive(p.archive, dir, { force: true });
    expect(existsSync(join(dir, "thesis.tex"))).toBe(false);
    const notes = tempDir();
    writeFileSync(join(notes, "mine.txt"), "keep");
    expect((await error(() => unpackArchive(p.archive, notes, { force: true }))).message).toContain("not a kerncap capture");
    expect(readFileSync(join(notes, "mine.txt"), "utf8")).toBe("keep");
  });

  test("unpack --force over an unpacked folder warns of the files it loses only, not of the received mark it writes again", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    const u = join(root, "u");
    await unpackArchive(p.archive, u);
    expect(existsSync(join(u, RECEIVED_MARK))).toBe(true);
    const warned: string[] = [];
    const spy = spyOn(log, "warn").mockImplementation(((...a: unknown[]) => void warned.push(a.join(" "))) as never);
    try {
      await unpackArchive(p.archive, u, { force: true });
      expect(warned).toEqual([]);
      writeFileSync(join(u, "notes.txt"), "mine");
      // a name with a newline (a folder extracted from someone's tar) is said on the warning's one line (adversary 89 #02)
      writeFileSync(join(u, "x\n[kerncap] ✔ FORGED"), "theirs");
      await unpackArchive(p.archive, u, { force: true });
    } finally {
      spy.mockRestore();
    }
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain("removes 2 files the archive does not hold: notes.txt, x\\n[kerncap] ✔ FORGED");
    expect(warned[0]).not.toContain("\n");
    expect(warned[0]).not.toContain(RECEIVED_MARK);
    expect(existsSync(join(u, RECEIVED_MARK))).toBe(true);
  });

  test("pack --force replaces only a kerncap archive; unpack --force never deletes the archive it reads", async () => {
    const { root, dir } = await fresh();
    const thesis = join(root, "thesis.tex");
    writeFileSync(thesis, "my thesis");
    const e = await error(() => packCapture(dir, thesis, { force: true }));
    expect(e.code).toBe("E_EXISTS");
    expect(e.message).toContain("not a kerncap archive");
    expect(readFileSync(thesis, "utf8")).toBe("my thesis");
    const p = await packCapture(dir, join(root, "cap.zip"));
    expect(await isPackArchive(p.archive)).toBe(true);
    expect(await isPackArchive(thesis)).toBe(false);
    await packCapture(dir, p.archive, { force: true }); // its own archive: replaced
    const inside = join(dir, "cap.zip");
    renameSync(p.archive, inside);
    const u = await error(() => unpackArchive(inside, dir, { force: true }));
    expect(u.code).toBe("E_USAGE");
    expect(existsSync(inside)).toBe(true);
  });

  test("two packs to one archive at once: one writes it, the other is refused (E_EXISTS)", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "src"), { recursive: true });
    denseFile(join(dir, "src/big.bin"), 64 << 20);
    const out = join(root, "same.zip");
    const r = await Promise.allSettled([packCapture(dir, out), packCapture(dir, out)]);
    expect(r.filter((x) => x.status === "fulfilled").length).toBe(1);
    expect(((r.find((x) => x.status === "rejected") as PromiseRejectedResult).reason as KerncapError).code).toBe("E_EXISTS");
  });

  test("two unpacks to one folder at once: one writes it, the other is refused (E_EXISTS), never a silent replacement", async () => {
    const { root, dir } = await fresh();
    mkdirSync(join(dir, "src"), { recursive: true });
    denseFile(join(dir, "src/big.bin"), 64 << 20); // so that the two unpacks overlap
    const p = await packCapture(dir, join(root, "cap.zip"));
    const out = join(root, "same");
    const r = await Promise.allSettled([unpackArchive(p.archive, out), unpackArchive(p.archive, out)]);
    expect(r.filter((x) => x.status === "fulfilled").length).toBe(1);
    const no = r.find((x) => x.status === "rejected") as PromiseRejectedResult;
    expect((no.reason as KerncapError).code).toBe("E_EXISTS");
    verifyRegions(out, readManifest(out));
  });

  test("zip-slip: an entry outside the folder is refused and nothing is written", async () => {
    const root = tempDir();
    const idx = {
      schema: "kerncap.pack/1",
      root: "cap",
      tool: "x",
      dirs: [],
      warnings: [],
      files: [{ path: "../evil.txt", size: 4, mode: 0o644, entry: "cap/../evil.txt", method: "deflated" }],
    };
    const zip = zipSync({ [`cap/${PACK_INDEX}`]: strToU8(JSON.stringify(idx)), "cap/../evil.txt": strToU8("evil") });
    writeFileSync(join(root, "evil.zip"), zip);
    const e = await error(() => unpackArchive(join(root, "evil.zip"), join(root, "out")));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain("outside the capture folder");
    expect(existsSync(join(root, "evil.txt"))).toBe(false);
    expect(readdirSync(root)).toEqual(["evil.zip"]);
    // an entry the index does not list
    const zip2 = zipSync({ [`cap/${PACK_INDEX}`]: strToU8(JSON.stringify({ ...idx, files: [] })), "/etc/x": strToU8("x") });
    writeFileSync(join(root, "evil2.zip"), zip2);
    expect((await error(() => unpackArchive(join(root, "evil2.zip"), join(root, "out")))).message).toContain("is not in");
  });

  test("a zip that is not kerncap's: the unzip hint only when every name stays inside a folder, else refused as unsafe", async () => {
    const root = tempDir();
    writeFileSync(join(root, "plain.zip"), zipSync({ "cap/kerncap.json": strToU8("{}"), "cap/src/k.cu": strToU8("x") }));
    const plain = await error(() => unpackArchive(join(root, "plain.zip"), join(root, "out")));
    expect(plain.code).toBe("E_ARCHIVE");
    expect(plain.hint).toContain("unpack it with unzip");
    for (const [name, bad] of [
      ["up.zip", "cap/../../evil.txt"],
      ["abs.zip", "/etc/evil"],
    ] as const) {
      writeFileSync(join(root, name), zipSync({ "cap/kerncap.json": strToU8("{}"), [bad]: strToU8("evil") }));
      const e = await error(() => unpackArchive(join(root, name), join(root, "out")));
      expect(e.code).toBe("E_ARCHIVE");
      expect(e.message).toContain(`refused as unsafe: entry ${JSON.stringify(bad)} would be written outside`);
      expect(e.hint).not.toContain("unzip if");
    }
    expect(existsSync(join(root, "out"))).toBe(false);
  });

  test("a damaged archive: CRC or truncation named; no folder left behind", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    const b = readFileSync(p.archive);
    const at = b.indexOf(Buffer.from(readFileSync(join(dir, "memory/before.bin")).subarray(100, 132)));
    expect(at).toBeGreaterThan(0);
    b[at] ^= 0xff;
    writeFileSync(join(root, "bad.zip"), b);
    const e = await error(() => unpackArchive(join(root, "bad.zip"), join(root, "out")));
    expect(e.message).toContain("CRC-32 mismatch in cap/memory/before.bin");
    expect(existsSync(join(root, "out"))).toBe(false);
    expect(readdirSync(root).filter((n) => n.includes(".tmp-"))).toEqual([]);
    writeFileSync(join(root, "short.zip"), b.subarray(0, b.length >> 1));
    expect((await error(() => unpackArchive(join(root, "short.zip"), join(root, "out")))).code).toBe("E_ARCHIVE");
  });

  test("a damaged capture is not packed", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "kernel/params.bin"), new Uint8Array(12).fill(1));
    expect((await error(() => packCapture(dir, join(root, "cap.zip")))).code).toBe("E_CHECKSUM");
    expect(existsSync(join(root, "cap.zip"))).toBe(false);
  });

  test("inspect, replay and validate given an archive say how to unpack it", async () => {
    const { root, dir } = await fresh();
    const p = await packCapture(dir, join(root, "cap.zip"));
    for (const v of ["inspect", "replay", "validate"] as const) {
      let e: unknown;
      try {
        await runCommand(await commands[v](), { rawArgs: [p.archive] });
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).hint, v).toContain("kerncap unpack");
    }
  });

  test("absolute paths in build.sh and overlay mode are reported as not portable", async () => {
    const { dir } = await fresh();
    writeFileSync(
      join(dir, "build.sh"),
      `#!/usr/bin/env bash\nhere=x\n"$nvcc" -I/home/me/proj/include -isystem /usr/local/cuda/include -I"$here/src" "${dir}/src/k.cu"\n`,
    );
    const m = readManifest(dir);
    m.source = { cuda: { mode: "overlay", projectRoot: "/home/me/proj", referencedOutsideRoot: [] } };
    const w = portabilityWarnings(dir, m);
    expect(w.join("\n")).toContain("overlay mode");
    expect(w.join("\n")).toContain("/home/me/proj/include");
    expect(w.join("\n")).not.toContain("/usr/local/cuda");
    expect(w.join("\n")).not.toContain(dir);
  });

  test("a received manifest's source block of the wrong types: pack's portability notes skip what is not a list of paths (no internal error)", async () => {
    const { dir } = await fresh();
    const m = readManifest(dir);
    for (const cuda of [
      { referencedOutsideRoot: "/etc/passwd" },
      { referencedOutsideRoot: [1, null, "/opt/x.h"], projectRoot: 7, mode: "overlay" },
      "text",
      null,
    ]) {
      m.source = { cuda } as unknown as typeof m.source;
      const w = portabilityWarnings(dir, m).join("\n");
      expect(w).not.toContain("/etc/passwd");
      if (typeof cuda === "object" && cuda && "projectRoot" in cuda) expect(w).toContain("/opt/x.h");
    }
  });

  test("a decompression bomb whose central directory tells the truth is refused before inflating", async () => {
    const root = tempDir();
    await bombArchive(join(root, "bomb.zip"), 64, 64 << 20);
    const t0 = performance.now();
    const e = await error(() => unpackArchive(join(root, "bomb.zip"), join(root, "out")));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain(`central directory declares ${64 << 20} bytes, ${PACK_INDEX} 8`);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(readdirSync(root)).toEqual(["bomb.zip"]);
  });

  test("a decompression bomb whose sizes all lie stops at its declared size, in bounded memory", async () => {
    const root = tempDir();
    await bombArchive(join(root, "bomb.zip"), 1024, 8); // 1 MiB of deflate, 1 GiB of zeros, declared 8 bytes
    const p = Bun.spawn([process.execPath, MAIN, "unpack", join(root, "bomb.zip"), "-o", join(root, "out")], { stdout: "pipe", stderr: "pipe" });
    const [, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(code).toBe(2);
    expect(err).toContain("inflates past its declared size of 8 bytes");
    // inflating the whole entry would hold 1 GiB (old: 2 GiB peak); one 16 KiB piece inflates to
    // ~16 MiB. Measured: 103 MB alone, 467 MB once in a full suite run on a loaded 2-core machine
    // (the collector lagging behind the pieces), so the bound is below the 1 GiB, not at 400 MB
    expect(p.resourceUsage()!.maxRSS).toBeLessThan(768 << 20);
    expect(readdirSync(root)).toEqual(["bomb.zip"]);
  }, 30_000);

  test("an altered memory chunk: pack refuses it, and unpack refuses an archive holding one (CRC-32s recomputed)", async () => {
    const { root, dir } = await fresh();
    const m = readManifest(dir);
    const r = m.regions[0]!;
    const good = await packCapture(dir, join(root, "good.zip"));
    // the byte 100 of the first region's first stored chunk in the before image
    const at = r.before.extents[0]![2] + 100;
    const img = readFileSync(join(dir, m.memory.before));
    img[at] ^= 0x5a;
    writeFileSync(join(dir, m.memory.before), img);
    const e = await error(() => packCapture(dir, join(root, "bad.zip")));
    expect(e.code).toBe("E_CHECKSUM");
    expect(e.message).toContain(`region ${r.va}, chunk 0`);
    expect(existsSync(join(root, "bad.zip"))).toBe(false);
    // the archive of the intact capture, with that byte altered inside the zip
    alterStoredEntry(good.archive, `cap/${m.memory.before}`, at);
    const u = await error(() => unpackArchive(good.archive, join(root, "back")));
    expect(u.code).toBe("E_CHECKSUM");
    expect(u.message).toContain(`region ${r.va}, chunk 0`);
    expect(u.message).not.toContain(".tmp-");
    expect(existsSync(join(root, "back"))).toBe(false);
    expect(readdirSync(root).filter((n) => n.includes(".tmp-"))).toEqual([]);
  });

  test("unpack masks modes: no group/other write, no executable bit", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\n");
    chmodSync(join(dir, "build.sh"), 0o777);
    chmodSync(join(dir, "kernel/params.bin"), 0o666);
    const p = await packCapture(dir, join(root, "cap.zip"));
    expect((await readPackIndex(p.archive)).files.find((f) => f.path === "build.sh")!.mode).toBe(0o777);
    const u = await unpackArchive(p.archive, join(root, "back"));
    expect(statSync(join(u.dir, "build.sh")).mode & 0o7777).toBe(0o644);
    expect(statSync(join(u.dir, "kernel/params.bin")).mode & 0o7777).toBe(0o644);
  });

  test("unpack makes no file executable, build.sh neither (a root named bin, unpacked in the home folder, put the sender's ls, then its build.sh, on PATH); kerncap runs build.sh with bash", async () => {
    const { root, dir } = await fresh();
    writeFileSync(join(dir, "ls"), "#!/bin/sh\necho pwned\n", { mode: 0o755 });
    writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\n", { mode: 0o755 });
    mkdirSync(join(dir, "src"), { recursive: true });
    writeFileSync(join(dir, "src/tool"), "#!/bin/sh\n", { mode: 0o755 });
    const p = await packCapture(dir, join(root, "cap.zip"));
    const u = await unpackArchive(p.archive, join(root, "bin"));
    expect(statSync(join(u.dir, "ls")).mode & 0o777).toBe(0o644);
    expect(statSync(join(u.dir, "src/tool")).mode & 0o777).toBe(0o644);
    expect(statSync(join(u.dir, "build.sh")).mode & 0o777).toBe(0o644);
  });

  test("SIGINT (ignored by the parent shell) ends pack with 130, SIGTERM ends unpack with 143; no temp is left", async () => {
    const { root, dir } = await fresh();
    denseFile(join(dir, "memory/big.bin"), 384 << 20);
    const out = join(root, "cap.zip");
    // a shell's background job inherits SIGINT ignored; kerncap still ends on it
    const p = Bun.spawn(["bash", "-c", `trap '' INT; exec "$0" "$@"`, process.execPath, MAIN, "pack", dir, "-o", out], { stdout: "pipe", stderr: "pipe" });
    // the temp is out.tmp-<pid>-<random token>: found by its prefix
    const tempOf = (path: string, pid: number) =>
      readdirSync(root)
        .filter((n) => n.startsWith(`${basename(path)}.tmp-${pid}-`))
        .map((n) => join(root, n))[0];
    await until(() => {
      const tmp = tempOf(out, p.pid);
      return !!tmp && statSync(tmp).size > 0;
    });
    p.kill("SIGINT");
    const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    expect(code, err).toBe(130);
    expect(err).toContain("pack interrupted (SIGINT)");
    expect(readdirSync(root).sort()).toEqual(["cap"]);

    await packCapture(dir, out);
    const back = join(root, "back");
    const q = Bun.spawn([process.execPath, MAIN, "unpack", out, "-o", back], { stdout: "pipe", stderr: "pipe" });
    await until(() => {
      const qtmp = tempOf(back, q.pid);
      return !!qtmp && existsSync(join(qtmp, "memory/big.bin"));
    });
    q.kill("SIGTERM");
    const [qerr, qcode] = await Promise.all([new Response(q.stderr).text(), q.exited]);
    expect(qcode, qerr).toBe(143);
    expect(readdirSync(root).sort()).toEqual(["cap", "cap.zip"]);
  }, 60_000);

  test("temps left by a killed pack/unpack (pid gone) are removed by the next one, saying so; a live pid's are kept", async () => {
    const { root, dir } = await fresh();
    const out = join(root, "cap.zip");
    const dead = await deadPid();
    writeFileSync(`${out}.tmp-${dead}`, Buffer.concat([Buffer.from("PK\x03\x04"), Buffer.alloc(1020)])); // a partial zip
    writeFileSync(`${out}.tmp-1`, "pid 1 is alive");
    const run = async (...argv: string[]) => {
      const p = Bun.spawn([process.execPath, MAIN, ...argv], { stdout: "pipe", stderr: "pipe" });
      const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
      expect(code, err).toBe(0);
      return err;
    };
    const err = await run("pack", dir, "-o", out);
    expect(err).toContain(`removed ${out}.tmp-${dead}: left by an interrupted kerncap pack (process ${dead}`);
    expect(existsSync(`${out}.tmp-${dead}`)).toBe(false);
    expect(existsSync(`${out}.tmp-1`)).toBe(true);
    const back = join(root, "back");
    mkdirSync(`${back}.tmp-${dead}/memory`, { recursive: true });
    writeFileSync(`${back}.tmp-${dead}/memory/before.bin`, new Uint8Array(4096));
    writeFileSync(`${back}.tmp-${dead}/.kerncap-temp`, `${dead}\n`); // what an unpack leaves (src/leftovers.ts)
    const err2 = await run("unpack", out, "-o", back);
    expect(err2).toContain(`removed ${back}.tmp-${dead}: left by an interrupted kerncap unpack`);
    expect(existsSync(`${back}.tmp-${dead}`)).toBe(false);
    expect(existsSync(join(back, "kerncap.json"))).toBe(true);
  }, 30_000);
});

test("pack warns of an edited src/, as export does: the archive ships it as it is now (nu12 #10)", () => {
  const root = tempDir();
  const { dir } = writeDemo(join(root, "cap"), false);
  const pack = () => Bun.spawnSync([process.execPath, MAIN, "pack", dir, "-o", join(root, "cap.zip"), "--force", "--json"], { stdout: "pipe", stderr: "pipe" });
  expect(JSON.parse(pack().stdout.toString()).warnings.some((w: string) => w.startsWith("src/ differs"))).toBe(false);
  writeFileSync(join(dir, "src/saxpy.cu"), readFileSync(join(dir, "src/saxpy.cu"), "utf8") + "// edited\n");
  const edited = pack();
  expect(edited.exitCode, edited.stderr.toString()).toBe(0);
  expect(JSON.parse(edited.stdout.toString()).warnings).toContainEqual(
    expect.stringContaining("src/ differs from the source the captured module was built from: src/saxpy.cu (edited)"),
  );
});
