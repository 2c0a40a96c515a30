/**
 * `kerncap unpack`: an archive that pack wrote, checked before anything is written (the index,
 * every entry against it, sizes against the archived manifest: planUnpack), then streamed into a
 * temp folder with every CRC-32 and size checked as it goes (streamEntry), the capture checked,
 * and the folder renamed into place (./archive.ts has the design).
 */
import { oneLine } from "../escape.ts";
import { Inflate } from "fflate";
import * as v from "valibot";
import { chmodSync, closeSync, existsSync, fstatSync, ftruncateSync, mkdirSync, openSync, readSync, rmSync, type Stats, writeSync } from "node:fs";
import { dirname, join, posix, resolve, sep } from "node:path";
import { makePrivateTemp, type PrivateTemp } from "../util/write-file.ts";
import { KerncapError, withPath } from "../errors.ts";
import { didYouMean } from "./near-names.ts";
import { markTemp, TEMP_MARKER, tempFor } from "../leftovers.ts";
import { StopSignals } from "../process-group.ts";
import { markReceived } from "./received.ts";
import { keepBesideHint, sayWhatForceLoses } from "./force-losses.ts";
import { replaceFolder } from "../util/replace-folder.ts";
import { assertNotNested, assertReplaceable, readManifest, replaceableKind, verifyFiles, verifyRegionsAsync } from "./capture-dir.ts";
import { checkWorkProblem, imageBound } from "./chunks.ts";
import { checkListedFolders, checkUnpackBounds } from "./unpack-bounds.ts";
import { MANIFEST_FILE, parseManifest, type Manifest } from "./manifest.ts";
import { dataExtentsOfFd, readSparse, writeSparse, type Extent } from "./sparse-extents.ts";
import { badArchive as bad, centralDirectory, DEFLATE_MAX_RATIO, openArchiveFile, type CdEntry } from "./zip.ts";
import { JSON_MAX_DEPTH, jsonDepth } from "./json-position.ts";
import {
  type ArchiveProgress,
  assertOutputPath,
  escapedForMessage,
  FILE_MODE_MASK,
  FOLDER_MODE,
  INFLATE_PIECE,
  interruptCheck,
  PACK_INDEX,
  PACK_SCHEMA,
  type PackedFile,
  type PackIndex,
  PIECE,
  realPathLoose,
  refuseUnsafeNames,
  removeStale,
  safeEntryPath,
  SPARSE_SUFFIX,
  type UnpackResult,
  unsafeEntryName,
} from "./archive-common.ts";

/**
 * Stream one entry's uncompressed bytes (stored or deflated) to sink, in pieces, checking its
 * CRC-32 and its size against `limit` (bytes: the size the index gives it, which the central
 * directory's must equal) as it goes: a deflated entry is pushed INFLATE_PIECE compressed bytes at a
 * time, and the first piece that takes the count past `limit` ends it, so a decompression bomb
 * costs at most one piece's output. `tick` runs between pieces (the interrupt check).
 * @throws KerncapError E_ARCHIVE; the sink's own errors (ENOSPC, EFBIG…) as they are, never blamed
 *   on the archive
 */
async function streamEntry(
  archive: string,
  fd: number,
  e: CdEntry,
  limit: number,
  sink: (chunk: Uint8Array) => void,
  tick: () => Promise<void>,
  data: ArchiveData = { extents: [[0, Number.MAX_SAFE_INTEGER]], size: Number.MAX_SAFE_INTEGER },
): Promise<void> {
  if (e.flags & 1) throw bad(archive, `${e.name} is encrypted`);
  if (e.usize !== limit) throw bad(archive, `${e.name}: the central directory declares ${e.usize} bytes, ${PACK_INDEX} ${limit}`);
  if (e.method === 0 && e.csize !== e.usize) throw bad(archive, `${e.name} is stored with ${e.csize} bytes but declares ${e.usize}`);
  // an honest deflate stream gives at most DEFLATE_MAX_RATIO bytes per byte: a larger claim is refused before inflating
  if (e.method === 8 && e.usize > e.csize * DEFLATE_MAX_RATIO + 1024)
    throw bad(archive, `${e.name} declares ${e.usize} bytes from ${e.csize} compressed bytes, more than deflate can give (${DEFLATE_MAX_RATIO}:1)`);
  const start = e.dataOffset;
  let crc = 0;
  let n = 0;
  const take = (c: Uint8Array) => {
    if (!c.length) return;
    n += c.length;
    if (n > limit) throw bad(archive, `${e.name} inflates past its declared size of ${limit} bytes (a decompression bomb?); stopped at ${n} bytes`);
    crc = Bun.hash.crc32(c, crc);
    sink(c);
  };
  let inflate: Inflate | undefined;
  if (e.method === 8) inflate = new Inflate((c) => take(c));
  else if (e.method !== 0) throw bad(archive, `${e.name} uses compression method ${e.method} (kerncap reads stored and deflated entries)`);
  if (inflate && e.csize === 0) throw bad(archive, `${e.name}: an empty deflate stream`);
  const piece = inflate ? INFLATE_PIECE : PIECE;
  // a stored piece is written before the next read: one buffer serves (the inflater may keep what it is given)
  const stored = inflate ? undefined : new Uint8Array(Math.min(PIECE, e.csize));
  let sinceTick = 0;
  for (let done = 0; done < e.csize; ) {
    const k = Math.min(piece, e.csize - done);
    const b = stored ? stored.subarray(0, k) : new Uint8Array(k);
    if (readSparse(fd, b, start + done, data.extents, data.size) !== k) throw bad(archive, `truncated inside ${e.name}`);
    done += k;
    try {
      if (inflate) inflate.push(b, done === e.csize);
      else take(b);
    } catch (err) {
      // the sink's write failing (a full disk, a file-size limit) is the output's fault, not the archive's
      if (err instanceof KerncapError || typeof (err as NodeJS.ErrnoException).code === "string") throw err;
      throw bad(archive, `${e.name} does not inflate: ${(err as Error).message}`);
    }
    sinceTick += k;
    if (sinceTick >= PIECE) (sinceTick = 0), await tick();
  }
  if (n !== limit) throw bad(archive, `${e.name} has ${n} bytes, the archive says ${limit}`);
  if (crc >>> 0 !== e.crc) throw bad(archive, `CRC-32 mismatch in ${e.name}`);
}

const noTick = async () => {};

/** The archive's data extents and size (bytes): its holes (runs of zeros that pack left unwritten) are not read. */
type ArchiveData = { extents: Extent[]; size: number };

/** A small entry (the index, the manifest: at most 64 MiB) as JSON. @throws KerncapError E_ARCHIVE */
async function jsonEntry(archive: string, fd: number, e: CdEntry, what: string): Promise<unknown> {
  if (e.usize > 64 << 20) throw bad(archive, `${what} is ${e.usize} bytes`);
  const parts: Uint8Array[] = [];
  await streamEntry(archive, fd, e, e.usize, (c) => parts.push(c.slice()), noTick);
  const text = new TextDecoder().decode(Buffer.concat(parts));
  if (jsonDepth(text) > JSON_MAX_DEPTH) throw bad(archive, `${what} nests ${jsonDepth(text)} levels deep (kerncap's own nest fewer than ${JSON_MAX_DEPTH})`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw bad(archive, `${what} is not JSON: ${(err as Error).message}`);
  }
}

const Count = v.pipe(v.number(), v.safeInteger(), v.minValue(0));

/** The index as pack writes it (PackIndex); anything else in an archive is refused before it is used. */
const PackIndexSchema = v.object({
  schema: v.literal(PACK_SCHEMA),
  root: v.string(),
  tool: v.string(),
  files: v.array(
    v.object({
      path: v.string(),
      size: Count,
      mode: v.pipe(Count, v.maxValue(0o7777)),
      entry: v.string(),
      method: v.picklist(["deflated", "stored", "sparse"]),
      extents: v.optional(v.array(v.strictTuple([Count, Count]))),
    }),
  ),
  dirs: v.array(v.string()),
  warnings: v.array(v.string()),
});

/**
 * Read the index entry; first, every entry's extra fields are held to what pack writes (only
 * ZIP64: CdEntry.oddExtra), as unzip acts on others (it names an entry by its Unicode Path field).
 * @throws KerncapError E_ARCHIVE when absent or malformed, or an entry carries an extra field pack never writes
 */
async function readIndex(archive: string, fd: number, entries: CdEntry[]): Promise<PackIndex> {
  const e = entries.find((x) => x.name.split("/").length === 2 && x.name.endsWith(`/${PACK_INDEX}`));
  if (!e) {
    // the unzip hint only for an archive whose every name stays inside a folder (no absolute name, no ..), as unzip may name it
    const unsafe = entries.flatMap((x) => [x.name, ...x.altNames]).find((n) => unsafeEntryName(n));
    if (unsafe !== undefined)
      throw new KerncapError(
        "E_ARCHIVE",
        `${archive} has no ${PACK_INDEX} (not written by \`kerncap pack\`) and is refused as unsafe: entry ${escapedForMessage(unsafe)} would be written outside the folder it is unpacked into`,
        { hint: "Do not unpack it with another tool either; ask the sender for an archive made by kerncap pack. Nothing was unpacked." },
      );
    throw new KerncapError("E_ARCHIVE", `${archive} has no ${PACK_INDEX}: not written by \`kerncap pack\``, {
      hint: "Its entries' names stay inside a folder: unpack it with unzip if it is a plain zip of a capture folder.",
    });
  }
  const odd = entries.find((x) => x.oddExtra);
  if (odd)
    throw new KerncapError(
      "E_ARCHIVE",
      `${archive}: ${escapedForMessage(odd.name)} carries ${odd.oddExtra}, which \`kerncap pack\` never writes: another reader (unzip) could unpack it differently from kerncap`,
      { hint: "Ask the sender to pack the capture again with `kerncap pack` (it writes no such field); nothing was unpacked." },
    );
  const json = await jsonEntry(archive, fd, e, PACK_INDEX);
  const schema = (json as { schema?: unknown } | null)?.schema;
  if (schema !== PACK_SCHEMA) {
    throw new KerncapError("E_ARCHIVE", `${archive}: ${PACK_INDEX} is not a ${PACK_SCHEMA} index (schema ${JSON.stringify(schema)})`, {
      hint: "Upgrade kerncap to the version that packed it.",
    });
  }
  const r = v.safeParse(PackIndexSchema, json, { abortEarly: true });
  if (!r.success)
    throw bad(
      archive,
      `${PACK_INDEX} is malformed: ${r.issues
        .slice(0, 3)
        .map((i) => `${oneLine(v.getDotPath(i) ?? "(root)")}: ${oneLine(i.message)}`)
        .join("; ")}`,
    );
  return r.output;
}

/** The index of an archive (what `kerncap unpack` would write), without unpacking it. */
export async function readPackIndex(archive: string): Promise<PackIndex> {
  const fd = openArchiveFile(archive);
  try {
    return await readIndex(archive, fd, centralDirectory(archive, fd, fstatSync(fd).size));
  } finally {
    closeSync(fd);
  }
}

/**
 * Bytes of a file's entry as the index describes it (its size; a sparse file: the sum of its
 * extents, which must be ascending, disjoint and inside the size). @throws KerncapError E_ARCHIVE
 */
function declaredBytes(archive: string, f: PackedFile): number {
  const int = (x: unknown) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
  if (!int(f.size) || !int(f.mode)) throw bad(archive, `${f.entry}: bad size or mode in ${PACK_INDEX}`);
  if (f.method !== "sparse") return f.size;
  let end = 0;
  let sum = 0;
  for (const x of f.extents ?? []) {
    if (!Array.isArray(x) || !int(x[0]) || !int(x[1]) || x[0] < end || x[0] + x[1] > f.size)
      throw bad(archive, `${f.entry}: bad extent ${JSON.stringify(x)} in ${PACK_INDEX}`);
    end = x[0] + x[1];
    sum += x[1];
  }
  return sum;
}

/** One file to unpack: its index record, its zip entry, and the bytes the entry holds. */
interface Planned {
  file: PackedFile;
  entry: CdEntry;
  bytes: number;
}

/**
 * Every check of an archive that needs no writing, with the capture's manifest read from the
 * archive (ROOT/kerncap.json, parsed and checked as readManifest does):
 *  - each entry is one the index knows, each index record has its entry, no path twice, no file
 *    where a folder is (names are unique and streams disjoint already: src/format/zip.ts);
 *  - the apparent size of every file is one the manifest allows: a file it lists has the size
 *    its files[] gives, a memory image the size memory.beforeFileBytes/afterFileBytes gives and
 *    at most what its regions' layout holds (imageBound); only the memory images may be sparse,
 *    so every other file's size is its stored bytes (bounded by deflate's ratio, streamEntry).
 * @returns the files in index order
 * @throws KerncapError E_ARCHIVE naming the file and the bound, E_MANIFEST* for the archived manifest
 */
async function planUnpack(archive: string, fd: number, idx: PackIndex, entries: CdEntry[], dest: string): Promise<Planned[]> {
  const byName = new Map(entries.map((e) => [e.name, e]));
  const known = new Set([`${idx.root}/${PACK_INDEX}`, ...idx.files.map((f) => f.entry), ...idx.dirs.map((d) => `${idx.root}/${d}/`)]);
  // an empty folder entry above a listed file (zip -r writes one per folder: nu12 #18) names a folder unpack makes anyway
  const above = new Set(
    idx.files.flatMap((f) =>
      f.entry
        .split("/")
        .slice(0, -1)
        .map((_, i, parts) => `${parts.slice(0, i + 1).join("/")}/`),
    ),
  );
  for (const e of entries)
    if (!known.has(e.name) && !(above.has(e.name) && e.usize === 0)) throw bad(archive, `entry ${JSON.stringify(e.name)} is not in ${PACK_INDEX}`);
  checkListedFolders(archive, idx, byName);
  for (const p of [...idx.dirs, ...idx.files.map((f) => f.path)]) safeEntryPath(archive, dest, p); // zip-slip, before anything else
  const folders = new Set(idx.dirs.map((d) => d.replace(/\/+$/, "")));
  const paths = new Set<string>();
  for (const f of idx.files) {
    const key = f.path.replace(/\/+$/, "");
    if (paths.has(key)) throw bad(archive, `${PACK_INDEX} lists ${f.path} twice`);
    paths.add(key);
  }
  for (const p of paths) {
    for (let up = posix.dirname(p); up !== "."; up = posix.dirname(up))
      if (paths.has(up)) throw bad(archive, `${PACK_INDEX} lists ${up} as a file and ${p} inside it`);
    if (folders.has(p)) throw bad(archive, `${PACK_INDEX} lists ${p} both as a file and as a folder`);
  }
  const used = new Set<string>();
  const planned = idx.files.map((f) => {
    const entry = byName.get(f.entry);
    if (!entry) throw bad(archive, `${f.entry} is missing`);
    // one entry, one file (adversary 61: memory/after.bin as sparse and memory/after.bin.kcsparse as stored named one entry)
    if (used.has(f.entry)) throw bad(archive, `${PACK_INDEX} names the entry ${f.entry} for two files`);
    used.add(f.entry);
    if (f.entry !== `${idx.root}/${f.path}${f.method === "sparse" ? SPARSE_SUFFIX : ""}`) throw bad(archive, `${f.entry} does not name ${f.path}`);
    const bytes = declaredBytes(archive, f);
    if (entry.usize !== bytes) throw bad(archive, `${entry.name}: the central directory declares ${entry.usize} bytes, ${PACK_INDEX} ${bytes}`);
    return { file: f, entry, bytes };
  });
  const manifestEntry = byName.get(`${idx.root}/${MANIFEST_FILE}`);
  if (!manifestEntry) throw bad(archive, `it holds no ${MANIFEST_FILE}: not a capture`);
  const m = parseManifest(await jsonEntry(archive, fd, manifestEntry, MANIFEST_FILE), `${archive}: ${MANIFEST_FILE}`);
  const work = checkWorkProblem(m, fstatSync(fd).size); // before anything is written
  if (work) throw bad(archive, work);
  const listed = new Map(m.files.map((f) => [posix.normalize(f.path), f.size]));
  const images = new Map(
    (["before", "after"] as const).map((w) => [
      posix.normalize(m.memory[w]),
      { bytes: w === "before" ? m.memory.beforeFileBytes : m.memory.afterFileBytes, bound: imageBound(m) },
    ]),
  );
  for (const { file: f } of planned) {
    const image = images.get(f.path);
    const want = image?.bytes ?? listed.get(f.path);
    if (want !== undefined && f.size !== want) throw bad(archive, `${f.path} would be ${f.size} bytes; the manifest says ${want}`);
    if (image && image.bytes > image.bound)
      throw bad(archive, `${f.path}: the manifest gives it ${image.bytes} bytes, more than its regions and globals can fill (${image.bound} bytes)`);
    if (f.method === "sparse" && !image)
      throw bad(archive, `${f.path} is packed sparse (holes), but only the manifest's memory images are: its size ${f.size} is not bounded by its data`);
  }
  checkUnpackBounds(
    archive,
    planned.map((p) => ({ path: p.file.path, bytes: p.bytes, stored: p.entry.csize, sized: images.has(p.file.path) || listed.has(p.file.path) })),
    dest,
  );
  return planned;
}

/**
 * Mode bits unpack gives a file: the archive's, without group/other write, special or execute
 * bits, always owner read/write. An archive names its own root folder, so unpacked in the home
 * folder a root `bin` would put the sender's executables on the user's PATH (a trial: ~/bin/ls,
 * then ~/bin/build.sh); no file of a capture is run as a program by its mode (kerncap runs
 * build.sh with bash, src/ is compiled, repro.py run by the interpreter).
 */
export function unpackedMode(mode: number): number {
  return ((mode & FILE_MODE_MASK) | 0o600) & ~0o111;
}

/**
 * Unpack an archive written by packCapture into `outArg` (default: ./ROOT), written as
 * DIR.tmp-<pid> and renamed when every entry has been written and the capture checks (every
 * file's SHA-256, every stored memory chunk's kc64). Sparse files are recreated with their holes
 * (each extent written at its offset, then the size set). File modes are masked (unpackedMode).
 * @throws KerncapError E_ARCHIVE (damaged, zip-slip, CRC, sizes past the declared ones),
 *   E_EXISTS (DIR exists, no force), E_CHECKSUM (naming the file, or the region and chunk),
 *   E_INTERRUPTED (exit 130 SIGINT, 143 SIGTERM; the temp is removed)
 * `opts.onOpened`: given the fstat of the archive as opened (the file whose bytes are unpacked).
 */
/** unpackArchive's options. */
export interface UnpackOptions {
  /** Replace a capture at the destination (what it loses said first: src/format/force-losses.ts). */
  force?: boolean;
  onProgress?: ArchiveProgress;
  /** The archive file as opened (its owner and mode, for a caller that holds them against it). */
  onOpened?: (st: Stats) => void;
  /** The files kerncap generates in a capture of manifest `m` (capture-relative: the CUDA slice src/…kerncap-slice.cu): made again, so never "your edits" that --force loses. */
  generated?: (m: Manifest) => string[];
}

export async function unpackArchive(archiveArg: string, outArg: string | undefined, opts: UnpackOptions = {}): Promise<UnpackResult> {
  const stops = new StopSignals().install();
  try {
    return await unpack(archiveArg, outArg, opts, interruptCheck(stops, "unpack"));
  } finally {
    stops.dispose();
  }
}

async function unpack(archiveArg: string, outArg: string | undefined, opts: UnpackOptions, tick: () => Promise<void>): Promise<UnpackResult> {
  const t0 = performance.now();
  const archive = resolve(archiveArg);
  if (!existsSync(archive))
    throw new KerncapError("E_USAGE", `no such archive: ${archive}`, { hint: `Give the .zip that \`kerncap pack\` wrote.${didYouMean(archive)}` });
  // opened once and read from this descriptor only, its data extents too (adversary 68: a FIFO swapped in after the open hung unpack)
  const fd = openArchiveFile(archive);
  let t: PrivateTemp | undefined;
  let dest: string | undefined;
  try {
    const opened = fstatSync(fd);
    opts.onOpened?.(opened); // the file read, whose owner and mode the caller may hold against it (check: another user's archive)
    const entries = centralDirectory(archive, fd, opened.size);
    const idx = await readIndex(archive, fd, entries);
    refuseUnsafeNames(archive, idx);
    dest = resolve(outArg ?? idx.root);
    const realArchive = realPathLoose(archive);
    const realDest = realPathLoose(dest);
    if (archive === dest || archive.startsWith(dest + sep) || realArchive === realDest || realArchive.startsWith(realDest + sep))
      throw new KerncapError(
        "E_USAGE",
        `the archive ${archive}${realArchive !== archive ? ` (${realArchive})` : ""} lies inside ${dest}, the folder it would be unpacked into`,
        { hint: "Unpack it somewhere else (-o DIR), or move the archive out of that folder first." },
      );
    const existed = existsSync(dest);
    // a copy beside the original needs another name: the hint says that first (--force replaces the original, its edits with it)
    if (existed) assertReplaceable(dest, Boolean(opts.force), undefined, keepBesideHint(dest, archiveArg, outArg ?? idx.root));
    assertOutputPath(dest, "capture folder");
    assertNotNested(dest, { output: true }); // unpacked inside a capture it would be that capture's content, never a capture
    // every check that needs no writing comes first: a refused archive leaves nothing behind
    const plan = await planUnpack(archive, fd, idx, entries, dest);
    const data = dataExtentsOfFd(fd);
    removeStale(dest, "unpack");
    // made 0700 and held open: every file goes in through its fd, never by a name another user may swap (src/util/write-file.ts)
    t = makePrivateTemp(tempFor(dest));
    const tmp = t.at;
    markTemp(tmp); // known as kerncap's if this unpack is killed (src/leftovers.ts)
    const made = new Set<string>([tmp]);
    // each folder by itself, chmod'ed: mkdir's mode is cut by the umask (0777 under umask 000), a chmod is not
    const folder = (p: string) => {
      if (made.has(p)) return;
      folder(dirname(p));
      mkdirSync(p);
      chmodSync(p, FOLDER_MODE);
      made.add(p);
    };
    for (const d of idx.dirs) folder(safeEntryPath(archive, tmp, d));
    const { sparseFiles, filesBytes, dataBytes } = await writeFiles(archive, fd, tmp, dest, plan, folder, data, opts, tick);
    chmodSync(tmp, FOLDER_MODE);
    // the capture's own checks (manifest, per-file checksums, memory image sizes, every stored chunk's kc64) before the rename
    try {
      const m = readManifest(tmp);
      verifyFiles(tmp, m);
      await verifyRegionsAsync(tmp, m, tick, opts.onProgress && ((done, total) => opts.onProgress!("checking", done, total)));
    } catch (e) {
      if (!(e instanceof KerncapError) || e.code === "E_INTERRUPTED") throw e;
      throw new KerncapError(e.code, `${archive}: ${t.shown(e.message, dest)}`, {
        hint: "The capture in the archive was altered after it was packed (its CRC-32s were recomputed); ask for it again. Nothing was unpacked.",
      });
    }
    await tick(); // the last point before the rename: a signal until here leaves nothing
    replaceWithTemp(t, dest, existed, idx, archive, opts.generated);
    return {
      archive,
      dir: dest,
      files: idx.files.length,
      sparseFiles,
      bytes: { files: filesBytes, data: dataBytes },
      warnings: idx.warnings ?? [],
      seconds: (performance.now() - t0) / 1000,
    };
  } catch (e) {
    throw t && dest ? t.unfd(e, dest) : e; // no /proc/self/fd path reaches the user
  } finally {
    closeSync(fd);
    t?.dispose();
  }
}

/**
 * Whether `path` begins as `kerncap pack` writes an archive, whatever follows: its first local file
 * header (ZIP's `PK\x03\x04` at offset 0) names `ROOT/kerncap-pack.json`, the index pack writes
 * first. An archive cut short (a copy interrupted) still begins so, though its central directory is
 * gone and isPackArchive says false: `check` counts it as a capture, whose unpack then says what
 * is wrong (E_ARCHIVE), instead of passing it over as some other .zip.
 */
export function beginsAsPackArchive(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openArchiveFile(path);
    const head = Buffer.alloc(30 + 512);
    const n = readSync(fd, head, 0, head.length, 0);
    if (n < 30 || head.readUInt32LE(0) !== 0x04034b50) return false;
    const nameLength = head.readUInt16LE(26);
    if (30 + nameLength > n) return false;
    return /^[^/]+\/kerncap-pack\.json$/.test(head.subarray(30, 30 + nameLength).toString("latin1"));
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Whether `path` is an archive that kerncap pack wrote: a zip whose central directory names ROOT/kerncap-pack.json. Never throws. */
export async function isPackArchive(path: string): Promise<boolean> {
  let fd: number | undefined;
  try {
    fd = openArchiveFile(path);
    const entries = centralDirectory(path, fd, fstatSync(fd).size);
    return entries.some((e) => e.name.endsWith(`/${PACK_INDEX}`) && e.name.split("/").length === 2);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Write every planned file under `tmp` (folders made by `folder`), streamed from the archive with
 * its CRC-32 and size checked: a sparse one extent by extent at its offsets, the others with
 * blocks of zeros left as holes; modes masked (unpackedMode).
 * @returns sparse files, the files' bytes (apparent sizes) and the entries' data bytes
 * @throws KerncapError E_ARCHIVE; the file system's errors with the file's path in `dest`
 */
async function writeFiles(
  archive: string,
  fd: number,
  tmp: string,
  dest: string,
  plan: Planned[],
  folder: (p: string) => void,
  data: ArchiveData,
  opts: { onProgress?: ArchiveProgress },
  tick: () => Promise<void>,
): Promise<{ sparseFiles: number; filesBytes: number; dataBytes: number }> {
  let sparseFiles = 0;
  let filesBytes = 0;
  let dataBytes = 0;
  const unpackTotal = plan.reduce((a, p) => a + p.entry.usize, 0);
  let unpacked = 0;
  const progress = opts.onProgress && ((c: Uint8Array) => opts.onProgress!("unpacking", (unpacked += c.length), unpackTotal));
  progress?.(new Uint8Array(0));
  for (const { file: f, entry: e, bytes } of plan) {
    const p = safeEntryPath(archive, tmp, f.path);
    folder(dirname(p));
    const out = openSync(p, "w", 0o600);
    try {
      if (f.method === "sparse") {
        sparseFiles++;
        const ext = f.extents ?? [];
        let x = 0; // current extent
        let inX = 0; // bytes of it written
        await streamEntry(
          archive,
          fd,
          e,
          bytes,
          (c) => {
            progress?.(c);
            for (let o = 0; o < c.length; ) {
              const cur = ext[x];
              if (!cur) throw bad(archive, `${f.entry} holds more bytes than its extents`);
              const n = Math.min(c.length - o, cur[1] - inX);
              writeSync(out, c, o, n, cur[0] + inX);
              o += n;
              inX += n;
              if (inX === cur[1]) x++, (inX = 0);
            }
          },
          tick,
          data,
        );
        while (x < ext.length && ext[x]![1] === 0) x++; // empty extents hold no bytes
        if (x !== ext.length) throw bad(archive, `${f.entry} holds fewer bytes than its extents`);
      } else {
        // blocks of zeros are left as holes: a stored run of zeros costs no disk here either
        let at = 0;
        await streamEntry(
          archive,
          fd,
          e,
          bytes,
          (c) => {
            progress?.(c);
            writeSparse(out, c, at);
            at += c.length;
          },
          tick,
          data,
        );
      }
      ftruncateSync(out, f.size); // the trailing hole; earlier holes were never written
    } catch (err) {
      throw withPath(err, join(dest, f.path));
    } finally {
      closeSync(out);
    }
    chmodSync(p, unpackedMode(f.mode));
    filesBytes += f.size;
    dataBytes += e.usize;
  }
  return { sparseFiles, filesBytes, dataBytes };
}

/**
 * Put the checked temp folder at `dest` (the received mark written first: src/format/received.ts): a folder that
 * appeared there meanwhile is refused, one that existed (--force) is replaced through a private holder
 * (src/util/replace-folder.ts: judged again there, never another folder swapped in at the name; what it loses warned of).
 * @throws KerncapError E_EXISTS, E_UNSAFE_PATH (the folder at `dest` was swapped for one that is no capture)
 */
function replaceWithTemp(t: PrivateTemp, dest: string, existed: boolean, idx: PackIndex, archive: string, generated?: UnpackOptions["generated"]): void {
  const appeared = () =>
    new KerncapError("E_EXISTS", `${dest} appeared while unpacking (another kerncap writing there?); nothing was replaced`, {
      hint: "Unpack again (it then says whether --force may replace what is there), or choose another -o.",
    });
  const place = (d: string) => {
    markReceived(t.at, archive); // validate asks before running its build.sh (src/format/trust.ts)
    rmSync(join(t.at, TEMP_MARKER), { force: true });
    try {
      t.placeAt(d); // refused when another user swapped the folder at the temp's name
    } catch (e) {
      // another unpack or run renamed its folder there between the check above and this rename
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") throw appeared();
      throw e;
    }
  };
  if (!existsSync(dest)) return place(dest);
  // a folder that appeared while this unpack ran (another unpack or run to the same place) is not ours to replace
  if (!existed) throw appeared();
  replaceFolder(dest, {
    refuse: (old) => (replaceableKind(old) ? undefined : "not a kerncap capture nor an empty folder"),
    before: (old) => sayWhatForceLoses(old, t.at, idx, dest, generatedIn(old, generated)),
    place,
  });
}

/** The generated files of the capture at `dir` (UnpackOptions.generated), none where its manifest does not read (a capture set, a damaged one). */
function generatedIn(dir: string, generated: UnpackOptions["generated"]): string[] {
  if (!generated) return [];
  try {
    return generated(readManifest(dir));
  } catch {
    return [];
  }
}
