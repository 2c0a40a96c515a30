/**
 * The one rule for paths that kerncap takes from a manifest, an archive index or an MCP call: each
 * names a file inside the capture folder, reached without following a link. A relative path
 * (`/`-separated, no NUL or other control character, no backslash, not absolute, no `..`) is
 * resolved under the capture folder's real path (the folder the user named may itself be a link:
 * that name is the user's); every existing component below it must be a real folder, and the file
 * a regular file with one name (a symbolic link, a hard link with another name elsewhere, a device,
 * a FIFO or a socket is refused). Files are opened with O_NOFOLLOW|O_NONBLOCK and checked with
 * fstat after the open, so that a FIFO cannot hang a reader and a link swapped in after the check
 * is not followed; every read is bounded. Writes go to a temporary file created with
 * O_CREAT|O_EXCL|O_NOFOLLOW in the same folder, then renamed over the name: a link or a hard link
 * at the name is replaced, never written through.
 *
 * Who is guarded against (docs/security.md): a received capture or archive, another local user who
 * made the folder, an MCP agent. A folder changed by another process while kerncap works on it is
 * out of scope (checks and opens are separate calls for the memory images, which are mmapped).
 *
 * Errors: KerncapError E_UNSAFE_PATH (exit 2) naming the path, what it is and what to do.
 */
import { chmodSync, closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync, realpathSync, type Stats } from "node:fs";
import { homedir } from "node:os";
import { basename, join } from "node:path";
import { KerncapError, systemError, whileReading } from "../errors.ts";
import { noSuchCaptureFolder } from "./near-names.ts";
import { fdPath, openDirWalk, writeFileAtomic } from "../util/write-file.ts";
import { isEditorTemporary } from "./file-names.ts";

export { assertMergeSize, INPUT_FILE_MAX_BYTES, MERGE_MAX_BYTES, readInputBytes, readInputFile } from "./input-file.ts";

/** The largest kerncap.json (or capture-set index, build record) kerncap reads (bytes). */
export const MANIFEST_MAX_BYTES = 64 << 20;

const HINT =
  'A capture\'s files must be regular files inside its folder; kerncap follows no link out of a capture and writes nothing through one. If you made the link, replace it with the file itself (cp --remove-destination "$(readlink -f F)" F); a capture made elsewhere: capture again, or ask for a clean copy (kerncap pack).';

/** Why `rel` cannot name a file inside a capture folder (as a sentence's end), or undefined. */
export function relativePathProblem(rel: unknown): string | undefined {
  if (typeof rel !== "string") return "is not a string";
  if (rel.length === 0) return "is empty";
  if (rel.includes("\0")) return "holds a NUL byte";
  if (/[\x01-\x1f\x7f]/.test(rel)) return "holds a control character (a newline, a tab, …)";
  if (rel.includes("\\")) return "holds a backslash";
  if (rel.startsWith("/")) return "is an absolute path";
  if (rel.split("/").includes("..")) return "climbs out of the folder with ..";
  if (!rel.split("/").some((p) => p && p !== ".")) return "names the folder itself";
  return undefined;
}

/**
 * Longest name of one part of a source path (bytes of UTF-8): NAME_MAX of Linux file systems
 * (ext4, xfs, btrfs, tmpfs); a longer one cannot be created, and would fail as ENAMETOOLONG later.
 */
export const SOURCE_NAME_MAX = 255;
/**
 * Longest source path relative to the capture folder (bytes): the capture folder's own path, a
 * build's private copy (…/kerncap-run-XXXXXX/src/…) and an eval candidate's
 * (CAP/build/eval/<hash>/src/…) are prefixed to it and must stay within PATH_MAX (4096 bytes),
 * which every open, lstat and the compiler's own path handling take at most.
 */
export const SOURCE_PATH_MAX = 1024;
/**
 * Most parts of a source path (folders and the file): deeper than any real source tree, and far
 * from what the recursive walks of src/ (pack, the build's scans) and the compiler's include
 * search can take.
 */
export const SOURCE_DEPTH_MAX = 32;

/**
 * Why `rel` (a source path relative to the capture folder, src/…, or to src/) is too long or too
 * deep to be written as a source (as a sentence's end), or undefined. The one rule for every
 * source name an agent or a candidate gives (MCP edit_file, evaluate's files and patches): a path
 * past it would be written, then fail every later read of the capture (pack, validate) as
 * ENAMETOOLONG.
 */
export function sourcePathProblem(rel: string): string | undefined {
  const bytes = Buffer.byteLength(rel, "utf8");
  if (bytes > SOURCE_PATH_MAX) return `is ${bytes} bytes long; a source path is at most ${SOURCE_PATH_MAX} bytes`;
  const parts = rel.split("/").filter((x) => x && x !== ".");
  if (parts.length > SOURCE_DEPTH_MAX) return `is ${parts.length} parts deep; a source path has at most ${SOURCE_DEPTH_MAX} parts`;
  const long = parts.find((x) => Buffer.byteLength(x, "utf8") > SOURCE_NAME_MAX);
  if (long) return `has a part of ${Buffer.byteLength(long, "utf8")} bytes; a file or folder name is at most ${SOURCE_NAME_MAX} bytes`;
  return undefined;
}

/** A path as a message shows it: JSON-quoted when it holds anything unprintable. */
export function shownPath(rel: string): string {
  return /^[\x20-\x7e\u00a0-\uffff]*$/.test(rel) && !rel.includes('"') ? rel : JSON.stringify(rel);
}

function unsafe(dir: string, rel: string, what: string, hint = HINT): KerncapError {
  return new KerncapError("E_UNSAFE_PATH", `${shownPath(rel)} in ${dir} ${what}`, { hint });
}

/** What a file that is not a regular file is, for messages: "a FIFO", "a symbolic link" … */
export function fileKind(st: Stats): string {
  return st.isSymbolicLink()
    ? "a symbolic link"
    : st.isDirectory()
      ? "a folder"
      : st.isFIFO()
        ? "a FIFO"
        : st.isCharacterDevice()
          ? "a character device"
          : st.isBlockDevice()
            ? "a block device"
            : st.isSocket()
              ? "a socket"
              : "not a regular file";
}

/** The checks on a file's own entry (lstat or fstat): a regular file with one name. */
function checkEntry(dir: string, rel: string, st: Stats): void {
  if (!st.isFile()) throw unsafe(dir, rel, `is ${fileKind(st)}; a capture's files must be regular files inside it`);
  if (st.nlink > 1)
    throw unsafe(
      dir,
      rel,
      `is a hard link (${st.nlink} names share its data, some perhaps outside the capture); a capture's files must be regular files with one name`,
      "Replace it with a copy of its own (cp F F.copy && mv F.copy F), or capture again.",
    );
}

/** lstat, undefined when nothing is there (ENOENT, or ENOTDIR under a file). */
function lstatOrNone(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw systemError(whileReading(e, p)) ?? e;
  }
}

/**
 * The real path of the capture folder (the user's own name for it may be a link); a folder kerncap
 * holds open (/proc/self/fd/N: src/util/write-file.ts makePrivateTemp) as it is, reached through
 * its fd rather than by a name another user could swap. @throws E_IO/E_NOT_CAPTURE
 */
function realFolder(dir: string): string {
  if (/^\/proc\/self\/fd\/\d+$/.test(dir)) return dir;
  try {
    return realpathSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") throw noSuchCaptureFolder(dir);
    throw systemError(e) ?? e;
  }
}

export interface CapturePath {
  /** Absolute path under the capture folder's real path. */
  path: string;
  /** The file's lstat, undefined when it does not exist (yet). */
  stats?: Stats;
}

/**
 * Resolve `rel` (a path from a manifest, an index or a tool call) inside capture folder `dir`:
 * every existing folder on the way is a real folder, and the file, when there, is a regular file
 * with one name. A missing file is not an error here (readers say what is missing).
 * @throws KerncapError E_UNSAFE_PATH naming `rel` (malformed, a link, a hard link, a device, a FIFO,
 *   a socket, a folder, a part of the path that is a file)
 */
export function resolveInCapture(dir: string, rel: string): CapturePath {
  const problem = relativePathProblem(rel);
  if (problem)
    throw unsafe(
      dir,
      String(rel),
      `${problem}; a capture's paths are relative to its folder, inside it`,
      "The manifest, the archive or the tool call names a path that kerncap does not write; give a path such as src/kernel.cu, or capture again.",
    );
  let p = realFolder(dir);
  const parts = rel.split("/").filter((x) => x && x !== ".");
  const last = parts.pop()!; // relativePathProblem refused a path without a part
  for (let i = 0; i < parts.length; i++) {
    p = join(p, parts[i]!);
    const st = lstatOrNone(p);
    if (!st) return { path: join(p, ...parts.slice(i + 1), last) };
    const shown = parts.slice(0, i + 1).join("/");
    if (st.isSymbolicLink()) throw unsafe(dir, shown, "is a symbolic link; a capture's files must be regular files inside it, reached through its own folders");
    if (!st.isDirectory())
      throw unsafe(dir, shown, `is ${fileKind(st)}, not a folder, so ${shownPath(rel)} cannot be inside it`, "Give a path through the capture's folders.");
  }
  p = join(p, last);
  const st = lstatOrNone(p);
  if (st) checkEntry(dir, [...parts, last].join("/"), st);
  return { path: p, stats: st };
}

/**
 * The folder `rel` inside capture folder `dir` (`.` or "": the capture folder itself), by the same
 * rule as a file's: every part a real folder reached through the capture's own folders, no link
 * followed. Undefined when it does not exist.
 * @returns its absolute path under the capture folder's real path
 * @throws KerncapError E_UNSAFE_PATH naming `rel` (malformed, a part that is a link or not a folder)
 */
export function folderInCapture(dir: string, rel: string): string | undefined {
  const root = realFolder(dir);
  const parts = rel.split("/").filter((x) => x && x !== ".");
  const problem = rel === "" ? undefined : relativePathProblem(rel);
  if (!parts.length && (!problem || problem === "names the folder itself")) return root;
  if (problem) throw unsafe(dir, String(rel), `${problem}; a capture's paths are relative to its folder, inside it`, "Give a folder such as src.");
  let p = root;
  for (let i = 0; i < parts.length; i++) {
    p = join(p, parts[i]!);
    const st = lstatOrNone(p);
    if (!st) return undefined;
    const shown = parts.slice(0, i + 1).join("/");
    if (st.isSymbolicLink()) throw unsafe(dir, shown, "is a symbolic link; a capture's folders are real folders inside it (no link is followed)");
    if (!st.isDirectory()) throw unsafe(dir, shown, `is ${fileKind(st)}, not a folder`, "Give a folder of the capture, such as src.");
  }
  return p;
}

/**
 * Refuse, before a build runs, anything under the capture's folder `rel` (src/) that is neither a
 * regular file nor a folder: a symbolic link (the compiler would read through it, outside the
 * capture), a FIFO (the compiler would wait on it for ever), a device (it would read /dev/zero
 * until memory runs out), a socket. The same rule as every file kerncap reads itself
 * (resolveInCapture), for the files a build's compiler or interpreter reads by name: a received
 * capture shows its build.sh before --trust, not its sources, so it is said here rather than found
 * as a hang. No link is followed; a missing `rel` passes (a capture without sources); an editor's
 * temporary (isEditorTemporary: Emacs' lock link .#x.cu, a vim swap file) that is a file or a link is
 * passed over, as the build's private copy, pack and export leave it out.
 * @throws KerncapError E_UNSAFE_PATH naming the first such entry (sorted walk) and what it is
 */
export function assertRegularTree(dir: string, rel: string): void {
  const root = realFolder(dir);
  const walk = (r: string) => {
    const st = lstatOrNone(join(root, r));
    if (!st) return;
    if (st.isDirectory()) {
      let names: string[];
      try {
        names = readdirSync(join(root, r)).sort();
      } catch (e) {
        throw systemError(whileReading(e, join(root, r))) ?? e;
      }
      for (const n of names) walk(`${r}/${n}`);
    } else if (isEditorTemporary(basename(r)) && (st.isFile() || st.isSymbolicLink())) {
      // an editor's lock link (Emacs' .#x.cu, dangling) or swap file: no source; the build's private copy leaves it out (src/format/staged-build.ts), as pack and export do
    } else if (!st.isFile()) {
      throw unsafe(
        dir,
        r,
        `is ${fileKind(st)}; the files under ${rel}/ that a build reads must be regular files inside the capture (a link reads outside it, a FIFO or a device hangs or floods the compiler)`,
        `Replace it with a regular file, or remove it if the sources do not need it; nothing was built. A capture made elsewhere: ask for a clean copy (kerncap pack archives regular files only).`,
      );
    }
  };
  walk(rel);
}

/**
 * The entries under `root`/`rel`, depth first in sorted order, each with its lstat (no link
 * followed: a link is an entry, never a way in); `rel` paths are `/`-separated from `root` (`rel`
 * "": the entries of `root` itself). A folder that cannot be read is passed over; a folder for
 * which `descend` says false is an entry, its content not walked. Stop early by breaking out of
 * the loop.
 */
export function* treeEntries(root: string, rel: string, descend: (rel: string) => boolean = () => true): Generator<{ rel: string; st: Stats }> {
  let names: string[];
  try {
    names = readdirSync(join(root, rel)).sort();
  } catch {
    return;
  }
  for (const n of names) {
    const r = rel ? `${rel}/${n}` : n;
    const st = lstatOrNone(join(root, r));
    if (!st) continue;
    yield { rel: r, st };
    if (st.isDirectory() && descend(r)) yield* treeEntries(root, r, descend);
  }
}

/**
 * Take the group and other write bits off `root` and every file and folder under it (no link
 * followed; only what the user owns): copyFileSync and cpSync keep a source's mode, and a file
 * under src/ others may write makes a capture received (src/format/received.ts notYours). For what
 * kerncap copies into a capture (a project's sources) or into a private copy of one (eval's).
 */
export function withoutOthersWrite(root: string): void {
  const uid = process.geteuid?.();
  const strip = (p: string, st: Stats) => {
    if (!st.isSymbolicLink() && st.mode & 0o022 && (uid === undefined || st.uid === uid)) chmodSync(p, st.mode & 0o7777 & ~0o022);
  };
  const top = lstatOrNone(root);
  if (!top) return;
  strip(root, top);
  if (top.isDirectory()) for (const { rel, st } of treeEntries(root, "")) strip(join(root, rel), st);
}

/**
 * The folder of one member of a capture set (`name`: the `dir` of an entry of
 * kerncap-captures.json, one folder name) inside the set's folder `setDir`: a real folder there,
 * never a link. The same rule as a capture's own files: a set's members are its content, and a
 * member that is a link would open a capture outside the folder named (outside an MCP server's
 * --root) under a name inside it.
 * @returns the member's absolute path under the set folder's real path
 * @throws KerncapError E_UNSAFE_PATH (not one folder name, a link, not a folder), E_NOT_CAPTURE (no set folder)
 */
export function captureSetMember(setDir: string, name: string): string {
  const problem = relativePathProblem(name) ?? (name.split("/").filter((x) => x && x !== ".").length !== 1 ? "is not one folder name" : undefined);
  if (problem)
    throw unsafe(setDir, String(name), `${problem}; a capture set's members are folders inside it`, "The capture set's index was damaged; capture again.");
  const p = join(realFolder(setDir), name);
  const st = lstatOrNone(p);
  if (st && !st.isDirectory())
    throw unsafe(
      setDir,
      name,
      `is ${fileKind(st)}, not a folder; a capture set's members are capture folders inside it`,
      "Give the capture itself (its own folder), or capture again.",
    );
  return p;
}

/**
 * The absolute path of a file the manifest names (module, parameters, memory images, files[]),
 * checked by the one path rule (src/format/paths.ts): inside the folder, no link followed, a
 * regular file with one name when it exists.
 * @throws KerncapError E_UNSAFE_PATH
 */
export function capturePath(dir: string, rel: string): string {
  return resolveInCapture(dir, rel).path;
}

/**
 * An open descriptor of the regular file `rel` inside `dir` (O_RDONLY|O_NOFOLLOW|O_NONBLOCK, then
 * fstat: a FIFO or device is refused before any read, a link at the last component is never
 * followed), of at most maxBytes bytes. The caller closes it.
 * @returns undefined when there is no such file
 * @throws KerncapError E_UNSAFE_PATH (as resolveInCapture, and a file past maxBytes), E_IO
 */
export function openInCapture(dir: string, rel: string, maxBytes: number): { fd: number; path: string; size: number } | undefined {
  const { path, stats } = resolveInCapture(dir, rel);
  if (!stats) return undefined;
  const fd = openFileWalk(dir, rel, path);
  if (fd === undefined) return undefined;
  try {
    const st = fstatSync(fd);
    checkEntry(dir, rel, st);
    // the file opened is the one the check saw (a swap between the two is refused, not read)
    if (st.dev !== stats.dev || st.ino !== stats.ino) throw changed(dir, rel);
    if (st.size > maxBytes)
      throw unsafe(dir, rel, `has ${st.size} bytes; kerncap reads at most ${maxBytes} bytes from it`, "It is not a file kerncap wrote; capture again.");
    return { fd, path, size: st.size };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/** E_UNSAFE_PATH: `rel` changed between kerncap's check and its use (another process at work in the folder). */
export function changed(dir: string, rel: string): KerncapError {
  return unsafe(
    dir,
    rel,
    "changed while kerncap was reading it (replaced, or a folder on its way swapped for a link)",
    "Another process is changing the folder: if other users can write it, work on a copy only you can write (kerncap pack it, then kerncap unpack the archive where only you write); otherwise try again when nothing writes to it.",
  );
}

/**
 * Open the file `rel` inside capture folder `dir` read-only (O_RDONLY|O_NOFOLLOW|O_NONBLOCK)
 * through folders opened one by one with O_DIRECTORY|O_NOFOLLOW from the folder's real path
 * (src/util/write-file.ts openDirWalk): a folder on the way swapped for a link after a check is
 * never followed. The caller fstats and closes the fd.
 * @returns undefined when there is no such file
 * @throws KerncapError E_UNSAFE_PATH (a link at any component), E_IO
 */
export function openFileWalk(dir: string, rel: string, path = join(dir, rel)): number | undefined {
  const parts = rel.split("/").filter((x) => x && x !== ".");
  const last = parts.pop()!;
  let d: { fd: number };
  try {
    d = openDirWalk(dir, parts);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as { cause?: NodeJS.ErrnoException }).cause?.code;
    if (code === "ENOENT") return undefined;
    if (e instanceof KerncapError && e.code === "E_UNSAFE_PATH") throw changed(dir, rel);
    throw e;
  }
  try {
    return openSync(fdPath(d.fd, last), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    if (code === "ELOOP") throw unsafe(dir, rel, "is a symbolic link; a capture's files must be regular files inside it");
    throw systemError(Object.assign(e as object, { path })) ?? e;
  } finally {
    closeSync(d.fd);
  }
}

/**
 * The bytes of the regular file `rel` inside `dir` (openInCapture's checks), at most maxBytes.
 * @returns undefined when there is no such file
 * @throws KerncapError E_UNSAFE_PATH, E_IO
 */
export function readInCapture(dir: string, rel: string, maxBytes: number): Buffer | undefined {
  const f = openInCapture(dir, rel, maxBytes);
  if (!f) return undefined;
  try {
    const b = Buffer.alloc(f.size);
    let done = 0;
    for (;;) {
      // a file that grew since fstat is read to the bound only
      const n = readSync(f.fd, b, done, b.length - done, done);
      if (n === 0) break;
      done += n;
      if (done === b.length) break;
    }
    return b.subarray(0, done);
  } catch (e) {
    throw systemError(Object.assign(e as object, { path: f.path })) ?? e;
  } finally {
    closeSync(f.fd);
  }
}

/**
 * readInCapture for a file the manifest lists, which must be there.
 * @throws KerncapError E_CHECKSUM when it is missing, E_UNSAFE_PATH, E_IO
 */
export function readCaptureBytes(dir: string, rel: string, maxBytes: number): Buffer {
  const b = readInCapture(dir, rel, maxBytes);
  if (!b) throw new KerncapError("E_CHECKSUM", `${shownPath(rel)} is missing from ${dir}`, { hint: "The capture is incomplete; capture again." });
  return b;
}

/**
 * Create the folders of `rel` (a folder path) inside `dir`, none of them through a link.
 * @returns the folder's absolute path
 * @throws KerncapError E_UNSAFE_PATH, E_IO
 */
export function mkdirInCapture(dir: string, rel: string): string {
  const problem = relativePathProblem(rel);
  if (problem) throw unsafe(dir, rel, `${problem}; a capture's paths are relative to its folder, inside it`);
  let p = realFolder(dir);
  const parts = rel.split("/").filter((x) => x && x !== ".");
  for (let i = 0; i < parts.length; i++) {
    p = join(p, parts[i]!);
    const st = lstatOrNone(p);
    if (st && !st.isDirectory()) throw unsafe(dir, parts.slice(0, i + 1).join("/"), `is ${fileKind(st)}, not a folder`);
  }
  // made inside folders opened with O_NOFOLLOW one by one (mode 0755, never group-writable whatever the umask:
  // a group-writable capture counts as received, src/format/received.ts): a folder swapped for a link meanwhile is refused
  closeSync(openDirWalk(dir, parts, { create: true }).fd);
  return p;
}

/**
 * Whether a file name is one of writeInCapture's temporaries (src/leftovers.ts tempFor): a watcher of the
 * folder must not take kerncap's own write (the CUDA slice remade before a build) for a save.
 */
export function isCaptureTemp(name: string): boolean {
  return /\.tmp-\d+-[0-9a-z]{6,}$/.test(name);
}

/**
 * Write `data` as the file `rel` inside `dir`: its folders created (mkdirInCapture), a temporary
 * file beside it (O_CREAT|O_EXCL|O_NOFOLLOW; the permission bits of the file it replaces, else
 * `mode`), then renamed over the name. A link or hard link at the name is refused
 * (resolveInCapture) and could not be written through anyway.
 * @returns the file's absolute path
 * @throws KerncapError E_UNSAFE_PATH, E_IO (ENOSPC, EACCES …)
 */
export function writeInCapture(dir: string, rel: string, data: string | Uint8Array, mode = 0o644): string {
  const { path } = resolveInCapture(dir, rel);
  // the one writer (src/util/write-file.ts): folders opened from the capture's real path with no link followed,
  // an unguessable O_EXCL|O_NOFOLLOW temp in the open folder, fsync, rename within it
  writeFileAtomic(path, data, { mode: mode & ~process.umask(), root: realFolder(dir), create: true }); // a replaced file keeps its bits
  return path;
}

/**
 * Refuse an output path that already exists, unless `force` is given and what is there is the one
 * thing --force may replace. The hint offers --force only where --force would replace it; where it
 * would not, it says to choose another name or to move the thing away yourself. One wording for
 * every writer (demo, run, pack, unpack, export).
 * @param path the output, as it will be named in the message.
 * @param o.found what is there when --force may replace it ("a previous capture", "an empty
 *   folder"), or false when it may not; o.why then says what it is ("is not a kerncap capture").
 * @param o.replaces what --force replaces ("a previous capture or an empty folder").
 * @param o.another how to name another output ("output folder (-o)", "DIR").
 * @param o.hint the hint when --force may replace it but was not given (default: --force, or another output).
 * @throws KerncapError E_EXISTS; returns only when `force` and `o.found`.
 */
export function refuseExisting(
  path: string,
  force: boolean,
  o: { found: string | false; why: string; replaces: string; another: string; hint?: string },
): void {
  if (o.found === false) {
    throw new KerncapError("E_EXISTS", `${path} exists and ${o.why}; ${force ? "--force" : "kerncap"} replaces only ${o.replaces}`, {
      hint: `Choose another ${o.another}, or move or remove ${path} yourself if it should go.`,
    });
  }
  if (!force)
    throw new KerncapError("E_EXISTS", `${path} already exists (${o.found})`, {
      hint: o.hint ?? `Pass --force to replace it, or choose another ${o.another}.`,
    });
}

/**
 * Whether the absolute folder `p` is "/", the user's home folder or a folder above it (as named
 * and with links resolved, against $HOME and os.homedir()): a folder too broad to hand to a
 * confined build or to count as a toolchain's (it holds the user's keys and tokens).
 */
export function homeOrAbove(p: string): boolean {
  const norm = (x: string) => (x.length > 1 ? x.replace(/\/+$/, "") : x);
  const real = (x: string) => {
    try {
      return realpathSync(x);
    } catch {
      return x;
    }
  };
  const homes = [process.env.HOME, homedir()].filter((h): h is string => !!h && h.startsWith("/")).flatMap((h) => [norm(h), norm(real(h))]);
  return [norm(p), norm(real(p))].some((q) => q === "/" || homes.some((h) => h === q || h.startsWith(`${q}/`)));
}
