/**
 * ZIP64 in pack/unpack (src/format/zip.ts): an archive past 4 GiB (a 5 GiB sparse file of a
 * capture, stored whole: its blocks of zeros stay holes, so neither side needs 5 GiB of disk) and
 * one of more than 65535 entries, round-tripped and listed by Python's zipfile and Info-ZIP unzip.
 */
import { describe, expect, test } from "bun:test";
import { closeSync, fstatSync, ftruncateSync, openSync, readSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { packCapture, readPackIndex, unpackArchive } from "../../src/format/archive.ts";
import { dataExtents } from "../../src/format/sparse-extents.ts";
import { centralDirectory, ZIP32_MAX, ZipWriter } from "../../src/format/zip.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

/**
 * SHA-256 of a file's size and of every non-zero 4 KiB page with its offset: equal digests, equal
 * bytes (holes and zero pages read as zeros alike), without reading the holes (only data extents).
 */
function sparseDigest(path: string): string {
  const h = new Bun.CryptoHasher("sha256");
  const { size, extents } = dataExtents(path);
  h.update(`${size}\n`);
  const zero = new Uint8Array(4096);
  const fd = openSync(path, "r");
  try {
    for (const [off, len] of extents) {
      const b = new Uint8Array(len);
      readSync(fd, b, 0, len, off);
      for (let o = 0; o < len; o += 4096) {
        const pg = b.subarray(o, o + 4096);
        if (Buffer.compare(pg, zero.subarray(0, pg.length)) !== 0) h.update(`${off + o}:`).update(pg);
      }
    }
  } finally {
    closeSync(fd);
  }
  return h.digest("hex");
}

/** `python3 -m zipfile -l` and `unzip -l` on path: their listings (stdout), or undefined where the tool is missing. */
function listings(path: string): { python?: string; unzip?: string } {
  const run = (cmd: string[]) => {
    if (!Bun.which(cmd[0]!)) return undefined;
    const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode, `${cmd.join(" ")}: ${p.stderr.toString()}`).toBe(0);
    return p.stdout.toString();
  };
  return { python: run(["python3", "-m", "zipfile", "-l", path]), unzip: run(["unzip", "-l", path]) };
}

describe("ZIP64", () => {
  test("a capture with a 5 GiB sparse file: the archive passes 4 GiB (ZIP64 sizes, offsets, end records), costs its data on disk, round-trips, and zipfile/unzip list it", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    const big = join(dir, "blank.bin"); // sorted first: every later entry lies past byte 5 GiB
    const fd = openSync(big, "w");
    ftruncateSync(fd, 5 * 2 ** 30);
    const page = new Uint8Array(4096).map((_, i) => (i * 13 + 1) & 0xff);
    for (const at of [0, 2 ** 32 - 4096, 2 ** 32 + 8192, 5 * 2 ** 30 - 4096]) writeSync(fd, page, 0, page.length, at);
    closeSync(fd);
    if (!dataExtents(big).sparse) return; // a file system without holes: the test would need 5 GiB of disk
    const want = sparseDigest(big);

    const p = await packCapture(dir, join(root, "cap.zip"));
    const st = statSync(p.archive);
    expect(st.size).toBeGreaterThan(5 * 2 ** 30);
    expect(st.blocks * 512).toBeLessThan(8 << 20); // the 5 GiB of zeros are holes of the archive too
    const afd = openSync(p.archive, "r");
    const entries = centralDirectory(p.archive, afd, fstatSync(afd).size);
    closeSync(afd);
    expect(entries.find((e) => e.name === "cap/blank.bin")).toMatchObject({ usize: 5 * 2 ** 30, csize: 5 * 2 ** 30 });
    expect(entries.find((e) => e.name === "cap/kerncap.json")!.localOffset).toBeGreaterThan(ZIP32_MAX);
    expect((await readPackIndex(p.archive)).files.find((f) => f.path === "blank.bin")).toMatchObject({ method: "stored", size: 5 * 2 ** 30 });

    const l = listings(p.archive);
    if (l.python) expect(l.python).toMatch(/cap\/blank\.bin\s.*\s5368709120\n/);
    if (l.unzip) expect(l.unzip).toMatch(/5368709120\s.*cap\/blank\.bin/);

    const u = await unpackArchive(p.archive, join(root, "back"));
    const back = join(u.dir, "blank.bin");
    expect(statSync(back).blocks * 512).toBeLessThan(8 << 20);
    expect(sparseDigest(back)).toBe(want);
  }, 60_000);

  test("more than 65535 entries: the ZIP64 end records carry the count; the reader and zipfile/unzip see every entry", () => {
    const root = tempDir();
    const path = join(root, "many.zip");
    const fd = openSync(path, "w+");
    const zip = new ZipWriter(fd, path);
    const n = 70_000;
    for (let i = 0; i < n; i++) {
      const bytes = new TextEncoder().encode(`${i}\n`);
      const e = zip.add(`many/f${i}.txt`, { deflate: i % 2 === 0, mode: 0o644, mtime: new Date(), usize: bytes.length });
      e.push(bytes);
      e.end();
    }
    zip.end();
    const entries = centralDirectory(path, fd, fstatSync(fd).size);
    closeSync(fd);
    expect(entries.length).toBe(n);
    expect(entries[n - 1]).toMatchObject({ name: `many/f${n - 1}.txt`, usize: `${n - 1}\n`.length });
    const l = listings(path);
    if (l.python) expect(l.python.trim().split("\n").length).toBe(n + 1); // a header line, then one per entry
    if (l.unzip) expect(l.unzip).toMatch(new RegExp(`\\s${n} files\\n`));
  }, 30_000);
});
