/**
 * Turn a capture library's raw output (docs/raw-capture.md) into a checked capture folder:
 * kerncap.json (src/format/manifest.ts) with checksums, then an atomic rename to the final name.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { sha256File } from "../format/capture-dir.ts";
import { FileImage, sha256Range } from "../format/file-image.ts";
import { MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION, parseManifest, type Manifest } from "../format/manifest.ts";
import { TOOL_VERSION } from "../version.ts";
import { identityFromRaw } from "./census.ts";

// The raw JSON the C libraries write; only the fields used here are typed.
interface RawRegion { va: string; size: number; kind: string; offset: number; changed: boolean; name?: string }
interface Raw {
  raw_version: number;
  library: string;
  frontend: "cuda" | "triton" | "hip";
  kernel: { name: string; demangled: string; match_index: number; launch_index: number; counts_benchmarks?: boolean };
  device: { vendor: "nvidia" | "amd"; name: string; arch: string; driver_version: number; ordinal: number };
  launch: { api: string; grid: [number, number, number]; block: [number, number, number]; shared_mem_bytes: number; cluster?: [number, number, number]; attributes: { id: number; name: string; value_hex: string }[] };
  function_attributes: { id: number; name: string; value: number }[];
  params: { file: string; size: number; layout_source: string; layout: { index: number; offset: number; size: number }[] };
  module: { file: string; kind: Manifest["module"]["kind"]; size: number; source: string };
  regions: RawRegion[];
  globals: RawRegion[];
  timing: Record<string, number>;
  hsa?: Record<string, unknown> | null;
  /** The capturing process (c/kc_process.h); absent from older libraries. */
  process?: Parameters<typeof identityFromRaw>[0];
}

/** Read raw.json from a library's output folder, or undefined when the capture did not complete. */
export function readRaw(dir: string): Raw | undefined {
  const p = join(dir, "raw.json");
  if (!existsSync(p)) return undefined;
  try {
    return JSON.parse(readFileSync(p, "utf8")) as Raw;
  } catch (e) {
    throw new KerncapError("E_RAW", `the capture library wrote an unreadable raw.json: ${(e as Error).message}`, { hint: "Report this as a kerncap bug, with the app command." });
  }
}

function regionHashes(dir: string, file: string, regions: RawRegion[], which: "before" | "after"): string[] {
  const img = new FileImage(join(dir, file));
  return regions.map((r) => (which === "after" && !r.changed ? "" : sha256Range(img, r.offset, r.size)));
}

export interface FinalizeOptions {
  tmpDir: string;
  finalDir: string;
  force: boolean;
  command: string[];
  match: string;
  /** Extra frontend source information to store under manifest.source. */
  source?: Record<string, unknown>;
  /** Runs on the temp folder before the rename (e.g. render the reproducer project). */
  beforeRename?: (dir: string, m: Manifest) => void | Promise<void>;
}

/**
 * Build and write kerncap.json in tmpDir, then rename tmpDir → finalDir (replacing an existing
 * finalDir only when force is set).
 * @returns the manifest written.
 */
export async function finalizeCapture(raw: Raw, o: FinalizeOptions): Promise<Manifest> {
  const t0 = performance.now();
  const before = "memory/before.bin";
  const after = "memory/after.bin";
  const hb = regionHashes(o.tmpDir, before, raw.regions, "before");
  const ha = regionHashes(o.tmpDir, after, raw.regions, "after");
  const gb = regionHashes(o.tmpDir, before, raw.globals, "before");
  const ga = regionHashes(o.tmpDir, after, raw.globals, "after");
  const fileRefs = [raw.params.file, raw.module.file].map((path) => ({ path, size: statSync(join(o.tmpDir, path)).size, sha256: sha256File(join(o.tmpDir, path)) }));
  const m: Manifest = {
    format: MANIFEST_FORMAT,
    version: MANIFEST_VERSION,
    tool: { name: "kerncap", version: TOOL_VERSION, library: raw.library },
    createdAt: new Date().toISOString(),
    command: o.command,
    kernel: {
      name: raw.kernel.name,
      demangled: raw.kernel.demangled,
      frontend: raw.frontend,
      match: o.match,
      matchIndex: raw.kernel.match_index,
      launchIndex: raw.kernel.launch_index,
    },
    device: { vendor: raw.device.vendor, name: raw.device.name, arch: raw.device.arch, driverVersion: raw.device.driver_version, ordinal: raw.device.ordinal },
    launch: {
      api: raw.launch.api,
      grid: raw.launch.grid,
      block: raw.launch.block,
      sharedMemBytes: raw.launch.shared_mem_bytes,
      cluster: raw.launch.cluster ?? [1, 1, 1],
      attributes: raw.launch.attributes.map((a) => ({ id: a.id, name: a.name, valueHex: a.value_hex })),
    },
    functionAttributes: raw.function_attributes,
    params: { file: raw.params.file, size: raw.params.size, layoutSource: raw.params.layout_source, layout: raw.params.layout },
    module: { file: raw.module.file, kind: raw.module.kind, size: raw.module.size, source: raw.module.source },
    memory: {
      before,
      after,
      beforeBytes: raw.regions.reduce((s, r) => s + r.size, 0),
      afterBytes: raw.regions.filter((r) => r.changed).reduce((s, r) => s + r.size, 0),
    },
    regions: raw.regions.map((r, i) => ({
      va: r.va,
      size: r.size,
      kind: r.kind as Manifest["regions"][number]["kind"],
      offset: r.offset,
      changed: r.changed,
      sha256Before: hb[i]!,
      ...(r.changed ? { sha256After: ha[i]! } : {}),
    })),
    globals: raw.globals.map((g, i) => ({
      name: g.name ?? "",
      va: g.va,
      size: g.size,
      offset: g.offset,
      changed: g.changed,
      sha256Before: gb[i]!,
      ...(g.changed ? { sha256After: ga[i]! } : {}),
    })),
    files: fileRefs,
    timing: { ...raw.timing, finalize_s: 0 },
    hsa: raw.hsa ?? null,
    ...(raw.process ? { process: identityFromRaw(raw.process) } : {}),
    ...(o.source ? { source: o.source } : {}),
  };
  m.timing.finalize_s = (performance.now() - t0) / 1000;
  parseManifest(m); // the writer obeys the same schema as every reader
  if (o.beforeRename) await o.beforeRename(o.tmpDir, m);
  writeFileSync(join(o.tmpDir, MANIFEST_FILE), JSON.stringify(m, null, 2) + "\n");
  rmSync(join(o.tmpDir, "raw.json"), { force: true }); // superseded by kerncap.json (kernels.<pid>.json stay: the launch census of each process)
  if (existsSync(o.finalDir)) {
    assertReplaceable(o.finalDir, o.force);
    // the old capture stays until the new one is in place: a failed rename loses nothing
    const old = `${o.finalDir}.old-${process.pid}`;
    renameSync(o.finalDir, old);
    try {
      renameSync(o.tmpDir, o.finalDir);
    } catch (e) {
      renameSync(old, o.finalDir);
      throw e;
    }
    rmSync(old, { recursive: true, force: true });
  } else renameSync(o.tmpDir, o.finalDir);
  return m;
}

/**
 * May `dir` (which exists) be replaced by a new capture? Only with force, and only when it is a
 * kerncap capture folder (kerncap.json of our format) or an empty folder: --force must never
 * delete a source tree or a home folder given by mistake.
 * @throws KerncapError E_EXISTS saying why not.
 */
export function assertReplaceable(dir: string, force: boolean): void {
  let isCapture = false;
  let empty = false;
  try {
    if (statSync(dir).isDirectory()) {
      empty = readdirSync(dir).length === 0;
      const mf = join(dir, MANIFEST_FILE);
      isCapture = existsSync(mf) && (JSON.parse(readFileSync(mf, "utf8")) as { format?: string }).format === MANIFEST_FORMAT;
    }
  } catch {
    isCapture = false;
  }
  if (!isCapture && !empty) {
    throw new KerncapError("E_EXISTS", `${dir} exists and is not a kerncap capture${force ? "; --force replaces only a previous capture" : ""}`, {
      hint: "Choose another --out (kerncap writes a new folder there).",
    });
  }
  if (!force) throw new KerncapError("E_EXISTS", `${dir} already exists (a previous capture)`, { hint: "Pass --force to replace it, or choose another --out." });
}
