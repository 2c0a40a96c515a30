/**
 * One-file archives of a capture folder (`kerncap pack`: ./pack.ts; `kerncap unpack`:
 * ./unpack.ts; what both share: ./archive-common.ts): a zip (ZIP64 where
 * needed) written and read by src/format/zip.ts, deflated and inflated by fflate's streaming
 * `Deflate`/`Inflate`. Nothing holds a whole file in memory: every file is read and written in
 * PIECE-byte pieces; holes are not read, and blocks of zeros are written as holes.
 *
 * Format-agnostic: every file under the folder is archived as it is (the manifest, module, memory
 * images in whatever layout the manifest version uses, the reproducer). The archive:
 *   ROOT/kerncap-pack.json     the index (first entry, deflated): every file's path, size, mode,
 *                              entry name and, for a sparse file, its data extents
 *   ROOT/<path>                a file: deflated when text (no NUL in its first 8 KiB, no hole),
 *                              stored otherwise (holes read as zeros, left as holes on both sides)
 *   ROOT/<path>.kcsparse       a memory image with holes (SEEK_DATA/SEEK_HOLE): only its data
 *                              extents, concatenated, stored; unpack writes each extent at its
 *                              offset and sets the size, so the holes come back as holes. Only
 *                              the memory images: their size is bounded by the manifest's regions
 *   ROOT/<dir>/                every folder (so empty ones survive)
 * ROOT is the capture folder's name. Only regular files inside the folder are archived: a symbolic
 * link anywhere in it is refused (E_PACK_LINK, naming it), as is a hard link (the capture path rule,
 * src/format/paths.ts; verifyFiles applies it to the files the manifest lists). A file or folder name that is not UTF-8 is refused
 * (E_PACK_NAME, naming it with \xHH escapes): zip entry names and the JSON index are UTF-8, and a
 * reproducer file silently left out would break its build elsewhere. Plain `unzip` gives the dense files as they are, and the
 * sparse ones only as their packed data: `kerncap unpack` is the reader.
 *
 * Unpack refuses, before writing anything (planUnpack, and zip.ts centralDirectory): two entries
 * of one name, entries sharing data, entries that would land outside the target folder
 * (zip-slip), encrypted entries, an index or manifest that does not parse, a file the manifest
 * lists at another size, a memory image larger than its regions allow, a sparse entry for any
 * other file, a deflated entry declaring more than deflate's 1032:1 can give. While writing it
 * checks every entry's CRC-32 and size: a deflated entry is inflated INFLATE_PIECE compressed
 * bytes at a time with a running count that stops at the first byte past its declared size
 * (fflate inflates each push whole: 16 KiB in is at most ~16.5 MiB out). Folders are made 0755 and
 * files masked (unpackedMode), whatever the umask. docs/archives.md says why.
 *
 * Both directions check the capture itself (every file's SHA-256, every stored memory chunk's
 * kc64: verifyRegions), pack before writing, unpack before the rename. SIGINT/SIGTERM (src/
 * process-group.ts StopSignals) end either at the next piece: the temp is removed and
 * E_INTERRUPTED exits 130/143. Temps of kerncap processes that are gone (kill -9) next to the
 * target are removed by the next pack/unpack of it (src/leftovers.ts).
 */
export {
  assertOutputPath,
  BUILD_DIR,
  EDITOR_LEFT_OUT,
  escapedName,
  PACK_INDEX,
  PACK_SCHEMA,
  safeEntryPath,
  SPARSE_SUFFIX,
  unportableName,
} from "./archive-common.ts";
export type { ArchiveProgress, PackedFile, PackIndex, PackResult, UnpackResult } from "./archive-common.ts";
export { packCapture, portabilityWarnings } from "./pack.ts";
export { beginsAsPackArchive, isPackArchive, readPackIndex, unpackArchive, unpackedMode } from "./unpack.ts";
export { filesNotIn } from "./files-not-in.ts";
