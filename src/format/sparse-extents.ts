/**
 * The data extents of a (possibly sparse) file, from the kernel: lseek(2) with SEEK_DATA /
 * SEEK_HOLE through bun:ffi (src/native/libc.ts). A file system without hole support reports the whole
 * file as one data extent (Linux's generic lseek), so the answer is always usable; where libc or
 * lseek cannot be reached at all, the whole file is one extent too.
 */
import { closeSync, fstatSync, openSync } from "node:fs";
import { libc } from "../native/libc.ts";

const SEEK_DATA = 3;
const SEEK_HOLE = 4;

/** [offset, length] in bytes, ascending, not overlapping. */
export type Extent = [number, number];

let lseek: ((fd: number, off: number, whence: number) => number) | null | undefined;

function libcLseek(): typeof lseek {
  if (lseek !== undefined) return lseek;
  try {
    const lib = libc();
    lseek = (fd, off, whence) => Number(lib.lseek(fd, off, whence));
  } catch {
    lseek = null;
  }
  return lseek;
}

/**
 * Data extents of the file at `path` (holes left out). An empty file has none; a file made only of
 * a hole has none.
 * @returns { size (bytes), extents, dataBytes (sum of extent lengths), sparse (some hole found) }
 */
export function dataExtents(path: string): { size: number; extents: Extent[]; dataBytes: number; sparse: boolean } {
  const fd = openSync(path, "r");
  try {
    const st = fstatSync(fd);
    const size = st.size;
    const seek = libcLseek();
    if (size === 0) return { size, extents: [], dataBytes: 0, sparse: false };
    if (!seek) return { size, extents: [[0, size]], dataBytes: size, sparse: false };
    const extents: Extent[] = [];
    let off = 0;
    while (off < size) {
      const d = seek(fd, off, SEEK_DATA);
      if (d < 0) {
        // ENXIO: no data after off (the rest is a hole). Any other failure at 0: take it all as data
        if (off === 0 && st.blocks > 0) return { size, extents: [[0, size]], dataBytes: size, sparse: false };
        break;
      }
      const h = Math.min(seek(fd, d, SEEK_HOLE), size);
      if (h <= d) break;
      extents.push([d, h - d]);
      off = h;
    }
    const dataBytes = extents.reduce((a, [, n]) => a + n, 0);
    return { size, extents, dataBytes, sparse: dataBytes < size };
  } finally {
    closeSync(fd);
  }
}
