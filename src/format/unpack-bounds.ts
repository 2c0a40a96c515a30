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
import { escapedForMessage, PACK_INDEX, type PackIndex } from "./archive-common.ts";
import { badArchive } from "./zip.ts";

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
 * The most bytes that the archive's files the manifest gives no size (`src/`, a notes file: not a
 * memory image, not in files[]) may unpack to beyond what the archive stores of them (a deflated
 * entry's uncompressed bytes less its compressed ones): 512 MiB, what a build copies of src/ at
 * most (src/format/staged-build.ts). A memory image is bounded by its regions, a listed file by its
 * size, a stored entry by the archive's own size; these were bounded by the disk alone (adversary
 * 30: a 4.3 MB archive of kerncap pack's own making, one src/ header of 4 GiB, unpacked to 4 GiB;
 * dropped into a shared corpus, every `kerncap check` of it did so again in the checker's TMPDIR).
 */
export const UNSIZED_MAX_BYTES = 512 << 20;
/** The most files the manifest gives no size an archive may hold: what a build copies of src/ at most (20000 files). */
export const UNSIZED_MAX_FILES = 20_000;

/**
 * @param files every file the unpack writes: its capture-relative path, the bytes it stores (a sparse image: its data extents), and whether the manifest bounds its size (sized)
 * @param free bytes available at `dest` (default: statfs; undefined: not checked)
 * @throws KerncapError E_ARCHIVE (the files the manifest gives no size past UNSIZED_MAX_FILES or UNSIZED_MAX_BYTES), E_IO (not enough free space at `dest`)
 */
export function checkUnpackBounds(
  archive: string,
  files: readonly { path: string; bytes: number; stored?: number; sized?: boolean }[],
  dest: string,
  free = freeBytes(dest),
): void {
  const unsized = files.filter((f) => f.sized === false);
  if (unsized.length > UNSIZED_MAX_FILES)
    throw new KerncapError(
      "E_ARCHIVE",
      `${archive}: it holds ${unsized.length} files that the manifest gives no size (src/ and the like), more than the ${UNSIZED_MAX_FILES} a build copies of src/`,
      { hint: "Nothing was written. A capture's sources are far fewer: ask the sender what the archive holds." },
    );
  // what they inflate to beyond what the archive stores of them (a stored entry costs the archive its own size)
  const grown = (f: (typeof unsized)[number]) => Math.max(0, f.bytes - (f.stored ?? 0));
  const loose = unsized.reduce((a, f) => a + grown(f), 0);
  if (loose > UNSIZED_MAX_BYTES) {
    const big = [...unsized].sort((a, b) => grown(b) - grown(a)).slice(0, 3);
    throw new KerncapError(
      "E_ARCHIVE",
      `${archive}: its compressed files that the manifest gives no size (src/ and the like) would unpack to ${GiB(loose)} more than the archive holds of them, more than the ${GiB(UNSIZED_MAX_BYTES)} a build copies of src/ (largest: ${big.map((f) => `${JSON.stringify(f.path)} ${GiB(f.bytes)}`).join(", ")})`,
      {
        hint: "Nothing was written. A capture's sources are far smaller: ask the sender what the archive holds, and to pack the capture without the large files.",
      },
    );
  }
  const total = files.reduce((a, f) => a + f.bytes, 0);
  if (free !== undefined && total + FREE_MARGIN_BYTES > free)
    throw new KerncapError(
      "E_IO",
      `unpacking ${archive} writes ${GiB(total)}; the file system of ${dest} has ${GiB(free)} free, and unpack leaves ${GiB(FREE_MARGIN_BYTES)} of it free`,
      { hint: "Nothing was written. Free space there, or unpack somewhere else (-o DIR)." },
    );
}

/**
 * That every folder the index lists (`dirs`) is a folder entry of the archive (`byName`: entries by
 * name), as pack writes one for each: the zip's entry bound (ZIP_MAX_ENTRIES) then bounds the
 * folders an unpack makes too (an 800 KB archive whose index listed 300 000 folders alone made every
 * one, 141 s: adversary 78).
 * @throws KerncapError E_ARCHIVE naming the first folder without its entry
 */
export function checkListedFolders(archive: string, idx: Pick<PackIndex, "root" | "dirs">, byName: ReadonlyMap<string, unknown>): void {
  const unheld = idx.dirs.find((d) => !byName.has(`${idx.root}/${d}/`));
  if (unheld !== undefined) throw badArchive(archive, `${PACK_INDEX} lists the folder ${escapedForMessage(unheld)}, which the archive holds no entry of`);
}
