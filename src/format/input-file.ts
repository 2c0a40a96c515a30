/**
 * Files a user names outside any capture (results, baselines, `--merge` inputs, candidate lists,
 * `replay --module`): read bounded, never through a link (or, where asked, through none another
 * user planted), never blocking on a FIFO, refused when not a regular file.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, realpathSync, type Stats } from "node:fs";
import { resolve } from "node:path";
import { type ErrorCode, KerncapError, systemError, whileReading } from "../errors.ts";
import { refusePlantedLinks } from "../util/write-file.ts";

/**
 * The most bytes kerncap reads of a results file, a baseline or a `--merge` input: a corpus of
 * 10 000 captures writes about 20 MB; a file from someone else past this is refused rather than
 * read into memory (rendering a record's text to a report multiplies its size).
 */
export const INPUT_FILE_MAX_BYTES = 64 << 20;

/**
 * The bytes of a results, baseline or merge input file at `path` (outside any capture: a file
 * from someone else, or in a folder another user can write): opened O_RDONLY|O_NOFOLLOW|O_NONBLOCK,
 * so a link is refused and a FIFO never blocks; anything but a regular file, or one past
 * `maxBytes`, is refused. `check`, given the fd's fstat, may refuse it too (another user's file:
 * src/user-group.ts notOwnFile), judged on the file read, with no swap between the check and the read.
 * @returns the file's bytes (utf8 text)
 * @throws KerncapError `code` (exit 2) naming the file and why; E_IO when it cannot be read; what `check` throws
 */
export function readInputFile(path: string, what: string, code: ErrorCode, maxBytes = INPUT_FILE_MAX_BYTES, check?: (st: Stats) => void): string {
  const hint = `Give the ${what} kerncap wrote (a regular file of at most ${maxBytes >> 20} MiB).`;
  const bytes = readInputBytes(path, what, code, { maxBytes, ...(check ? { check } : {}) });
  // strict UTF-8: a byte that is not would become U+FFFD, and a path in it another file's name (adversary 69: a
  // candidate list's `cand\377` built the folder `cand\uFFFD`); streamed, so that a last line cut inside a character
  // is a cut line (the readers' "not a whole record"), not a refusal of the file
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: true });
  } catch {
    throw new KerncapError(code, `${path} is not UTF-8 text: not a ${what}`, { hint });
  }
}

/**
 * The bytes of the file at `path` a user names (an input outside any capture), read as
 * readInputFile reads it: opened O_RDONLY|O_NONBLOCK (a FIFO never blocks) and O_NOFOLLOW unless
 * `followLink` (then a link another user planted is still refused first, src/util/write-file.ts
 * refusePlantedLinks); anything but a regular file, or one past `maxBytes` (default
 * INPUT_FILE_MAX_BYTES), is refused before a byte is read; `check` sees the fd's fstat.
 * @returns the file's bytes
 * @throws KerncapError `code` (exit 2) naming the file and why; E_UNSAFE_PATH (a planted link); E_IO when it cannot be read
 */
export function readInputBytes(
  path: string,
  what: string,
  code: ErrorCode,
  o: { maxBytes?: number; check?: (st: Stats) => void; followLink?: boolean } = {},
): Buffer {
  const maxBytes = o.maxBytes ?? INPUT_FILE_MAX_BYTES;
  const hint = `Give the ${what} kerncap wrote (a regular file of at most ${maxBytes >> 20} MiB).`;
  if (o.followLink) refusePlantedLinks(resolve(path), `the ${what}`, undefined, true);
  let fd: number;
  try {
    // a link followed is followed once, here: the real path opened O_NOFOLLOW (a file swapped for a link after the check is refused)
    fd = openSync(o.followLink ? realpathSync(path) : path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOOP")
      throw new KerncapError(code, `${path} is a symbolic link; kerncap reads no ${what} through a link`, { hint });
    throw systemError(whileReading(e, path)) ?? e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new KerncapError(code, `${path} is not a regular file (a FIFO, a device or a folder): not a ${what}`, { hint });
    o.check?.(st);
    if (st.size > maxBytes) throw new KerncapError(code, `${path} holds ${st.size} bytes, more than the ${maxBytes >> 20} MiB a ${what} may hold`, { hint });
    const buf = Buffer.alloc(st.size);
    let off = 0;
    while (off < st.size) {
      const n = readSync(fd, buf, off, st.size - off, off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    closeSync(fd);
  }
}

/** The most bytes of results files one `--merge` reads in all (a merge holds every record in memory, and its reports several times that). */
export const MERGE_MAX_BYTES = 4 * INPUT_FILE_MAX_BYTES;

/**
 * Refuse a `--merge` whose files hold more than MERGE_MAX_BYTES in all, before any is read (each
 * is still read through readInputFile). Sizes of files that cannot be stat'ed count as 0: the read says why.
 * @throws KerncapError E_RESULTS naming the total and the limit
 */
export function assertMergeSize(paths: string[]): void {
  let total = 0;
  for (const p of paths) {
    try {
      const st = lstatSync(p);
      if (st.isFile()) total += st.size;
    } catch {
      // the read names the problem
    }
  }
  if (total > MERGE_MAX_BYTES)
    throw new KerncapError("E_RESULTS", `the ${paths.length} files to merge hold ${total} bytes, more than the ${MERGE_MAX_BYTES >> 20} MiB one merge reads`, {
      hint: "Merge fewer files at a time, or shard the run into fewer, larger shards.",
    });
}
