/**
 * The one way kerncap writes a whole file beside the user's files (a JUnit report, a baseline, an
 * archive, a capture's own files through src/format/paths.ts writeInCapture): a temp file created
 * with O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600) under an unguessable name (`PATH.tmp-<pid>-<random
 * token>`, src/leftovers.ts tempFor), written, fsync'd, given its mode, then renamed over the
 * target. A link another user planted at the temp name is never followed (O_EXCL|O_NOFOLLOW fail
 * on it, and the name cannot be guessed anyway); a target that is itself a symbolic link is refused
 * (E_UNSAFE_PATH, exit 2), never written through nor silently replaced. A reader never sees half a file;
 * a failed write leaves no temp behind.
 *
 * Appended files (check's results.jsonl) are opened with openNoFollow: O_NOFOLLOW, so a link at
 * the name (dangling or not) is refused rather than followed.
 */
import { closeSync, constants, existsSync, fchmodSync, fsyncSync, lstatSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { KerncapError, systemError } from "../errors.ts";
import { tempFor } from "../leftovers.ts";

/** The mode a new file gets from open(2) by default: 0666 less the process's umask. */
function defaultMode(): number {
  return 0o666 & ~process.umask();
}

/**
 * Refuse `path` when it is a symbolic link (dangling or not): kerncap writes no file through a
 * link, and replacing one the user made would surprise them as much.
 * @param what what the file is, for the message ("the JUnit report", "the results file")
 * @returns the target's lstat, or undefined when there is nothing at the name
 * @throws KerncapError E_UNSAFE_PATH (exit 2) naming the path and where the link points
 */
export function refuseLink(path: string, what = "the file to write") {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return undefined;
  }
  if (st.isSymbolicLink()) {
    throw new KerncapError("E_UNSAFE_PATH", `${path} (${what}) is a symbolic link: kerncap never writes through a link`, {
      hint: "Remove the link (rm), or name the real file; in a folder that other users can write, anyone may plant one.",
    });
  }
  return st;
}

/**
 * A new temp file beside `path` (tempFor's unguessable name; O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW,
 * mode 0600), for a writer that streams (kerncap pack); finish with commitTemp, or on failure
 * close the fd and remove the temp.
 * @throws the file system's error worded by systemError (E_IO: EACCES, ENOSPC…)
 */
export function openTempBeside(path: string): { fd: number; tmp: string } {
  const tmp = tempFor(path);
  try {
    return { fd: openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600), tmp };
  } catch (e) {
    throw systemError(Object.assign(e as object, { path: tmp })) ?? e;
  }
}

/**
 * Finish a temp of openTempBeside: fsync, the mode set (`mode`: the replaced file's bits, else
 * 0666 less the umask), closed, renamed over `path`. The fd is closed whatever happens; the temp is
 * removed when this fails.
 * @throws KerncapError E_UNSAFE_PATH when `path` became a link meanwhile; the file system's errors
 */
export function commitTemp(fd: number, tmp: string, path: string, mode?: number, sync = true): void {
  let open = true;
  try {
    const st = refuseLink(path);
    fchmodSync(fd, mode ?? (st?.isFile() ? st.mode & 0o777 : defaultMode()));
    if (sync) fsyncSync(fd);
    closeSync(fd);
    open = false;
    renameSync(tmp, path);
  } catch (e) {
    if (open) closeSync(fd);
    rmSync(tmp, { force: true });
    throw systemError(e) ?? e;
  }
}

/**
 * Write `data` as the whole file `path`, atomically and through no link (see the module's
 * comment). The file keeps the permission bits of the one it replaces, else `o.mode`, else 0666
 * less the umask. `o.sync` false: no fsync (a scratch file of build/, remade when lost).
 * @throws KerncapError E_UNSAFE_PATH when `path` is a symbolic link; E_IO and the file system's errors
 *   (ENOENT for a missing folder, EISDIR …) worded by systemError
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, o: { mode?: number; what?: string; sync?: boolean } = {}): void {
  const st = refuseLink(path, o.what);
  const { fd, tmp } = openTempBeside(path);
  try {
    const b = typeof data === "string" ? Buffer.from(data) : data;
    for (let done = 0; done < b.length; ) done += writeSync(fd, b, done, b.length - done);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw systemError(e) ?? e;
  }
  commitTemp(fd, tmp, path, st?.isFile() ? st.mode & 0o777 : o.mode, o.sync ?? true);
}

/**
 * Open `path` without following a link at its last component (O_NOFOLLOW; `flags` the rest:
 * O_WRONLY|O_APPEND|O_CREAT for a log appended to, O_RDWR to cut it). A link there, dangling or
 * not, is refused.
 * @throws KerncapError E_UNSAFE_PATH; the file system's errors
 */
export function openNoFollow(path: string, flags: number, what: string, mode = 0o644): number {
  refuseLink(path, what);
  try {
    return openSync(path, flags | constants.O_NOFOLLOW, mode);
  } catch (e) {
    // a link put there between the check and the open
    if ((e as NodeJS.ErrnoException).code === "ELOOP") refuseLink(path, what);
    throw systemError(Object.assign(e as object, { path })) ?? e;
  }
}

/**
 * A file a verb writes at its end (check's --junit, --write-baseline, --report, --csv; tune's
 * --report, --csv), checked before the work starts, so a typo does not cost the whole run: its
 * folder exists and it is neither a folder nor a symbolic link.
 * @throws KerncapError E_USAGE naming the option and the path, E_UNSAFE_PATH for a link
 */
export function checkOutputFile(option: string, path: string): void {
  const p = resolve(path);
  refuseLink(p, `--${option}`); // written through no link (writeFileAtomic), said before the work rather than after it
  const hint = `Give --${option} a file in an existing folder.`;
  if (existsSync(p) && statSync(p).isDirectory()) throw new KerncapError("E_USAGE", `--${option} ${p} is a folder`, { hint: `${hint} For example --${option} ${join(p, ({ junit: "check.xml", report: "report.html", csv: "report.csv" } as Record<string, string>)[option] ?? "baseline.json")}.` });
  const parent = dirname(p);
  if (!existsSync(parent) || !statSync(parent).isDirectory()) throw new KerncapError("E_USAGE", `--${option} ${p}: there is no folder ${parent}`, { hint: `${hint} Make it first (mkdir -p ${parent}).` });
}

