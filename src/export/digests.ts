/**
 * The checksums an export's C program checks its data files against before it asks the GPU for
 * anything (templates/export/repro_common.h verify_data): a data file damaged in transit would
 * otherwise replay into a MISMATCH that looks like a miscompile (nu9 #8).
 *
 * The digest is kc64 (src/format/kc64.ts; its C twin c/common/kc_hash.h is copied into
 * repro_common.h), the checksum the capture already records:
 * - the memory images: every stored chunk, its kc64 as the capture recorded it (manifest
 *   regions[]/globals[] before/after hashes; the last chunk of a range is cut at the range's end),
 *   so that nothing is read at export time and a damage between capture and export is caught too;
 * - every other file the program reads (the parameters, the module, the extracted PTX, an unbundled
 *   AMD code object): the whole file as one piece, its kc64 taken here from the bytes the export
 *   checked (verifyFiles: their SHA-256) and wrote.
 * Each file's size is recorded too (a truncated or appended file is named as such).
 */
import type { Manifest } from "../format/manifest.ts";
import { chunkLen, runs, storedHash } from "../format/chunks.ts";
import { kc64 } from "../format/kc64.ts";
import { cString } from "./plan.ts";

/** One data file the program reads: its path relative to the export folder and its size (bytes). */
export interface DigestFile {
  path: string;
  bytes: number;
}

/** One checked piece: DigestFile index, byte offset and length in that file, kc64 (16 hex digits). */
export interface DigestPiece {
  file: number;
  offset: number;
  length: number;
  kc64: string;
}

/**
 * The digests of an export's data files.
 * @param memory the memory images' paths relative to the export folder (data/memory/before.bin …)
 * @param whole the other files the program reads, with their bytes (kc64 taken here)
 */
export function dataDigests(
  m: Manifest,
  memory: { before: string; after: string },
  whole: { path: string; bytes: Uint8Array }[],
): { files: DigestFile[]; pieces: DigestPiece[] } {
  const files: DigestFile[] = [];
  const pieces: DigestPiece[] = [];
  const C = m.memory.chunkBytes;
  for (const which of ["before", "after"] as const) {
    const bytes = which === "before" ? m.memory.beforeFileBytes : m.memory.afterFileBytes;
    const file = files.push({ path: memory[which], bytes }) - 1;
    for (const r of [...m.regions, ...m.globals]) {
      for (const run of runs(r, r[which], C)) {
        for (let k = 0; k < run.count; k++)
          pieces.push({ file, offset: run.fileOffset + k * C, length: chunkLen(r.size, run.first + k, C), kc64: storedHash(r[which], run.hashIndex + k) });
      }
    }
  }
  for (const w of whole) {
    if (files.some((f) => f.path === w.path)) continue; // a PTX module is the module file itself
    const file = files.push({ path: w.path, bytes: w.bytes.length }) - 1;
    pieces.push({ file, offset: 0, length: w.bytes.length, kc64: kc64(w.bytes).hex });
  }
  return { files, pieces };
}

/** The C tables of `d` (capture.h's part that verify_data reads): DATA_FILES, DATA_DIGESTS. */
export function digestTables(d: { files: DigestFile[]; pieces: DigestPiece[] }): string {
  const files = d.files.map((f) => `  {${cString(f.path)}, ${f.bytes}ull},`);
  const pieces = d.pieces.map((p) => `  {${p.file}, ${p.offset}ull, ${p.length}ull, 0x${p.kc64}ull},`);
  return `/* The data files' checksums, recorded at the export (kc64, repro_common.h kc_hash64): each file's
 * size, and the kc64 of each piece {file, byte offset, length}: every stored memory chunk as the
 * capture recorded it, every other file whole. verify_data checks them before the GPU is asked
 * for anything; a file that differs ends the program with exit 3. */
struct kc_data_file { const char *path; unsigned long long bytes; };
struct kc_digest { int file; unsigned long long offset, length, kc64; };
#define N_DATA_FILES ${files.length}
static const struct kc_data_file DATA_FILES[] = {
${files.join("\n") || '  {"", 0}, /* none */'}
};
#define N_DATA_DIGESTS ${pieces.length}
static const struct kc_digest DATA_DIGESTS[] = {
${pieces.join("\n") || "  {0, 0, 0, 0}, /* none */"}
};
`;
}
