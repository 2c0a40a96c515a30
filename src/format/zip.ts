/**
 * The zip container of `kerncap pack` (APPNOTE.TXT 6.3.10, PKWARE): a writer with ZIP64 records
 * and a strict reader of the central directory. fflate is the deflate engine only (its `Zip`
 * writes no ZIP64 records, so archives and entries stopped at 4 GiB).
 *
 * Writer: each entry is a local header, its data, and no data descriptor: the header is written
 * first with room for its sizes and CRC-32, and written again (pwrite) once the data is out. An
 * entry whose size may pass 0xffffffff bytes gets the ZIP64 extended information extra field
 * (tag 0x0001) in both headers; an entry past byte 0xffffffff of the archive gets it in the
 * central directory for its offset; more than 65535 entries or a central directory past
 * 0xffffffff gets the ZIP64 end of central directory record and its locator. Stored pieces of
 * zeros are left as holes of the archive file (a sparse file's holes cost no disk while packing).
 *
 * Reader: refuses (E_ARCHIVE) what `kerncap pack` never writes and what would let a small archive
 * unpack to a large one: two entries of one name, entries whose local headers and data overlap
 * each other or the central directory (one compressed stream counted twice), a local header whose
 * name or method differs from the central directory's, sizes or offsets past 2^53 or the file, and
 * any entry whose external attributes give a Unix file type other than a regular file or a folder
 * (a symbolic link, a device, a FIFO, a socket: `unzip` would make that, kerncap never writes one).
 * Each entry's extra fields, local and central, are read (CdEntry.oddExtra): any but the ZIP64 field
 * (the only one pack writes) and the two that zip -r adds and that name nothing (EXTRA_HARMLESS), a
 * field twice or a malformed block is refused by unpack once the
 * archive claims to be kerncap's (src/format/unpack.ts readIndex), since other readers act on them:
 * unzip names an entry by its Info-ZIP Unicode Path field (0x7075), kerncap by the header's name.
 */
import { Deflate } from "fflate";
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, writeSync } from "node:fs";
import { KerncapError, withPath } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { writeSparse } from "./sparse-extents.ts";

/** Largest value of a 32-bit zip field; the value itself means "see the ZIP64 record". */
export const ZIP32_MAX = 0xffffffff;
/** Largest entry count of the end of central directory record. */
const ZIP16_MAX = 0xffff;
/** The most entries an archive kerncap reads may hold (a capture set of many members, each with its src/). */
export const ZIP_MAX_ENTRIES = 100_000;
/** Deflate's largest expansion ratio (RFC 1951: a 258-byte match in a 1-bit code at best; zlib's figure). */
export const DEFLATE_MAX_RATIO = 1032;

const SIG_LOCAL = 0x04034b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_END = 0x06054b50;
const SIG_END64 = 0x06064b50;
const SIG_LOCATOR64 = 0x07064b50;
const FLAG_UTF8 = 0x800;
const EXTRA_ZIP64 = 0x0001;
/** The Info-ZIP Unicode Path extra field: a UTF-8 name that unzip and others use instead of the header's (APPNOTE 4.6.9). */
const EXTRA_UNICODE_PATH = 0x7075;
/** What some other extra fields are, for the refusal. */
const EXTRA_NAMES: Record<number, string> = {
  [EXTRA_UNICODE_PATH]: "Info-ZIP Unicode Path: unzip names the entry by it",
  0x6375: "Info-ZIP Unicode Comment",
  0x5455: "extended timestamp",
  0x7875: "Info-ZIP Unix UID/GID",
  0x000a: "NTFS times",
};
/**
 * Extra fields Info-ZIP's zip writes that name nothing and hold no content, so no reader unpacks an
 * entry differently for them: the extended timestamp (0x5455, an mtime) and the Unix UID/GID
 * (0x7875, applied by unzip -X only, and never by kerncap). An archive unzipped and zipped again
 * with `zip -r` carries them on every entry (nu12 #18: refused, the sender asked to pack again);
 * taken once each, the rest of the rule standing.
 */
const EXTRA_HARMLESS = new Set([0x5455, 0x7875]);
/** The file-type bits of a Unix st_mode (the high 16 bits of the external attributes, as Info-ZIP's unzip reads them). */
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
/** What each other Unix file type is, for the refusal. */
const FILE_TYPES: Record<number, string> = {
  0o120000: "a symbolic link",
  0o020000: "a character device",
  0o060000: "a block device",
  0o010000: "a FIFO",
  0o140000: "a socket",
};

/** The E_ARCHIVE refusal of a damaged or foreign archive. */
export const badArchive = (archive: string, msg: string) =>
  new KerncapError("E_ARCHIVE", `${archive}: ${msg}`, { hint: "The archive is damaged or was not written by `kerncap pack`; ask for it again." });

/** One central-directory record (APPNOTE 4.3.12), its ZIP64 fields applied, and where its data starts. */
export interface CdEntry {
  name: string;
  method: number;
  flags: number;
  crc: number;
  /** Bytes of the entry's data in the archive (compressed). */
  csize: number;
  /** Bytes of the entry once inflated. */
  usize: number;
  /** Unix permission bits from the external attributes. */
  mode: number;
  localOffset: number;
  /** Byte of the archive where the entry's data begins (after its local header). */
  dataOffset: number;
  /**
   * What is wrong with its extra fields (local or central header), as a phrase: a field other than
   * ZIP64 (0x0001, the only one pack writes), a field twice, a malformed block; undefined when none.
   */
  oddExtra?: string;
  /** The names its Unicode Path fields (0x7075) give it, which unzip would use instead of `name`. */
  altNames: string[];
}

const u16 = (b: Uint8Array, o: number) => b[o]! | (b[o + 1]! << 8);
const u32 = (b: Uint8Array, o: number) => (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
/** A 64-bit field as a number, or undefined past 2^53 (no file is that large). */
const u64 = (b: Uint8Array, o: number) => {
  const hi = u32(b, o + 4);
  return hi > 0x1fffff ? undefined : hi * 2 ** 32 + u32(b, o);
};

function readAt(fd: number, off: number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  const got = readSync(fd, b, 0, n, off);
  return b.subarray(0, got);
}

/**
 * The end-of-central-directory record (ZIP64's where the locator names one) of the zip open at fd:
 * the entry count, the central directory's size and offset, and where it must end (bytes).
 * @throws what `bad` makes (E_ARCHIVE): no record, several disks, ZIP64 fields missing or past 2^53
 */
function endRecord(fd: number, size: number, bad: (msg: string) => Error): { count: number; cdSize: number; cdOff: number; cdLimit: number } {
  const tailLen = Math.min(size, 22 + 65535);
  const tailStart = size - tailLen;
  const tail = readAt(fd, tailStart, tailLen);
  let e = -1;
  for (let i = tail.length - 22; i >= 0; i--)
    if (u32(tail, i) === SIG_END) {
      e = i;
      break;
    }
  if (e < 0) throw bad("not a zip archive (no end-of-central-directory record)");
  if (u16(tail, e + 4) !== 0 || u16(tail, e + 6) !== 0) throw bad("a multi-disk archive");
  let count = u16(tail, e + 10);
  let cdSize = u32(tail, e + 12);
  let cdOff = u32(tail, e + 16);
  let cdLimit = tailStart + e; // the central directory ends where the records after it begin
  if (e >= 20 && u32(tail, e - 20) === SIG_LOCATOR64) {
    const at = u64(tail, e - 20 + 8);
    if (at === undefined || at + 56 > tailStart + e - 20) throw bad("the ZIP64 end-of-central-directory locator points past the end of the file");
    const r = readAt(fd, at, 56);
    if (r.length < 56 || u32(r, 0) !== SIG_END64) throw bad(`no ZIP64 end-of-central-directory record at byte ${at}`);
    const n = u64(r, 32);
    const s = u64(r, 40);
    const o = u64(r, 48);
    if (n === undefined || s === undefined || o === undefined) throw bad("a ZIP64 end-of-central-directory field past 2^53");
    [count, cdSize, cdOff] = [n, s, o];
    cdLimit = at;
  } else if (count === ZIP16_MAX || cdSize === ZIP32_MAX || cdOff === ZIP32_MAX) {
    throw bad("the end-of-central-directory record calls for ZIP64 records that are not there");
  }
  return { count, cdSize, cdOff, cdLimit };
}

/**
 * Every entry of the zip open at fd (`size` bytes), checked as the module comment says.
 * @throws KerncapError E_ARCHIVE naming the fault
 */
export function centralDirectory(archive: string, fd: number, size: number): CdEntry[] {
  const bad = (msg: string) => badArchive(archive, msg);
  const { count, cdSize, cdOff, cdLimit } = endRecord(fd, size, bad);
  if (cdOff + cdSize > cdLimit) throw bad("truncated (the central directory lies past the end of the file)");
  // a record is at least 46 bytes: a count the directory cannot hold is a lie, refused before looping on it
  if (count * 46 > cdSize) throw bad(`the end-of-central-directory record counts ${count} entries, more than ${cdSize} bytes can hold`);
  // before any entry is read (adversary 30: a million entries took 930 MB and 5 s before their refusal)
  if (count > ZIP_MAX_ENTRIES)
    throw bad(
      `it holds ${count} entries, more than the ${ZIP_MAX_ENTRIES} a capture (its sources at most 20000 files, a build's bound) or a capture set is unpacked with`,
    );
  const cd = readAt(fd, cdOff, cdSize);
  const out: CdEntry[] = [];
  const names = new Set<string>();
  let o = 0;
  for (let k = 0; k < count; k++) {
    if (o + 46 > cd.length || u32(cd, o) !== SIG_CENTRAL) throw bad("malformed central directory");
    const nlen = u16(cd, o + 28);
    const xlen = u16(cd, o + 30);
    const clen = u16(cd, o + 32);
    if (o + 46 + nlen + xlen + clen > cd.length) throw bad("malformed central directory (a record runs past its end)");
    const flags = u16(cd, o + 8);
    const nameBytes = cd.subarray(o + 46, o + 46 + nlen);
    const name = flags & FLAG_UTF8 ? new TextDecoder().decode(nameBytes) : String.fromCharCode(...nameBytes);
    if (names.has(name)) throw bad(`two entries are named ${JSON.stringify(name)} (which one would be unpacked depends on the reader)`);
    names.add(name);
    let usize = u32(cd, o + 24);
    let csize = u32(cd, o + 20);
    let localOffset = u32(cd, o + 42);
    if (u16(cd, o + 34) !== 0 && u16(cd, o + 34) !== ZIP16_MAX) throw bad(`${name} is on another disk`);
    const wide = [usize, csize, localOffset].some((x) => x === ZIP32_MAX);
    if (wide) {
      // the ZIP64 record holds, in this order, each field whose 32-bit value is 0xffffffff (APPNOTE 4.5.3)
      const x = zip64Extra(cd.subarray(o + 46 + nlen, o + 46 + nlen + xlen));
      if (!x) throw bad(`${name} has a 0xffffffff size or offset and no ZIP64 extra field`);
      let at = 0;
      const next = (what: string) => {
        const v = at + 8 <= x.length ? u64(x, at) : undefined;
        if (v === undefined) throw bad(`${name}: its ZIP64 extra field lacks the ${what}, or it is past 2^53`);
        at += 8;
        return v;
      };
      if (usize === ZIP32_MAX) usize = next("uncompressed size");
      if (csize === ZIP32_MAX) csize = next("compressed size");
      if (localOffset === ZIP32_MAX) localOffset = next("local header offset");
    }
    // 0 (no type: a zip from a system without Unix modes) reads as a file or folder by its name in unzip too
    const fileType = (u32(cd, o + 38) >>> 16) & S_IFMT;
    if (fileType !== 0 && fileType !== S_IFREG && fileType !== S_IFDIR)
      throw bad(
        `${escapeForTerminal(JSON.stringify(name), { oneLine: true })} is ${FILE_TYPES[fileType] ?? `of Unix file type 0${fileType.toString(8)}`} by its external attributes: unzip would make one, kerncap unpacks only regular files and folders`,
      );
    const method = u16(cd, o + 10);
    const lh = readAt(fd, localOffset, 30);
    if (lh.length < 30 || u32(lh, 0) !== SIG_LOCAL) throw bad(`${name}: no local header at byte ${localOffset}`);
    const lnlen = u16(lh, 26);
    const localName = readAt(fd, localOffset + 30, lnlen);
    if (lnlen !== nlen || Buffer.compare(localName, nameBytes) !== 0)
      throw bad(`${name}: the local header at byte ${localOffset} names ${JSON.stringify(new TextDecoder().decode(localName))}`);
    if (u16(lh, 8) !== method) throw bad(`${name}: the local header's compression method differs from the central directory's`);
    const lxlen = u16(lh, 28);
    const dataOffset = localOffset + 30 + lnlen + lxlen;
    const central = readExtras(cd.subarray(o + 46 + nlen, o + 46 + nlen + xlen));
    const local = readExtras(readAt(fd, localOffset + 30 + lnlen, lxlen), lxlen);
    const oddExtra = central.odd ? `${central.odd} in its central directory record` : local.odd ? `${local.odd} in its local header` : undefined;
    out.push({
      name,
      flags,
      method,
      crc: u32(cd, o + 16),
      csize,
      usize,
      mode: (u32(cd, o + 38) >>> 16) & 0o7777,
      localOffset,
      dataOffset,
      oddExtra,
      altNames: [...central.altNames, ...local.altNames],
    });
    o += 46 + nlen + xlen + clen;
  }
  // each entry's header and data is its own: one stream counted under two names is a small archive unpacking large
  const byStart = [...out].sort((a, b) => a.localOffset - b.localOffset);
  for (let i = 0; i < byStart.length; i++) {
    const x = byStart[i]!;
    const end = x.dataOffset + x.csize;
    if (end > cdOff) throw bad(`${x.name}: its data (bytes ${x.dataOffset}–${end}) runs into the central directory at byte ${cdOff}`);
    const y = byStart[i + 1];
    if (y && end > y.localOffset)
      throw bad(`${x.name} and ${y.name} overlap (bytes ${x.localOffset}–${end} and ${y.localOffset}–): two entries would share one stream of data`);
  }
  return out;
}

/** The data of the ZIP64 extended information extra field (tag 0x0001) in an extra block, if any. */
function zip64Extra(extra: Uint8Array): Uint8Array | undefined {
  for (let o = 0; o + 4 <= extra.length; ) {
    const tag = u16(extra, o);
    const len = u16(extra, o + 2);
    if (o + 4 + len > extra.length) return undefined;
    if (tag === EXTRA_ZIP64) return extra.subarray(o + 4, o + 4 + len);
    o += 4 + len;
  }
  return undefined;
}

/**
 * An extra block's fields (APPNOTE 4.5.1: tag, length, data), as unpack judges them: `odd` says
 * what pack never writes (a field other than ZIP64, a field twice, a field running past the block,
 * `want` bytes declared and fewer there); `altNames` the names of its Unicode Path fields
 * (version, CRC-32 of the header's name, UTF-8 name).
 */
function readExtras(extra: Uint8Array, want = extra.length): { odd?: string; altNames: string[] } {
  const altNames: string[] = [];
  if (extra.length < want) return { odd: `an extra field block cut short (${extra.length} of ${want} bytes)`, altNames };
  const seen = new Set<number>();
  let odd: string | undefined;
  for (let o = 0; o < extra.length; ) {
    if (o + 4 > extra.length) return { odd: odd ?? `${extra.length - o} stray bytes after the extra fields`, altNames };
    const tag = u16(extra, o);
    const len = u16(extra, o + 2);
    const hex = `0x${tag.toString(16).padStart(4, "0")}`;
    if (o + 4 + len > extra.length) return { odd: odd ?? `an extra field ${hex} running past the end of its block`, altNames };
    if (tag === EXTRA_UNICODE_PATH && len > 5) altNames.push(new TextDecoder().decode(extra.subarray(o + 9, o + 4 + len)));
    if (!odd && seen.has(tag)) odd = `the extra field ${hex} twice`;
    else if (!odd && tag !== EXTRA_ZIP64 && !EXTRA_HARMLESS.has(tag)) odd = `an extra field ${hex}${EXTRA_NAMES[tag] ? ` (${EXTRA_NAMES[tag]})` : ""}`;
    seen.add(tag);
    o += 4 + len;
  }
  return { odd, altNames };
}

/** MS-DOS date and time of `d` (local time, 2-second steps, from 1980: APPNOTE 4.4.6). */
function dosDateTime(d: Date): { time: number; date: number } {
  const t = d.getFullYear() < 1980 ? new Date(1980, 0, 1) : d;
  return {
    time: (t.getHours() << 11) | (t.getMinutes() << 5) | (t.getSeconds() >> 1),
    date: ((t.getFullYear() - 1980) << 9) | ((t.getMonth() + 1) << 5) | t.getDate(),
  };
}

/** One entry being written: push its bytes in order, then end it. */
export interface ZipEntryWriter {
  /** Bytes of the entry's uncompressed data, in order. @throws the file system's error (ENOSPC, EFBIG…) */
  push(bytes: Uint8Array): void;
  /** Finish the data and write the local header's CRC-32 and sizes. @throws KerncapError E_ARCHIVE when the bytes pushed differ from the declared size */
  end(): void;
}

interface Written {
  name: Uint8Array;
  method: number;
  crc: number;
  csize: number;
  usize: number;
  localOffset: number;
  attrs: number;
  time: number;
  date: number;
  zip64Sizes: boolean;
}

/**
 * A zip written at fd (a new, empty regular file) from byte 0, one entry at a time, with positional
 * writes; `path` names the archive in a write's error (ENOSPC, EFBIG: src/errors.ts withPath).
 * `written()` gives the archive's length so far (bytes).
 */
export class ZipWriter {
  private pos = 0;
  private readonly entries: Written[] = [];
  private open = false;

  constructor(
    private readonly fd: number,
    private readonly path: string,
  ) {}

  written(): number {
    return this.pos;
  }

  private write(b: Uint8Array, at: number): void {
    try {
      for (let o = 0; o < b.length; ) o += writeSync(this.fd, b, o, b.length - o, at + o);
    } catch (e) {
      throw withPath(e, this.path);
    }
  }

  /** Data bytes at the end; blocks of zeros are left as holes (the file is extended by ftruncate at the end). */
  private append(b: Uint8Array): void {
    try {
      writeSparse(this.fd, b, this.pos);
    } catch (e) {
      throw withPath(e, this.path);
    }
    this.pos += b.length;
  }

  /**
   * Start an entry. `usize`: its uncompressed bytes, as it will be pushed (it decides ZIP64
   * before the data, as the local header comes first); `mode`: Unix permission bits, recorded in
   * the external attributes; names ending in "/" are folders.
   */
  add(name: string, o: { deflate: boolean; mode: number; mtime: Date; usize: number }): ZipEntryWriter {
    if (this.open) throw new Error("ZipWriter: the previous entry was not ended");
    this.open = true;
    const nameBytes = new TextEncoder().encode(name);
    // deflate may grow incompressible data by its stored blocks' headers (5 bytes per 64 KiB): room for that
    const zip64Sizes = o.usize + Math.ceil(o.usize / 16384) + 1024 > ZIP32_MAX;
    const { time, date } = dosDateTime(o.mtime);
    const w: Written = {
      name: nameBytes,
      method: o.deflate ? 8 : 0,
      crc: 0,
      csize: 0,
      usize: 0,
      localOffset: this.pos,
      attrs: (((name.endsWith("/") ? 0o040000 : 0o100000) | o.mode) << 16) >>> 0,
      time,
      date,
      zip64Sizes,
    };
    const header = () => {
      const h = Buffer.alloc(30 + nameBytes.length + (zip64Sizes ? 20 : 0));
      h.writeUInt32LE(SIG_LOCAL, 0);
      h.writeUInt16LE(zip64Sizes ? 45 : 20, 4);
      h.writeUInt16LE(FLAG_UTF8, 6);
      h.writeUInt16LE(w.method, 8);
      h.writeUInt16LE(time, 10);
      h.writeUInt16LE(date, 12);
      h.writeUInt32LE(w.crc >>> 0, 14);
      h.writeUInt32LE(zip64Sizes ? ZIP32_MAX : w.csize, 18);
      h.writeUInt32LE(zip64Sizes ? ZIP32_MAX : w.usize, 22);
      h.writeUInt16LE(nameBytes.length, 26);
      h.writeUInt16LE(zip64Sizes ? 20 : 0, 28);
      h.set(nameBytes, 30);
      if (zip64Sizes) {
        const x = 30 + nameBytes.length;
        h.writeUInt16LE(EXTRA_ZIP64, x);
        h.writeUInt16LE(16, x + 2);
        h.writeBigUInt64LE(BigInt(w.usize), x + 4);
        h.writeBigUInt64LE(BigInt(w.csize), x + 12);
      }
      return h;
    };
    const first = header();
    this.write(first, this.pos);
    this.pos += first.length;
    const sink = (c: Uint8Array) => {
      w.csize += c.length;
      this.append(c);
    };
    const deflate = o.deflate ? new Deflate({ level: 6 }, (c) => sink(c)) : undefined;
    return {
      push: (b) => {
        if (!b.length) return;
        w.usize += b.length;
        w.crc = Bun.hash.crc32(b, w.crc);
        if (deflate) deflate.push(b, false);
        else sink(b);
      },
      end: () => {
        deflate?.push(new Uint8Array(0), true);
        if (w.usize !== o.usize)
          throw new KerncapError("E_ARCHIVE", `${name} had ${w.usize} bytes while it was packed, not ${o.usize}`, {
            hint: "Pack it again when nothing writes to the capture.",
          });
        if (w.csize > ZIP32_MAX && !zip64Sizes) throw new Error(`ZipWriter: ${name} deflated to ${w.csize} bytes without a ZIP64 record`);
        this.write(header(), w.localOffset);
        this.entries.push(w);
        this.open = false;
      },
    };
  }

  /** Write the central directory and its end records, and give the file its full length (trailing holes). @returns the archive's length (bytes) */
  end(): number {
    const cdOff = this.pos;
    for (const w of this.entries) {
      const wide = { usize: w.zip64Sizes || w.usize >= ZIP32_MAX, csize: w.zip64Sizes || w.csize >= ZIP32_MAX, offset: w.localOffset >= ZIP32_MAX };
      const fields = [wide.usize && w.usize, wide.csize && w.csize, wide.offset && w.localOffset].filter((x): x is number => x !== false);
      const xlen = fields.length ? 4 + 8 * fields.length : 0;
      const r = Buffer.alloc(46 + w.name.length + xlen);
      r.writeUInt32LE(SIG_CENTRAL, 0);
      r.writeUInt16LE(fields.length ? 0x032d : 0x0314, 4); // made by: Unix, spec 4.5 (ZIP64) or 2.0
      r.writeUInt16LE(fields.length ? 45 : 20, 6);
      r.writeUInt16LE(FLAG_UTF8, 8);
      r.writeUInt16LE(w.method, 10);
      r.writeUInt16LE(w.time, 12);
      r.writeUInt16LE(w.date, 14);
      r.writeUInt32LE(w.crc >>> 0, 16);
      r.writeUInt32LE(wide.csize ? ZIP32_MAX : w.csize, 20);
      r.writeUInt32LE(wide.usize ? ZIP32_MAX : w.usize, 24);
      r.writeUInt16LE(w.name.length, 28);
      r.writeUInt16LE(xlen, 30);
      r.writeUInt32LE(w.attrs, 38);
      r.writeUInt32LE(wide.offset ? ZIP32_MAX : w.localOffset, 42);
      r.set(w.name, 46);
      if (fields.length) {
        const x = 46 + w.name.length;
        r.writeUInt16LE(EXTRA_ZIP64, x);
        r.writeUInt16LE(8 * fields.length, x + 2);
        fields.forEach((v, i) => r.writeBigUInt64LE(BigInt(v), x + 4 + 8 * i));
      }
      this.write(r, this.pos);
      this.pos += r.length;
    }
    const cdSize = this.pos - cdOff;
    const n = this.entries.length;
    if (n >= ZIP16_MAX || cdOff >= ZIP32_MAX || cdSize >= ZIP32_MAX) {
      const end64 = Buffer.alloc(56 + 20);
      end64.writeUInt32LE(SIG_END64, 0);
      end64.writeBigUInt64LE(44n, 4); // the record's size after this field
      end64.writeUInt16LE(0x032d, 12);
      end64.writeUInt16LE(45, 14);
      end64.writeBigUInt64LE(BigInt(n), 24);
      end64.writeBigUInt64LE(BigInt(n), 32);
      end64.writeBigUInt64LE(BigInt(cdSize), 40);
      end64.writeBigUInt64LE(BigInt(cdOff), 48);
      end64.writeUInt32LE(SIG_LOCATOR64, 56);
      end64.writeBigUInt64LE(BigInt(this.pos), 56 + 8);
      end64.writeUInt32LE(1, 56 + 16);
      this.write(end64, this.pos);
      this.pos += end64.length;
    }
    const end = Buffer.alloc(22);
    end.writeUInt32LE(SIG_END, 0);
    end.writeUInt16LE(Math.min(n, ZIP16_MAX), 8);
    end.writeUInt16LE(Math.min(n, ZIP16_MAX), 10);
    end.writeUInt32LE(Math.min(cdSize, ZIP32_MAX), 12);
    end.writeUInt32LE(Math.min(cdOff, ZIP32_MAX), 16);
    this.write(end, this.pos);
    this.pos += end.length;
    try {
      ftruncateSync(this.fd, this.pos);
    } catch (e) {
      throw withPath(e, this.path);
    }
    return this.pos;
  }
}

/**
 * An archive opened for reading: O_NONBLOCK (a FIFO named as the archive, or renamed over it, is
 * never waited on: adversary 68), then fstat; read from this descriptor only. The caller closes it.
 * @throws KerncapError E_USAGE when it is no regular file (a FIFO, a device, a folder); the open's own error (ENOENT…)
 */
export function openArchiveFile(archive: string): number {
  const fd = openSync(archive, constants.O_RDONLY | constants.O_NONBLOCK);
  if (fstatSync(fd).isFile()) return fd;
  closeSync(fd);
  throw new KerncapError("E_USAGE", `${archive} is not a file`, { hint: "Give the .zip that `kerncap pack` wrote." });
}
