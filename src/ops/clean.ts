/**
 * `kerncap clean DIR…`: remove what kerncap made from a capture and can make again: `build/` (the
 * rebuilt modules, the pruned TU and its cache, the build logs, eval's candidate copies and their
 * kept modules), or with `--eval` only `build/eval/`, and with `--profile` also `profile/` (the
 * ncu/nsys reports). What was captured (kerncap.json, kernel/, memory/, processes/), the
 * reproducer (src/, build.sh, …) and the judging settings are never touched.
 *
 * Each folder is taken without following a link (a link at `build` is removed as a link, its target
 * left; a `build` that is a link holds no `build/eval` of the capture's), moved into a private
 * holder and removed there (cleanPart), and nothing is removed while an eval holds a lock in `build/eval/` (its builds would lose
 * their folder): the whole command refuses before removing anything.
 */
import { accessSync, closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { isKerncapError, KerncapError, systemError } from "../errors.ts";
import { openCapture } from "../format/capture-dir.ts";
import { CAPTURE_SET_FILE, readCaptureSet } from "../format/capture-set.ts";
import { notOwnEntry } from "../format/received.ts";
import { sharedParentRisk } from "../cache.ts";
import { captureSetMember } from "../format/paths.ts";
import { EVAL_LOCK, EVAL_WORK_DIR, lockHolder } from "../eval/copies.ts";
import { cleanHolderName, pidAlive, staleCleanHolder } from "../leftovers.ts";
import { fdPath, makePrivateTemp, openDirWalk } from "../util/write-file.ts";
import { tryBuildLock, type BuildLock } from "../util/build-lock.ts";
import { MANIFEST_FILE } from "../format/manifest.ts";
import { discoverCaptures } from "../check/discover.ts";
import { escapeForTerminal, oneLine } from "../escape.ts";
import { log } from "../log.ts";

/** What `clean` removes of one capture: `build`, `build/eval`, `profile` (relative to the capture folder). */
export type CleanPart = "build" | "build/eval" | "profile";

/** One removed (or, with dryRun, removable) folder: its path relative to the capture and its bytes (regular files under it, links not followed). */
export interface CleanedPart {
  path: CleanPart;
  bytes: number;
  files: number;
}

/** One capture's clean: its folder (absolute) and the parts removed; bytes is their sum. */
export interface CleanedCapture {
  dir: string;
  removed: CleanedPart[];
  bytes: number;
}

/**
 * cleanTargets of `paths`, where a folder that is neither a capture nor a capture set is searched
 * for captures at any depth, as `kerncap check` finds them (src/check/discover.ts: folders only, an
 * archive holds no build/; another user's copy passed over, said): `kerncap clean corpus` after
 * `check corpus --rebuild` (a new user's finding: E_NOT_CAPTURE).
 * @throws KerncapError as cleanTargets; E_NOT_CAPTURE where such a folder holds no capture
 */
export async function cleanTargetsUnder(paths: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    // the folder the path leads to (a link of the user's to a shared corpus is that corpus: adversary 87 #01)
    const folder = statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
    // a folder that is not the user's alone, or whose kerncap.json is not, is searched as a corpus (its own capture then judged as
    // the others are): adversary 86 #01, a kerncap.json dropped at the top of a shared 1777 corpus made the corpus one capture, and
    // clean removed the user's captures named build/ and profile/ there
    if (!folder || (!notCleanable(p) && (existsSync(join(p, MANIFEST_FILE)) || readCaptureSet(p)))) {
      out.push(...cleanTargets([p]));
      continue;
    }
    const found = await discoverCaptures([p]);
    for (const o of found.passedOver) if (o.warn) log.warn(`${escapeForTerminal(o.path, { oneLine: true })}: ${o.reason}`);
    const folders = found.captures.filter((c) => c.kind === "folder").map((c) => c.path);
    if (!folders.length)
      throw new KerncapError("E_NOT_CAPTURE", `${escapeForTerminal(p, { oneLine: true })} is no capture and holds none (no kerncap.json at any depth)`, {
        hint: "Name capture folders, capture sets (run -c N), or folders that hold them.",
      });
    const mine = ownCapturesAmong(folders);
    // a capture named by itself that is not the user's alone, holding none of theirs: an error, as naming it always was
    const not = mine.length === 0 && folders.length === 1 ? notCleanable(folders[0]!) : undefined;
    if (not)
      throw new KerncapError("E_IO", `cannot clean ${oneLine(folders[0]!)}: ${not}; kerncap clean removes only what is yours alone`, {
        hint: "Ask its owner to clean it, or copy it into a folder of yours (cp -r) and work there.",
      });
    out.push(...mine);
  }
  return [...new Set(out)];
}

/**
 * The capture folders among `folders` (found by searching a folder) that clean may act on: the
 * user's own, each opened (cleanTargets); another user's, or one that does not open (a damaged
 * manifest, one that is a link), is passed over with a warning and never stops the clean of the
 * others (adversary 85 #03: one capture of another user's in a shared corpus failed the whole
 * clean, --dry-run too). A capture named directly keeps its hard error (cleanTargets).
 */
function ownCapturesAmong(folders: readonly string[]): string[] {
  const out: string[] = [];
  for (const f of folders) {
    const pass = (why: string) => log.warn(`${oneLine(f)}: passed over: ${why}`);
    const not = notCleanable(f);
    if (not) {
      pass(`${not}: kerncap clean removes only what is yours alone`);
      continue;
    }
    try {
      out.push(...cleanTargets([f]));
    } catch (e) {
      if (!isKerncapError(e)) throw e;
      pass(`${e.code}: ${e.message}`);
    }
  }
  return out;
}

/**
 * Why clean may not act on folder `f` as a capture (or capture set) of the user's, or undefined:
 * the folder it leads to (its real path: a link of the user's to a shared corpus is that corpus)
 * and its kerncap.json and kerncap-captures.json, where there, must be the user's and writable by
 * no one else (src/format/received.ts notOwnEntry), and no folder above it one whose entries others
 * may rename (src/cache.ts sharedParentRisk): another user who may write there chose what lies in it.
 */
function notCleanable(f: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(f); // the folder a link of the user's leads to is the one judged (adversary 87 #01)
  } catch {
    return undefined; // not there: cleanTargets says so
  }
  for (const [what, name] of [
    ["the folder", "."],
    [MANIFEST_FILE, MANIFEST_FILE],
    [CAPTURE_SET_FILE, CAPTURE_SET_FILE],
  ] as const) {
    const st = lstatSync(join(real, name), { throwIfNoEntry: false });
    const not = st && notOwnEntry(what, st);
    if (not) return not;
  }
  // a folder above it whose entries others may rename: they could put another folder at its name between the check and the removal (adversary 87 #02)
  return sharedParentRisk(real);
}

/** Options: `eval` removes build/eval only (not the pruned build's cache, which keeps validate fast); `profile` adds profile/; `dryRun` removes nothing. */
export interface CleanOptions {
  eval?: boolean;
  profile?: boolean;
  dryRun?: boolean;
}

/**
 * The capture folders `paths` name: a capture folder itself, or a capture set's folder
 * (kerncap-captures.json: each member).
 * @throws KerncapError as openCapture (E_NOT_CAPTURE, E_NESTED_CAPTURE, E_MANIFEST …), E_UNSAFE_PATH (a set member that is a link)
 */
export function cleanTargets(paths: readonly string[]): string[] {
  const out: string[] = [];
  for (const p of paths) {
    const set = readCaptureSet(p);
    if (set) for (const c of set.captures) out.push(openCapture(captureSetMember(p, c.dir)).dir);
    else out.push(openCapture(p).dir);
  }
  return [...new Set(out)];
}

/** The deepest folder partSize counts in (deeper ones are removed all the same, their bytes not counted). */
const SIZE_DEPTH_MAX = 256;

/**
 * Bytes and files of the regular files at `name` in the folder held open as `parentFd`, walked
 * through folder fds (each opened O_NOFOLLOW relative to the one above: no link followed, a folder
 * swapped for a link meanwhile is not entered, no path grows past PATH_MAX); undefined where it is
 * not there.
 */
function partSize(parentFd: number, name: string, depth = 0): { bytes: number; files: number } | undefined {
  const st = lstatSync(fdPath(parentFd, name), { throwIfNoEntry: false });
  if (!st) return undefined;
  if (st.isFile()) return { bytes: st.size, files: 1 };
  if (!st.isDirectory() || depth >= SIZE_DEPTH_MAX) return { bytes: 0, files: 0 };
  let fd: number;
  try {
    fd = openSync(fdPath(parentFd, name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return { bytes: 0, files: 0 }; // swapped for a link, unreadable: not counted
  }
  let bytes = 0;
  let files = 0;
  try {
    for (const n of readdirSync(fdPath(fd))) {
      const sub = partSize(fd, n, depth + 1);
      bytes += sub?.bytes ?? 0;
      files += sub?.files ?? 0;
    }
  } catch {
    /* unreadable: what was counted stands */
  } finally {
    closeSync(fd);
  }
  return { bytes, files };
}

/** A folder below the one held open as `fd`, opened O_NOFOLLOW (undefined: not there, a link, no folder). */
function openBelow(fd: number, name: string): number | undefined {
  try {
    return openSync(fdPath(fd, name), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
}

/**
 * The pids of the live evals whose locks are in the capture's build/eval (EVAL_LOCK files: regular
 * files of this user's, reached without following a link; a lock another user wrote, or one at a
 * link, blocks nothing: adversary 33, a lock naming pid 1 blocked clean for good).
 */
function liveEvals(capFd: number): number[] {
  const build = openBelow(capFd, "build");
  if (build === undefined) return [];
  const work = openBelow(build, "eval");
  closeSync(build);
  if (work === undefined) return [];
  const pids: number[] = [];
  try {
    for (const n of readdirSync(fdPath(work))) {
      // what eval writes in it (lockHolder): an empty, foreign or other file is no lock, as eval itself takes it over
      // (a `touch`ed lock naming pid 1 blocked clean for good: adversary 33 #2)
      const held = EVAL_LOCK.test(n) ? lockHolder(fdPath(work, n)) : undefined;
      if (held && pidAlive(held.pid)) pids.push(held.pid);
    }
  } catch {
    /* unreadable: no lock seen */
  } finally {
    closeSync(work);
  }
  return pids;
}

/**
 * Remove (or, dryRun, measure) the parts of each capture in `dirs` (absolute capture folders,
 * cleanTargets'). A part's parent folder is opened without following a link (a `build` that is a
 * link holds no `build/eval` of the capture's) and held; the part is moved, in one rename through
 * that fd, into a private 0700 holder beside it (src/util/write-file.ts makePrivateTemp) and removed
 * there: never by a name another user who may write the capture folder could swap meanwhile
 * (src/util/replace-folder.ts, for the same reason).
 * Holders a killed clean left beside a part (staleHolders) are counted with it and removed.
 * @returns one entry per capture, in order; a capture with nothing to remove has `removed` empty
 * @throws KerncapError E_BUSY (exit 2) when an eval is running on one of them (its lock in build/eval), or a build
 *   (validate, check --rebuild: the capture's build lock): nothing removed
 */
export function cleanCaptures(dirs: readonly string[], o: CleanOptions = {}): CleanedCapture[] {
  const parts: CleanPart[] = [o.eval ? "build/eval" : "build", ...(o.profile ? (["profile"] as const) : [])];
  // each capture folder held open from here on (heldCapture): every later step goes through the fd, never the name again
  const held: { dir: string; fd: number }[] = [];
  for (const dir of dirs) {
    try {
      held.push({ dir, fd: heldCapture(dir) });
    } catch (e) {
      // of several, one refused on the folder held (another user swapped something at its name meanwhile) is passed over, said:
      // it never stops the clean of the others (adversary 88: a swap race made `clean CORPUS` fail now and then)
      if (dirs.length > 1 && isKerncapError(e) && e.code === "E_UNSAFE_PATH") {
        log.warn(`${oneLine(dir)}: passed over: ${e.message}`);
        continue;
      }
      for (const h of held) closeSync(h.fd);
      throw e;
    }
  }
  const locks: BuildLock[] = [];
  try {
    for (const { dir, fd } of held) {
      const pids = liveEvals(fd);
      if (pids.length)
        throw new KerncapError("E_BUSY", `an eval is running on ${dir} (pid ${pids.join(", ")}, its lock in ${EVAL_WORK_DIR}/): nothing removed`, {
          hint: `Wait for it to end, or stop it; then clean again. A lock whose process is gone is no lock: ${EVAL_WORK_DIR}/.kerncap-eval-<pid>-*.lock.`,
        });
    }
    // a kerncap build of it under way (validate, check --rebuild: its build lock, src/util/build-lock.ts) would find its module
    // gone before its replay loaded it; held from here to the end, so that none starts meanwhile
    for (const { dir, fd } of held) {
      const got = tryBuildLock(fdPath(fd), { create: false, lenient: true });
      if (!got.lock)
        throw new KerncapError("E_BUSY", `a kerncap build of ${dir} is running${got.holder ? ` (pid ${got.holder})` : ""}: nothing removed`, {
          hint: "Wait for the validate (or check) on this capture to end, then clean again.",
        });
      locks.push(got.lock);
    }
    return held.map(({ dir, fd }) => {
      const removed: CleanedPart[] = [];
      for (const path of parts) {
        const done = cleanPart(fd, dir, path, Boolean(o.dryRun));
        if (done) removed.push(done);
      }
      return { dir, removed, bytes: removed.reduce((a, r) => a + r.bytes, 0) };
    });
  } finally {
    for (const l of locks) l.release();
    for (const { fd } of held) closeSync(fd);
  }
}

/**
 * The capture folder `dir` opened with no link followed on the way (openDirWalk: every component of
 * its real path O_NOFOLLOW from the one above), and still a capture (a kerncap.json that is a regular
 * file): a folder above it swapped for a link after cleanTargets checked it leads nowhere else
 * (adversary 33: an exchange of a parent in a shared folder had a project's own build/ removed).
 * @throws KerncapError E_UNSAFE_PATH (a component is a link now, or the folder holds no kerncap.json)
 */
function heldCapture(dir: string): number {
  const { fd } = openDirWalk(dir);
  // judged again on the folder held, whatever route led here: the user's alone, in no folder others may rename entries of
  const not = notOwnEntry("the folder", fstatSync(fd)) ?? sharedParentRisk(dir);
  if (not) {
    closeSync(fd);
    throw new KerncapError("E_UNSAFE_PATH", `${oneLine(dir)}: ${not}: nothing removed`, {
      hint: "kerncap clean removes only what is yours alone: keep captures in folders only you can write, then clean again.",
    });
  }
  if (!lstatSync(fdPath(fd, MANIFEST_FILE), { throwIfNoEntry: false })?.isFile()) {
    closeSync(fd);
    throw new KerncapError("E_UNSAFE_PATH", `${dir}: the folder found at that name now holds no ${MANIFEST_FILE}: nothing removed`, {
      hint: "Another user can rename entries above it: keep captures in a folder only you can write, then clean again.",
    });
  }
  return fd;
}

/** Two sizes added (b may be missing). */
function add(a: { bytes: number; files: number }, b: { bytes: number; files: number } | undefined): { bytes: number; files: number } {
  return { bytes: a.bytes + (b?.bytes ?? 0), files: a.files + (b?.files ?? 0) };
}

/**
 * The holders an earlier clean made beside the part `name` in the folder open as `parentFd`
 * (`name.tmp-<pid>-<12 hex>`) and left there when it was killed (src/leftovers.ts staleCleanHolder:
 * a pid as kerncap writes it and gone, a 0700 folder of this user's). Pack leaves them out; this
 * clean removes them.
 */
function staleHolders(parentFd: number, name: string): string[] {
  let names: string[];
  try {
    names = readdirSync(fdPath(parentFd));
  } catch {
    return [];
  }
  return names.filter((n) => n.startsWith(`${name}.tmp-`) && staleCleanHolder(fdPath(parentFd, n), name));
}

/** One part of the capture held open as `capFd` (cleanCaptures; `dir` its name in messages): its size, and unless dryRun its removal; undefined where it is not there (or its parent is a link). */
function cleanPart(capFd: number, dir: string, path: CleanPart, dryRun: boolean): CleanedPart | undefined {
  const below = dirname(path) === "." ? undefined : dirname(path);
  // the part's parent: the capture itself, or its build/ reached without following a link
  const parentFd = below === undefined ? capFd : openBelow(capFd, below);
  if (parentFd === undefined) return undefined; // no build/, or a build that is no folder of the capture's: nothing of it to remove
  try {
    const name = basename(path);
    // what an earlier clean, killed, left beside it: counted with the part and removed with it
    const stale = staleHolders(parentFd, name);
    const staleSize = stale.reduce((a, n) => add(a, partSize(parentFd, n)), { bytes: 0, files: 0 });
    const withStale = (size: { bytes: number; files: number } | undefined): CleanedPart | undefined =>
      size || stale.length ? { path, ...add(staleSize, size) } : undefined;
    const part = lstatSync(fdPath(parentFd, name), { throwIfNoEntry: false });
    // a part (or the build/ it lies in) of another user's is theirs, whatever capture it lies in: left, said (adversary 88: another
    // user's build/ in the user's capture was removed with its files)
    const me = process.geteuid?.() ?? process.getuid?.();
    const owner = [...(below !== undefined ? [fstatSync(parentFd).uid] : []), ...(part ? [part.uid] : [])].find((u) => me !== undefined && u !== me);
    if (owner !== undefined) {
      log.warn(`${oneLine(join(dir, path))}: left as it is: it belongs to another user (uid ${owner}); kerncap clean removes only what is yours`);
      return undefined;
    }
    const present = Boolean(part);
    try {
      if (present || stale.length) accessSync(fdPath(parentFd), constants.W_OK); // a dry run says the refusal the clean would meet
    } catch {
      throw new KerncapError("E_IO", `cannot remove ${join(dir, path)}: you may not write ${below === undefined ? dir : join(dir, below)}`, {
        hint: "Clean a capture of your own, or ask its owner to (kerncap clean DIR).",
      });
    }
    if (dryRun) return withStale(partSize(parentFd, name));
    for (const n of stale) rmSync(fdPath(parentFd, n), { recursive: true, force: true });
    if (!present) return withStale(undefined);
    const holder = makePrivateTemp(fdPath(parentFd, cleanHolderName(name)));
    try {
      try {
        renameSync(fdPath(parentFd, name), join(holder.at, "old"));
      } catch (e) {
        throw systemError(Object.assign(e as object, { path: join(dir, path) })) ?? e; // EACCES …: said with its path
      }
      return withStale(partSize(holder.fd, "old") ?? { bytes: 0, files: 0 });
    } finally {
      holder.dispose(); // the part, through the holder's fd
    }
  } finally {
    if (parentFd !== capFd) closeSync(parentFd);
  }
}
