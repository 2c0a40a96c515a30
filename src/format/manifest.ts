/**
 * The capture manifest `kerncap.json`: the contract between the capture libraries (via the raw
 * capture, docs/raw-capture.md), the replay engine and the reproducer templates.
 *
 * One valibot schema, versioned by `version`. Readers reject an unknown format, a newer version
 * or a schema violation with a KerncapError that says what to do.
 */
import { oneLine } from "../escape.ts";
import { posix } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { TOOL_VERSION } from "../version.ts";
import { nonFinite } from "./json-position.ts";

/** Manifest format version written by this build. Bump on any incompatible change. */
export const MANIFEST_VERSION = 2;
/** Manifest versions this build reads (1: whole-region images with SHA-256, before chunked snapshots). */
export const MANIFEST_VERSIONS_READ = [2] as const;
export const MANIFEST_FORMAT = "kerncap-capture";
export const MANIFEST_FILE = "kerncap.json";
/**
 * The most chunks a capture's ranges (regions and globals) may span together, 2^24: 1 TiB in the
 * capture library's smallest chunks (64 KiB, KERNCAP_CHUNK_BYTES), 16 TiB in its default (1 MiB).
 */
export const MANIFEST_CHUNKS_MAX = 1 << 24;

/** A 64-bit VA: 0x and 1 to 16 lowercase hex digits, as the capture libraries print it (`0x%llx`, c/cuda/kc_snapshot.h, c/common/kc_json.h) and the schema of `inspect --json` states it. */
const Hex = v.pipe(v.string(), v.regex(/^0x[0-9a-f]{1,16}$/, "expected a 64-bit VA in lowercase hex (0x and 1 to 16 digits 0-9a-f, such as 0x7f12...)"));
// at most 2^53 - 1: past it a JSON number is no longer the integer written (a byte count would be misread)
const U = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(Number.MAX_SAFE_INTEGER));
/** grid, block, cluster: exactly [x, y, z]. */
const Dim3 = v.strictTuple([U, U, U], "expected exactly 3 dimensions [x, y, z]");
const Sha256 = v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/));

/**
 * A frontend's name (kernel.frontend). The names are the frontend registry's (src/frontends/index.ts,
 * a layer above this one): the capture that is opened is checked there (frontendOf: E_FRONTEND),
 * and `kerncap schema manifest` lists them (jsonSchemaOf's `frontends`).
 */
const FrontendName = v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_-]*$/, "expected a frontend name"));

export const RegionKind = v.picklist(["device", "pitched", "managed", "vmm", "async", "host-mapped", "global"]);

/**
 * One stored state of a range: runs of chunks written to a memory file. extents[i] = [first chunk,
 * chunk count, byte offset in the file] (the run's chunks lie back to back from that offset);
 * hashes = kc64 (src/format/kc64.ts) of every stored chunk in extent order, 16 hex digits each.
 */
export const Stored = v.object({
  extents: v.array(v.strictTuple([U, U, U])),
  hashes: v.pipe(v.string(), v.regex(/^(?:[0-9a-f]{16})*$/, "expected kc64 hashes, 16 hex digits each")),
});
export type Stored = v.InferOutput<typeof Stored>;

/** Fields every snapshotted range has (allocations and module globals alike). */
const Range = {
  /** Virtual address of the first byte (hex). */
  va: Hex,
  /** Bytes. */
  size: U,
  /** True when the launch changed at least one chunk; then `after` lists the changed chunks. */
  changed: v.boolean(),
  /** Chunks the launch changed, and their bytes (chunk-granular: whole chunks count). */
  changedChunks: U,
  changedBytes: U,
  /** Where the chunk hashes were computed: the scan kernel on the GPU, or the CPU. */
  hashedOn: v.picklist(["gpu", "cpu"]),
  /** The non-zero chunks before the launch (chunks not listed were all zero). */
  before: Stored,
  /** The chunks the launch changed, with their after state (chunks not listed kept their before state). */
  after: Stored,
};

/** One device allocation (or VMM mapping) live at the launch. */
export const Region = v.object({ ...Range, kind: RegionKind });
export type Region = v.InferOutput<typeof Region>;

/**
 * A name kerncap prints (a kernel's mangled and demangled name, a symbol's, the device's name and
 * architecture): no control character, bidirectional override or line separator, which no such
 * name holds; a received manifest's name that does would print lines of its own that read as
 * kerncap's (adversary 90 #05: kernel.name and device.arch in validate's messages).
 */
const PrintedName = v.pipe(
  v.string(),
  v.regex(
    /^[^\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]*$/u,
    "holds a control character, a bidirectional mark or a line separator, which no kernel, symbol or device name holds",
  ),
);

/** A module-scope variable (__device__ / __constant__), restored by name via cuModuleGetGlobal. */
export const Global = v.object({ ...Range, name: PrintedName });
export type Global = v.InferOutput<typeof Global>;

export const LaunchAttribute = v.object({
  id: U,
  name: v.string(),
  /** Raw CUlaunchAttributeValue bytes (hex, no 0x). */
  valueHex: v.string(),
});

export const FunctionAttribute = v.object({ id: U, name: v.string(), value: v.pipe(v.number(), v.integer(), v.minValue(-(2 ** 31)), v.maxValue(2 ** 31 - 1)) }); // an int (cuFuncGetAttribute)

export const ParamSlot = v.object({ index: U, offset: U, size: U });
export type ParamSlot = v.InferOutput<typeof ParamSlot>;

export const FileRef = v.object({ path: v.string(), size: U, sha256: Sha256 });
export type FileRef = v.InferOutput<typeof FileRef>;

/**
 * Who captured (raw.json `process`, written by c/common/kc_process.h in the capturing process): one
 * process of a job (torchrun, multiprocessing, a subprocess) claims the capture.
 */
export const ProcessIdentity = v.object({
  pid: U,
  ppid: U,
  /** 0-based order in which the job's processes initialized CUDA/HSA (--process); -1 unknown. */
  number: v.pipe(v.number(), v.integer(), v.minValue(-1)),
  hostname: v.string(),
  /** /proc/self/cmdline. */
  cmdline: v.array(v.string()),
  /** Launcher variables that were set (RANK, LOCAL_RANK, WORLD_SIZE, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, ...). */
  jobEnv: v.record(v.string(), v.string()),
  /** From the first of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID holding a whole number. */
  rank: v.nullable(U),
  rankVariable: v.nullable(v.string()),
  /** How the capturing process was chosen: --rank, --process, or the first to reach the launch. */
  selection: v.object({ by: v.picklist(["any", "rank", "process"]), value: v.optional(U), admitted: v.boolean() }),
  /** CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES on AMD), those set. */
  visibleDevices: v.record(v.string(), v.string()),
  /** cuDeviceGetUuid_v2, as nvidia-smi prints it (GPU-…). */
  deviceUuid: v.optional(v.string()),
  /** cuDeviceGetPCIBusId (domain:bus:device.function). */
  pciBusId: v.optional(v.string()),
});
export type ProcessIdentity = v.InferOutput<typeof ProcessIdentity>;

export const Manifest = v.object({
  format: v.literal(MANIFEST_FORMAT),
  version: v.literal(MANIFEST_VERSION),
  tool: v.object({ name: v.literal("kerncap"), version: v.string(), library: v.string() }),
  createdAt: v.string(),
  command: v.array(v.string()),
  kernel: v.object({
    name: PrintedName,
    demangled: PrintedName,
    frontend: FrontendName,
    /** The regex given with --kernel. */
    match: v.string(),
    /** 0-based index among the launches that matched (--dispatch). */
    matchIndex: U,
    /** 0-based index among all launches of the process. */
    launchIndex: U,
  }),
  device: v.object({
    vendor: v.picklist(["nvidia", "amd"]),
    name: PrintedName,
    /** sm_90, gfx90a, ... */
    arch: PrintedName,
    driverVersion: U,
    ordinal: U,
  }),
  launch: v.object({
    api: v.string(),
    grid: Dim3,
    block: Dim3,
    sharedMemBytes: U,
    cluster: Dim3,
    attributes: v.array(LaunchAttribute),
  }),
  functionAttributes: v.array(FunctionAttribute),
  params: v.object({
    file: v.string(),
    /** The parameter buffer's size (bytes): at most 1 MiB (CUDA takes 32764 bytes of parameters; a larger one is read whole by inspect, export, the reproducer's build: adversary 61's 4 GiB one ended in an internal error). */
    size: v.pipe(U, v.maxValue(1 << 20)),
    layoutSource: v.string(),
    layout: v.array(ParamSlot),
  }),
  module: v.object({
    file: v.string(),
    kind: v.picklist(["cubin", "fatbin", "ptx", "hsaco", "elf"]),
    /** The module's size (bytes): under 4 GiB (a module is read whole, into one buffer). */
    size: v.pipe(U, v.maxValue(2 ** 32 - 1)),
    source: v.string(),
  }),
  memory: v.object({
    before: v.string(),
    after: v.string(),
    /** Snapshot chunk size (bytes, a power of two; the last chunk of a range may be shorter). */
    chunkBytes: U,
    /** Chunk checksum function. */
    hash: v.literal("kc64/1"),
    /** Bytes of region data (sum of region sizes: live memory at the launch). */
    beforeBytes: U,
    /** Bytes of the regions' chunks that the launch changed. */
    afterBytes: U,
    /** Bytes stored in memory/before.bin and memory/after.bin (non-zero and changed chunks). */
    storedBeforeBytes: U,
    storedAfterBytes: U,
    /** Sizes (bytes) of memory/before.bin and memory/after.bin as written: a longer or shorter file was altered. */
    beforeFileBytes: U,
    afterFileBytes: U,
    /** Why chunks were hashed on the CPU instead of the GPU scan kernel (absent when it ran). */
    gpuScanUnavailable: v.optional(v.string()),
  }),
  regions: v.array(Region),
  globals: v.array(Global),
  /** Per-file checksums of every file other than the memory images (those are per chunk). */
  files: v.array(FileRef),
  timing: v.record(v.string(), v.number()),
  /** The captured launch was kernel node `kernelNode` of CUDA graph `id` (instantiation order): its ancestors were run by kerncap to reach its before state. */
  graph: v.optional(v.object({ id: U, kernelNode: U })),
  /** The captured launch faulted in the app (device-side assert, illegal address, trap): the CUresult; there is no after state. */
  fault: v.optional(v.object({ code: U, name: v.string(), message: v.string() })),
  /** How timing.app_launch_us (the kernel's GPU time in the app) was measured. */
  appLaunchMethod: v.optional(v.string()),
  hsa: v.optional(v.nullable(v.record(v.string(), v.unknown()))),
  /** The capturing process (absent from captures made before it was recorded). */
  process: v.optional(ProcessIdentity),
  /** The host that made the capture (os.hostname(), /etc/machine-id or null) and the user (effective uid; absent in captures made before it was recorded): another host's or another user's capture is received (src/format/received.ts). Absent before it was recorded. */
  host: v.optional(v.object({ name: v.string(), machineId: v.nullable(v.string()), uid: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))) })),
  /** Frontend-specific source information (CUDA source location, Triton JIT metadata). */
  source: v.optional(v.record(v.string(), v.unknown())),
  /**
   * What a rebuild runs, as kerncap wrote it at capture (build.sh; Triton's pinned.json and
   * repro.py): each file's SHA-256. A confined build (kerncap mcp) runs only these bytes, or bytes
   * the user trusted on the command line (src/format/rendered.ts). Absent before it was recorded.
   */
  rendered: v.optional(v.array(v.object({ path: v.string(), sha256: Sha256 }))),
  /**
   * The reproducer's sources as kerncap wrote them at capture: every regular file under src/ and
   * its SHA-256 (src/format/source-digests.ts). `kerncap inspect` says which differ now (edited,
   * added, gone). Informational: a received capture's is the sender's. Absent before it was recorded.
   */
  sources: v.optional(v.array(v.object({ path: v.string(), sha256: Sha256 }))),
});
export type Manifest = v.InferOutput<typeof Manifest>;

/**
 * Validate parsed JSON as a manifest.
 * @throws KerncapError E_MANIFEST for a foreign format, a newer version, or a schema violation.
 */
export function parseManifest(json: unknown, where = MANIFEST_FILE): Manifest {
  const obj = json as Record<string, unknown> | null;
  if (!obj || typeof obj !== "object" || obj.format !== MANIFEST_FORMAT) {
    throw new KerncapError("E_MANIFEST", `${where} is not a kerncap capture manifest (format is not "${MANIFEST_FORMAT}")`, {
      hint: "Point kerncap at a folder written by `kerncap run`.",
    });
  }
  if (typeof obj.version === "number" && obj.version < MANIFEST_VERSION) {
    throw new KerncapError(
      "E_MANIFEST_VERSION",
      `${where} has manifest version ${obj.version} (whole-region memory images, from an earlier kerncap build: tool.version ${String((obj.tool as { version?: unknown } | undefined)?.version ?? "0.1")}); this kerncap (${TOOL_VERSION}) reads manifest version ${MANIFEST_VERSION} (chunked snapshots)`,
      { hint: "Capture the kernel again with this kerncap (`kerncap run ...`), or replay this capture with the kerncap build that wrote it." },
    );
  }
  if (typeof obj.version === "number" && obj.version > MANIFEST_VERSION) {
    throw new KerncapError("E_MANIFEST_VERSION", `${where} has manifest version ${obj.version}; this kerncap reads version ${MANIFEST_VERSION}`, {
      hint: "Upgrade kerncap to the version that wrote this capture (see tool.version in the manifest).",
    });
  }
  // JSON has no Infinity, but JSON.parse reads 1e999 as one and valibot's number() takes it (adversary round 70: export wrote it into C)
  const inf = nonFinite(json);
  if (inf)
    throw new KerncapError("E_MANIFEST", `${where} is malformed: ${inf}`, {
      hint: "This is not a manifest kerncap wrote: a damaged or crafted capture. Capture again, or ask its sender for the capture as kerncap wrote it.",
    });
  const r = v.safeParse(Manifest, json, { abortEarly: true });
  if (!r.success) {
    const issues = r.issues
      .slice(0, 5)
      .map((i) => `${oneLine(v.getDotPath(i) ?? "(root)")}: ${i.received === "undefined" ? "missing" : oneLine(i.message)}`)
      .join("; ");
    throw new KerncapError("E_MANIFEST", `${where} is malformed: ${issues}`, {
      hint: "The capture folder was edited or damaged; capture again with `kerncap run`.",
    });
  }
  checkInvariants(r.output, where);
  return r.output;
}

/** Relative, inside the capture folder (no absolute path, no `..`). */
function insideFolder(p: string): boolean {
  return p.length > 0 && !p.startsWith("/") && !p.split(/[\\/]/).includes("..");
}

/**
 * What the schema alone cannot say: every file path stays inside the capture folder, files[]
 * lists each path once, the parameter and module files are covered by checksums with the sizes
 * params.size and module.size state, and no two regions overlap in VA or in the memory images.
 * @throws KerncapError E_MANIFEST
 */
function checkInvariants(m: Manifest, where: string): void {
  const bad = (msg: string) =>
    new KerncapError("E_MANIFEST", `${where} is malformed: ${msg}`, { hint: "The capture folder was edited or damaged; capture again with `kerncap run`." });
  for (const p of [m.params.file, m.module.file, m.memory.before, m.memory.after, ...m.files.map((f) => f.path)]) {
    if (!insideFolder(p)) throw bad(`file path ${JSON.stringify(p)} points outside the capture folder`);
  }
  // the sources kerncap recorded at capture: files under src/ (inspect, pack and export compare src/ with them)
  for (const [i, f] of (m.sources ?? []).entries()) {
    const p = f.path;
    if (
      !p.startsWith("src/") ||
      !insideFolder(p) ||
      p.split("/").some((part) => part === "" || part === ".") ||
      /[\x00-\x1f\x7f]/.test(p) ||
      Buffer.byteLength(p) > 4096
    )
      throw bad(`sources[${i}].path ${JSON.stringify(p)} is not a file under src/ (relative, no "..", no control character, at most 4096 bytes)`);
  }
  const seen = new Set<string>();
  for (const f of m.files) {
    const key = posix.normalize(f.path); // kernel//a and ./kernel/a name one file
    if (seen.has(key)) throw bad(`files[] lists ${JSON.stringify(f.path)} twice`);
    seen.add(key);
  }
  for (const p of [m.params.file, m.module.file]) {
    if (!m.files.some((f) => f.path === p)) throw bad(`${oneLine(p)} has no checksum in files[]`);
  }
  const params = m.files.find((f) => f.path === m.params.file);
  if (params && params.size !== m.params.size) throw bad(`params.size is ${m.params.size} but ${m.params.file} has ${params.size} bytes`);
  const module = m.files.find((f) => f.path === m.module.file);
  if (module && module.size !== m.module.size) throw bad(`module.size is ${m.module.size} but ${m.module.file} has ${module.size} bytes in files[]`);
  for (const [what, d] of [
    ["launch.grid", m.launch.grid],
    ["launch.block", m.launch.block],
    ["launch.cluster", m.launch.cluster],
  ] as const) {
    if (d.some((x) => x < 1)) throw bad(`${what} is ${JSON.stringify(d)}: every dimension is at least 1`);
  }
  for (const p of m.params.layout) {
    if (p.offset + p.size > m.params.size)
      throw bad(`parameter ${p.index} (offset ${p.offset}, ${p.size} bytes) lies past the ${m.params.size}-byte parameter buffer`);
  }
  for (const r of [...m.regions, ...m.globals]) {
    if (BigInt(r.va) === 0n) throw bad("a range at VA 0x0");
    // a 64-bit VA space (the VA's own format holds at most 16 hex digits): a range may not wrap past 2^64
    if (BigInt(r.va) + BigInt(r.size) > 1n << 64n) throw bad(`the range at ${r.va} (${r.size} bytes) runs past the end of the 64-bit address space`);
  }
  const live = m.regions.reduce((a, r) => a + r.size, 0);
  if (live !== m.memory.beforeBytes) throw bad(`memory.beforeBytes is ${m.memory.beforeBytes} but the regions hold ${live} bytes`);
  const C = m.memory.chunkBytes;
  // at most 64 MiB, the capture library's largest (KERNCAP_CHUNK_BYTES): one chunk's hash is checked by reading it whole
  if (C < 4096 || C > 64 << 20 || C & (C - 1)) throw bad(`memory.chunkBytes ${C} is not a power of two from 4096 to 64 MiB`);
  // every reader that judges or restores a capture holds a few numbers per chunk of every range (src/format/chunks.ts
  // chunkExpectation): a 64 TiB all-zero region (no stored byte, an 88 KB archive) took gigabytes to look at (adversary 62)
  const chunks = [...m.regions, ...m.globals].reduce((a, r) => a + Math.ceil(r.size / C), 0);
  if (chunks > MANIFEST_CHUNKS_MAX)
    throw bad(
      `the ranges span ${chunks} chunks of ${C} bytes; a capture spans at most ${MANIFEST_CHUNKS_MAX} (1 TiB in the capture library's smallest chunks, 64 KiB)`,
    );
  const ranges = [...m.regions.map((r) => ({ r, what: `region ${r.va}` })), ...m.globals.map((g) => ({ r: g as Region | Global, what: `global ${g.name}` }))];
  const fileRuns: Record<"before" | "after", [number, number, string][]> = { before: [], after: [] };
  for (const { r, what } of ranges) {
    const n = Math.ceil(r.size / C);
    for (const which of ["before", "after"] as const) {
      const st = r[which];
      let next = 0;
      let chunks = 0;
      for (const [first, count, off] of st.extents) {
        if (count < 1 || first < next || first + count > n)
          throw bad(`${what}: ${which} extent [${first}, ${count}] is out of order or outside its ${n} chunks`);
        if (off % 4096) throw bad(`${what}: ${which} extent at file offset ${off} is not page-aligned`);
        next = first + count;
        chunks += count;
        fileRuns[which].push([off, Math.min(r.size, (first + count) * C) - first * C, what]);
      }
      if (st.hashes.length !== chunks * 16) throw bad(`${what}: ${which} lists ${chunks} chunks but ${st.hashes.length / 16} hashes`);
    }
    if (r.changed !== r.after.extents.length > 0) throw bad(`${what}: changed is ${r.changed} but ${r.after.extents.length} changed extents are listed`);
  }
  for (const which of ["before", "after"] as const) {
    const runs = fileRuns[which].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < runs.length; i++) {
      if (runs[i - 1]![0] + runs[i - 1]![1] > runs[i]![0]) throw bad(`${runs[i - 1]![2]} and ${runs[i]![2]} overlap in memory/${which}.bin`);
    }
  }
  const byVa = [...m.regions].map((r) => ({ r, va: BigInt(r.va) })).sort((a, b) => (a.va < b.va ? -1 : a.va > b.va ? 1 : 0));
  for (let i = 1; i < byVa.length; i++) {
    const prev = byVa[i - 1]!;
    if (prev.va + BigInt(prev.r.size) > byVa[i]!.va) throw bad(`regions ${prev.r.va} and ${byVa[i]!.r.va} overlap`);
  }
}
