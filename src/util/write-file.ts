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
 *
 * No link in a middle component either, even one swapped in after a check: the folder a file goes
 * into is opened once by walking from `/` (openDirWalk: each component opened with
 * O_DIRECTORY|O_NOFOLLOW relative to the one before, through /proc/self/fd/N, which the kernel
 * resolves to the open folder itself and not by name), and the temp's create and the rename name
 * `/proc/self/fd/N/NAME`: another user who swaps a folder of the path for a link after that open
 * changes nothing kerncap writes (Linux's openat/renameat, which Bun has no call for). The walk
 * starts from the real path of a trusted root (the user's own name for a folder may be a link; a
 * capture folder's own name is the user's too); below the root no link is followed.
 */
import {
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { KerncapError, systemError } from "../errors.ts";
import { escapeForTerminal, listForTerminal } from "../escape.ts";
import { log } from "../log.ts";
import { isPrivateGroup } from "../user-group.ts";
import { tempFor } from "../leftovers.ts";
import { walkPhysically } from "../path-walk.ts";
import { settleFolderModes } from "./folder-modes.ts";

/** The path of `name` inside the folder open as `fd` (the kernel resolves /proc/self/fd/N to the folder itself). */
export function fdPath(fd: number, name?: string): string {
  return name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;
}

/** The open folder fd that a fdPath names, or undefined for any other path. */
function fdOfPath(p: string): number | undefined {
  const m = /^\/proc\/self\/fd\/(\d+)\//.exec(p);
  return m ? Number(m[1]) : undefined;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Refuse a folder path that passes through a symbolic link another user (not root) made and can
 * change: one in a sticky, world-writable folder (/tmp) that is not that folder's owner's, the
 * links Linux itself does not follow with fs.protected_symlinks=1 (a machine may have it off), or
 * one in a folder of its owner's. Through `-o /tmp/work/out` the owner of a link /tmp/work chose where the
 * output went (adversary 38: an unpack, an export and a pack written into the victim's ~/t09).
 * Every prefix of `folder` as given (made absolute) is looked at with lstat, and each link met is
 * walked in its place, as the kernel resolves it (its target's components, `..` from where the
 * links led), so another user's link that a link of the user's names is judged too; a missing
 * entry, or more than 40 links, ends the walk (the caller's own checks and open say it).
 * @param what what kerncap writes there, for the message ("the archive"); with `reads`, what it reads there ("the candidate")
 * @throws KerncapError E_UNSAFE_PATH naming the link and its owner, with `hint`
 */
export function refusePlantedLinks(
  folder: string,
  what = "what kerncap writes",
  hint = "Name a folder of your own (the folder the link names, if it is yours, by its own path).",
  reads = false,
): void {
  const me = process.getuid?.() ?? -1;
  // the path as given (made absolute), and the target of every link on the way walked in its place, as the kernel
  // resolves it: a link of the user's own whose target is another user's link is judged there too (adversary 87 #03a)
  for (const s of walkPhysically(folder)) {
    // a path that grew past PATH_MAX through links cannot be judged here, and the kernel still follows it (adversary 90 #04a)
    if (s.kind === "missing" && s.code === "ENAMETOOLONG")
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${escapeForTerminal(JSON.stringify(folder), { oneLine: true })} leads, through its links, to a path longer than the system's limit (${s.path.length} characters and more): kerncap cannot check it for links another user made`,
        { hint },
      );
    if (s.kind !== "entry") return; // missing, or a loop: the caller's own open says so (ENOENT, ELOOP)
    if (s.target === undefined || s.st.uid === me || s.st.uid === 0) continue;
    // `s.parent` holds no link (each one met was walked in its place): the folder the link lies in, as it is
    const parent = lstatSync(s.parent);
    // in a folder others may write, sticky or not (as protected_symlinks for /tmp; adversary 87 #03c: a 0777 folder, root's or
    // the user's own), or in a folder of its owner's (they can point it elsewhere at any time: adversary 40, a link in their own /tmp/x)
    if ((parent.mode & 0o022) !== 0 || parent.uid === s.st.uid)
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${escapeForTerminal(JSON.stringify(s.path), { oneLine: true })} is a symbolic link that another user (uid ${s.st.uid}) made in ${s.parent}, ${parent.uid === s.st.uid ? "a folder of theirs" : "a folder others may write"}: following it would let them choose ${reads ? `what kerncap reads as ${what}` : `where ${what} is written`}`,
        { hint },
      );
  }
}

/**
 * Open the folder `root`/`below…` with no link followed below `root`'s real path: `root` is
 * resolved once (realpath: the user's own name, links and all), then every component of that real
 * path and of `below` is opened with O_DIRECTORY|O_NOFOLLOW relative to the folder opened before it
 * (fdPath). A component swapped for a link after the realpath, or one of `below` that is a link, is
 * refused, never followed. `create`: a missing folder of `below` is made (mode 0755) in the open
 * parent. The caller closes the fd.
 * @returns the folder's fd and its path as messages name it
 * @throws KerncapError E_UNSAFE_PATH naming the component that is a link or not a folder (or changed
 *   while kerncap used it); ENOENT and the other file system errors worded by systemError
 */
export function openDirWalk(root: string, below: string[] = [], o: { create?: boolean } = {}): { fd: number; path: string } {
  // a folder kerncap holds open (makePrivateTemp's at): opened through the fd, never by its name
  const held = /^\/proc\/self\/fd\/\d+$/.test(root);
  let real = "/";
  if (!held) refusePlantedLinks(root);
  try {
    if (!held) real = realpathSync(root);
  } catch (e) {
    throw systemError(Object.assign(e as object, { path: root })) ?? e;
  }
  const parts = [
    ...real
      .split("/")
      .filter(Boolean)
      .map((p) => ({ p, mine: false })),
    ...below.filter((p) => p && p !== ".").map((p) => ({ p, mine: true })),
  ];
  let fd = held ? openSync(root, constants.O_RDONLY | constants.O_DIRECTORY) : openSync("/", DIR_FLAGS);
  let shown = held ? root : "/";
  try {
    for (const { p, mine } of parts) {
      if (p === "..")
        throw new KerncapError("E_UNSAFE_PATH", `${join(shown, p)}: kerncap walks no .. below a folder it writes in`, { hint: "Name the file without .." });
      const at = join(shown, p);
      let next: number;
      try {
        next = openSync(fdPath(fd, p), DIR_FLAGS);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === "ENOENT" && mine && o.create) {
          try {
            mkdirSync(fdPath(fd, p), 0o755); // never group-writable whatever the umask
          } catch (e2) {
            if ((e2 as NodeJS.ErrnoException).code !== "EEXIST") throw systemError(Object.assign(e2 as object, { path: at })) ?? e2;
          }
          next = openSync(fdPath(fd, p), DIR_FLAGS);
        } else if (code === "ELOOP" || code === "ENOTDIR") {
          let link = code === "ELOOP";
          try {
            link = lstatSync(fdPath(fd, p)).isSymbolicLink(); // O_DIRECTORY|O_NOFOLLOW on a link: ENOTDIR
          } catch {
            /* gone meanwhile */
          }
          throw new KerncapError(
            "E_UNSAFE_PATH",
            `${at} is ${link ? "a symbolic link" : "not a folder"} (${mine ? "kerncap follows no link below the folder it writes in" : "it changed while kerncap was using it"})`,
            {
              hint: "Another process may be changing the folder: if it is shared with other users, work in a folder only you can write. Otherwise replace the link with the folder itself.",
            },
          );
        } else throw systemError(Object.assign(e as object, { path: at })) ?? e;
      }
      closeSync(fd);
      fd = next;
      shown = at;
    }
    return { fd, path: shown };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

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
export function refuseLink(path: string, what = "the file to write", at = path) {
  let st;
  try {
    st = lstatSync(at);
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
export function openTempBeside(path: string, root?: string, o: { create?: boolean } = {}): { fd: number; tmp: string } {
  const dir = dirname(path);
  let top = root ?? dir;
  let rel = relative(resolve(top), resolve(dir));
  // a root named through a link (the user's name for the capture) and a path under its real path
  if (rel.startsWith("..")) rel = relative(realpathSync(top), resolve(dir));
  // a file that is not under the root after all (a scratch folder elsewhere): its own folder is the root
  if (rel.startsWith("..") || isAbsolute(rel)) [top, rel] = [dir, ""];
  const d = openDirWalk(top, rel ? rel.split("/") : [], o);
  const tmp = fdPath(d.fd, basename(tempFor(path)));
  try {
    return { fd: openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600), tmp };
  } catch (e) {
    closeSync(d.fd);
    throw systemError(Object.assign(e as object, { path: join(dir, basename(tmp)) })) ?? e;
  }
}

/** Give up a temp of openTempBeside: the fd closed (when open), the temp removed, its folder's fd closed. */
export function discardTemp(fd: number | undefined, tmp: string): void {
  if (fd !== undefined) {
    try {
      closeSync(fd);
    } catch {
      /* closed already */
    }
  }
  rmSync(tmp, { force: true });
  const d = fdOfPath(tmp);
  if (d !== undefined) closeSync(d);
}

/**
 * Finish a temp of openTempBeside: fsync, the mode set (`mode`: the replaced file's bits, else
 * 0666 less the umask), closed, renamed over `path`. The fd is closed whatever happens; the temp is
 * removed when this fails.
 * @throws KerncapError E_UNSAFE_PATH when `path` became a link meanwhile; the file system's errors
 */
export function commitTemp(fd: number, tmp: string, path: string, mode?: number, sync = true): void {
  let open = true;
  // the rename within the folder opened by openTempBeside (renameat): not through a name another user may swap
  const d = fdOfPath(tmp);
  const at = d === undefined ? path : fdPath(d, basename(path));
  try {
    const st = refuseLink(path, undefined, at);
    fchmodSync(fd, mode ?? (st?.isFile() ? st.mode & 0o777 : defaultMode()));
    if (sync) fsyncSync(fd);
    closeSync(fd);
    open = false;
    renameSync(tmp, at);
  } catch (e) {
    discardTemp(open ? fd : undefined, tmp);
    throw systemError(Object.assign(e as object, { path, dest: undefined })) ?? e;
  }
  if (d !== undefined) closeSync(d);
}

/**
 * Write `data` as the whole file `path`, atomically and through no link (see the module's
 * comment). The file keeps the permission bits of the one it replaces, else `o.mode`, else 0666
 * less the umask. `o.sync` false: no fsync (a scratch file of build/, remade when lost).
 * @throws KerncapError E_UNSAFE_PATH when `path` is a symbolic link; E_IO and the file system's errors
 *   (ENOENT for a missing folder, EISDIR …) worded by systemError
 */
export function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  o: { mode?: number; what?: string; sync?: boolean; root?: string; create?: boolean } = {},
): void {
  const { fd, tmp } = openTempBeside(path, o.root, { create: o.create });
  let st;
  try {
    st = refuseLink(path, o.what, fdPath(fdOfPath(tmp)!, basename(path)));
    const b = typeof data === "string" ? Buffer.from(data) : data;
    for (let done = 0; done < b.length; ) done += writeSync(fd, b, done, b.length - done);
  } catch (e) {
    discardTemp(fd, tmp);
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
  const d = openDirWalk(dirname(path));
  const at = fdPath(d.fd, basename(path));
  try {
    refuseLink(path, what, at);
    return openSync(at, flags | constants.O_NOFOLLOW, mode);
  } catch (e) {
    // a link put there between the check and the open
    if ((e as NodeJS.ErrnoException).code === "ELOOP") refuseLink(path, what, at);
    throw systemError(Object.assign(e as object, { path })) ?? e;
  } finally {
    closeSync(d.fd);
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
  if (existsSync(p) && statSync(p).isDirectory())
    throw new KerncapError("E_USAGE", `--${option} ${p} is a folder`, {
      hint: `${hint} For example --${option} ${join(p, ({ junit: "check.xml", report: "report.html", csv: "report.csv" } as Record<string, string>)[option] ?? "baseline.json")}.`,
    });
  const parent = dirname(p);
  if (!existsSync(parent) || !statSync(parent).isDirectory())
    throw new KerncapError("E_USAGE", `--${option} ${p}: there is no folder ${parent}`, { hint: `${hint} Make it first (mkdir -p ${parent}).` });
}

/**
 * A temp folder that kerncap fills and then renames into place (unpack, export, demo), safe in a
 * folder that other users can write: made by makePrivateTemp, held open, and written, read and
 * filled only through `at` (/proc/self/fd/N, which the kernel resolves to the open folder itself,
 * never by its name). Another user who renames the folder away and puts a folder of links at its
 * name changes nothing kerncap writes; placeAt then refuses to rename what is at the name.
 */
export interface PrivateTemp {
  /** The folder's own name (tempFor's `OUT.tmp-<pid>-<token>`), as messages name it. */
  readonly path: string;
  /** Its open fd (O_RDONLY|O_DIRECTORY|O_NOFOLLOW). */
  readonly fd: number;
  /** The folder through its fd (fdPath(fd)): join(at, rel) for every file and folder inside. */
  readonly at: string;
  /** `text` with `at` replaced by `as` (default: the folder's own name): no /proc/self/fd path reaches the user. */
  shown(text: string, as?: string): string;
  /** `e` (a KerncapError or a file system error) with `at` replaced by `as` in its message, hint and paths; returns `e`. */
  unfd<E>(e: E, as?: string): E;
  /**
   * Rename the folder to `dest` (rename(2): an existing empty folder at `dest` is replaced, a
   * non-empty one fails ENOTEMPTY/EEXIST as the caller expects): the name is checked to still be
   * this folder (lstat's dev/ino against the open fd's) just before the rename, and `dest` just after.
   * Its entries' modes and group are settled first (./folder-modes.ts: the umask, a setgid parent).
   * @throws KerncapError E_UNSAFE_PATH when the folder at the name was swapped (nothing of ours placed);
   *   the rename's own errors as they are
   */
  placeAt(dest: string): void;
  /** Close the fd; unless placed, remove what the folder holds (through the fd) and the folder while its name is still it. Never throws. */
  dispose(): void;
}

/** The E_UNSAFE_PATH of a temp folder that another user swapped while kerncap wrote it. */
function swappedTemp(tmp: string, dest: string, placedTheirs = false): KerncapError {
  let parent = "";
  try {
    const st = statSync(dirname(dest));
    parent = ` (${dirname(dest)} has mode ${(st.mode & 0o7777).toString(8).padStart(4, "0")})`;
  } catch {
    /* gone: said without its mode */
  }
  const what = placedTheirs ? `what lies at ${dest} now is theirs, not kerncap's output: remove it` : "nothing was placed";
  return new KerncapError("E_UNSAFE_PATH", `${dest}: someone replaced the folder kerncap was writing (${tmp}) while it was written; ${what}`, {
    hint: `Another user can rename entries in its parent folder${parent}: write the output (-o/--out, demo's DIR) into a folder only you can write (or a sticky one such as /tmp), then move it. A team folder others write should be sticky (chmod +t DIR; mode 3770 with the group's setgid): then no one renames another's entries, and captures there count as their makers'.`,
  });
}

/**
 * Remove what the folder open as `fd` holds, no link followed: each entry unlinked through the
 * held folder (fdPath), each folder of the user's opened O_DIRECTORY|O_NOFOLLOW, given u+rwx
 * through its own fd where it lacks them (a 0555 src/ro of an old export: adversary 89 #05),
 * emptied the same way and removed. A folder another user owns or may write (its group's, not
 * the user's own group, or everyone's) is not entered: what it holds may be theirs, or moved in by
 * them (adversary 90 #07b: another user's 0777 folder in an old export received a 0555 folder of
 * the victim's moved in from elsewhere, which kerncap then made writable and removed); it is left,
 * its path (relative to the folder) added to `left`.
 */
function removeOwnTree(fd: number, left: string[], rel = ""): void {
  const me = process.geteuid?.();
  for (const name of readdirSync(fdPath(fd))) {
    const r = rel ? `${rel}/${name}` : name;
    const p = fdPath(fd, name);
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    if (!st.isDirectory()) {
      rmSync(p, { force: true });
      continue;
    }
    if (st.uid !== me || st.mode & 0o002 || (st.mode & 0o020 && !isPrivateGroup(st.gid))) {
      left.push(r);
      continue;
    }
    let sub: number;
    try {
      sub = openSync(p, DIR_FLAGS);
    } catch {
      left.push(r); // swapped for a link or a file meanwhile: not ours to follow
      continue;
    }
    try {
      const now = fstatSync(sub);
      if (now.dev !== st.dev || now.ino !== st.ino) {
        left.push(r);
        continue;
      }
      if ((now.mode & 0o700) !== 0o700) fchmodSync(sub, (now.mode & 0o7777) | 0o700);
      removeOwnTree(sub, left, r);
    } finally {
      closeSync(sub);
    }
    try {
      rmdirSync(p);
    } catch {
      // what it still holds is in `left`
    }
  }
}

/**
 * Make the temp folder `tmp` (mode 0700) and hold it open (see PrivateTemp): the name is opened
 * once with O_RDONLY|O_DIRECTORY|O_NOFOLLOW and the open folder must be a folder of the effective
 * user, with no bit for group or others, and empty; it is then chmod'ed 0700 through the fd (a
 * umask that took the owner's bits). The caller dispose()s it in a finally. `shownAs`: its name in
 * messages (default `tmp`; a name through a held folder's fd, /proc/self/fd/N/…, is no name a user can use).
 * @throws KerncapError E_UNSAFE_PATH when what was opened is not the folder just made (a link, a
 *   folder of someone else's); the file system's errors worded by systemError (EACCES, EEXIST…)
 */
export function makePrivateTemp(tmp: string, shownAs: string = tmp): PrivateTemp {
  try {
    mkdirSync(tmp, 0o700);
  } catch (e) {
    throw systemError(Object.assign(e as object, { path: tmp })) ?? e;
  }
  let fd: number;
  try {
    fd = openSync(tmp, DIR_FLAGS);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "ENOTDIR") throw swappedTemp(tmp, tmp.replace(/\.tmp-\d+-[0-9a-z]+$/, ""));
    throw systemError(Object.assign(e as object, { path: tmp })) ?? e;
  }
  const at = fdPath(fd);
  try {
    const st = fstatSync(fd);
    const uid = process.geteuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || st.mode & 0o077 || readdirSync(at).length)
      throw swappedTemp(tmp, tmp.replace(/\.tmp-\d+-[0-9a-z]+$/, ""));
    fchmodSync(fd, 0o700);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  const mine = fstatSync(fd, { bigint: true });
  const isMine = (p: string) => {
    const st = lstatSync(p, { bigint: true, throwIfNoEntry: false });
    return st !== undefined && st.isDirectory() && st.dev === mine.dev && st.ino === mine.ino;
  };
  const fdRe = new RegExp(`${at.replaceAll("/", "\\/")}(?![0-9])`, "g");
  const shown = (text: string, as = tmp) => text.replace(fdRe, as);
  let placed = false;
  let open = true;
  return {
    path: tmp,
    fd,
    at,
    shown,
    unfd<E>(e: E, as?: string): E {
      if (e === null || typeof e !== "object") return e;
      const x = e as unknown as { message?: unknown; hint?: unknown; path?: unknown; dest?: unknown };
      for (const k of ["message", "path", "dest"] as const) if (typeof x[k] === "string") x[k] = shown(x[k] as string, as);
      if (typeof x.hint === "string") Object.defineProperty(e, "hint", { value: shown(x.hint, as) });
      return e;
    },
    placeAt(dest: string): void {
      settleFolderModes(at, dirname(dest)); // the umask's bits taken, a setgid parent's group given
      if (!isMine(tmp)) throw swappedTemp(tmp, dest);
      renameSync(tmp, dest);
      if (!isMine(dest)) throw swappedTemp(tmp, dest, true); // swapped between the check and the rename: what was renamed is not ours
      placed = true;
    },
    dispose(): void {
      if (!open) return;
      open = false;
      if (!placed) {
        const left: string[] = [];
        try {
          removeOwnTree(fd, left);
          if (!left.length && isMine(tmp)) rmdirSync(tmp);
        } catch (e) {
          left.push(`(${(e as NodeJS.ErrnoException).code ?? String(e)})`);
        }
        if (left.length)
          log.warn(
            `${escapeForTerminal(shownAs, { oneLine: true })}: kerncap left there what it could not remove as its own: ${listForTerminal(left, 5)} (a folder another user owns or may write: what it holds may be theirs); look, then remove it yourself (rm -rf)`,
          );
      }
      closeSync(fd);
    },
  };
}
