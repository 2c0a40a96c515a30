/** What a folder holds beyond a list of files: unpack's "what replacing DIR loses", and a reproducer's src/ against the files a capture wrote (./source-digests.ts). */
import { closeSync, constants, lstatSync, openSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { listForTerminal } from "../escape.ts";
import { MADE_HERE_SEAL } from "./file-names.ts";

/**
 * Paths (relative, "/"-separated) of the regular files and links under `dir` that `keep` does not
 * list: what replacing `dir` with an unpacked capture loses (a user's notes, files added to src/).
 * kerncap's seal of a capture made here (MADE_HERE_SEAL) is kerncap's, not the user's: never
 * listed. Unreadable folders are skipped. Each folder below `dir` is opened
 * O_DIRECTORY|O_NOFOLLOW and listed through its fd: one swapped for a link after its lstat is not
 * walked (adversary 90 #03: the list named files where another user's link pointed).
 */
export function filesNotIn(dir: string, keep: Set<string>): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    let fd: number;
    try {
      fd = openSync(d, constants.O_RDONLY | constants.O_DIRECTORY | (rel ? constants.O_NOFOLLOW : 0));
    } catch {
      return;
    }
    try {
      const at = `/proc/self/fd/${fd}`;
      let names: string[];
      try {
        names = readdirSync(at);
      } catch {
        return;
      }
      for (const n of names.sort()) {
        const r = rel ? `${rel}/${n}` : n;
        let st;
        try {
          st = lstatSync(join(at, n));
        } catch {
          continue;
        }
        if (st.isDirectory()) walk(join(at, n), r);
        else if (!keep.has(r) && r !== MADE_HERE_SEAL) out.push(r);
      }
    } finally {
      closeSync(fd);
    }
  };
  walk(dir, "");
  return out;
}

/** "N files: a, b, …" for a warning: the first ten of `list` (paths in a folder that may be someone else's) as src/escape.ts listForTerminal gives them. */
export function someFiles(list: string[]): string {
  return `${list.length} file${list.length === 1 ? "" : "s"}: ${listForTerminal(list, 10)}`;
}
