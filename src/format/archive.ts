/**
 * One-file archives of a capture folder (`kerncap pack` / `kerncap unpack`): a zip (ZIP64 where
 * needed) written and read by src/format/zip.ts, deflated and inflated by fflate's streaming
 * `Deflate`/`Inflate`. Nothing holds a whole file in memory: every file is read and written in
 * PIECE-byte pieces; holes are not read, and blocks of zeros are written as holes.
 *
 * Format-agnostic: every file under the folder is archived as it is (the manifest, module, memory
 * images in whatever layout the manifest version uses, the reproducer). The archive:
 *   ROOT/kerncap-pack.json     the index (first entry, deflated): every file's path, size, mode,
 *                              entry name and, for a sparse file, its data extents
 *   ROOT/<path>                a file: deflated when text (no NUL in its first 8 KiB, no hole),
 *                              stored otherwise (holes read as zeros, left as holes on both sides)
 *   ROOT/<path>.kcsparse       a memory image with holes (SEEK_DATA/SEEK_HOLE): only its data
 *                              extents, concatenated, stored; unpack writes each extent at its
 *                              offset and sets the size, so the holes come back as holes. Only
 *                              the memory images: their size is bounded by the manifest's regions
 *   ROOT/<dir>/                every folder (so empty ones survive)
 * ROOT is the capture folder's name. Only regular files inside the folder are archived: a symbolic
 * link anywhere in it is refused (E_PACK_LINK, naming it), as is a hard link (the capture path rule,
 * src/format/paths.ts; verifyFiles applies it to the files the manifest lists). A file or folder name that is not UTF-8 is refused
 * (E_PACK_NAME, naming it with \xHH escapes): zip entry names and the JSON index are UTF-8, and a
 * reproducer file silently left out would break its build elsewhere. Plain `unzip` gives the dense files as they are, and the
 * sparse ones only as their packed data: `kerncap unpack` is the reader.
 *
 * Unpack refuses, before writing anything (planUnpack, and zip.ts centralDirectory): two entries
 * of one name, entries sharing data, entries that would land outside the target folder
 * (zip-slip), encrypted entries, an index or manifest that does not parse, a file the manifest
 * lists at another size, a memory image larger than its regions allow, a sparse entry for any
 * other file, a deflated entry declaring more than deflate's 1032:1 can give. While writing it
 * checks every entry's CRC-32 and size: a deflated entry is inflated INFLATE_PIECE compressed
 * bytes at a time with a running count that stops at the first byte past its declared size
 * (fflate inflates each push whole: 16 KiB in is at most ~16.5 MiB out). Folders are made 0755 and
 * files masked (unpackedMode), whatever the umask. docs/archives.md says why.
 *
 * Both directions check the capture itself (every file's SHA-256, every stored memory chunk's
 * kc64: verifyRegions), pack before writing, unpack before the rename. SIGINT/SIGTERM (src/
 * process-group.ts StopSignals) end either at the next piece: the temp is removed and
 * E_INTERRUPTED exits 130/143. Temps of kerncap processes that are gone (kill -9) next to the
 * target are removed by the next pack/unpack of it (src/leftovers.ts).
 */
import { Inflate } from "fflate";
import * as v from "valibot";
import { accessSync, chmodSync, closeSync, constants as fsConstants, existsSync, fstatSync, ftruncateSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, realpathSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { basename, dirname, isAbsolute, join, posix, resolve, sep } from "node:path";
import { KerncapError, withPath } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { markTemp, removeStaleTemps, TEMP_MARKER, tempFor } from "../leftovers.ts";
import { commitTemp, openTempBeside, refuseLink } from "../util/write-file.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import { markReceived, RECEIVED_MARK } from "./trust.ts";
import { TOOL_VERSION } from "../version.ts";
import { assertNotNested, assertReplaceable, readManifest, verifyFiles, verifyRegions } from "./capture-dir.ts";
import { imageBound } from "./chunks.ts";
import { MANIFEST_FILE, parseManifest, type Manifest } from "./manifest.ts";
import { refuseExisting, resolveInCapture } from "./paths.ts";
import { dataExtents, readSparse, writeSparse, type Extent } from "./sparse-extents.ts";
import { badArchive as bad, centralDirectory, DEFLATE_MAX_RATIO, ZipWriter, type CdEntry } from "./zip.ts";

export const PACK_INDEX = "kerncap-pack.json";
export const SPARSE_SUFFIX = ".kcsparse";
export const PACK_SCHEMA = "kerncap.pack/1";
/** Bytes read or written at once. */
const PIECE = 4 << 20;
/** Compressed bytes pushed into the inflater at once (bounds what one push can inflate to). */
const INFLATE_PIECE = 16 << 10;
/** Permission bits unpack applies at most: no group/other write, no setuid/setgid/sticky. */
const FILE_MODE_MASK = 0o755;
/**
 * Mode of every folder unpack makes: the files' mask (owner writes, others read and list), set by
 * chmod so that no umask (000 gave 0777 folders) lets another user add or swap a file in it.
 */
const FOLDER_MODE = 0o755;

/** One file of the packed folder, as the index records it. */
export interface PackedFile {
  /** Path inside the capture folder, `/`-separated. */
  path: string;
  /** Bytes of the file (holes included). */
  size: number;
  /** Permission bits (0o755 for build.sh). */
  mode: number;
  /** Entry name in the archive (ROOT/path, or ROOT/path.kcsparse). */
  entry: string;
  method: "deflated" | "stored" | "sparse";
  /** Sparse files: the data extents [offset, length] whose bytes the entry holds, in order. */
  extents?: Extent[];
}

export interface PackIndex {
  schema: typeof PACK_SCHEMA;
  root: string;
  tool: string;
  files: PackedFile[];
  dirs: string[];
  warnings: string[];
}

export interface PackResult {
  archive: string;
  dir: string;
  files: number;
  sparseFiles: number;
  /** Bytes: of the files (apparent sizes), of their data (holes left out), of the archive. */
  bytes: { files: number; data: number; archive: number };
  /** Reproducer paths that exist only on this machine (see portabilityWarnings); symbolic links left out. */
  warnings: string[];
  seconds: number;
}

export interface UnpackResult {
  archive: string;
  dir: string;
  files: number;
  sparseFiles: number;
  bytes: { files: number; data: number };
  /** The index's warnings, from pack time. */
  warnings: string[];
  seconds: number;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** A file name's bytes as printable text: valid UTF-8 characters kept (control characters excepted), every other byte as \xHH. */
export function escapedName(b: Uint8Array): string {
  let out = "";
  for (let i = 0; i < b.length; ) {
    let ch = "";
    for (let n = 1; n <= 4 && !ch && i + n <= b.length; n++) {
      try {
        ch = UTF8.decode(b.subarray(i, i + n)); // fatal: throws until the bytes are one whole character
      } catch {
        /* try one byte more */
      }
    }
    if (ch && !/[\x00-\x1f\x7f]/.test(ch)) {
      out += ch;
      i += Buffer.byteLength(ch);
    } else out += `\\x${b[i++]!.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/**
 * `p` with every symbolic link in it resolved, for a path that may not exist yet: the real path of
 * its longest existing ancestor, then the rest as written.
 */
function realPathLoose(p: string): string {
  let head = p;
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(head), ...rest.reverse());
    } catch {
      const up = dirname(head);
      if (up === head) return p;
      rest.push(basename(head));
      head = up;
    }
  }
}

/**
 * The folder build.sh and validate write their outputs into (the rebuilt module, the pruned build's
 * TU, plan and check record): left out of an archive, since the receiver rebuilds it and its files
 * carry the packer's PATH and absolute paths (a new user's trial found plan.json in a pack).
 */
export const BUILD_DIR = "build";

/**
 * Files and folders under dir (relative, `/`-separated, sorted): what pack archives. A symbolic
 * link anywhere in the folder is refused (a link to a folder would archive what it points to, a
 * home's .ssh/ for one), as is a file with another name elsewhere (a hard link); FIFOs, sockets
 * and devices are left out, and so is `build/` (BUILD_DIR).
 * Names are read as bytes: a name that is not UTF-8 (zip entry names and the index are UTF-8) is
 * refused.
 * @throws KerncapError E_PACK_NAME naming the file (its other bytes as \xHH) when a name is not
 *   UTF-8 or not portable (unportableName: unpack refuses it), E_PACK_LINK naming a symbolic link,
 *   E_UNSAFE_PATH naming a hard link.
 */
function walk(dir: string): { files: string[]; dirs: string[] } {
  const out = { files: [] as string[], dirs: [] as string[] };
  const go = (rel: string) => {
    const names: string[] = [];
    for (const raw of readdirSync(join(dir, rel), { encoding: "buffer" })) {
      let name: string;
      try {
        name = UTF8.decode(raw);
      } catch {
        const shown = `${rel ? `${rel}/` : ""}${escapedName(raw)}`;
        throw new KerncapError("E_PACK_NAME", `${join(dir, shown)}: the file name is not UTF-8, which a zip entry name must be`, {
          hint: `Rename it (e.g. mv with a UTF-8 name) or remove it, then pack again; it is not a file the manifest lists.`,
        });
      }
      // unpack refuses a backslash in an entry name (a Windows path separator: a way out of the folder)
      if (name.includes("\\")) {
        throw new KerncapError("E_PACK_NAME", `${join(dir, rel, name)}: the file name holds a backslash, which kerncap unpack refuses in an entry name`, { hint: "Rename it without the backslash (or remove it), then pack again." });
      }
      names.push(name);
    }
    for (const name of names.sort()) {
      if (name.endsWith(SPARSE_SUFFIX) && names.includes(name.slice(0, -SPARSE_SUFFIX.length))) {
        // a sparse file NAME is archived as NAME.kcsparse: the two entries would collide
        throw new KerncapError("E_PACK_NAME", `${join(dir, rel, name)}: its name is that of the entry of ${name.slice(0, -SPARSE_SUFFIX.length)} when that file is sparse`, { hint: `Rename it (any name not ending in ${SPARSE_SUFFIX}), then pack again.` });
      }
      const r = rel ? `${rel}/${name}` : name;
      if (r === BUILD_DIR) continue; // the rebuild's outputs and scratch: not the capture's, and they name the packer's environment
      const why = unportableName(name);
      if (why) throw new KerncapError("E_PACK_NAME", `${dir}: ${escapedForMessage(r)}: the name ${why}, which kerncap unpack refuses`, { hint: "Rename it with letters, digits and ._+- only (or remove it), then pack again." });
      const st = lstatSync(join(dir, r));
      if (st.isSymbolicLink()) {
        throw new KerncapError("E_PACK_LINK", `${join(dir, r)} is a symbolic link (to ${readlinkSync(join(dir, r))}): pack archives only the regular files inside the folder`, {
          hint: "Replace the link with the file or folder itself (cp -rL, or mv its target into its place) if it belongs to the capture, or remove it; then pack again.",
        });
      } else if (st.isDirectory()) {
        out.dirs.push(r);
        go(r);
      } else if (st.isFile()) {
        resolveInCapture(dir, r); // a hard link: E_UNSAFE_PATH
        out.files.push(r);
      }
    }
  };
  go("");
  return out;
}

/** No NUL byte in the first 8 KiB: text (deflated); otherwise binary (stored). */
function looksText(path: string): boolean {
  const fd = openSync(path, "r");
  try {
    const b = new Uint8Array(8192);
    const n = readSync(fd, b, 0, b.length, 0);
    return !b.subarray(0, n).includes(0);
  } finally {
    closeSync(fd);
  }
}

const SYSTEM_PREFIXES = ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/", "/dev/", "/proc/", "/opt/rocm", "/opt/nvidia"];

/**
 * Why the reproducer would not rebuild on another machine: overlay mode (build.sh reads every
 * unedited file from the original tree), and absolute paths in build.sh outside the capture
 * folder and outside the system folders (include folders of the original tree, a virtualenv).
 * Sources: manifest.source.cuda (mode, projectRoot, referencedOutsideRoot) and DIR/build.sh.
 */
export function portabilityWarnings(dir: string, m: Manifest): string[] {
  const w: string[] = [];
  const cuda = (m.source as { cuda?: { mode?: string; projectRoot?: string; referencedOutsideRoot?: string[] } } | undefined)?.cuda;
  if (cuda?.mode === "overlay") w.push(`overlay mode: build.sh reads every unedited source file from ${cuda.projectRoot ?? "the original tree"} on this machine; capture without --overlay to copy them into src/`);
  const script = join(dir, "build.sh");
  if (existsSync(script)) {
    const text = readFileSync(script, "utf8");
    const paths = new Set<string>();
    for (const line of text.split("\n")) {
      if (/^\s*#/.test(line)) continue;
      for (const hit of line.matchAll(/(?:^|[\s'"=]|-I|-isystem)(\/[^\s'"$;:)]+)/g)) {
        const p = hit[1]!.replace(/\/+$/, "");
        if (SYSTEM_PREFIXES.some((s) => p.startsWith(s) || p + "/" === s)) continue;
        if (p.startsWith(resolve(dir) + "/")) continue;
        paths.add(p);
      }
    }
    if (paths.size) w.push(`build.sh names ${paths.size} absolute path${paths.size > 1 ? "s" : ""} outside the capture that another machine may lack: ${[...paths].slice(0, 8).join(", ")}${paths.size > 8 ? ", …" : ""}`);
  }
  const outside = cuda?.referencedOutsideRoot ?? [];
  if (outside.length) w.push(`the kernel's source includes ${outside.length} header${outside.length > 1 ? "s" : ""} outside the project, read from their absolute paths: ${outside.slice(0, 4).join(", ")}${outside.length > 4 ? ", …" : ""}`);
  return w;
}

/**
 * The checks on an output path that cost one lstat/access, before any work: a dangling symbolic
 * link (existsSync follows it and says no; the rename would fail ENOTDIR), a parent that is
 * missing, not a folder, or not writable (access W_OK: EACCES, EROFS).
 * @throws KerncapError E_USAGE (dangling link, missing or non-folder parent), E_IO (parent not writable)
 */
export function assertOutputPath(out: string, what: string): void {
  let link = false;
  try {
    link = lstatSync(out).isSymbolicLink();
  } catch {
    /* nothing there */
  }
  if (link && !existsSync(out)) {
    throw new KerncapError("E_USAGE", `${out} is a dangling symbolic link (to ${readlinkSync(out)})`, { hint: `Remove the link, or choose another -o for the ${what}.` });
  }
  const parent = dirname(out);
  if (!existsSync(parent)) throw new KerncapError("E_USAGE", `the folder that would hold ${out} does not exist`, { hint: `Create ${parent} first, or choose another -o.` });
  if (!statSync(parent).isDirectory()) throw new KerncapError("E_USAGE", `${parent} is not a folder: it cannot hold ${out}`, { hint: "Choose another -o." });
  try {
    accessSync(parent, fsConstants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new KerncapError("E_IO", `cannot write ${out}: the folder ${parent} is ${code === "EROFS" ? "on a read-only file system" : "not writable (permission denied)"}`, {
      hint: `Choose another -o for the ${what}, or check the folder's permissions.`,
    });
  }
}

/** Say which stale temps (of kerncap processes that are gone) next to `target` were removed. */
function removeStale(target: string, verb: "pack" | "unpack"): void {
  for (const p of removeStaleTemps(target, existsSync(target))) {
    log.info(`removed ${p}: left by an interrupted kerncap ${verb} (process ${/\.(?:tmp|old)-(\d+)(?:-[0-9a-z]+)?$/.exec(p)?.[1]}, which is gone)`);
  }
}

/**
 * The SIGINT/SIGTERM check between pieces: a macrotask turn (so that a signal's handler runs),
 * then E_INTERRUPTED (exit 130/143) when one came. Cost: one setImmediate per 4 MiB piece.
 */
function interruptCheck(stops: StopSignals, what: string): () => Promise<void> {
  return async () => {
    await new Promise<void>((r) => setImmediate(r));
    if (stops.signal) throw new KerncapError("E_INTERRUPTED", `${what} interrupted (${stops.signal}); the partial output was removed`, { exitCode: signalExitCode(stops.signal) });
  };
}

/**
 * Write the capture folder `dir` into one zip at `out` (written as out.tmp-<pid>-<token>, then renamed; an `out` that is a symbolic link is refused).
 * The folder is checked first: the manifest, every file's size and SHA-256, and every stored
 * memory chunk's kc64 (verifyRegions, on the CPU): a damaged capture is not shipped.
 * @throws KerncapError E_NOT_CAPTURE / E_MANIFEST* / E_CHECKSUM for the folder (naming the file,
 *   or the region and chunk), E_EXISTS when out exists (without force), E_INTERRUPTED (exit 130
 *   SIGINT, 143 SIGTERM; the temp is removed); the file system's errors with `out` as their path
 *   (ENOSPC, EFBIG: src/errors.ts systemError words them).
 */
/**
 * How far a pack or unpack is, for a progress line (src/util/progress.ts): `checking` the memory
 * chunks' kc64 (bytes of stored chunks), `packing` or `unpacking` the files' data (bytes).
 */
export type ArchiveProgress = (phase: "checking" | "packing" | "unpacking", done: number, total: number) => void;

export async function packCapture(dirArg: string, outArg: string, opts: { force?: boolean; onProgress?: ArchiveProgress } = {}): Promise<PackResult> {
  const stops = new StopSignals().install();
  try {
    return await pack(dirArg, outArg, opts, interruptCheck(stops, "pack"));
  } finally {
    stops.dispose();
  }
}

async function pack(dirArg: string, outArg: string, opts: { force?: boolean; onProgress?: ArchiveProgress }, tick: () => Promise<void>): Promise<PackResult> {
  const t0 = performance.now();
  const dir = resolve(dirArg);
  const rootWhy = unportableName(basename(dir));
  if (rootWhy) throw new KerncapError("E_PACK_NAME", `${dir}: the folder's name ${escapedForMessage(basename(dir))} ${rootWhy}, which kerncap unpack refuses as an archive's root`, { hint: "Copy or rename the folder to a name of letters, digits and ._+- (cp -r DIR plain-name), then pack that." });
  const m = readManifest(dir);
  verifyFiles(dir, m);
  verifyRegions(dir, m, opts.onProgress && ((done, total) => opts.onProgress!("checking", done, total)));
  await tick();
  const out = resolve(outArg);
  // through symbolic links too (-o link-to-cap/x.zip): the archive would be packed into itself next time
  const realDir = realPathLoose(dir);
  const realOut = realPathLoose(out);
  if (out === dir || out.startsWith(dir + sep) || realOut === realDir || realOut.startsWith(realDir + sep)) {
    throw new KerncapError("E_USAGE", `the archive ${out} would be inside the capture folder it packs`, { hint: "Write it next to the folder: -o cap.zip." });
  }
  const existed = existsSync(out);
  if (existed) {
    // --force replaces only an archive that kerncap pack wrote, never another file of that name
    const isFile = statSync(out).isFile();
    refuseExisting(out, Boolean(opts.force), {
      found: isFile && (await isPackArchive(out)) ? "an archive kerncap pack wrote" : false,
      why: isFile ? "is not a kerncap archive" : "is not a file",
      replaces: "an archive that `kerncap pack` wrote",
      another: "archive name (-o)",
    });
  }
  assertOutputPath(out, "archive");
  removeStale(out, "pack");

  const root = basename(dir);
  const tree = walk(dir);
  const warnings = portabilityWarnings(dir, m);
  const files: PackedFile[] = [];
  const images = new Set([m.memory.before, m.memory.after].map((p) => posix.normalize(p)));
  let dataTotal = 0;
  let filesTotal = 0;
  for (const rel of tree.files) {
    if (rel === PACK_INDEX) continue; // an index left by hand; the archive gets its own
    const p = join(dir, rel);
    const mode = statSync(p).mode & 0o7777;
    const ext = dataExtents(p);
    filesTotal += ext.size;
    dataTotal += ext.dataBytes;
    // only a memory image may be sparse in the archive: unpack bounds its size by the manifest's regions
    if (ext.sparse && images.has(rel)) files.push({ path: rel, size: ext.size, mode, entry: `${root}/${rel}${SPARSE_SUFFIX}`, method: "sparse", extents: ext.extents });
    else files.push({ path: rel, size: ext.size, mode, entry: `${root}/${rel}`, method: !ext.sparse && looksText(p) ? "deflated" : "stored" });
  }
  const index: PackIndex = { schema: PACK_SCHEMA, root, tool: `kerncap ${TOOL_VERSION}`, files, dirs: tree.dirs, warnings };

  refuseLink(out, "the archive");
  // an unguessable O_EXCL|O_NOFOLLOW temp beside -o (src/util/write-file.ts): a link planted there is never followed
  const { fd, tmp } = openTempBeside(out);
  const piece = new Uint8Array(PIECE);
  let written = 0;
  const packTotal = files.reduce((a, f) => a + (f.method === "sparse" ? f.extents!.reduce((b, r) => b + r[1], 0) : f.size), 0);
  let packed = 0;
  opts.onProgress?.("packing", 0, packTotal);
  let ok = false;
  try {
    const zip = new ZipWriter(fd, out);
    const now = new Date();
    const text = new TextEncoder().encode(JSON.stringify(index, null, 1));
    const ix = zip.add(`${root}/${PACK_INDEX}`, { deflate: true, mode: 0o644, mtime: now, usize: text.length });
    ix.push(text);
    ix.end();
    for (const d of tree.dirs) zip.add(`${root}/${d}/`, { deflate: false, mode: statSync(join(dir, d)).mode & 0o7777, mtime: now, usize: 0 }).end();
    for (const f of files) {
      const p = join(dir, f.path);
      const ranges: Extent[] = f.method === "sparse" ? f.extents! : [[0, f.size]];
      const e = zip.add(f.entry, { deflate: f.method === "deflated", mode: f.mode, mtime: statSync(p).mtime, usize: ranges.reduce((a, r) => a + r[1], 0) });
      const src = openSync(p, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
      // holes of a file stored whole are zero-filled, not read
      const data = f.method === "stored" ? dataExtents(p) : { extents: [[0, f.size]] as Extent[], size: f.size };
      try {
        for (const [start, len] of ranges) {
          for (let done = 0; done < len; ) {
            const n = Math.min(PIECE, len - done);
            // a stored piece is written before the next read, so one buffer serves (fresh 4 MiB buffers cost their page faults: 2 s per GiB on a loaded machine); deflate may keep what it is given
            const b = f.method === "deflated" ? new Uint8Array(n) : piece.subarray(0, n);
            const got = readSparse(src, b, start + done, data.extents, data.size);
            if (got !== n) throw new KerncapError("E_ARCHIVE", `${p} changed while it was packed (short read at byte ${start + done})`, { hint: "Pack it again when nothing writes to the capture." });
            done += n;
            e.push(b);
            opts.onProgress?.("packing", (packed += n), packTotal);
            await tick();
          }
        }
        e.end();
      } finally {
        closeSync(src);
      }
    }
    written = zip.end();
    await tick(); // the last point before the rename: a signal until here leaves nothing
    // a file that appeared while this pack ran (another pack to the same -o) is not replaced
    if (!existed && existsSync(out)) throw new KerncapError("E_EXISTS", `${out} appeared while packing (another kerncap writing there?); nothing was replaced`, { hint: "Pack again (it then says whether --force may replace what is there), or choose another -o." });
    ok = true; // commitTemp closes the fd and removes the temp when it fails
    commitTemp(fd, tmp, out);
  } finally {
    if (!ok) {
      try {
        closeSync(fd);
      } catch {
        /* closed above */
      }
      rmSync(tmp, { force: true });
    }
  }
  return { archive: out, dir, files: files.length, sparseFiles: files.filter((f) => f.method === "sparse").length, bytes: { files: filesTotal, data: dataTotal, archive: written }, warnings, seconds: (performance.now() - t0) / 1000 };
}

/**
 * Why a name in an archive (its root folder, or a `/`-separated path inside it) is not portable
 * (a phrase), or undefined: each part is letters, digits and `._+-` only, and starts with no `-`.
 * Names are data: such a name can reach a shell or a compiler's command line unquoted (nvcc runs
 * its steps through sh), and a terminal (escape sequences), so unpack refuses anything else.
 */
export function unportableName(name: string): string | undefined {
  for (const part of name.split("/")) {
    if (part === "") return "has an empty part";
    if (!/^[A-Za-z0-9._+-]+$/.test(part)) return "holds a character outside letters, digits and ._+- (a space, shell syntax, a control character, …)";
    if (part.startsWith("-")) return "has a part starting with - (read as an option)";
  }
  return undefined;
}

/** `name` for a message: quoted, on one line, every control, bidi control and line separator escaped (src/escape.ts). */
const escapedForMessage = (name: string) => escapeForTerminal(JSON.stringify(name), { oneLine: true });

/**
 * A path from the archive, made safe: relative, `/`-separated, no `..`, no empty part, inside dest.
 * @throws KerncapError E_ARCHIVE (zip-slip)
 */
export function safeEntryPath(archive: string, dest: string, rel: string): string {
  const parts = rel.replace(/\/+$/, "").split("/");
  if (!rel || isAbsolute(rel) || rel.includes("\\") || rel.includes("\0") || parts.some((p) => p === ".." || p === "." || p === "")) {
    throw new KerncapError("E_ARCHIVE", `${archive}: entry ${JSON.stringify(rel)} would be written outside the capture folder`, { hint: "The archive is malicious or damaged; nothing was unpacked." });
  }
  const p = resolve(dest, ...parts);
  if (!p.startsWith(resolve(dest) + sep)) throw new KerncapError("E_ARCHIVE", `${archive}: entry ${JSON.stringify(rel)} would be written outside the capture folder`, { hint: "The archive is malicious or damaged; nothing was unpacked." });
  return p;
}

/**
 * Stream one entry's uncompressed bytes (stored or deflated) to sink, in pieces, checking its
 * CRC-32 and its size against `limit` (bytes: the size the index gives it, which the central
 * directory's must equal) as it goes: a deflated entry is pushed INFLATE_PIECE compressed bytes at a
 * time, and the first piece that takes the count past `limit` ends it, so a decompression bomb
 * costs at most one piece's output. `tick` runs between pieces (the interrupt check).
 * @throws KerncapError E_ARCHIVE; the sink's own errors (ENOSPC, EFBIG…) as they are, never blamed
 *   on the archive
 */
async function streamEntry(archive: string, fd: number, e: CdEntry, limit: number, sink: (chunk: Uint8Array) => void, tick: () => Promise<void>, data: ArchiveData = { extents: [[0, Number.MAX_SAFE_INTEGER]], size: Number.MAX_SAFE_INTEGER }): Promise<void> {
  if (e.flags & 1) throw bad(archive, `${e.name} is encrypted`);
  if (e.usize !== limit) throw bad(archive, `${e.name}: the central directory declares ${e.usize} bytes, ${PACK_INDEX} ${limit}`);
  if (e.method === 0 && e.csize !== e.usize) throw bad(archive, `${e.name} is stored with ${e.csize} bytes but declares ${e.usize}`);
  // an honest deflate stream gives at most DEFLATE_MAX_RATIO bytes per byte: a larger claim is refused before inflating
  if (e.method === 8 && e.usize > e.csize * DEFLATE_MAX_RATIO + 1024) throw bad(archive, `${e.name} declares ${e.usize} bytes from ${e.csize} compressed bytes, more than deflate can give (${DEFLATE_MAX_RATIO}:1)`);
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
  try {
    return JSON.parse(new TextDecoder().decode(Buffer.concat(parts)));
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
  files: v.array(v.object({ path: v.string(), size: Count, mode: v.pipe(Count, v.maxValue(0o7777)), entry: v.string(), method: v.picklist(["deflated", "stored", "sparse"]), extents: v.optional(v.array(v.strictTuple([Count, Count]))) })),
  dirs: v.array(v.string()),
  warnings: v.array(v.string()),
});

/** Read the index entry. @throws KerncapError E_ARCHIVE when absent or malformed */
async function readIndex(archive: string, fd: number, entries: CdEntry[]): Promise<PackIndex> {
  const e = entries.find((x) => x.name.split("/").length === 2 && x.name.endsWith(`/${PACK_INDEX}`));
  if (!e) throw new KerncapError("E_ARCHIVE", `${archive} has no ${PACK_INDEX}: not written by \`kerncap pack\``, { hint: "Unpack it with unzip if it is a plain zip of a capture folder." });
  const json = await jsonEntry(archive, fd, e, PACK_INDEX);
  const schema = (json as { schema?: unknown } | null)?.schema;
  if (schema !== PACK_SCHEMA) {
    throw new KerncapError("E_ARCHIVE", `${archive}: ${PACK_INDEX} is not a ${PACK_SCHEMA} index (schema ${JSON.stringify(schema)})`, { hint: "Upgrade kerncap to the version that packed it." });
  }
  const r = v.safeParse(PackIndexSchema, json);
  if (!r.success) throw bad(archive, `${PACK_INDEX} is malformed: ${r.issues.slice(0, 3).map((i) => `${v.getDotPath(i) ?? "(root)"}: ${i.message}`).join("; ")}`);
  return r.output;
}

/** The index of an archive (what `kerncap unpack` would write), without unpacking it. */
export async function readPackIndex(archive: string): Promise<PackIndex> {
  const fd = openSync(archive, "r");
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
    if (!Array.isArray(x) || !int(x[0]) || !int(x[1]) || x[0] < end || x[0] + x[1] > f.size) throw bad(archive, `${f.entry}: bad extent ${JSON.stringify(x)} in ${PACK_INDEX}`);
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
  for (const e of entries) if (!known.has(e.name)) throw bad(archive, `entry ${JSON.stringify(e.name)} is not in ${PACK_INDEX}`);
  for (const p of [...idx.dirs, ...idx.files.map((f) => f.path)]) safeEntryPath(archive, dest, p); // zip-slip, before anything else
  const folders = new Set(idx.dirs.map((d) => d.replace(/\/+$/, "")));
  const paths = new Set<string>();
  for (const f of idx.files) {
    const key = f.path.replace(/\/+$/, "");
    if (paths.has(key)) throw bad(archive, `${PACK_INDEX} lists ${f.path} twice`);
    paths.add(key);
  }
  for (const p of paths) {
    for (let up = posix.dirname(p); up !== "."; up = posix.dirname(up)) if (paths.has(up)) throw bad(archive, `${PACK_INDEX} lists ${up} as a file and ${p} inside it`);
    if (folders.has(p)) throw bad(archive, `${PACK_INDEX} lists ${p} both as a file and as a folder`);
  }
  const planned = idx.files.map((f) => {
    const entry = byName.get(f.entry);
    if (!entry) throw bad(archive, `${f.entry} is missing`);
    if (f.entry !== `${idx.root}/${f.path}${f.method === "sparse" ? SPARSE_SUFFIX : ""}`) throw bad(archive, `${f.entry} does not name ${f.path}`);
    const bytes = declaredBytes(archive, f);
    if (entry.usize !== bytes) throw bad(archive, `${entry.name}: the central directory declares ${entry.usize} bytes, ${PACK_INDEX} ${bytes}`);
    return { file: f, entry, bytes };
  });
  const manifestEntry = byName.get(`${idx.root}/${MANIFEST_FILE}`);
  if (!manifestEntry) throw bad(archive, `it holds no ${MANIFEST_FILE}: not a capture`);
  const m = parseManifest(await jsonEntry(archive, fd, manifestEntry, MANIFEST_FILE), `${archive}: ${MANIFEST_FILE}`);
  const listed = new Map(m.files.map((f) => [posix.normalize(f.path), f.size]));
  const images = new Map(
    (["before", "after"] as const).map((w) => [posix.normalize(m.memory[w]), { bytes: w === "before" ? m.memory.beforeFileBytes : m.memory.afterFileBytes, bound: imageBound(m) }]),
  );
  for (const { file: f } of planned) {
    const image = images.get(f.path);
    const want = image?.bytes ?? listed.get(f.path);
    if (want !== undefined && f.size !== want) throw bad(archive, `${f.path} would be ${f.size} bytes; the manifest says ${want}`);
    if (image && image.bytes > image.bound) throw bad(archive, `${f.path}: the manifest gives it ${image.bytes} bytes, more than its regions and globals can fill (${image.bound} bytes)`);
    if (f.method === "sparse" && !image) throw bad(archive, `${f.path} is packed sparse (holes), but only the manifest's memory images are: its size ${f.size} is not bounded by its data`);
  }
  return planned;
}

/** Mode bits unpack gives a file: the archive's, without group/other write or special bits; always owner read/write. */
export function unpackedMode(mode: number): number {
  return (mode & FILE_MODE_MASK) | 0o600;
}

/**
 * Unpack an archive written by packCapture into `outArg` (default: ./ROOT), written as
 * DIR.tmp-<pid> and renamed when every entry has been written and the capture checks (every
 * file's SHA-256, every stored memory chunk's kc64). Sparse files are recreated with their holes
 * (each extent written at its offset, then the size set). File modes are masked (unpackedMode).
 * @throws KerncapError E_ARCHIVE (damaged, zip-slip, CRC, sizes past the declared ones),
 *   E_EXISTS (DIR exists, no force), E_CHECKSUM (naming the file, or the region and chunk),
 *   E_INTERRUPTED (exit 130 SIGINT, 143 SIGTERM; the temp is removed)
 */
export async function unpackArchive(archiveArg: string, outArg: string | undefined, opts: { force?: boolean; onProgress?: ArchiveProgress } = {}): Promise<UnpackResult> {
  const stops = new StopSignals().install();
  try {
    return await unpack(archiveArg, outArg, opts, interruptCheck(stops, "unpack"));
  } finally {
    stops.dispose();
  }
}

async function unpack(archiveArg: string, outArg: string | undefined, opts: { force?: boolean; onProgress?: ArchiveProgress }, tick: () => Promise<void>): Promise<UnpackResult> {
  const t0 = performance.now();
  const archive = resolve(archiveArg);
  if (!existsSync(archive)) throw new KerncapError("E_USAGE", `no such archive: ${archive}`, { hint: "Give the .zip that `kerncap pack` wrote." });
  if (!statSync(archive).isFile()) throw new KerncapError("E_USAGE", `${archive} is not a file`, { hint: "Give the .zip that `kerncap pack` wrote." });
  const fd = openSync(archive, "r");
  let tmp: string | undefined;
  let ok = false;
  try {
    const entries = centralDirectory(archive, fd, fstatSync(fd).size);
    const idx = await readIndex(archive, fd, entries);
    if (!/^[^/\\\0]+$/.test(idx.root) || idx.root === "." || idx.root === "..") throw bad(archive, `bad root folder name ${JSON.stringify(idx.root)}`);
    if (/[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(idx.root)) throw bad(archive, `the root folder name ${JSON.stringify(idx.root)} holds a control character (an escape sequence, a newline, a bidi override): it would not be shown as it is`);
    // names are data: a root or entry name outside the portable set is refused before any folder is made
    for (const [what, name] of [["root folder name", idx.root] as const, ...idx.dirs.map((d) => ["folder", d.replace(/\/+$/, "")] as const), ...idx.files.map((f) => ["file", f.path] as const)]) {
      const why = unportableName(name);
      if (why) throw new KerncapError("E_ARCHIVE", `${archive}: the ${what} ${escapedForMessage(name)} ${why}`, { hint: "kerncap unpacks only portable names (letters, digits and ._+-); nothing was unpacked. Ask the sender to rename it and pack again." });
    }
    const dest = resolve(outArg ?? idx.root);
    const realArchive = realPathLoose(archive);
    const realDest = realPathLoose(dest);
    if (archive === dest || archive.startsWith(dest + sep) || realArchive === realDest || realArchive.startsWith(realDest + sep)) throw new KerncapError("E_USAGE", `the archive ${archive}${realArchive !== archive ? ` (${realArchive})` : ""} lies inside ${dest}, the folder it would be unpacked into`, { hint: "Unpack it somewhere else (-o DIR), or move the archive out of that folder first." });
    const existed = existsSync(dest);
    if (existed) assertReplaceable(dest, Boolean(opts.force));
    assertOutputPath(dest, "capture folder");
    assertNotNested(dest); // unpacked inside a capture it would be that capture's content, never a capture
    // every check that needs no writing comes first: a refused archive leaves nothing behind
    const plan = await planUnpack(archive, fd, idx, entries, dest);
    const data = dataExtents(archive);
    removeStale(dest, "unpack");
    tmp = tempFor(dest);
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { mode: 0o700 });
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
          await streamEntry(archive, fd, e, bytes, (c) => {
            progress?.(c);
            for (let o = 0; o < c.length; ) {
              const cur = ext[x];
              if (!cur) throw bad(archive, `${f.entry} holds more bytes than its extents`);
              const n = Math.min(c.length - o, cur[1] - inX);
              writeSync(out, c, o, n, cur[0] + inX);
              o += n;
              inX += n;
              if (inX === cur[1]) (x++, (inX = 0));
            }
          }, tick, data);
          while (x < ext.length && ext[x]![1] === 0) x++; // empty extents hold no bytes
          if (x !== ext.length) throw bad(archive, `${f.entry} holds fewer bytes than its extents`);
        } else {
          // blocks of zeros are left as holes: a stored run of zeros costs no disk here either
          let at = 0;
          await streamEntry(archive, fd, e, bytes, (c) => {
            progress?.(c);
            writeSparse(out, c, at);
            at += c.length;
          }, tick, data);
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
    chmodSync(tmp, FOLDER_MODE);
    // the capture's own checks (manifest, per-file checksums, memory image sizes, every stored chunk's kc64) before the rename
    try {
      const m = readManifest(tmp);
      verifyFiles(tmp, m);
      verifyRegions(tmp, m, opts.onProgress && ((done, total) => opts.onProgress!("checking", done, total)));
    } catch (e) {
      if (!(e instanceof KerncapError)) throw e;
      throw new KerncapError(e.code, `${archive}: ${e.message.replaceAll(tmp, dest)}`, { hint: "The capture in the archive was altered after it was packed (its CRC-32s were recomputed); ask for it again. Nothing was unpacked." });
    }
    await tick(); // the last point before the rename: a signal until here leaves nothing
    if (existsSync(dest)) {
      // a folder that appeared while this unpack ran (another unpack or run to the same place) is not ours to replace
      if (!existed) throw new KerncapError("E_EXISTS", `${dest} appeared while unpacking (another kerncap writing there?); nothing was replaced`, { hint: "Unpack again (it then says whether --force may replace what is there), or choose another -o." });
      // RECEIVED_MARK is written again below, whatever the archive holds: not a file this replacement loses
      const gone = filesNotIn(dest, new Set([...idx.files.map((f) => f.path), RECEIVED_MARK]));
      if (gone.length) log.warn(`--force: replacing ${dest} removes ${gone.length} file${gone.length === 1 ? "" : "s"} the archive does not hold: ${gone.slice(0, 10).join(", ")}${gone.length > 10 ? ", …" : ""}`);
      rmSync(dest, { recursive: true, force: true });
    }
    markReceived(tmp, archive); // validate asks before running its build.sh (src/format/trust.ts)
    rmSync(join(tmp, TEMP_MARKER), { force: true });
    try {
      renameSync(tmp, dest);
    } catch (e) {
      // another unpack or run renamed its folder there between the check above and this rename
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") throw new KerncapError("E_EXISTS", `${dest} appeared while unpacking (another kerncap writing there?); nothing was replaced`, { hint: "Unpack again (it then says whether --force may replace what is there), or choose another -o." });
      throw e;
    }
    ok = true;
    return { archive, dir: dest, files: idx.files.length, sparseFiles, bytes: { files: filesBytes, data: dataBytes }, warnings: idx.warnings ?? [], seconds: (performance.now() - t0) / 1000 };
  } finally {
    closeSync(fd);
    if (!ok && tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Paths (relative, "/"-separated) of the regular files and links under `dir` that `keep` does not
 * list: what replacing `dir` with an unpacked capture loses (a user's notes, files added to src/).
 * Unreadable folders are skipped.
 */
export function filesNotIn(dir: string, keep: Set<string>): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names.sort()) {
      const p = join(d, n);
      const r = rel ? `${rel}/${n}` : n;
      let st;
      try {
        st = lstatSync(p);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p, r);
      else if (!keep.has(r)) out.push(r);
    }
  };
  walk(dir, "");
  return out;
}

/** Whether `path` is an archive that kerncap pack wrote: a zip whose central directory names ROOT/kerncap-pack.json. Never throws. */
export async function isPackArchive(path: string): Promise<boolean> {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const entries = centralDirectory(path, fd, fstatSync(fd).size);
    return entries.some((e) => e.name.endsWith(`/${PACK_INDEX}`) && e.name.split("/").length === 2);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
