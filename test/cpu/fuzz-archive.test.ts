/**
 * Property-based tests of `kerncap unpack` (src/format/archive.ts, src/format/zip.ts) on archives
 * an attacker could write: a small valid archive of a synthetic capture, mutated in its central
 * directory, local headers and end records (bytes at the fields, ZIP64 records added), in its
 * entries (duplicated, dropped, renamed, sharing one stream, sizes and methods changed) and in its
 * index (names that leave the folder, duplicates, huge and sparse sizes). Every case ends either
 * with the capture unpacked inside the temp root or with a user error that has a message (a
 * KerncapError other than E_INTERNAL, or a file-system error the CLI reports as one), and nothing
 * is written outside the temp root.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { closeSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { isKerncapError, systemError } from "../../src/errors.ts";
import { packCapture, PACK_INDEX, unpackArchive, type PackIndex } from "../../src/format/archive.ts";
import { makeCapture, tempDir } from "./fixtures.ts";
import { rawZip, readRawZip, storedEntry, type RawEntry } from "./zip-fixture.ts";

let top: string; // the temp root's parent: it must hold only the root afterwards
let jail: string; // the temp root: the archive, and the output folder of each case
let base: Buffer; // the valid archive
let entries: RawEntry[];
let index: PackIndex; // its index

beforeAll(async () => {
  top = tempDir();
  jail = join(top, "jail");
  const dir = join(jail, "cap");
  await makeCapture(dir);
  writeFileSync(join(dir, "README.md"), "# a kernel\n".repeat(50));
  // the before image with a hole between its two regions: a sparse entry in the archive
  const img = join(dir, "memory/before.bin");
  const bytes = readFileSync(img);
  rmSync(img);
  const fd = openSync(img, "w");
  writeSync(fd, bytes, 0, 4096, 0);
  writeSync(fd, bytes, 65536, 8192, 65536);
  closeSync(fd);
  const p = await packCapture(dir, join(top, "base.zip"));
  base = readFileSync(p.archive);
  entries = readRawZip(p.archive);
  index = JSON.parse(new TextDecoder().decode(Bun.inflateSync(entries[0]!.data as Uint8Array<ArrayBuffer>))) as PackIndex;
  rmSync(p.archive);
  rmSync(dir, { recursive: true });
});

afterAll(() => rmSync(top, { recursive: true, force: true }));
beforeEach(() => Object.assign(seen, { unpacked: 0, refused: 0 }));
afterEach(() => {
  expect(seen.unpacked).toBeGreaterThan(0);
  expect(seen.refused).toBeGreaterThan(0);
});

/** Outcomes of the current property: both must occur, or the mutations miss the reader (or break every archive). */
const seen = { unpacked: 0, refused: 0 };

/** Unpack `zip`; the property: success inside the jail, or a user error with a message; nothing outside. */
async function check(zip: Uint8Array): Promise<void> {
  const archive = join(jail, "a.zip");
  const out = join(jail, "out");
  writeFileSync(archive, zip);
  try {
    const u = await unpackArchive(archive, out);
    expect(u.dir).toBe(out);
    expect(readdirSync(out)).toContain("kerncap.json");
    seen.unpacked++;
  } catch (e) {
    const user = isKerncapError(e) ? e : systemError(e);
    if (!user || user.code === "E_INTERNAL" || !user.message) throw e;
    seen.refused++;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
  expect(readdirSync(top)).toEqual(["jail"]);
  expect(readdirSync(jail)).toEqual(["a.zip"]);
}

/** Byte offsets of the fields a reader trusts: every central-directory record, local header and the end record. */
function fieldOffsets(b: Buffer): number[] {
  const out: number[] = [];
  const eocd = b.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]));
  for (let i = 0; i < 22; i++) out.push(eocd + i);
  let o = b.readUInt32LE(eocd + 16);
  for (let k = 0; k < b.readUInt16LE(eocd + 10); k++) {
    for (let i = 0; i < 46; i++) out.push(o + i);
    const lo = b.readUInt32LE(o + 42);
    for (let i = 0; i < 30; i++) out.push(lo + i);
    o += 46 + b.readUInt16LE(o + 28) + b.readUInt16LE(o + 30) + b.readUInt16LE(o + 32);
  }
  return out;
}

const RUNS = Number(process.env.KERNCAP_FUZZ_RUNS ?? 0) || undefined;

/** Values that sizes, offsets and counts take at their edges. */
const edge32 = fc.constantFrom(0, 1, 0xfffe, 0xffff, 0x10000, 0x7fffffff, 0xfffffffe, 0xffffffff);
const nasty = fc.constantFrom(
  "../x",
  "/etc/x",
  "cap/../x",
  "cap\\x",
  "cap/./x",
  "cap//x",
  "cap/kernel/params.bin",
  "cap/kernel/",
  "cap/kerncap.json",
  "cap/memory/before.bin.kcsparse",
  "other/x",
  "cap/\u0000x",
  "cap/x/",
);

describe("fuzz: unpack on mutated archives", () => {
  test("bytes of the central directory, local headers and end record overwritten", async () => {
    const fields = fieldOffsets(base);
    const write = fc.record({ at: fc.constantFrom(...fields), width: fc.constantFrom(1, 2, 4), value: fc.oneof(edge32, fc.nat()) });
    await fc.assert(
      fc.asyncProperty(fc.array(write, { minLength: 1, maxLength: 4 }), async (ws) => {
        const b = Buffer.from(base);
        for (const w of ws) {
          if (w.at + w.width > b.length) continue;
          if (w.width === 1) b.writeUInt8(w.value & 0xff, w.at);
          else if (w.width === 2) b.writeUInt16LE(w.value & 0xffff, w.at);
          else b.writeUInt32LE(w.value >>> 0, w.at);
        }
        await check(b);
      }),
      { numRuns: RUNS ?? 1000 },
    );
  }, 120_000);

  test("entries duplicated, dropped, renamed, sharing a stream, resized; index records added, duplicated, resized, made sparse", async () => {
    const idx0 = index;
    const k = entries.length;
    const op = fc.oneof(
      fc.record({ kind: fc.constant("dup" as const), i: fc.nat(k - 1) }),
      fc.record({ kind: fc.constant("drop" as const), i: fc.integer({ min: 1, max: k - 1 }) }),
      fc.record({ kind: fc.constant("rename" as const), i: fc.integer({ min: 1, max: k - 1 }), name: nasty }),
      fc.record({ kind: fc.constant("share" as const), i: fc.integer({ min: 1, max: k - 1 }), j: fc.nat(k - 1) }),
      fc.record({ kind: fc.constant("usize" as const), i: fc.integer({ min: 1, max: k - 1 }), v: fc.oneof(edge32, fc.nat()) }),
      fc.record({ kind: fc.constant("method" as const), i: fc.integer({ min: 1, max: k - 1 }) }),
      fc.record({
        kind: fc.constant("addFile" as const),
        path: nasty.map((n) => n.replace(/^cap\//, "")),
        size: fc.oneof(fc.nat(), fc.constant(750 * 2 ** 40)),
        sparse: fc.boolean(),
      }),
      fc.record({ kind: fc.constant("dupFile" as const), i: fc.nat(idx0.files.length - 1) }),
      fc.record({ kind: fc.constant("size" as const), i: fc.nat(idx0.files.length - 1), v: fc.oneof(fc.nat(), fc.constant(2 ** 40), fc.constant(-1)) }),
      fc.record({
        kind: fc.constant("sparse" as const),
        i: fc.nat(idx0.files.length - 1),
        ext: fc.array(fc.tuple(fc.nat(1 << 20), fc.nat(1 << 16)), { maxLength: 3 }),
      }),
      fc.record({ kind: fc.constant("dir" as const), name: nasty.map((n) => n.replace(/^cap\//, "")) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 3 }), async (ops) => {
        let list: RawEntry[] = entries.map((e) => ({ ...e }));
        const idx: PackIndex = structuredClone(idx0);
        for (const o of ops) {
          const at = "i" in o ? Math.min(o.i, list.length - 1) : 0;
          if (o.kind === "dup") list.push({ ...list[at]! });
          else if (o.kind === "drop" && list.length > 1) list.splice(Math.max(1, at), 1);
          else if (o.kind === "rename") list[at] = { ...list[at]!, name: o.name };
          else if (o.kind === "share" && o.j < at && list[o.j]!.sharesWith === undefined) list[at] = { ...list[at]!, sharesWith: o.j };
          else if (o.kind === "usize") list[at] = { ...list[at]!, usize: o.v >>> 0 };
          else if (o.kind === "method") list[at] = { ...list[at]!, method: list[at]!.method === 0 ? 8 : 0 };
          else if (o.kind === "addFile") {
            const entry = `cap/${o.path}${o.sparse ? ".kcsparse" : ""}`;
            idx.files.push({ path: o.path, size: o.size, mode: 0o644, entry, method: o.sparse ? "sparse" : "stored", extents: o.sparse ? [] : undefined });
            list.push(storedEntry(entry, o.sparse ? "" : "x".repeat(Math.min(o.size, 64))));
          } else if (o.kind === "dupFile") idx.files.push({ ...idx.files[Math.min(o.i, idx.files.length - 1)]! });
          else if (o.kind === "size") idx.files[Math.min(o.i, idx.files.length - 1)]!.size = o.v;
          else if (o.kind === "sparse") Object.assign(idx.files[Math.min(o.i, idx.files.length - 1)]!, { method: "sparse", extents: o.ext });
          else if (o.kind === "dir") idx.dirs.push(o.name);
        }
        // the index entry rewritten (stored) after the changes; entries that shared it now share another's place
        list = [storedEntry(`cap/${PACK_INDEX}`, JSON.stringify(idx)), ...list.slice(1)].map((e) => (e.sharesWith === 0 ? { ...e, sharesWith: undefined } : e));
        await check(rawZip(list));
      }),
      { numRuns: RUNS ?? 1000 },
    );
  }, 120_000);

  test("ZIP64 end records and extra fields added, with lying counts, sizes and offsets", async () => {
    const eocd = base.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]));
    const count = base.readUInt16LE(eocd + 10);
    const cdSize = base.readUInt32LE(eocd + 12);
    const cdOff = base.readUInt32LE(eocd + 16);
    // the truth half the time: a record that lies in one field at a time reaches the checks behind the others
    const u64 = (truth: number) =>
      fc.oneof(
        { arbitrary: fc.constant(BigInt(truth)), weight: 6 },
        fc.constant(BigInt(truth + 1)),
        fc.constant(BigInt(Math.max(0, truth - 1))),
        fc.constant(0n),
        fc.constant(2n ** 53n),
        fc.constant(2n ** 64n - 1n),
        fc.bigInt({ min: 0n, max: 2n ** 40n }),
      );
    const zip64 = fc.record({
      n: u64(count),
      size: u64(cdSize),
      off: u64(cdOff),
      locator: u64(eocd),
      entry: fc.nat(count - 1),
      field: fc.constantFrom(20, 24, 42),
      extra: fc.oneof(fc.constant("truth" as const), fc.array(u64(0), { maxLength: 3 })),
    });
    await fc.assert(
      fc.asyncProperty(zip64, async (z) => {
        // one central-directory record's size or offset set to 0xffffffff with a ZIP64 extra field of z.extra
        const cd = Buffer.from(base.subarray(cdOff, cdOff + cdSize));
        let o = 0;
        for (let k = 0; k < z.entry; k++) o += 46 + cd.readUInt16LE(o + 28) + cd.readUInt16LE(o + 30) + cd.readUInt16LE(o + 32);
        const nlen = cd.readUInt16LE(o + 28);
        const xlen = cd.readUInt16LE(o + 30);
        const rec = Buffer.from(cd.subarray(o, o + 46 + nlen));
        // "truth": the field's value moved into the extra field, as a ZIP64 writer does
        const values = z.extra === "truth" ? [BigInt(rec.readUInt32LE(z.field))] : z.extra;
        rec.writeUInt32LE(0xffffffff, z.field);
        const extra = Buffer.alloc(4 + 8 * values.length);
        extra.writeUInt16LE(1, 0);
        extra.writeUInt16LE(8 * values.length, 2);
        values.forEach((v, i) => extra.writeBigUInt64LE(v, 4 + 8 * i));
        rec.writeUInt16LE(extra.length, 30);
        const newCd = Buffer.concat([cd.subarray(0, o), rec, extra, cd.subarray(o + 46 + nlen + xlen)]);
        const end64 = Buffer.alloc(56);
        end64.writeUInt32LE(0x06064b50, 0);
        end64.writeBigUInt64LE(44n, 4);
        end64.writeBigUInt64LE(z.n, 24);
        end64.writeBigUInt64LE(z.n, 32);
        end64.writeBigUInt64LE(z.size === BigInt(cdSize) ? BigInt(newCd.length) : z.size, 40);
        end64.writeBigUInt64LE(z.off, 48);
        const at = cdOff + newCd.length;
        const loc = Buffer.alloc(20);
        loc.writeUInt32LE(0x07064b50, 0);
        loc.writeBigUInt64LE(z.locator === BigInt(eocd) ? BigInt(at) : z.locator, 8);
        loc.writeUInt32LE(1, 16);
        const end = Buffer.from(base.subarray(eocd, eocd + 22));
        end.writeUInt16LE(0xffff, 8);
        end.writeUInt16LE(0xffff, 10);
        end.writeUInt32LE(0xffffffff, 12);
        end.writeUInt32LE(0xffffffff, 16);
        await check(Buffer.concat([base.subarray(0, cdOff), newCd, end64, loc, end]));
      }),
      { numRuns: RUNS ?? 800 },
    );
  }, 120_000);
});
