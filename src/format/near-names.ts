/**
 * "Did you mean …?" for a path the user named that does not exist (a capture folder, an archive,
 * a results file): the entries beside its first missing part whose names are a few edits away
 * (optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps),
 * with the rest of the path appended, kept only where that whole path exists. Suggestions only:
 * nothing is read but one folder's names and a suggested path's status (stat: a folder, when
 * folders are asked for); a name that is not UTF-8 is passed over; a folder larger than
 * NEAR_FOLDER_MAX_BYTES is not listed, and at most NEAR_SCAN_ENTRIES of a folder's entries are
 * looked at (a huge shared folder stays cheap).
 */
import { lstatSync, opendirSync, statSync } from "node:fs";
import { isAbsolute, join, resolve, sep } from "node:path";
import { KerncapError } from "../errors.ts";
import { shellPath } from "../util/shell-quote.ts";

/** The most entries of one folder read for suggestions. */
export const NEAR_SCAN_ENTRIES = 4096;

/**
 * A folder larger than this (its st_size, bytes: about 20 a name on tmpfs, more on ext4) is not
 * listed for suggestions: some tens of thousands of names at most.
 */
export const NEAR_FOLDER_MAX_BYTES = 1 << 20;

/**
 * Optimal string alignment distance between `a` and `b` (by UTF-16 unit), or `max + 1` as soon as
 * it exceeds `max`. O(|a|·|b|) time; names are short.
 */
export function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let prev2: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2]! + 1);
      cur.push(d);
      rowMin = Math.min(rowMin, d);
    }
    if (rowMin > max) return max + 1;
    prev2 = prev;
    prev = cur;
  }
  return prev[b.length]!;
}

/** The edits a name of this length may be away and still be suggested: 1 up to 4 characters, 2 up to 10, else 3. */
function allowedEdits(name: string): number {
  return name.length <= 4 ? 1 : name.length <= 10 ? 2 : 3;
}

/** Whether `p` exists, by lstat (its last part not followed). */
function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Whether `p` is a folder (followed: the user's own path may go through a link). */
function isFolder(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The existing paths a few edits away from `path` at its first missing part, nearest first (ties
 * by name), written as the user wrote `path` (relative stays relative).
 * @param o.folders only suggest paths that are folders; o.limit at most this many (default 3)
 * @returns [] where every part exists, or no near name is found
 */
export function nearPaths(path: string, o: { folders?: boolean; limit?: number } = {}): string[] {
  const parts = path.split(sep);
  const abs = isAbsolute(path);
  // the first part that does not exist, beside the parts before it
  let at = -1;
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === "" || parts[i] === "." || parts[i] === "..") continue;
    const p = parts.slice(0, i + 1).join(sep);
    if (!exists(abs ? p : resolve(p))) {
      at = i;
      break;
    }
  }
  if (at < 0) return [];
  const wanted = parts[at]!;
  const parentParts = parts.slice(0, at);
  const parent = parentParts.join(sep) || (abs ? sep : ".");
  const max = allowedEdits(wanted);
  const found: { name: string; d: number }[] = [];
  let dir;
  try {
    const folder = abs ? parent : resolve(parent);
    // Bun's directory reader takes in every entry at its first read: a folder of a million names (another user's, in a
    // shared /tmp) cost 1.6 s and 500 MB for one mistyped path (adversary round 71); its size says how many names it holds
    if (statSync(folder).size > NEAR_FOLDER_MAX_BYTES) return [];
    dir = opendirSync(folder);
  } catch {
    return [];
  }
  try {
    for (let n = 0; n < NEAR_SCAN_ENTRIES; n++) {
      const e = dir.readSync();
      if (!e) break;
      if (e.name.includes("\uFFFD") || e.name.startsWith(".") !== wanted.startsWith(".")) continue;
      const d = Math.min(editDistance(wanted, e.name, max), editDistance(wanted.toLowerCase(), e.name.toLowerCase(), max));
      if (d <= max) found.push({ name: e.name, d });
    }
  } finally {
    dir.closeSync();
  }
  found.sort((x, y) => x.d - y.d || (x.name < y.name ? -1 : 1));
  const out: string[] = [];
  for (const f of found) {
    const whole = [...parentParts, f.name, ...parts.slice(at + 1)].join(sep);
    const p = abs ? whole : resolve(whole);
    if (!exists(p) || (o.folders && !isFolder(p))) continue;
    out.push(parentParts.length ? whole : join(f.name, ...parts.slice(at + 1)));
    if (out.length >= (o.limit ?? 3)) break;
  }
  return out;
}

/**
 * The sentence to add to a hint: `Did you mean X?` (or `X or Y?`), each path shell-quoted and
 * escaped (a name in a shared folder is someone else's text); "" when nothing is near.
 */
export function didYouMean(path: string, o: { folders?: boolean } = {}): string {
  const near = nearPaths(path, o);
  if (!near.length) return "";
  return ` Did you mean ${near.map(shellPath).join(" or ")}?`;
}

/** E_NOT_CAPTURE for a capture folder that does not exist, with the folders a few edits away (readManifest, the capture path rule). */
export function noSuchCaptureFolder(dir: string): KerncapError {
  return new KerncapError("E_NOT_CAPTURE", `no such capture folder: ${dir}`, {
    hint: `Give the folder that \`kerncap run --out DIR\` wrote.${didYouMean(dir, { folders: true })}`,
  });
}
