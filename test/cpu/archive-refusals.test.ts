/**
 * What `kerncap unpack` refuses before it writes (src/format/zip.ts, src/format/archive.ts): each
 * case an archive that once unpacked larger than it is or differently from what it lists, made
 * from a real `kerncap pack` archive of a synthetic capture by rewriting its entries.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateRawSync } from "node:zlib";
import { KerncapError } from "../../src/errors.ts";
import { packCapture, PACK_INDEX, unpackArchive, type PackIndex } from "../../src/format/archive.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { checkUnpackBounds, FREE_MARGIN_BYTES, freeBytes } from "../../src/format/unpack-bounds.ts";
import { makeCapture, tempDir } from "./fixtures.ts";
import { extraField, rawZip, readRawZip, storedEntry, unicodePathField, type RawEntry } from "./zip-fixture.ts";

async function refusal(fn: () => Promise<unknown>): Promise<KerncapError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("unpacked: no refusal");
}

/** A packed synthetic capture (`extra`: more files in the folder, path → text), its entries, and a function that rewrites it. */
async function packed(extra: Record<string, string> = {}) {
  const root = tempDir();
  const dir = join(root, "cap");
  await makeCapture(dir);
  for (const [p, text] of Object.entries(extra)) {
    mkdirSync(join(dir, p, ".."), { recursive: true });
    writeFileSync(join(dir, p), text);
  }
  const p = await packCapture(dir, join(root, "cap.zip"));
  const entries = readRawZip(p.archive);
  const index = JSON.parse(new TextDecoder().decode(Bun.inflateSync(entries[0]!.data as Uint8Array<ArrayBuffer>))) as PackIndex;
  /** Write `list` (the index entry replaced by `idx`, stored) as evil.zip; @returns its path. */
  const write = (list: RawEntry[], idx: PackIndex = index) => {
    const out = join(root, "evil.zip");
    writeFileSync(out, rawZip([storedEntry(`cap/${PACK_INDEX}`, JSON.stringify(idx)), ...list.slice(1)]));
    return out;
  };
  return { root, entries, index, write, out: join(root, "out") };
}

/** Nothing of an unpack left under root but the archives. */
const onlyArchives = (root: string) => readdirSync(root).filter((n) => n !== "cap" && !n.endsWith(".zip"));

describe("unpack refuses", () => {
  test("two entries of one name (the last one used to win)", async () => {
    const a = await packed();
    const dup = a.entries.find((e) => e.name === "cap/kernel/params.bin")!;
    const e = await refusal(() => unpackArchive(a.write([...a.entries, { ...dup }]), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain('two entries are named "cap/kernel/params.bin"');
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("an index listing folders the archive holds no entry of (300 000 of them in an 800 KB archive made every one, 141 s: adversary 78): refused before anything is made", async () => {
    const a = await packed();
    expect(a.index.dirs.length).toBeGreaterThan(0);
    // what pack writes: each listed folder has its folder entry
    for (const d of a.index.dirs)
      expect(
        a.entries.some((e) => e.name === `cap/${d}/`),
        d,
      ).toBe(true);
    const idx = { ...a.index, dirs: [...a.index.dirs, ...Array.from({ length: 50_000 }, (_, i) => `src/d${i}`)] };
    const t0 = performance.now();
    const e = await refusal(() => unpackArchive(a.write(a.entries, idx), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain('kerncap-pack.json lists the folder "src/d0", which the archive holds no entry of');
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(onlyArchives(a.root)).toEqual([]);
    // a folder the index names once more, its entry there: unpacks as before
    expect(readdirSync((await unpackArchive(a.write(a.entries), join(a.root, "ok"))).dir)).toContain("kerncap.json");
  });

  test("two records of the index naming one entry (a sparse image and a stored file of the image's entry name): adversary 61, one entry written as two files", async () => {
    const a = await packed();
    const idx = structuredClone(a.index);
    const image = idx.files.find((f) => f.path.endsWith("after.bin"))!;
    const entry = `cap/${image.path}.kcsparse`;
    const twin = { path: `${image.path}.kcsparse`, size: image.size, mode: image.mode, entry, method: "stored" as const };
    Object.assign(image, { method: "sparse", extents: [[0, image.size]], entry });
    idx.files.push(twin);
    const list = a.entries.map((e) => (e.name === `cap/${image.path}` ? { ...e, name: entry } : e));
    const e = await refusal(() => unpackArchive(a.write(list, idx), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain(`names the entry ${entry} for two files`);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("an entry whose external attributes say symbolic link, device, FIFO or socket (unzip makes a link; kerncap wrote a file)", async () => {
    const a = await packed({ "src/l.h": "/etc/hostname" });
    for (const [mode, what] of [
      [0o120777, "a symbolic link"],
      [0o020644, "a character device"],
      [0o060644, "a block device"],
      [0o010644, "a FIFO"],
      [0o140644, "a socket"],
    ] as const) {
      const list = a.entries.map((e) => (e.name === "cap/src/l.h" ? { ...e, mode } : e));
      const e = await refusal(() => unpackArchive(a.write(list), a.out));
      expect(e.code).toBe("E_ARCHIVE");
      expect(e.message).toContain(`"cap/src/l.h" is ${what} by its external attributes`);
      expect(onlyArchives(a.root)).toEqual([]);
    }
    // the entry's name is escaped in the refusal
    const list = a.entries.map((e) => (e.name === "cap/src/l.h" ? { ...e, name: "cap/src/l\x1b[2J\u202e.h", mode: 0o120777 } : e));
    const e = await refusal(() => unpackArchive(a.write(list), a.out));
    expect(e.message).toContain('"cap/src/l\\u001b[2J\\u202e.h" is a symbolic link');
    expect(e.message).not.toMatch(/[\x1b\u202e]/);
  });

  test("an entry with an extra field pack never writes, in either header: unzip extracted README.md's bytes as a root Makefile by its Unicode Path field", async () => {
    const a = await packed({ "README.md": "all:\n\ttouch /tmp/PWNED\n" });
    const readme = "cap/README.md";
    const zip64 = extraField(0x0001, new Uint8Array(8));
    for (const [where, x, said] of [
      [
        "central",
        unicodePathField(readme, "cap/Makefile"),
        "an extra field 0x7075 (Info-ZIP Unicode Path: unzip names the entry by it) in its central directory record",
      ],
      ["local", unicodePathField(readme, "cap/Makefile"), "an extra field 0x7075 (Info-ZIP Unicode Path: unzip names the entry by it) in its local header"],
      ["central", extraField(0x6375, "\x01\0\0\0\0hi"), "an extra field 0x6375 (Info-ZIP Unicode Comment) in its central directory record"],
      ["local", Buffer.concat([extraField(0x5455, "\x01\0\0\0\0"), extraField(0x5455, "\x01\0\0\0\0")]), "the extra field 0x5455 twice in its local header"],
      ["central", extraField(0xcafe, ""), "an extra field 0xcafe in its central directory record"],
      ["central", Buffer.concat([zip64, zip64]), "the extra field 0x0001 twice in its central directory record"],
      ["local", Buffer.from([1, 0, 9]), "3 stray bytes after the extra fields in its local header"],
      [
        "central",
        Buffer.concat([zip64, Buffer.from([0x75, 0x70, 40, 0])]),
        "an extra field 0x7075 running past the end of its block in its central directory record",
      ],
    ] as const) {
      const list = a.entries.map((e) => (e.name === readme ? { ...e, [where === "central" ? "extra" : "localExtra"]: x } : e));
      const e = await refusal(() => unpackArchive(a.write(list), a.out));
      expect(e.code).toBe("E_ARCHIVE");
      expect(e.message).toContain(`"${readme}" carries ${said}, which \`kerncap pack\` never writes`);
      expect(e.hint).toContain("pack the capture again with `kerncap pack`");
      expect(onlyArchives(a.root)).toEqual([]);
    }
    // the same entries without the fields unpack, README.md as README.md; a lone ZIP64 field (what pack writes) is read
    const list = a.entries.map((e) => (e.name === readme ? { ...e, extra: zip64, localExtra: zip64 } : e));
    const u = await unpackArchive(a.write(list), a.out);
    expect(readdirSync(u.dir)).toContain("README.md");
    expect(readdirSync(u.dir)).not.toContain("Makefile");
  });

  test.skipIf(!Bun.which("zip") || !Bun.which("unzip"))(
    "an archive unzipped and zipped again with zip -r (timestamps, uid/gid fields, folder entries) unpacks, received; an entry the index lacks is still refused (nu12 #18)",
    async () => {
      const a = await packed();
      const x = join(a.root, "x");
      mkdirSync(x);
      const run = (cmd: string[]) => expect(Bun.spawnSync(cmd, { cwd: x, stderr: "pipe" }).exitCode).toBe(0);
      run(["unzip", "-q", a.write(a.entries)]);
      run(["zip", "-qr", join(a.root, "re.zip"), "cap"]);
      const raw = readRawZip(join(a.root, "re.zip"));
      expect(raw.some((e) => e.name === "cap/")).toBe(true); // zip -r's folder entries, and its 0x5455/0x7875 fields on each
      const u = await unpackArchive(join(a.root, "re.zip"), join(a.root, "out"));
      expect(readdirSync(u.dir)).toContain("kerncap.json");
      expect(existsSync(join(u.dir, "kerncap-received.json"))).toBe(true);
      // a file added before zipping again is no folder entry: refused as before
      writeFileSync(join(x, "cap/extra.txt"), "x");
      run(["zip", "-qr", join(a.root, "re2.zip"), "cap"]);
      const e = await refusal(() => unpackArchive(join(a.root, "re2.zip"), join(a.root, "out2")));
      expect(e.message).toContain('entry "cap/extra.txt" is not in kerncap-pack.json');
    },
  );

  test("a zip without an index whose Unicode Path field leaves the folder: refused as unsafe, no hint to use unzip", async () => {
    const a = await packed();
    const zip = join(a.root, "plain.zip");
    writeFileSync(zip, rawZip([{ ...storedEntry("cap/notes.txt", "x"), extra: unicodePathField("cap/notes.txt", "../../.bashrc") }]));
    const e = await refusal(() => unpackArchive(zip, a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain('refused as unsafe: entry "../../.bashrc" would be written outside');
    expect(e.hint).not.toContain("unzip if");
  });

  test("two entries sharing one compressed stream (1.2 MB once unpacked to 2 GiB)", async () => {
    const text = "kernel source line\n".repeat(1 << 16);
    const a = await packed({ "src/a.txt": text, "src/b.txt": text });
    const ia = a.entries.findIndex((e) => e.name === "cap/src/a.txt");
    const list = a.entries.map((e, i) => (e.name === "cap/src/b.txt" ? { ...e, sharesWith: ia } : e));
    const e = await refusal(() => unpackArchive(a.write(list), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toMatch(/cap\/src\/b\.txt: the local header at byte \d+ names "cap\/src\/a\.txt"/);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("a sparse entry without data for a file the manifest does not lay out (157 KB once became 750 TiB)", async () => {
    const a = await packed();
    const size = 750 * 2 ** 40;
    const idx = {
      ...a.index,
      files: [...a.index.files, { path: "memory/huge.bin", size, mode: 0o644, entry: "cap/memory/huge.bin.kcsparse", method: "sparse" as const, extents: [] }],
    };
    const t0 = performance.now();
    const e = await refusal(() => unpackArchive(a.write([...a.entries, storedEntry("cap/memory/huge.bin.kcsparse", "")], idx), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain("memory/huge.bin is packed sparse");
    expect(e.message).toContain("only the manifest's memory images");
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("an unpack past the free space of the destination (a 2 MiB archive may unpack to 2 GiB): refused before a byte is written", () => {
    const files = [{ path: "memory/before.bin", bytes: 2 ** 33 }];
    let e: KerncapError | undefined;
    try {
      checkUnpackBounds("x.zip", files, "/somewhere/out", 2 ** 33);
    } catch (err) {
      e = err as KerncapError;
    }
    expect(e?.code).toBe("E_IO");
    expect(e?.message).toBe("unpacking x.zip writes 8.00 GiB; the file system of /somewhere/out has 8.00 GiB free, and unpack leaves 1.00 GiB of it free");
    expect(() => checkUnpackBounds("x.zip", files, "/somewhere/out", 2 ** 33 + FREE_MARGIN_BYTES)).not.toThrow();
    expect(freeBytes(tempDir())).toBeGreaterThan(0);
    expect(freeBytes("/no/such/folder/below/root")).toBeGreaterThan(0); // its nearest existing folder's
  });

  test("files the manifest gives no size (src/) past 512 MiB together: refused, naming the largest, before a byte is written, however much space is free (adversary 30: 4.3 MB unpacked to 4 GiB)", async () => {
    const sized = [{ path: "memory/before.bin", bytes: 2 ** 32, sized: true }];
    const loose = [
      { path: "src/pad.h", bytes: 2 ** 30, sized: false },
      { path: "src/k.cu", bytes: 4096, sized: false },
    ];
    expect(() => checkUnpackBounds("x.zip", sized, "/out", 2 ** 40)).not.toThrow(); // a memory image is bounded by its regions
    const many = Array.from({ length: 20_001 }, (_, i) => ({ path: `src/m/f${i}.h`, bytes: 0, sized: false }));
    expect(() => checkUnpackBounds("x.zip", many, "/out", 2 ** 40)).toThrow("it holds 20001 files that the manifest gives no size");
    expect(() => checkUnpackBounds("x.zip", many.slice(1), "/out", 2 ** 40)).not.toThrow();
    const e = (() => {
      try {
        checkUnpackBounds("x.zip", [...sized, ...loose], "/out", 2 ** 40);
      } catch (err) {
        return err as KerncapError;
      }
    })();
    expect(e?.code).toBe("E_ARCHIVE");
    expect(e?.message).toContain(
      'would unpack to 1.00 GiB more than the archive holds of them, more than the 0.50 GiB a build copies of src/ (largest: "src/pad.h" 1.00 GiB',
    );
    // stored whole (the archive as large as the file: no bomb), passed
    expect(() => checkUnpackBounds("x.zip", [{ ...loose[0]!, stored: 2 ** 30 }], "/out", 2 ** 40)).not.toThrow();
    // through unpack itself: a packed capture with a 600 MiB src/ header (zeros: deflate's ratio), nothing written
    const a = await packed({ "src/pad.h": "" });
    const pad = a.entries.find((x) => x.name === "cap/src/pad.h")!;
    const big = new Uint8Array(600 << 20);
    const list = a.entries.map((x) => (x === pad ? { ...x, data: deflateRawSync(big), method: 8 as const, usize: big.length, crc: Bun.hash.crc32(big) } : x));
    const idx = { ...a.index, files: a.index.files.map((f) => (f.path === "src/pad.h" ? { ...f, size: big.length, method: "deflated" as const } : f)) };
    const r = await refusal(() => unpackArchive(a.write(list, idx), a.out));
    expect(r.code).toBe("E_ARCHIVE");
    expect(r.message).toContain('"src/pad.h" 0.59 GiB');
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("an archive counting more than 100000 entries: refused from its end record, before any entry is read (adversary 30: a million took 930 MB and 5 s)", async () => {
    const count = 200_000;
    const cd = Buffer.alloc(count * 46); // room enough for the count to be believed
    const e64 = Buffer.alloc(56);
    e64.writeUInt32LE(0x06064b50, 0);
    e64.writeBigUInt64LE(44n, 4);
    e64.writeBigUInt64LE(BigInt(count), 24);
    e64.writeBigUInt64LE(BigInt(count), 32);
    e64.writeBigUInt64LE(BigInt(cd.length), 40);
    e64.writeBigUInt64LE(0n, 48);
    const loc = Buffer.alloc(20);
    loc.writeUInt32LE(0x07064b50, 0);
    loc.writeBigUInt64LE(BigInt(cd.length), 8);
    loc.writeUInt32LE(1, 16);
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(0xffff, 8);
    end.writeUInt16LE(0xffff, 10);
    end.writeUInt32LE(0xffffffff, 12);
    end.writeUInt32LE(0xffffffff, 16);
    const root = tempDir();
    const zip = join(root, "many.zip");
    writeFileSync(zip, Buffer.concat([cd, e64, loc, end]));
    const t0 = performance.now();
    const e = await refusal(() => unpackArchive(zip, join(root, "out")));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain("it holds 200000 entries, more than the 100000");
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  test("a memory image larger than the manifest's regions and their layout allow", async () => {
    const a = await packed();
    const i = a.index.files.findIndex((f) => f.path === "memory/before.bin");
    const before = a.index.files[i]!;
    const files = [...a.index.files];
    files[i] = { ...before, size: 2 ** 40, method: "sparse", entry: `${before.entry}.kcsparse`, extents: [[0, before.size]] };
    const list = a.entries.map((e) => (e.name === before.entry ? { ...e, name: `${before.entry}.kcsparse` } : e));
    const e = await refusal(() => unpackArchive(a.write(list, { ...a.index, files }), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain(`memory/before.bin would be ${2 ** 40} bytes; the manifest says ${before.size}`);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("a file the manifest lists, with another size than the manifest's", async () => {
    const a = await packed();
    const params = a.entries.find((e) => e.name === "cap/kernel/params.bin")!;
    const big = new Uint8Array(1 << 20).fill(7);
    const files = a.index.files.map((f) => (f.path === "kernel/params.bin" ? { ...f, size: big.length } : f));
    const list = a.entries.map((e) => (e === params ? storedEntry(e.name, big) : e));
    const e = await refusal(() => unpackArchive(a.write(list, { ...a.index, files }), a.out));
    expect(e.message).toContain(`kernel/params.bin would be ${1 << 20} bytes; the manifest says 12`);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("a manifest nested 100 000 levels deep (pack's walk of it once overflowed the stack: internal error); a capture folder holding one is refused too", async () => {
    const a = await packed();
    const man = a.entries.find((e) => e.name === "cap/kerncap.json")!;
    const text = new TextDecoder().decode(man.method === 8 ? Bun.inflateSync(man.data as Uint8Array<ArrayBuffer>) : man.data);
    const deep = `${text.trimEnd().slice(0, -1)}, "x": ${'{"a":'.repeat(100_000)}1${"}".repeat(100_000)}}`;
    const files = a.index.files.map((f) => (f.path === "kerncap.json" ? { ...f, size: Buffer.byteLength(deep) } : f));
    const list = a.entries.map((e) => (e === man ? storedEntry(e.name, deep) : e));
    const e = await refusal(() => unpackArchive(a.write(list, { ...a.index, files }), a.out));
    expect(e.code).toBe("E_ARCHIVE");
    expect(e.message).toContain("kerncap.json nests 100001 levels deep");
    expect(onlyArchives(a.root)).toEqual([]);
    // the same manifest in a folder: every reader refuses it with E_MANIFEST, none walks it
    writeFileSync(join(a.root, "cap", "kerncap.json"), deep);
    const m = await refusal(async () => readManifest(join(a.root, "cap")));
    expect(m.code).toBe("E_MANIFEST");
    expect(m.message).toContain("nests 100001 levels deep");
  });

  test("a deflated entry declaring more bytes than deflate can give from its compressed ones", async () => {
    const a = await packed({ "src/k.cu": "__global__ void k() {}\n" });
    const src = a.entries.find((e) => e.name === "cap/src/k.cu")!;
    const usize = src.data.length * 2000;
    const files = a.index.files.map((f) => (f.path === "src/k.cu" ? { ...f, size: usize } : f));
    const list = a.entries.map((e) => (e === src ? { ...e, usize } : e));
    const e = await refusal(() => unpackArchive(a.write(list, { ...a.index, files }), a.out));
    expect(e.message).toContain(`cap/src/k.cu declares ${usize} bytes from ${src.data.length} compressed bytes`);
    expect(onlyArchives(a.root)).toEqual([]);
  });

  test("folders get the files' mask (no group/other write) whatever the umask; files too", async () => {
    const a = await packed({ "src/deep/k.cu": "__global__ void k() {}\n" });
    const old = process.umask(0);
    try {
      const u = await unpackArchive(join(a.root, "cap.zip"), a.out);
      for (const d of ["", "src", "src/deep", "kernel", "memory"]) expect((statSync(join(u.dir, d)).mode & 0o7777).toString(8), d || ".").toBe("755");
      expect((statSync(join(u.dir, "src/deep/k.cu")).mode & 0o7777).toString(8)).toBe("644");
    } finally {
      process.umask(old);
    }
    expect(existsSync(join(a.out, "kerncap.json"))).toBe(true);
  });
});
