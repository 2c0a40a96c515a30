/**
 * How much an unpack may write, checked before it writes anything (src/format/unpack.ts
 * planUnpack). A deflated entry is bounded by deflate's own ratio (1032:1) only, and memory
 * images of real captures compress that well (as may any file a user keeps in a capture folder),
 * so no ratio bounds a received archive: the whole unpack must fit the destination's file system
 * with FREE_MARGIN_BYTES to spare (statfs: the blocks available to this user), so that an archive
 * never fills a disk (a 2 MiB archive that unpacks to 2 GiB is refused where 2 GiB and the margin
 * are not free, and said so before a byte is written).
 */
import { statfsSync } from "node:fs";
import { dirname } from "node:path";
import { KerncapError } from "../errors.ts";

/** Bytes left free on the destination's file system after an unpack (1 GiB). */
export const FREE_MARGIN_BYTES = 1 << 30;

const GiB = (n: number) => `${(n / 2 ** 30).toFixed(2)} GiB`;

/** Bytes available to this user on the file system of `path` (its nearest existing folder), or undefined when statfs cannot tell. */
export function freeBytes(path: string): number | undefined {
  for (let p = path; ; p = dirname(p)) {
    try {
      const s = statfsSync(p);
      return Number(s.bavail) * Number(s.bsize);
    } catch {
      if (dirname(p) === p) return undefined;
    }
  }
}

/**
 * @param files every file the unpack writes: its capture-relative path and the bytes it stores (a sparse image: its data extents)
 * @param free bytes available at `dest` (default: statfs; undefined: not checked)
 * @throws KerncapError E_IO (not enough free space at `dest`)
 */
export function checkUnpackBounds(archive: string, files: readonly { path: string; bytes: number }[], dest: string, free = freeBytes(dest)): void {
  const total = files.reduce((a, f) => a + f.bytes, 0);
  if (free !== undefined && total + FREE_MARGIN_BYTES > free)
    throw new KerncapError(
      "E_IO",
      `unpacking ${archive} writes ${GiB(total)}; the file system of ${dest} has ${GiB(free)} free, and unpack leaves ${GiB(FREE_MARGIN_BYTES)} of it free`,
      { hint: "Nothing was written. Free space there, or unpack somewhere else (-o DIR)." },
    );
}
