/**
 * Zips written and read byte by byte (APPNOTE 4.3), so that tests can make their sizes, names and
 * offsets lie: the archives an attacker would hand to `kerncap unpack`.
 */
import { readFileSync } from "node:fs";

/** One zip entry as rawZip writes it: `data` is the payload as stored (already deflated for method 8). */
export interface RawEntry {
  name: string;
  data: Uint8Array;
  method: 0 | 8;
  crc: number;
  /** The uncompressed size the local header and central directory declare. */
  usize: number;
  /** Unix mode of the external attributes (default 0o100644). */
  mode?: number;
  /** Write no local header or data for this entry: its central-directory record points at entry `sharesWith`'s. */
  sharesWith?: number;
  /** The extra field block of its central-directory record (default none). */
  extra?: Uint8Array;
  /** The extra field block of its local header (default none). */
  localExtra?: Uint8Array;
}

/** One extra field (APPNOTE 4.5.1): its tag, its data's length, its data. */
export function extraField(tag: number, data: Uint8Array | string): Buffer {
  const d = Buffer.from(data);
  const h = Buffer.alloc(4);
  h.writeUInt16LE(tag, 0);
  h.writeUInt16LE(d.length, 2);
  return Buffer.concat([h, d]);
}

/** An Info-ZIP Unicode Path extra field (0x7075) giving `header`'s entry the name `name` (version 1, the CRC-32 of the header's name). */
export function unicodePathField(header: string, name: string): Buffer {
  const v = Buffer.alloc(5);
  v.writeUInt8(1, 0);
  v.writeUInt32LE(Bun.hash.crc32(Buffer.from(header)) >>> 0, 1);
  return extraField(0x7075, Buffer.concat([v, Buffer.from(name)]));
}

/** A zip of `entries`, in order, without ZIP64 records. */
export function rawZip(entries: RawEntry[]): Buffer {
  const locals: Buffer[] = [];
  const cds: Buffer[] = [];
  const offsets: number[] = [];
  let off = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const at = e.sharesWith === undefined ? off : offsets[e.sharesWith]!;
    offsets.push(at);
    if (e.sharesWith === undefined) {
      const lh = Buffer.alloc(30);
      lh.writeUInt32LE(0x04034b50, 0);
      lh.writeUInt16LE(20, 4);
      lh.writeUInt16LE(0x800, 6);
      lh.writeUInt16LE(e.method, 8);
      lh.writeUInt32LE(e.crc >>> 0, 14);
      lh.writeUInt32LE(e.data.length, 18);
      lh.writeUInt32LE(e.usize, 22);
      lh.writeUInt16LE(name.length, 26);
      const lx = Buffer.from(e.localExtra ?? []);
      lh.writeUInt16LE(lx.length, 28);
      locals.push(lh, name, lx, Buffer.from(e.data));
      off += 30 + name.length + lx.length + e.data.length;
    }
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE(0x031e, 4);
    cd.writeUInt16LE(20, 6);
    cd.writeUInt16LE(0x800, 8);
    cd.writeUInt16LE(e.method, 10);
    cd.writeUInt32LE(e.crc >>> 0, 16);
    cd.writeUInt32LE(e.data.length, 20);
    cd.writeUInt32LE(e.usize, 24);
    cd.writeUInt16LE(name.length, 28);
    const cx = Buffer.from(e.extra ?? []);
    cd.writeUInt16LE(cx.length, 30);
    cd.writeUInt32LE(((e.mode ?? 0o100644) << 16) >>> 0, 38);
    cd.writeUInt32LE(at, 42);
    cds.push(cd, name, cx);
  }
  const cd = Buffer.concat(cds);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(off, 16);
  return Buffer.concat([...locals, cd, end]);
}

/** The entries of a zip without ZIP64 records (what `kerncap pack` writes for a small capture), as rawZip takes them. */
export function readRawZip(path: string): RawEntry[] {
  const b = readFileSync(path);
  const eocd = b.lastIndexOf(Buffer.from([0x50, 0x4b, 5, 6]));
  const count = b.readUInt16LE(eocd + 10);
  let o = b.readUInt32LE(eocd + 16);
  const out: RawEntry[] = [];
  for (let k = 0; k < count; k++) {
    const nlen = b.readUInt16LE(o + 28);
    const lo = b.readUInt32LE(o + 42);
    const start = lo + 30 + b.readUInt16LE(lo + 26) + b.readUInt16LE(lo + 28);
    out.push({
      name: b.subarray(o + 46, o + 46 + nlen).toString(),
      method: b.readUInt16LE(o + 10) as 0 | 8,
      crc: b.readUInt32LE(o + 16),
      data: new Uint8Array(b.subarray(start, start + b.readUInt32LE(o + 20))),
      usize: b.readUInt32LE(o + 24),
      mode: b.readUInt32LE(o + 38) >>> 16,
    });
    o += 46 + nlen + b.readUInt16LE(o + 30) + b.readUInt16LE(o + 32);
  }
  return out;
}

/** A stored entry of `bytes` (its CRC-32 and size computed). */
export function storedEntry(name: string, bytes: Uint8Array | string): RawEntry {
  const data = typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes;
  return { name, data, method: 0, crc: Bun.hash.crc32(data), usize: data.length };
}
