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
import { accessSync, closeSync, constants, lstatSync, openSync, readdirSync, renameSync, type Stats } from "node:fs";
import { randomBytes } from "node:crypto";
import { basename, dirname, join } from "node:path";
import { KerncapError, systemError } from "../errors.ts";
import { openCapture } from "../format/capture-dir.ts";
import { readCaptureSet } from "../format/capture-set.ts";
import { captureSetMember, treeEntries } from "../format/paths.ts";
import { EVAL_LOCK, EVAL_WORK_DIR } from "../eval/copies.ts";
import { pidAlive } from "../leftovers.ts";
import { fdPath, makePrivateTemp } from "../util/write-file.ts";

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

/** Bytes and files of the regular files under dir/rel (no link followed); undefined where dir/rel is not there. */
function partSize(dir: string, rel: string): { bytes: number; files: number; st: Stats } | undefined {
  let st: Stats;
  try {
    st = lstatSync(join(dir, rel));
  } catch {
    return undefined;
  }
  let bytes = st.isFile() ? st.size : 0;
  let files = st.isFile() ? 1 : 0;
  if (st.isDirectory())
    for (const e of treeEntries(dir, rel))
      if (e.st.isFile()) {
        bytes += e.st.size;
        files++;
      }
  return { bytes, files, st };
}

/** The pids of the live evals whose locks are in dir/build/eval (EVAL_LOCK files; a link or an unreadable one is no lock). */
function liveEvals(dir: string): number[] {
  const work = join(dir, EVAL_WORK_DIR);
  let names: string[];
  try {
    if (!lstatSync(work).isDirectory()) return [];
    names = readdirSync(work);
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const n of names) {
    if (!EVAL_LOCK.test(n)) continue;
    const m = /^\.kerncap-eval-(\d+)-/.exec(n);
    const pid = m ? Number(m[1]) : Number.NaN;
    // a lock of kerncap before names (.kerncap-eval.lock): its pid is inside; taken as live, the safe side
    if (!m || pidAlive(pid)) pids.push(m ? pid : 0);
  }
  return pids;
}

/**
 * Remove (or, dryRun, measure) the parts of each capture in `dirs` (absolute capture folders,
 * cleanTargets'). A part's parent folder is opened without following a link (a `build` that is a
 * link holds no `build/eval` of the capture's) and held; the part is moved, in one rename through
 * that fd, into a private 0700 holder beside it (./util/write-file.ts makePrivateTemp) and removed
 * there: never by a name another user who may write the capture folder could swap meanwhile
 * (src/util/replace-folder.ts, for the same reason).
 * @returns one entry per capture, in order; a capture with nothing to remove has `removed` empty
 * @throws KerncapError E_BUSY (exit 2) when an eval is running on one of them (its lock in build/eval): nothing removed
 */
export function cleanCaptures(dirs: readonly string[], o: CleanOptions = {}): CleanedCapture[] {
  const parts: CleanPart[] = [o.eval ? "build/eval" : "build", ...(o.profile ? (["profile"] as const) : [])];
  for (const dir of dirs) {
    const pids = liveEvals(dir);
    if (pids.length)
      throw new KerncapError(
        "E_BUSY",
        `an eval is running on ${dir} (${pids.some((p) => p > 0) ? `pid ${pids.filter((p) => p > 0).join(", ")}` : "a lock of an older kerncap"}, its lock in ${EVAL_WORK_DIR}/): nothing removed`,
        { hint: `Wait for it to end, or stop it; then clean again. A lock whose process is gone is no lock: ${EVAL_WORK_DIR}/.kerncap-eval-<pid>-*.lock.` },
      );
  }
  return dirs.map((dir) => {
    const removed: CleanedPart[] = [];
    for (const path of parts) {
      const done = cleanPart(dir, path, Boolean(o.dryRun));
      if (done) removed.push(done);
    }
    return { dir, removed, bytes: removed.reduce((a, r) => a + r.bytes, 0) };
  });
}

/** One part of one capture (cleanCaptures): its size, and unless dryRun its removal; undefined where it is not there (or its parent is a link). */
function cleanPart(dir: string, path: CleanPart, dryRun: boolean): CleanedPart | undefined {
  const parent = dirname(path) === "." ? dir : join(dir, dirname(path));
  let parentFd: number;
  try {
    parentFd = openSync(parent, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return undefined; // no build/, or a build that is no folder of the capture's: nothing of it to remove
  }
  try {
    const name = basename(path);
    if (dryRun) {
      const size = partSize(fdPath(parentFd), name);
      return size && { path, bytes: size.bytes, files: size.files };
    }
    if (!lstatSync(fdPath(parentFd, name), { throwIfNoEntry: false })) return undefined;
    try {
      accessSync(fdPath(parentFd), constants.W_OK);
    } catch {
      throw new KerncapError("E_IO", `cannot remove ${join(dir, path)}: you may not write ${parent}`, {
        hint: "Clean a capture of your own, or ask its owner to (kerncap clean DIR).",
      });
    }
    const holder = makePrivateTemp(fdPath(parentFd, `${name}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`));
    try {
      try {
        renameSync(fdPath(parentFd, name), join(holder.at, "old"));
      } catch (e) {
        throw systemError(Object.assign(e as object, { path: join(dir, path) })) ?? e; // EACCES …: said with its path
      }
      const size = partSize(holder.at, "old");
      return { path, bytes: size?.bytes ?? 0, files: size?.files ?? 0 };
    } finally {
      holder.dispose(); // the part, through the holder's fd
    }
  } finally {
    closeSync(parentFd);
  }
}
