/**
 * Turn a capture library's raw output (docs/raw-capture.md) into a checked capture folder:
 * kerncap.json (src/format/manifest.ts) with checksums, then an atomic rename to the final name.
 */
import { jsonText } from "../escape.ts";
import { existsSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { KerncapError } from "../errors.ts";
import { assertReplaceable, replaceableKind, sha256File } from "../format/capture-dir.ts";
import { replaceFolder } from "../util/replace-folder.ts";
import { settleFolderModes } from "../util/folder-modes.ts";
import { parseRaw, type Raw } from "./raw.ts";
import { MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION, parseManifest, type Manifest } from "../format/manifest.ts";
import { TOOL_VERSION } from "../version.ts";
import { identityFromRaw } from "./census.ts";
import { hostIdentity } from "../format/received.ts";
import { sealMadeHere } from "../format/made-here.ts";
import { renderedDigests } from "../format/rendered.ts";
import { sourceDigests } from "../format/source-digests.ts";

export { readRaw } from "./raw.ts";

type ManifestRange = Manifest["regions"][number];

/** The manifest's ranges and memory summary from raw.json (chunked: c/common/kc_raw.c). */
function memoryOf(raw: Raw): { regions: Manifest["regions"]; globals: Manifest["globals"]; memory: Manifest["memory"] } {
  const conv = (r: Raw["regions"][number]): ManifestRange => ({
    va: r.va.toLowerCase(), // the manifest's VAs are lowercase (src/format/manifest.ts Hex); raw.json's may not be
    size: r.size,
    kind: r.kind,
    changed: r.changed,
    changedChunks: r.changed_chunks,
    changedBytes: r.changed_bytes,
    hashedOn: r.hashed_on,
    before: r.before,
    after: r.after,
  });
  const regions = raw.regions.map(conv);
  return {
    regions,
    globals: raw.globals.map((g) => ({ ...conv(g), name: g.name ?? "" })),
    memory: {
      before: "memory/before.bin",
      after: "memory/after.bin",
      chunkBytes: raw.memory.chunk_bytes,
      hash: raw.memory.hash,
      beforeBytes: raw.regions.reduce((s, r) => s + r.size, 0),
      afterBytes: regions.reduce((s, r) => s + r.changedBytes, 0),
      storedBeforeBytes: raw.memory.stored_before_bytes,
      storedAfterBytes: raw.memory.stored_after_bytes,
      beforeFileBytes: 0, // set by the caller
      afterFileBytes: 0,
      ...(raw.memory.gpu_scan_unavailable ? { gpuScanUnavailable: raw.memory.gpu_scan_unavailable } : {}),
    },
  };
}

export interface FinalizeOptions {
  tmpDir: string;
  finalDir: string;
  force: boolean;
  command: string[];
  match: string;
  /** Extra frontend source information to store under manifest.source. */
  source?: Record<string, unknown>;
  /**
   * Runs on the temp folder before the rename (e.g. render the reproducer project); finalDir is
   * the name the folder gets next, the one its messages must name.
   */
  beforeRename?: (dir: string, m: Manifest, finalDir: string) => void | Promise<void>;
}

/**
 * Check the raw capture (src/capture/raw.ts), build and write kerncap.json in tmpDir, then rename tmpDir → finalDir (replacing an existing
 * finalDir only when force is set).
 * @returns the manifest written.
 */
export async function finalizeCapture(input: unknown, o: FinalizeOptions): Promise<Manifest> {
  const t0 = performance.now();
  const raw = parseRaw(input);
  if (!raw.module) {
    throw new KerncapError(
      "E_CAPTURE_FAILED",
      `the capture library saw the launch of ${raw.kernel.demangled || raw.kernel.name} but no loaded code object holding it`,
      {
        hint: "The application loaded its code object in a way the library does not follow; run with --verbose and report the library's log.",
      },
    );
  }
  const module = raw.module;
  const mem = memoryOf(raw);
  const fileBytes = (f: string) => (existsSync(join(o.tmpDir, f)) ? statSync(join(o.tmpDir, f)).size : 0);
  mem.memory.beforeFileBytes = fileBytes(mem.memory.before);
  mem.memory.afterFileBytes = fileBytes(mem.memory.after);
  const fileRefs = [raw.params.file, module.file].map((path) => ({
    path,
    size: statSync(join(o.tmpDir, path)).size,
    sha256: sha256File(join(o.tmpDir, path)),
  }));
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
    // the size of the file written (what replay loads; files[] states it too, and readManifest checks the two agree)
    module: { file: module.file, kind: module.kind, size: fileRefs[1]!.size, source: module.source },
    memory: mem.memory,
    regions: mem.regions,
    globals: mem.globals,
    files: fileRefs,
    timing: { ...raw.timing, finalize_s: 0 },
    ...(raw.app_launch_method ? { appLaunchMethod: raw.app_launch_method } : {}),
    ...(raw.fault ? { fault: raw.fault } : {}),
    ...(raw.graph ? { graph: { id: raw.graph.id, kernelNode: raw.graph.kernel_node } } : {}),
    hsa: raw.hsa ?? null,
    ...(raw.process ? { process: identityFromRaw(raw.process) } : {}),
    host: hostIdentity(),
    ...(o.source ? { source: o.source } : {}),
  };
  m.timing.finalize_s = (performance.now() - t0) / 1000;
  parseManifest(m); // the writer obeys the same schema as every reader
  if (o.beforeRename) await o.beforeRename(o.tmpDir, m, o.finalDir);
  // what a rebuild runs, as the templates wrote it: a confined build (kerncap mcp) runs only these bytes (src/format/rendered.ts)
  const rendered = renderedDigests(o.tmpDir);
  if (rendered.length) m.rendered = rendered;
  // the reproducer's sources as written: inspect says which the user changed since (src/format/source-digests.ts)
  const sources = sourceDigests(o.tmpDir);
  if (sources.length) m.sources = sources;
  writeFileSync(join(o.tmpDir, MANIFEST_FILE), jsonText(m, 2) + "\n");
  rmSync(join(o.tmpDir, "raw.json"), { force: true });
  rmSync(join(o.tmpDir, ".kerncap-temp"), { force: true }); // src/leftovers.ts TEMP_MARKER: complete now // superseded by kerncap.json (kernels.<pid>.json stay: the launch census of each process)
  // made here by this user: sealed over the manifest and the folder (the rename keeps its identity; src/format/made-here.ts)
  sealMadeHere(o.tmpDir);
  moveIntoPlace(o.tmpDir, o.finalDir, o.force);
  return m;
}

/**
 * Rename a complete capture folder `tmpDir` to `finalDir`, replacing a previous capture there only
 * with `force` (assertReplaceable). The old capture stays until the new one is in place: a failed
 * rename loses nothing; a folder another user swapped in at the name meanwhile is never removed
 * (E_UNSAFE_PATH). `rename` does the rename itself (demo: PrivateTemp.placeAt, which refuses a
 * folder swapped at the temp's name).
 * @throws KerncapError E_EXISTS (see assertReplaceable); the rename's system error.
 */
export function moveIntoPlace(tmpDir: string, finalDir: string, force: boolean, rename: (dest: string) => void = (dest) => renameSync(tmpDir, dest)): void {
  settleFolderModes(tmpDir, dirname(finalDir)); // the umask's bits taken, a setgid parent's group given (src/util/folder-modes.ts)
  if (!existsSync(finalDir)) return rename(finalDir);
  assertReplaceable(finalDir, force);
  // judged again where no one else can swap it, and removed through a held fd (src/util/replace-folder.ts)
  replaceFolder(finalDir, { refuse: (old) => (replaceableKind(old) ? undefined : "not a kerncap capture nor an empty folder"), place: rename });
}
