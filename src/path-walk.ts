/**
 * A path walked as the kernel resolves it (path_resolution(7)), one component at a time: each
 * name is looked at with lstat where the walk stands, a symbolic link is walked in its place (its
 * target's components, from the root when absolute), and `..` goes to the folder above where the
 * links led (physically, not by the text). Two judges read the same walk: the load paths kept for
 * a build's programs (src/env.ts buildChildEnv: an entry that leads into /proc or into the capture
 * is dropped) and the folders kerncap writes or reads in (src/util/write-file.ts
 * refusePlantedLinks: a link another user can change is refused).
 */
import { lstatSync, readlinkSync, type Stats } from "node:fs";
import { posix } from "node:path";

/** The kernel's own bound on the links in one path (MAXSYMLINKS, 40): more is ELOOP. */
export const MAX_LINKS = 40;

/** One step of walkPhysically. */
export type PathStep =
  /** An entry that exists: `path` is its name where the walk stood (`parent`, a folder with no link in it), `st` its lstat. For a link, `target` is its text and `at` is where the walk stands before its target is walked (`parent`, or `/` for an absolute target); otherwise `at` is `path`. */
  | { kind: "entry"; parent: string; path: string; at: string; st: Stats; target?: string }
  /** `path` does not exist (or its link could not be read); `rest` is the text not walked; `code` the errno (ENOENT; ENAMETOOLONG: the walked path grew past PATH_MAX through links, where the kernel, which follows links in place, still goes on: the walk cannot tell what lies there). */
  | { kind: "missing"; path: string; rest: string[]; code: string }
  /** More than MAX_LINKS links. */
  | { kind: "loop" };

/**
 * The steps of `path` (relative to the working folder when not absolute), as the kernel resolves
 * it: an `entry` for each component met (links included, then their target's components), ending
 * at the last component, at a `missing` one, or at a `loop`. `.` and empty components are no
 * step; `..` is no step either (the walk goes up from where it stands). Nothing is opened.
 * Source: path_resolution(7).
 */
export function* walkPhysically(path: string): Generator<PathStep> {
  const rest = (path.startsWith("/") ? path : `${process.cwd()}/${path}`).split("/").filter((c) => c !== "" && c !== ".");
  let at = "/";
  for (let links = 0; rest.length; ) {
    const c = rest.shift() as string;
    if (c === "..") {
      at = posix.dirname(at);
      continue;
    }
    const next = posix.join(at, c);
    let st: Stats;
    let target: string | undefined;
    try {
      st = lstatSync(next);
      if (st.isSymbolicLink()) target = readlinkSync(next);
    } catch (e) {
      yield { kind: "missing", path: next, rest, code: (e as NodeJS.ErrnoException).code ?? "ENOENT" };
      return;
    }
    if (target === undefined) {
      yield { kind: "entry", parent: at, path: next, at: next, st };
      at = next;
      continue;
    }
    if (++links > MAX_LINKS) {
      yield { kind: "loop" };
      return;
    }
    const from = target.startsWith("/") ? "/" : at;
    yield { kind: "entry", parent: at, path: next, at: from, st, target };
    at = from;
    rest.unshift(...target.split("/").filter((t) => t !== "" && t !== "."));
  }
}
