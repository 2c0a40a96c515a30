/**
 * The raw capture (docs/raw-capture.md): what a capture library writes into its output folder,
 * checked here with one valibot schema before anything is read from it. Both libraries write
 * raw_version 2 through c/common/kc_raw.c: chunked snapshots with kc64 hashes, computed on the GPU
 * (CUDA library, c/cuda/kc_snapshot.c) or on the CPU (`hashed_on: "cpu"`: the HSA library, and CUDA
 * ranges the scan kernel does not read).
 */
import * as v from "valibot";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { isFrontendName } from "../frontends/index.ts";

const U = v.pipe(v.number(), v.integer(), v.minValue(0));
const Dim3 = v.tuple([U, U, U]);
const Hex = v.pipe(v.string(), v.regex(/^0x[0-9a-f]+$/i));
const Kind = v.picklist(["device", "pitched", "managed", "vmm", "async", "host-mapped", "global"]);
const Stored = v.object({ extents: v.array(v.tuple([U, U, U])), hashes: v.pipe(v.string(), v.regex(/^(?:[0-9a-f]{16})*$/)) });

const Common = {
  library: v.string(),
  frontend: v.pipe(
    v.string(),
    v.check(isFrontendName, (i) => `${JSON.stringify(i.input)} is no frontend this kerncap knows`),
  ),
  kernel: v.object({ name: v.string(), demangled: v.string(), match_index: U, launch_index: U, counts_benchmarks: v.optional(v.boolean()) }),
  device: v.object({ vendor: v.picklist(["nvidia", "amd"]), name: v.string(), arch: v.string(), driver_version: U, ordinal: U }),
  launch: v.object({
    api: v.string(),
    grid: Dim3,
    block: Dim3,
    shared_mem_bytes: U,
    cluster: v.optional(Dim3),
    attributes: v.array(v.object({ id: U, name: v.string(), value_hex: v.string() })),
  }),
  function_attributes: v.optional(v.array(v.object({ id: U, name: v.string(), value: v.number() })), []),
  params: v.object({ file: v.string(), size: U, layout_source: v.string(), layout: v.array(v.object({ index: U, offset: U, size: U })) }),
  /** null (HSA library) when no loaded code object held the kernel: finalize refuses it with a message. */
  module: v.nullable(v.object({ file: v.string(), kind: v.picklist(["cubin", "fatbin", "ptx", "hsaco", "elf"]), size: U, source: v.string() })),
  globals_scan: v.optional(v.object({ symbols: U, globals: U, unreadable_entries: U })),
  timing: v.record(v.string(), v.number()),
  hsa: v.optional(v.nullable(v.record(v.string(), v.unknown()))),
  /** The capturing process (c/common/kc_process.c kc_proc_json); absent from older libraries. */
  process: v.optional(
    v.object({
      pid: U,
      ppid: v.optional(U),
      number: v.optional(v.number()),
      hostname: v.optional(v.string()),
      cmdline: v.optional(v.array(v.string())),
      job_env: v.optional(v.record(v.string(), v.string())),
      rank: v.optional(v.nullable(v.number())),
      rank_variable: v.optional(v.nullable(v.string())),
      selection: v.optional(v.object({ by: v.picklist(["any", "rank", "process"]), value: v.optional(v.number()), admitted: v.boolean() })),
      visible_devices: v.optional(v.record(v.string(), v.string())),
      device_uuid: v.optional(v.string()),
      pci_bus_id: v.optional(v.string()),
    }),
  ),
};

/** One range: chunked (c/common/kc_raw.c kc_json_item). */
const Range = v.object({
  name: v.optional(v.string()),
  va: Hex,
  size: U,
  kind: Kind,
  hashed_on: v.picklist(["gpu", "cpu"]),
  changed: v.boolean(),
  changed_chunks: U,
  changed_bytes: U,
  before: Stored,
  after: Stored,
});
export const Raw = v.object({
  raw_version: v.literal(2),
  ...Common,
  memory: v.object({
    chunk_bytes: U,
    hash: v.literal("kc64/1"),
    align: U,
    live_bytes: U,
    stored_before_bytes: U,
    stored_after_bytes: U,
    hashed_on_gpu: v.boolean(),
    gpu_scan_unavailable: v.nullable(v.string()),
  }),
  regions: v.array(Range),
  globals: v.array(Range),
  /** Several captures in one run: which --kernel target this one is (-1: --capture-all). */
  target: v.optional(v.number()),
  /** The launch was a kernel node of a CUDA graph launch (c/cuda/kc_graphs.c): graph id, kernel node index. */
  graph: v.optional(v.object({ id: U, kernel_node: U })),
  /** The captured launch faulted in the app (cuCtxSynchronize's error): no after state. */
  fault: v.optional(v.object({ code: U, name: v.string(), message: v.string() })),
  /** How timing.app_launch_us was measured (c/cuda/kc_capture.c kc_capture_enter). */
  app_launch_method: v.optional(v.string()),
});

export type Raw = v.InferOutput<typeof Raw>;
/** raw_version values this build reads. */
export const RAW_VERSIONS = [2] as const;

/**
 * Check parsed raw.json against the schema of its raw_version.
 * @throws KerncapError E_RAW naming the first fields that do not fit.
 */
export function parseRaw(json: unknown, where = "raw.json"): Raw {
  const ver = (json as { raw_version?: unknown } | null)?.raw_version;
  if (!RAW_VERSIONS.includes(ver as 2)) {
    throw new KerncapError("E_RAW", `${where} has raw_version ${JSON.stringify(ver)}; this kerncap reads ${RAW_VERSIONS.join(" and ")}`, {
      hint: "The capture library and kerncap come from different builds: rebuild kerncap (bash scripts/build.sh), which embeds its own library.",
    });
  }
  const r = v.safeParse(Raw, json);
  if (!r.success) {
    const issues = r.issues
      .slice(0, 5)
      .map((i) => `${v.getDotPath(i) ?? "(root)"}: ${i.received === "undefined" ? "missing" : i.message}`)
      .join("; ");
    throw new KerncapError("E_RAW", `the capture library wrote a ${where} that does not fit raw_version ${String(ver)}: ${issues}`, {
      hint: "Report this as a kerncap bug, with the app command.",
    });
  }
  return r.output;
}

/** Read and check raw.json from a library's output folder; undefined when the capture did not complete. */
export function readRaw(dir: string): Raw | undefined {
  const p = join(dir, "raw.json");
  if (!existsSync(p)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(p, "utf8"));
  } catch (e) {
    throw new KerncapError("E_RAW", `the capture library wrote an unreadable raw.json: ${(e as Error).message}`, {
      hint: "Report this as a kerncap bug, with the app command.",
    });
  }
  return parseRaw(json);
}
