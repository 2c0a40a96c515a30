/**
 * Reading and checking a capture folder: the manifest, the per-file checksums, the memory images.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { MANIFEST_FILE, parseManifest, type Manifest, type Region } from "./manifest.ts";

/** SHA-256 (hex) of bytes, BoringSSL through Bun.CryptoHasher. */
export function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** SHA-256 of a file read in 64 MiB pieces (never the whole file in memory). */
export function sha256File(path: string): string {
  const h = new Bun.CryptoHasher("sha256");
  const size = statSync(path).size;
  if (size === 0) return h.digest("hex");
  const m = Bun.mmap(path, { shared: false });
  for (let o = 0; o < size; o += 64 << 20) h.update(m.subarray(o, Math.min(size, o + (64 << 20))));
  return h.digest("hex");
}

/**
 * Load and validate `DIR/kerncap.json`.
 * @throws KerncapError E_NOT_CAPTURE when the folder or manifest is missing, E_MANIFEST* when malformed.
 */
export function readManifest(dir: string): Manifest {
  const path = join(dir, MANIFEST_FILE);
  if (!existsSync(dir)) throw new KerncapError("E_NOT_CAPTURE", `no such capture folder: ${dir}`, { hint: "Give the folder that `kerncap run --out DIR` wrote." });
  if (!statSync(dir).isDirectory()) throw new KerncapError("E_NOT_CAPTURE", `${dir} is a file, not a capture folder`, { hint: "Give the folder that `kerncap run --out DIR` wrote." });
  if (!existsSync(path)) {
    const tmp = existsSync(dir) && /\.tmp-\d+$/.test(dir);
    throw new KerncapError("E_NOT_CAPTURE", `${dir} has no ${MANIFEST_FILE}: not a complete capture`, {
      hint: tmp ? "This is the temporary folder of an interrupted capture; run the capture again." : "Give the folder that `kerncap run --out DIR` wrote.",
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new KerncapError("E_MANIFEST", `${path} is not valid JSON: ${(e as Error).message}`, { hint: "The manifest was damaged; capture again." });
  }
  return parseManifest(json, path);
}

/** Bytes each memory image must span: max(region offset + size). */
export function memoryExtent(regions: { offset: number; size: number }[], onlyChanged = false): number {
  let end = 0;
  for (const r of regions) if (!onlyChanged || (r as Region).changed) end = Math.max(end, r.offset + r.size);
  return end;
}

/**
 * Check that every file exists with its recorded size and SHA-256 (small files), and that the
 * memory images are long enough. Region contents are checked against sha256Before/After as they
 * are read (replay), so this stays cheap for tens of GB.
 * @throws KerncapError E_CHECKSUM naming the file.
 */
export function verifyFiles(dir: string, m: Manifest): void {
  for (const f of m.files) {
    const p = join(dir, f.path);
    if (!existsSync(p) || !statSync(p).isFile()) throw new KerncapError("E_CHECKSUM", `${f.path} is missing from ${dir} (or not a file)`, { hint: "The capture is incomplete; capture again." });
    const size = statSync(p).size;
    if (size !== f.size) throw new KerncapError("E_CHECKSUM", `${f.path} has ${size} bytes, the manifest says ${f.size} (truncated or altered)`, { hint: "Capture again; the file was damaged." });
    const h = sha256File(p);
    if (h !== f.sha256) throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${f.path} (sha256 ${h.slice(0, 12)}…, expected ${f.sha256.slice(0, 12)}…)`, { hint: "The file was altered after capture; capture again or restore it (kerncap replay --no-verify runs it anyway)." });
  }
  const all = [...m.regions, ...m.globals];
  for (const [file, onlyChanged] of [[m.memory.before, false], [m.memory.after, true]] as const) {
    const need = memoryExtent(all, onlyChanged);
    const p = join(dir, file);
    if (need === 0) continue;
    if (!existsSync(p)) throw new KerncapError("E_CHECKSUM", `${file} is missing from ${dir}`, { hint: "The capture is incomplete; capture again." });
    const size = statSync(p).size;
    if (size < need) throw new KerncapError("E_CHECKSUM", `${file} is truncated: ${size} bytes, regions need ${need}`, { hint: "Capture again; the file was damaged." });
  }
}

/**
 * Check every region's SHA-256 in both memory images (reads them once, through mmap; the page
 * cache then serves the restore). Runs before the GPU is touched.
 * @throws KerncapError E_CHECKSUM naming the file and the region.
 */
export function verifyRegions(dir: string, m: Manifest): void {
  const all = [...m.regions, ...m.globals];
  const open = (file: string) => (statSync(join(dir, file)).size ? Bun.mmap(join(dir, file), { shared: false }) : new Uint8Array(0));
  if (m.memory.beforeBytes || m.globals.length) {
    const before = open(m.memory.before);
    for (const r of all) checkRegionHash(m.memory.before, r, before.subarray(r.offset, r.offset + r.size), r.sha256Before);
  }
  const changed = all.filter((r) => r.changed);
  if (changed.length) {
    const after = open(m.memory.after);
    for (const r of changed) checkRegionHash(m.memory.after, r, after.subarray(r.offset, r.offset + r.size), r.sha256After ?? "");
  }
}

/** Region checksum check on bytes already in memory. @throws KerncapError E_CHECKSUM */
export function checkRegionHash(file: string, r: { va: string; size: number }, bytes: Uint8Array, expected: string): void {
  const h = sha256(bytes);
  if (h !== expected) {
    throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${file} for region ${r.va} (${r.size} bytes)`, {
      hint: "The memory image was altered after capture; capture again (or pass --no-verify to replay it anyway).",
    });
  }
}
