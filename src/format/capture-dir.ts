/**
 * Reading and checking a capture folder: the manifest, the per-file checksums, the memory images.
 */
import { closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readSync, realpathSync, statSync } from "node:fs";
import { FileImage, openImageInCapture, sha256Range } from "./file-image.ts";
import { storedEnd, verifyChunks, verifyChunksAsync } from "./chunks.ts";
import { CAPTURE_SET_FILE, readCaptureSet } from "./capture-set.ts";
import { dirname, join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { noSuchCaptureFolder } from "./near-names.ts";
import { isTempName } from "../leftovers.ts";
import { EXPORT_FILE } from "./file-names.ts";
import { shellPath } from "../util/shell-quote.ts";
import { hasEscapedCharacters, oneLine, listForTerminal } from "../escape.ts";
import { MANIFEST_FILE, MANIFEST_FORMAT, parseManifest, type Manifest } from "./manifest.ts";
import { describeJsonError, JSON_MAX_DEPTH, jsonDepth } from "./json-position.ts";
import { capturePath, MANIFEST_MAX_BYTES, readInCapture, refuseExisting, resolveInCapture, treeEntries } from "./paths.ts";

/**
 * The captures in folder `dir` and in its folders, two levels down at most (relative paths, sorted;
 * each a folder holding kerncap.json, no link followed, at most 2000 entries looked at): what a
 * folder of captures given where one capture is asked for holds.
 */
function capturesJustBelow(dir: string): string[] {
  const isCapture = (rel: string) => lstatSync(join(dir, rel, MANIFEST_FILE), { throwIfNoEntry: false })?.isFile() === true;
  const found: string[] = [];
  let budget = 2000;
  // a capture's own folders are not walked, nor anything past the second level
  for (const { rel, st } of treeEntries(dir, "", (r) => !r.includes("/") && !isCapture(r))) {
    if (--budget < 0) break;
    if (st.isDirectory() && isCapture(rel)) found.push(rel);
  }
  return found;
}

/** SHA-256 (hex) of bytes, BoringSSL through Bun.CryptoHasher. */
export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** SHA-256 of a file of any size, read through mmap windows in 64 MiB pieces. */
export function sha256File(path: string): string {
  const img = new FileImage(path);
  return sha256Range(img, 0, img.size);
}

/** A capture folder with its manifest read and checked once (openCapture): what a verb hands to the engines. */
export interface OpenedCapture {
  readonly dir: string;
  readonly manifest: Manifest;
}

/**
 * Open a capture folder: its manifest, read and checked (readManifest), the folder a capture of
 * its own (not nested inside another: assertNotNested).
 * @throws as readManifest
 */
export function openCapture(dir: string): OpenedCapture {
  return { dir, manifest: readManifest(dir) };
}

/**
 * Refuse a capture folder whose path holds a control character, a format character or a line
 * separator (src/escape.ts hasEscapedCharacters): a received folder's name (a tar keeps it) reaches
 * many messages as part of a path, where a newline in it would start a line of the sender's as one
 * of kerncap's (adversary 84 #06: `n⏎[kerncap] ✔ … made here` in validate, pack, judge and check).
 * No kerncap verb reads a capture by such a name; renaming it is the way on.
 * @throws KerncapError E_UNSAFE_PATH naming the path escaped, with the mv that renames it
 */
export function refuseUnprintablePath(dir: string): void {
  if (!hasEscapedCharacters(dir)) return;
  throw new KerncapError(
    "E_UNSAFE_PATH",
    `${oneLine(dir)}: the path holds a control character, an invisible character or a line separator (shown escaped); kerncap reads no capture by such a name, which would reach its messages as lines that are not its own`,
    { hint: `Rename the folder to a plain name (mv ${shellPath(dir)} cap-renamed), then give that.` },
  );
}

/**
 * Whether `up/kerncap.json` makes `up` a capture folder: a regular file there (not followed through
 * a link) that is a kerncap manifest, or that cannot be read as JSON at all (a damaged manifest is
 * still its capture's). A kerncap.json of another format is someone else's file.
 */
function holdsManifest(up: string): boolean {
  try {
    if (!lstatSync(join(up, MANIFEST_FILE)).isFile()) return false;
  } catch {
    return false;
  }
  try {
    const b = readInCapture(up, MANIFEST_FILE, MANIFEST_MAX_BYTES);
    if (!b) return false;
    return (JSON.parse(b.toString("utf8")) as { format?: unknown } | null)?.format === MANIFEST_FORMAT;
  } catch {
    return true; // unreadable, a hard link, past 64 MiB, not JSON: a capture's damaged manifest, never a reason to call the inner folder a capture
  }
}

/**
 * The nearest capture folder above `dir` (one whose kerncap.json is a capture's manifest:
 * holdsManifest), looked for above both the path as given (made absolute) and its real path;
 * undefined when there is none. A folder of captures side by side (check's corpus, a capture
 * set, what `unpack` makes of an archive of several captures) holds no kerncap.json of its own and
 * does not count.
 *
 * Only a capture of the user's own can hold `dir`, so that no other local user can make someone
 * else's folders unusable by dropping a kerncap.json above them (a /tmp/kerncap.json): the walk
 * up stops at a folder that every user can write or that is sticky (/tmp), or that belongs to
 * someone other than `dir`'s owner and the effective user; an ancestor's kerncap.json counts only
 * when it belongs to one of those two. A kerncap.json an MCP agent writes under the user's capture
 * (src/x/kerncap.json) is inside the user's own capture folder, so it is still refused.
 * Source: lstat owner and mode bits (`dir` not there yet: the effective user's).
 */
export function outerCapture(dir: string): string | undefined {
  const starts = [resolve(dir)];
  try {
    const real = realpathSync(dir);
    if (real !== starts[0]) starts.push(real);
  } catch {
    /* not there (yet): the path as given */
  }
  const euid = process.geteuid?.() ?? process.getuid?.();
  let owner = euid;
  try {
    owner = statSync(dir).uid;
  } catch {
    /* not there yet: the folder kerncap is about to write, the effective user's */
  }
  const ours = (uid: number) => euid === undefined || uid === euid || uid === owner;
  for (const start of starts) {
    for (let p = start, up = dirname(p); up !== p; p = up, up = dirname(up)) {
      let st;
      try {
        st = lstatSync(up);
      } catch {
        continue; // not there (yet): nothing in it
      }
      if (st.isSymbolicLink()) continue; // the path as given passes through it; the real path's walk sees where it leads
      // a folder others can write or may share (1777 /tmp), or someone else's: what lies in it and above is not the user's capture
      if (euid !== undefined && (st.mode & 0o002 || st.mode & 0o1000 || !ours(st.uid))) break;
      if (holdsManifest(up) && ours(lstatSync(join(up, MANIFEST_FILE), { throwIfNoEntry: false })?.uid ?? -1)) return up;
    }
  }
  return undefined;
}

/**
 * Refuse a folder nested inside a capture: everything under a capture folder (its src/ above all,
 * which an MCP agent may write) is that capture's content, never a capture of its own, so that a
 * kerncap.json and a build.sh planted under src/ can never be opened, built or trusted as one. Every
 * verb opens its capture through readManifest, which asks this first; `run`, `demo` and `unpack` ask
 * it of the folder they are about to write.
 * @throws KerncapError E_NESTED_CAPTURE naming the outer capture
 */
export function assertNotNested(dir: string, o: { output?: boolean } = {}): void {
  const outer = outerCapture(dir);
  if (outer) throw nestedCaptureError(dir, outer, o);
}

/**
 * The E_NESTED_CAPTURE of `dir` inside the capture `outer` (assertNotNested; kerncap mcp's roots
 * check, src/mcp/roots.ts). `output`: `dir` is where a new capture would be written (run --out,
 * demo, unpack -o), so the hint names only a folder outside (the capture itself would be overwritten).
 */
export function nestedCaptureError(dir: string, outer: string, o: { output?: boolean } = {}): KerncapError {
  return new KerncapError(
    "E_NESTED_CAPTURE",
    `${dir} lies inside the capture ${outer}: a folder inside a capture is that capture's content (its sources, its build outputs), never a capture of its own`,
    {
      hint: o.output
        ? `Write it to a folder outside every capture (beside ${shellPath(outer)}, not inside it).`
        : `Give the capture folder itself (${shellPath(outer)}), or a folder outside every capture.`,
    },
  );
}

/**
 * Load and validate `DIR/kerncap.json`, DIR being a capture of its own (assertNotNested).
 * @throws KerncapError E_NOT_CAPTURE when the folder or manifest is missing, E_NESTED_CAPTURE when it
 *   lies inside another capture, E_MANIFEST* when malformed.
 */
export function readManifest(dir: string): Manifest {
  const path = join(dir, MANIFEST_FILE);
  refuseUnprintablePath(dir);
  if (!existsSync(dir)) throw noSuchCaptureFolder(dir);
  if (!statSync(dir).isDirectory()) {
    // an archive from `kerncap pack`: say how to get the folder back
    const zip = startsWithZipSignature(dir);
    throw new KerncapError("E_NOT_CAPTURE", zip ? `${dir} is a capture archive, not a capture folder` : `${dir} is a file, not a capture folder`, {
      hint: zip ? `Unpack it first: kerncap unpack ${shellPath(dir)} -o DIR, then give DIR.` : "Give the folder that `kerncap run --out DIR` wrote.",
    });
  }
  assertNotNested(dir);
  // bounded, a regular file with one name, opened without following a link or waiting on a FIFO
  const bytes = readInCapture(dir, MANIFEST_FILE, MANIFEST_MAX_BYTES);
  const set = bytes ? undefined : readCaptureSet(dir); // E_MANIFEST when damaged
  if (set) {
    const subs = set.captures.map((c) => join(dir, c.dir));
    throw new KerncapError(
      "E_NOT_CAPTURE",
      `${dir} holds ${subs.length} capture${subs.length === 1 ? "" : "s"} of one run (run --kernel A --kernel B / --capture-all), not one`,
      {
        hint: subs.length
          ? `Give one of them: ${subs.slice(0, 6).map(shellPath).join(", ")}${subs.length > 6 ? ", …" : ""}.`
          : "The set lists no capture; capture again.",
      },
    );
  }
  if (!bytes && isExportFolder(dir))
    // `kerncap export` wrote it: its data/ is the capture (src/export/export.ts)
    throw new KerncapError("E_NOT_CAPTURE", `${dir} is an exported reproducer (kerncap export), not a capture; the capture's data is in ${join(dir, "data")}`, {
      hint: `Give ${shellPath(join(dir, "data"))} (e.g. kerncap inspect ${shellPath(join(dir, "data"))}); the reproducer itself builds with make and runs as ./repro (its README.md).`,
    });
  if (!bytes) {
    const tmp = isTempName(dir);
    // a folder of captures (a corpus): name the ones in it (nu16 #11: "give the folder run wrote" named none)
    const held = tmp ? [] : capturesJustBelow(dir);
    throw new KerncapError(
      "E_NOT_CAPTURE",
      `${dir} has no ${MANIFEST_FILE}: not a complete capture${held.length ? `; it holds captures: ${listForTerminal(held, 6)}` : ""}`,
      {
        hint: tmp
          ? "This is the temporary folder of an interrupted capture; run the capture again."
          : held.length
            ? `Give one of them (e.g. ${shellPath(join(dir, held[0]!))}); kerncap check and kerncap clean take the whole folder.`
            : "Give the folder that `kerncap run --out DIR` wrote.",
      },
    );
  }
  const text = bytes.toString("utf8");
  const depth = jsonDepth(text);
  if (depth > JSON_MAX_DEPTH)
    throw new KerncapError("E_MANIFEST", `${path} nests ${depth} levels deep (a manifest kerncap writes nests fewer than ${JSON_MAX_DEPTH})`, {
      hint: "This is not a manifest kerncap wrote: a damaged or crafted capture. Capture again, or ask its sender for the capture as kerncap wrote it.",
    });
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_MANIFEST", `${path} is not valid JSON (${describeJsonError(text) || (e as Error).message}): ${(e as Error).message}`, {
      hint: "The manifest was damaged; capture again.",
    });
  }
  return parseManifest(json, path);
}

/** True when the file begins with a zip local-file header (PK\3\4), as `kerncap pack` writes. */
export function startsWithZipSignature(path: string): boolean {
  try {
    // never blocking, and only a regular file is asked (adversary 29: a FIFO named cap.zip hung inspect, replay, pack …)
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      if (!fstatSync(fd).isFile()) return false;
      const b = new Uint8Array(4);
      return readSync(fd, b, 0, 4, 0) === 4 && b[0] === 0x50 && b[1] === 0x4b && b[2] === 3 && b[3] === 4;
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
}

/**
 * Check that every file exists as a regular file with one name inside the folder (no link
 * followed: src/format/paths.ts) with its recorded size and SHA-256 (small files), and that the
 * memory images are such files of exactly memory.beforeFileBytes/afterFileBytes (an image recorded
 * as 0 bytes may be absent). Region contents are checked against sha256Before/After as they
 * are read (replay), so this stays cheap for tens of GB.
 * @throws KerncapError E_CHECKSUM naming the file, E_UNSAFE_PATH (a link, a hard link, a FIFO …).
 */
export function verifyFiles(dir: string, m: Manifest): void {
  for (const f of m.files) {
    const st = resolveInCapture(dir, f.path).stats; // E_UNSAFE_PATH: a link, a hard link, a device, a FIFO
    if (!st) throw new KerncapError("E_CHECKSUM", `${f.path} is missing from ${dir}`, { hint: "The capture is incomplete; capture again." });
    const size = st.size;
    if (size !== f.size)
      throw new KerncapError("E_CHECKSUM", `${f.path} has ${size} bytes, the manifest says ${f.size} (truncated or altered)`, {
        hint: "Capture again; the file was damaged.",
      });
    // read from one descriptor opened by the path rule, never by name again (adversary 66: a FIFO renamed over it hung the check)
    const img = openImageInCapture(dir, f.path);
    let h: string;
    try {
      if (img.size !== f.size)
        throw new KerncapError("E_CHECKSUM", `${f.path} has ${img.size} bytes, the manifest says ${f.size} (truncated or altered)`, {
          hint: "Capture again; the file was damaged.",
        });
      h = sha256Range(img, 0, img.size);
    } catch (e) {
      if (e instanceof RangeError)
        throw new KerncapError("E_CHECKSUM", `${f.path} was cut short while it was read`, { hint: "Capture again; the file was damaged." });
      throw e;
    } finally {
      img.close();
    }
    if (h !== f.sha256)
      throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${f.path} (sha256 ${h.slice(0, 12)}…, expected ${f.sha256.slice(0, 12)}…)`, {
        hint: "The file was altered after capture: capture again, or restore it from a copy (only `kerncap replay --no-verify` runs it as it is, unchecked).",
      });
  }
  for (const [file, want, need] of [
    [m.memory.before, m.memory.beforeFileBytes, storedEnd(m, "before")],
    [m.memory.after, m.memory.afterFileBytes, storedEnd(m, "after")],
  ] as const) {
    const st = resolveInCapture(dir, file).stats;
    // an empty image may be absent (finalizeCapture records 0 for a file the library did not write)
    if (want === 0 && need === 0 && !st) continue;
    if (!st) throw new KerncapError("E_CHECKSUM", `${file} is missing from ${dir}`, { hint: "The capture is incomplete; capture again." });
    const size = st.size;
    if (size < need)
      throw new KerncapError("E_CHECKSUM", `${file} in ${dir} is truncated: ${size} bytes, its stored chunks need ${need}`, {
        hint: "Capture again; the file was damaged.",
      });
    if (size !== want)
      throw new KerncapError(
        "E_CHECKSUM",
        `${file} in ${dir} has ${size} bytes, the manifest says ${want}: ${size > want ? "appended" : "truncated"} or altered`,
        { hint: "Capture again; the file was damaged." },
      );
  }
}

/**
 * Check the kc64 of every stored chunk in both memory images on the CPU (src/format/chunks.ts;
 * reads them once, through mmap). `kerncap replay` checks the restored memory on the GPU instead.
 * @throws KerncapError E_CHECKSUM naming the file, the range and the chunk.
 */
export function verifyRegions(dir: string, m: Manifest, onBytes?: (done: number, total: number) => void): void {
  verifyChunks(dir, m, onBytes);
}

/** verifyRegions that awaits `tick` (a signal's check) every 256 MiB hashed (src/format/chunks.ts verifyChunksAsync). */
export async function verifyRegionsAsync(dir: string, m: Manifest, tick: () => Promise<void>, onBytes?: (done: number, total: number) => void): Promise<void> {
  await verifyChunksAsync(dir, m, tick, onBytes);
}

/**
 * May `dir` (which exists) be replaced by a new capture? Only with force, and only when it is a
 * kerncap capture folder (kerncap.json of our format) or an empty folder: --force must never
 * delete a source tree or a home folder given by mistake.
 * `another` is how the verb names another output, for the hint (refuseExisting); `hint`, the hint
 * when --force would replace it but was not given (unpack's: another name first).
 * @throws KerncapError E_EXISTS saying why not.
 */
export function assertReplaceable(dir: string, force: boolean, another = "output folder (-o; kerncap writes a new folder there)", hint?: string): void {
  refuseExisting(dir, force, {
    found: replaceableKind(dir),
    why: "is not a kerncap capture",
    replaces: "a previous capture or an empty folder",
    another: another,
    ...(hint ? { hint } : {}),
  });
}

/**
 * What `--force` may replace at `dir`: "a previous capture" (a folder holding a capture's manifest
 * or a capture set's index), "an empty folder", or false for anything else (a file, another folder).
 */
export function replaceableKind(dir: string): "a previous capture" | "an empty folder" | false {
  try {
    if (!lstatSync(dir).isDirectory()) return false; // a link is not followed: nothing --force may replace
    if (formatOf(dir, MANIFEST_FILE) === MANIFEST_FORMAT) return "a previous capture";
    if (formatOf(dir, CAPTURE_SET_FILE) === "kerncap-capture-set") return "a previous capture"; // a folder of several captures (src/capture/session.ts)
    return readdirSync(dir).length === 0 ? "an empty folder" : false;
  } catch {
    return false;
  }
}

/**
 * The `format` field of the JSON file `rel` in `dir`, read by the capture path rule (no link
 * followed, a FIFO or device refused before any read, at most MANIFEST_MAX_BYTES: adversary 68, a
 * FIFO planted as a destination's kerncap.json hung unpack, a link to /dev/zero grew it to 6 GiB).
 * @returns undefined when there is no such file or it is no such JSON
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO, a device, past the bound)
 */
function formatOf(dir: string, rel: string): string | undefined {
  const b = readInCapture(dir, rel, MANIFEST_MAX_BYTES);
  if (!b) return undefined;
  try {
    const f = (JSON.parse(b.toString("utf8")) as { format?: unknown }).format;
    return typeof f === "string" ? f : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `dir` is a folder `kerncap export` wrote: its marker kerncap-export.json and a data/ folder holding kerncap.json, neither a link. */
function isExportFolder(dir: string): boolean {
  try {
    return lstatSync(join(dir, EXPORT_FILE)).isFile() && lstatSync(join(dir, "data")).isDirectory() && lstatSync(join(dir, "data", MANIFEST_FILE)).isFile();
  } catch {
    return false;
  }
}
