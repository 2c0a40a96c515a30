/**
 * `kerncap pack`: a capture folder, checked, written into one zip (./archive.ts has the design):
 * the folder's files and folders (walk: symbolic and hard links refused, names that unpack would
 * refuse refused here first), the index, then every file in PIECE-byte pieces, memory images
 * with holes as their data extents only.
 */
import { closeSync, existsSync, fstatSync, lstatSync, readdirSync, readFileSync, readlinkSync, readSync, statSync, type Stats } from "node:fs";
import { basename, join, posix, resolve, sep } from "node:path";
import { CLEAN_PARTS, staleCleanHolder } from "../leftovers.ts";
import { KerncapError, whileReading } from "../errors.ts";
import { escapeForTerminal, jsonText, listForTerminal } from "../escape.ts";
import { commitTemp, discardTemp, openTempBeside, refuseLink } from "../util/write-file.ts";
import { StopSignals } from "../process-group.ts";
import { TOOL_VERSION } from "../version.ts";
import { readManifest, verifyFiles, verifyRegions } from "./capture-dir.ts";
import { isLeftOutOfSources, MADE_HERE_SEAL, RECEIVED_MARK } from "./file-names.ts";
import { privateFields, redactText, shippedManifestOf } from "./redact.ts";
import { MANIFEST_FILE, type Manifest } from "./manifest.ts";
import { changed, fileKind, MANIFEST_MAX_BYTES, openInCapture, readInCapture, refuseExisting, resolveInCapture } from "./paths.ts";
import { dataExtentsOfFd, readSparse, type Extent } from "./sparse-extents.ts";
import { ZipWriter } from "./zip.ts";
import {
  type ArchiveProgress,
  assertOutputPath,
  BUILD_DIR,
  escapedForMessage,
  escapedName,
  interruptCheck,
  PACK_INDEX,
  PACK_SCHEMA,
  type PackedFile,
  EDITOR_LEFT_OUT,
  type PackIndex,
  type PackResult,
  PIECE,
  realPathLoose,
  removeStale,
  SPARSE_SUFFIX,
  foreignEntry,
  foreignFolder,
  unfitRootName,
  unportableName,
  UTF8,
} from "./archive-common.ts";
import { isPackArchive } from "./unpack.ts";

/** A path in a message: its file names are the folder's owner's text, one line on the terminal whatever they hold (adversary 46). */
const oneLine = (p: string) => escapeForTerminal(p, { oneLine: true });

/** A capture set's members: the folders of `dir` that hold a kerncap.json (what unpack reads them as: captureMembers). */
function setMembers(dir: string): Set<string> {
  const isMember = (n: string) => {
    try {
      return lstatSync(join(dir, n, "kerncap.json")).isFile();
    } catch {
      return false; // not a folder, or none there
    }
  };
  return new Set(readdirSync(dir).filter(isMember));
}

/**
 * Files and folders under dir (relative, `/`-separated, sorted): what pack archives. A symbolic
 * link anywhere in the folder is refused (a link to a folder would archive what it points to, a
 * home's .ssh/ for one), as is a file with another name elsewhere (a hard link); FIFOs, sockets
 * and devices are left out, and so is `build/` (BUILD_DIR); so are an editor's temporaries and
 * backups, and hidden names under src/ (isLeftOutOfSources), before any check of them (an Emacs
 * backup `x.cu~` or lock link `.#x.cu` is no reason to refuse), and a folder no capture holds
 * with no file in it (foreignFolder: unpack refuses it listed): each in `left`, with why.
 * Names are read as bytes: a name that is not UTF-8 (zip entry names and the index are UTF-8) is
 * refused.
 * @throws KerncapError E_PACK_NAME naming the file (its other bytes as \xHH) when a name is not
 *   UTF-8 or not portable (unportableName: unpack refuses it), E_PACK_LINK naming a symbolic link,
 *   E_UNSAFE_PATH naming a hard link.
 */
function walk(dir: string): { files: string[]; dirs: string[]; left: LeftOut[] } {
  const out = { files: [] as string[], dirs: [] as string[], left: [] as LeftOut[] };
  const members = setMembers(dir);
  const go = (rel: string) => {
    const names: string[] = [];
    let raws: Buffer[];
    try {
      raws = readdirSync(join(dir, rel), { encoding: "buffer" });
    } catch (e) {
      throw whileReading(e, join(dir, rel));
    }
    for (const raw of raws) {
      let name: string;
      try {
        name = UTF8.decode(raw);
      } catch {
        const shown = `${rel ? `${rel}/` : ""}${escapedName(raw)}`;
        throw new KerncapError("E_PACK_NAME", `${oneLine(join(dir, shown))}: the file name is not UTF-8, which a zip entry name must be`, {
          hint: `Rename it (e.g. mv with a UTF-8 name) or remove it, then pack again; it is not a file the manifest lists.`,
        });
      }
      // unpack refuses a backslash in an entry name (a Windows path separator: a way out of the folder)
      if (name.includes("\\")) {
        throw new KerncapError(
          "E_PACK_NAME",
          `${oneLine(join(dir, rel, name))}: the file name holds a backslash, which kerncap unpack refuses in an entry name`,
          { hint: "Rename it without the backslash (or remove it), then pack again." },
        );
      }
      names.push(name);
    }
    for (const name of names.sort()) {
      if (name.endsWith(SPARSE_SUFFIX) && names.includes(name.slice(0, -SPARSE_SUFFIX.length))) {
        // a sparse file NAME is archived as NAME.kcsparse: the two entries would collide
        throw new KerncapError(
          "E_PACK_NAME",
          `${oneLine(join(dir, rel, name))}: its name is that of the entry of ${oneLine(name.slice(0, -SPARSE_SUFFIX.length))} when that file is sparse`,
          { hint: `Rename it (any name not ending in ${SPARSE_SUFFIX}), then pack again.` },
        );
      }
      const r = rel ? `${rel}/${name}` : name;
      const left = leftOut(dir, r);
      if (left) {
        out.left.push(left);
        continue;
      }
      const why = unportableName(name);
      if (why)
        throw new KerncapError("E_PACK_NAME", `${oneLine(dir)}: ${escapedForMessage(r)}: the name ${why}, which kerncap unpack refuses`, {
          hint: "Rename it with letters, digits and ._+- only (or remove it), then pack again.",
        });
      let st: Stats;
      try {
        st = lstatSync(join(dir, r));
      } catch (e) {
        throw whileReading(e, join(dir, r));
      }
      if (st.isSymbolicLink()) {
        throw new KerncapError(
          "E_PACK_LINK",
          `${oneLine(join(dir, r))} is a symbolic link (to ${linkTarget(dir, r)}): pack archives only the regular files inside the folder`,
          {
            hint: "Replace the link with the file or folder itself (cp -rL, or mv its target into its place) if it belongs to the capture, or remove it; then pack again.",
          },
        );
      } else if (st.isDirectory()) {
        // a folder no capture holds, which unpack refuses (adversary 54): a file in it is refused below, and left empty it is left out
        if (foreignFolder(r, members)) out.left.push({ path: `${r}/`, why: "a folder no capture holds, with no file in it" });
        else out.dirs.push(r);
        go(r);
      } else if (st.isFile()) {
        resolveInCapture(dir, r); // a hard link: E_UNSAFE_PATH
        const foreign = foreignEntry(r, members); // no module or program outside src/: what unpack refuses (src/format/archive-common.ts)
        if (foreign)
          throw new KerncapError("E_PACK_NAME", `${oneLine(dir)}: ${escapedForMessage(r)} ${foreign}, which kerncap unpack refuses`, {
            hint: "Move it under src/ or out of the capture folder, then pack again.",
          });
        out.files.push(r);
      } else {
        // a FIFO, a socket, a device: not a capture's file, and leaving it out silently would ship a different folder
        throw new KerncapError(
          "E_PACK_LINK",
          `${oneLine(join(dir, r))} is ${fileKind(st)}: pack archives only the regular files and folders inside the folder`,
          {
            hint: "Remove it (it is not a file kerncap writes), then pack again.",
          },
        );
      }
    }
  };
  go("");
  return out;
}

/**
 * Where the link `rel` in `dir` points, escaped for a message.
 * @throws KerncapError E_UNSAFE_PATH naming it when it is no longer a link (readlink's EINVAL) or gone: it changed while kerncap read the folder
 */
export function linkTarget(dir: string, rel: string): string {
  try {
    return escapedForMessage(readlinkSync(join(dir, rel)));
  } catch {
    throw changed(dir, rel);
  }
}

/** No NUL byte in the first 8 KiB of the open file `fd`: text (deflated); otherwise binary (stored). */
function looksText(fd: number): boolean {
  const b = new Uint8Array(8192);
  const n = readSync(fd, b, 0, b.length, 0);
  return !b.subarray(0, n).includes(0);
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
  // the manifest's source block is the frontend's, not the schema's: a received one may hold anything there
  const raw = (m.source as { cuda?: { mode?: unknown; projectRoot?: unknown; referencedOutsideRoot?: unknown } } | undefined)?.cuda;
  const cuda = raw && typeof raw === "object" ? raw : undefined;
  if (cuda?.mode === "overlay")
    w.push(
      `overlay mode: build.sh reads every unedited source file from ${typeof cuda.projectRoot === "string" ? cuda.projectRoot : "the original tree"} on this machine; capture without --overlay to copy them into src/`,
    );
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
        if (p === "/tmp" || p.startsWith("/tmp/kerncap-build.")) continue; // the template's own temporary folder
        paths.add(p);
      }
    }
    if (paths.size)
      w.push(
        `build.sh names ${paths.size} absolute path${paths.size > 1 ? "s" : ""} outside the capture that another machine may lack: ${listForTerminal([...paths], 8)}`,
      );
  }
  const outside = Array.isArray(cuda?.referencedOutsideRoot) ? cuda.referencedOutsideRoot.filter((f): f is string => typeof f === "string") : [];
  if (outside.length)
    w.push(
      `the kernel's source includes ${outside.length} header${outside.length > 1 ? "s" : ""} outside the project, read from their absolute paths: ${listForTerminal(outside, 4)}`,
    );
  return w;
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
export async function packCapture(dirArg: string, outArg: string, opts: PackOptions = {}): Promise<PackResult> {
  const stops = new StopSignals().install();
  try {
    return await pack(dirArg, outArg, opts, interruptCheck(stops, "pack"));
  } finally {
    stops.dispose();
  }
}

/**
 * pack's options: `force` replaces an archive kerncap pack wrote; `root` names the archive's root
 * folder (default: the capture folder's name); `redact` ships the manifest without its private
 * fields (src/format/redact.ts) and the capture's README.md with those values replaced; `dryRun`:
 * plan only (what would go in, what is left out and why), no archive written, and `out` only named:
 * the folder's manifest, files and names are checked as pack checks them, the memory images' chunk
 * checksums (a read of every stored byte) only when packing.
 */
export type PackOptions = { force?: boolean; onProgress?: ArchiveProgress; root?: string; redact?: boolean; dryRun?: boolean };

/** A file or folder of the capture that an archive leaves out, with why (a phrase). */
export interface LeftOut {
  path: string;
  why: string;
}

/**
 * What pack leaves out at the capture-relative path `r` of the capture `dir`, with why, or undefined: build/ (the rebuild's
 * outputs and scratch: not the capture's, and they name the packer's environment), a holder a killed
 * kerncap clean left (src/leftovers.ts staleCleanHolder: the build's outputs on their way out; adversary 35: pack refused the
 * capture), an editor's temporaries under src/ (a vim swap file holds the user, the host and the file's path).
 */
function leftOut(dir: string, r: string): LeftOut | undefined {
  if (r === BUILD_DIR) return { path: `${BUILD_DIR}/`, why: "the rebuild's outputs and scratch, made again by the next build" };
  // only what the next clean removes (its process gone, a 0700 folder of the user's): a folder of that look with
  // data of the user's is packed or refused as any other (adversary 36: a live pid's 0755 one was left out)
  const part = CLEAN_PARTS.find((p) => r.startsWith(`${p}.tmp-`));
  if (part && staleCleanHolder(join(dir, r), part))
    return { path: `${r}/`, why: "left by a kerncap clean that was stopped (the next kerncap clean removes it)" };
  if (isLeftOutOfSources(r)) return { path: r, why: EDITOR_LEFT_OUT };
  return undefined;
}

async function pack(dirArg: string, outArg: string, opts: PackOptions, tick: () => Promise<void>): Promise<PackResult> {
  const t0 = performance.now();
  const dir = resolve(dirArg);
  const root = opts.root ?? basename(dir);
  const rootWhy = unfitRootName(root);
  if (rootWhy)
    throw new KerncapError(
      "E_PACK_NAME",
      opts.root !== undefined
        ? `--name ${escapedForMessage(root)} ${rootWhy}, which kerncap unpack refuses as an archive's root`
        : `${oneLine(dir)}: the folder's name ${escapedForMessage(root)} ${rootWhy}, which kerncap unpack refuses as an archive's root`,
      { hint: "Name the archive's root folder with --name NAME (letters, digits and ._+-), or copy the folder to such a name and pack that." },
    );
  const m = readManifest(dir);
  verifyFiles(dir, m);
  const out = resolve(outArg);
  if (opts.dryRun) {
    const manifest = shippedManifestOf(dir, Boolean(opts.redact));
    const { index, filesTotal, dataTotal, left } = packIndex(dir, root, m, new Map([[MANIFEST_FILE, manifest.bytes]]));
    const secrets = { privateFields: shippedPrivate(manifest.bytes, opts), redacted: Boolean(opts.redact) };
    return packResult(index, left, { archive: out, dir, files: filesTotal, data: dataTotal, written: 0, dryRun: true, t0, ...secrets });
  }
  verifyRegions(dir, m, opts.onProgress && ((done, total) => opts.onProgress!("checking", done, total)));
  await tick();
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

  const manifest = shippedManifestOf(dir, Boolean(opts.redact));
  const shipped = new Map([[MANIFEST_FILE, manifest.bytes]]);
  // the capture's README.md quotes the project's folder and TU (a Triton one the command line): the same values replaced
  const readme = opts.redact ? readInCapture(dir, "README.md", MANIFEST_MAX_BYTES) : undefined;
  if (readme) shipped.set("README.md", new TextEncoder().encode(redactText(readme.toString("utf8"), manifest.removed)));
  const { index, filesTotal, dataTotal, left } = packIndex(dir, root, m, shipped);
  // the index's warnings quote the project's paths (headers outside it, overlay's root): redacted as the manifest is
  if (opts.redact) index.warnings = index.warnings.map((w) => redactText(w, manifest.removed));
  const written = await writeArchive(dir, out, index, existed, opts, tick, shipped);
  const secrets = { privateFields: shippedPrivate(manifest.bytes, opts), redacted: Boolean(opts.redact) };
  return packResult(index, left, { archive: out, dir, files: filesTotal, data: dataTotal, written, dryRun: false, t0, ...secrets });
}

/** The private facts (src/format/redact.ts privateFields) of the manifest bytes an archive ships; [] under --redact. */
function shippedPrivate(bytes: Uint8Array, opts: PackOptions): string[] {
  return opts.redact ? [] : privateFields(JSON.parse(new TextDecoder().decode(bytes)));
}

/** pack's result from its index: the counts, and every file (path, bytes) and what was left out (nu9 #5: a count alone did not say what was shipped). */
function packResult(
  index: PackIndex,
  left: LeftOut[],
  r: {
    archive: string;
    dir: string;
    files: number;
    data: number;
    written: number;
    dryRun: boolean;
    t0: number;
    /** The private facts the shipped manifest holds ([] when redacted: src/format/redact.ts privateFields). */
    privateFields: string[];
    redacted: boolean;
  },
): PackResult {
  const { files, warnings } = index;
  return {
    archive: r.archive,
    dir: r.dir,
    dryRun: r.dryRun,
    files: files.length,
    sparseFiles: files.filter((f) => f.method === "sparse").length,
    bytes: { files: r.files, data: r.data, archive: r.written },
    list: files.map((f) => ({ path: f.path, bytes: f.size })),
    leftOut: left,
    warnings,
    privateFields: r.privateFields,
    redacted: r.redacted,
    seconds: (performance.now() - r.t0) / 1000,
  };
}

/**
 * A manifest's bytes with `host.machineId` null, or undefined when it names none (or is no JSON
 * object: shipped as it is, and no capture where it is unpacked).
 */
export function withoutMachineIdBytes(bytes: Buffer | undefined): Uint8Array | undefined {
  if (!bytes) return undefined;
  let m: unknown;
  try {
    m = JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
  const host = (m as { host?: { machineId?: unknown } } | null)?.host;
  if (!host || typeof host !== "object" || host.machineId == null) return undefined;
  host.machineId = null;
  return new TextEncoder().encode(`${jsonText(m, 2)}\n`);
}

/**
 * The index of the capture folder `dir` (PackIndex): every file with its size, mode, entry name
 * and method (a memory image with holes: sparse, its data extents; text: deflated; else stored),
 * every folder, the portability warnings; the bytes of the files (apparent sizes) and of their data; what is left out, with why.
 * @throws KerncapError as walk
 */
function packIndex(
  dir: string,
  root: string,
  m: Manifest,
  shipped: Map<string, Uint8Array>,
): { index: PackIndex; filesTotal: number; dataTotal: number; left: LeftOut[] } {
  const tree = walk(dir);
  const left = [...tree.left];
  const warnings = portabilityWarnings(dir, m);
  const files: PackedFile[] = [];
  const images = new Set([m.memory.before, m.memory.after].map((p) => posix.normalize(p)));
  let dataTotal = 0;
  let filesTotal = 0;
  for (const rel of tree.files) {
    if (rel === PACK_INDEX) {
      left.push({ path: rel, why: "an index left by hand: the archive writes its own" }); // an index left by hand; the archive gets its own
      continue;
    }
    // the packer's seal of a capture made here (src/format/made-here.ts), never shipped: the recipient's copy is received; a
    // nested capture's (a set's member, an older capture kept inside) alike (adversary 61). Listed, as all that is left out is
    // (a new user's finding: neither in the list nor left out)
    if (rel === MADE_HERE_SEAL || rel.endsWith(`/${MADE_HERE_SEAL}`)) {
      left.push({ path: rel, why: "the seal that makes the capture yours on this machine: never shipped, the recipient's copy is received" });
      continue;
    }
    // a nested capture's manifest ships as the top one does: no machine id, whose folder, moved out, would count as a copy of
    // the recipient's own (adversary 61: a member kept this machine's id, and plain --trust sealed it as theirs)
    if (rel.endsWith(`/${MANIFEST_FILE}`) && !shipped.has(rel)) {
      const nested = withoutMachineIdBytes(readInCapture(dir, rel, MANIFEST_MAX_BYTES));
      if (nested) shipped.set(rel, nested);
    }
    // unpack's mark stays here: the recipient's unpack writes its own (an archive cannot carry one)
    if (rel === RECEIVED_MARK || rel.endsWith(`/${RECEIVED_MARK}`)) {
      left.push({ path: rel, why: "unpack's mark of a received capture: the recipient's unpack writes its own" });
      continue;
    }
    const bytes = shipped.get(rel);
    if (bytes) {
      filesTotal += bytes.length;
      dataTotal += bytes.length;
      files.push({ path: rel, size: bytes.length, mode: lstatSync(join(dir, rel)).mode & 0o7777, entry: `${root}/${rel}`, method: "deflated" });
      continue;
    }
    // opened once by the capture path rule (no link followed, O_NONBLOCK: a FIFO renamed in after the walk is refused, never
    // waited on; adversary 68) and read from that descriptor only
    const opened = openInCapture(dir, rel, Number.MAX_SAFE_INTEGER);
    if (!opened) throw changed(dir, rel);
    try {
      const mode = fstatSync(opened.fd).mode & 0o7777;
      const ext = dataExtentsOfFd(opened.fd);
      filesTotal += ext.size;
      dataTotal += ext.dataBytes;
      // only a memory image may be sparse in the archive: unpack bounds its size by the manifest's regions
      if (ext.sparse && images.has(rel))
        files.push({ path: rel, size: ext.size, mode, entry: `${root}/${rel}${SPARSE_SUFFIX}`, method: "sparse", extents: ext.extents });
      else files.push({ path: rel, size: ext.size, mode, entry: `${root}/${rel}`, method: !ext.sparse && looksText(opened.fd) ? "deflated" : "stored" });
    } finally {
      closeSync(opened.fd);
    }
  }
  const index: PackIndex = { schema: PACK_SCHEMA, root, tool: `kerncap ${TOOL_VERSION}`, files, dirs: tree.dirs, warnings };
  return { index, filesTotal, dataTotal, left };
}

/**
 * Write the archive of `index` at `out`: an unguessable temp beside it, the index entry first,
 * the folders, then each file in PIECE-byte pieces (`tick` between them), renamed into place.
 * @returns the archive's size (bytes)
 * @throws KerncapError E_ARCHIVE (a file changed while packed), E_EXISTS (out appeared meanwhile), E_INTERRUPTED
 */
async function writeArchive(
  dir: string,
  out: string,
  index: PackIndex,
  existed: boolean,
  opts: { onProgress?: ArchiveProgress },
  tick: () => Promise<void>,
  shipped: Map<string, Uint8Array> = new Map(),
): Promise<number> {
  const { root, files } = index;
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
    const text = new TextEncoder().encode(jsonText(index, 1));
    const ix = zip.add(`${root}/${PACK_INDEX}`, { deflate: true, mode: 0o644, mtime: now, usize: text.length });
    ix.push(text);
    ix.end();
    for (const d of index.dirs) zip.add(`${root}/${d}/`, { deflate: false, mode: lstatSync(join(dir, d)).mode & 0o7777, mtime: now, usize: 0 }).end();
    for (const f of files) {
      const p = join(dir, f.path);
      const ranges: Extent[] = f.method === "sparse" ? f.extents! : [[0, f.size]];
      const usize = ranges.reduce((a, r) => a + r[1], 0);
      const own = shipped.get(f.path);
      if (own) {
        const e = zip.add(f.entry, { deflate: f.method === "deflated", mode: f.mode, mtime: lstatSync(p).mtime, usize });
        e.push(own);
        e.end();
        opts.onProgress?.("packing", (packed += own.length), packTotal);
        continue;
      }
      // opened through the capture's folders one by one with no link followed (src/format/paths.ts openInCapture), the
      // file opened the one its check saw (device and inode): a folder or file swapped meanwhile is refused, never archived
      const opened = openInCapture(dir, f.path, Number.MAX_SAFE_INTEGER);
      if (!opened) throw changed(dir, f.path);
      const src = opened.fd;
      try {
        const e = zip.add(f.entry, { deflate: f.method === "deflated", mode: f.mode, mtime: fstatSync(src).mtime, usize });
        // holes of a file stored whole are zero-filled, not read (its extents from this descriptor, never the name again)
        const data = f.method === "stored" ? dataExtentsOfFd(src) : { extents: [[0, f.size]] as Extent[], size: f.size };
        for (const [start, len] of ranges) {
          for (let done = 0; done < len; ) {
            const n = Math.min(PIECE, len - done);
            // a stored piece is written before the next read, so one buffer serves (fresh 4 MiB buffers cost their page faults: 2 s per GiB on a loaded machine); deflate may keep what it is given
            const b = f.method === "deflated" ? new Uint8Array(n) : piece.subarray(0, n);
            const got = readSparse(src, b, start + done, data.extents, data.size);
            if (got !== n)
              throw new KerncapError("E_ARCHIVE", `${p} changed while it was packed (short read at byte ${start + done})`, {
                hint: "Pack it again when nothing writes to the capture.",
              });
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
    if (!existed && existsSync(out))
      throw new KerncapError("E_EXISTS", `${out} appeared while packing (another kerncap writing there?); nothing was replaced`, {
        hint: "Pack again (it then says whether --force may replace what is there), or choose another -o.",
      });
    ok = true; // commitTemp closes the fd and removes the temp when it fails
    commitTemp(fd, tmp, out);
  } finally {
    if (!ok) discardTemp(fd, tmp);
  }
  return written;
}
