/**
 * What an export's programs need to know of a capture, as data: the regions and module globals
 * with their stored chunks (the extents of kerncap.json, src/format/manifest.ts Stored), the
 * launch, the function and launch attributes, the element type and tolerance of each range, the
 * module's architectures; and its two renderings, capture.h for the driver-API program
 * (templates/export/repro.c; for an AMD capture the HSA program, templates/export/hsa/repro.c) and
 * export.json for the Triton script (templates/export/repro.py).
 * Pure: manifest and parameter bytes in, text out; no file is read here.
 */
import type { Manifest, Stored } from "../format/manifest.ts";
import { multisetRegions, regionNumericsPlan } from "../replay/tolerance-plan.ts";
import { DEFAULT_TIMING } from "../replay/timing-setup.ts";
import { ELEMENT_BYTES, type ElementType, type Tolerance } from "../replay/tolerance.ts";
import { tritonParamTypes } from "../frontends/triton/numerics.ts";
import { TEMPLATE_ESCAPES } from "../frontends/templates.ts";
import { regionTypesOf } from "../frontends/index.ts";
import { KerncapError } from "../errors.ts";

// Launch attributes that carry handles of the app's process (events): meaningless in another
// process; the replay drops them too (src/replay/backends/cuda.ts).
const DROPPED_LAUNCH_ATTRIBUTES = new Set([7 /* PROGRAMMATIC_EVENT */, 12 /* LAUNCH_COMPLETION_EVENT */]);
// Function attributes the driver reports but does not let a caller set (CLUSTER_SIZE_MUST_BE_SET).
const READ_ONLY_FUNC_ATTRIBUTES = new Set([12]);
/** CU_LAUNCH_ATTRIBUTE_COOPERATIVE: what cuLaunchCooperativeKernel means for cuLaunchKernelEx. */
const COOPERATIVE = 2;

/** How the C program compares a range's elements: bytes (integers, unknown) or one float type. */
export type CompareKind = "DT_BYTES_EXACT" | "DT_F32" | "DT_F64" | "DT_F16" | "DT_BF16";
const COMPARE_KIND: Partial<Record<ElementType, CompareKind>> = { fp32: "DT_F32", fp64: "DT_F64", fp16: "DT_F16", bf16: "DT_BF16" };

/** One range (region or module global) with its stored chunks: extents [first chunk, count, file offset]. */
export interface PlanRange {
  /** Region: its kind (device, vmm …); global: its name (cuModuleGetGlobal). */
  name: string;
  va: bigint;
  size: number;
  changed: boolean;
  dtype: ElementType;
  /** Compared as a multiset of elements of dtype's size (kerncap judge/export --multiset: src/replay/envelope.ts multisetDifference); never a module global. */
  multiset: boolean;
  before: Stored["extents"];
  after: Stored["extents"];
}

export interface ExportPlan {
  kernel: string;
  demangled: string;
  capturedDevice: string;
  capturedArch: string;
  grid: [number, number, number];
  block: [number, number, number];
  sharedMemBytes: number;
  /** cuFuncSetAttribute(id, value) pairs, the read-only ones left out. */
  functionAttributes: { id: number; name: string; value: number }[];
  /** CUlaunchAttribute id and its 64 value bytes (the captured CUlaunchAttributeValue). */
  launchAttributes: { id: number; name: string; value: Uint8Array }[];
  chunkBytes: number;
  /** Sorted by VA (the C program merges neighbouring spans in one pass). */
  regions: PlanRange[];
  globals: PlanRange[];
  tolerance: Tolerance;
  paramsBytes: number;
  /** The module's machine-code architectures (sm_XX) and its PTX (compute_XX, "" when none): src/codeobj describeModule. */
  sass: string[];
  ptx: string;
  /** The kernel's time in the app (µs, manifest timing.app_launch_us), -1 when unknown. */
  appLaunchUs: number;
  /** The app's launch faulted (manifest fault: CUresult and its name): the replay must fault the same way. */
  fault: { code: number; name: string } | null;
  /** The dispatch of an AMD (HSA) capture, null for CUDA: see HsaDispatch. */
  hsa: HsaDispatch | null;
}

/**
 * What the HSA program's AQL dispatch packet needs beyond the launch: the kernel descriptor symbol
 * and kernarg segment size (bytes) from the code object's metadata (src/codeobj/amdgpu.ts
 * findKernel), the group (LDS) and private segment sizes (bytes) of the app's packet (manifest
 * hsa.group_segment_size / private_segment_size, else the metadata's fixed sizes), and the GPU
 * agent's ordinal among GPU agents (manifest device.ordinal).
 */
export interface HsaDispatch {
  symbol: string;
  kernargBytes: number;
  groupBytes: number;
  privateBytes: number;
  ordinal: number;
}

/** The 64 value bytes of a captured launch attribute (hex without 0x, at most 64 bytes). */
function attrBytes(hex: string): Uint8Array {
  const out = new Uint8Array(64);
  for (let i = 0; i < Math.min(64, hex.length >> 1); i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16) || 0;
  return out;
}

/**
 * The plan of an export: the manifest's launch and ranges, each region's element type as the
 * replay would judge it (regionNumericsPlan: a type named for the region (`o.dtypes`, region names
 * as --multiset takes them), else the Triton signature, else `o.dtype`, else fp32) with the
 * tolerance `o` gives (default 0, 0: bit for bit) and the regions `o.multiset` names compared as
 * multisets (multisetRegions), the module's architectures from `archs` (describeModule's list:
 * sm_XX machine code, compute_XX PTX). `o` is the judging in force: the capture's settings under
 * the export's options (src/export/export.ts).
 * @throws KerncapError E_USAGE for a bad tolerance, element type or region name (regionNumericsPlan, multisetRegions)
 */
export function exportPlan(
  m: Manifest,
  params: Uint8Array,
  archs: string[],
  o: { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; multiset?: string[] } = {},
  hsa: HsaDispatch | null = null,
): ExportPlan {
  const types = regionNumericsPlan(m, params, { ...o, regionTypes: regionTypesOf(m) });
  const asMultiset = new Set(o.multiset?.length ? multisetRegions(m, params, o.multiset) : []);
  const range = (r: Manifest["regions"][number], name: string, dtype: ElementType, multiset = false): PlanRange => ({
    name,
    va: BigInt(r.va),
    size: r.size,
    changed: r.changed,
    dtype,
    multiset,
    before: r.before.extents,
    after: r.after.extents,
  });
  const regions = m.regions.map((r, i) => range(r, r.kind, types[i]!.dtype, asMultiset.has(i))).sort((a, b) => (a.va < b.va ? -1 : a.va > b.va ? 1 : 0));
  const attrs = m.launch.attributes.filter((a) => !DROPPED_LAUNCH_ATTRIBUTES.has(a.id)).map((a) => ({ id: a.id, name: a.name, value: attrBytes(a.valueHex) }));
  if (m.launch.api === "cuLaunchCooperativeKernel" && !attrs.some((a) => a.id === COOPERATIVE)) {
    const value = new Uint8Array(64);
    value[0] = 1;
    attrs.push({ id: COOPERATIVE, name: "COOPERATIVE", value });
  }
  const ptx = archs.filter((a) => a.startsWith("compute_")).sort((a, b) => archNumber(b) - archNumber(a))[0] ?? "";
  const app = m.timing.app_launch_us;
  return {
    kernel: m.kernel.name,
    demangled: m.kernel.demangled || m.kernel.name,
    capturedDevice: m.device.name,
    capturedArch: m.device.arch,
    grid: m.launch.grid as [number, number, number],
    block: m.launch.block as [number, number, number],
    sharedMemBytes: m.launch.sharedMemBytes,
    functionAttributes: m.functionAttributes.filter((a) => !READ_ONLY_FUNC_ATTRIBUTES.has(a.id)),
    launchAttributes: attrs,
    chunkBytes: m.memory.chunkBytes,
    regions,
    globals: m.globals.map((g) => range({ ...g, kind: "global" }, g.name, "u8")),
    tolerance: types.tol,
    paramsBytes: m.params.size,
    sass: archs.filter((a) => a.startsWith("sm_")),
    ptx,
    appLaunchUs: typeof app === "number" && app >= 0 ? app : -1,
    fault: m.fault ? { code: m.fault.code, name: m.fault.name } : null,
    hsa,
  };
}

/** 90 of sm_90a / compute_90. */
function archNumber(a: string): number {
  return Number(/_(\d+)/.exec(a)?.[1] ?? 0);
}

/**
 * A C string literal holding `s` exactly: the templates' C escape (src/frontends/templates.ts cStr:
 * printable ASCII as is, quote, backslash and `?` escaped, every other byte of its UTF-8 a
 * three-digit octal escape). Names are data (a kernel's name may hold anything).
 */
export const cString = (s: string): string => TEMPLATE_ESCAPES.cStr!(s);

/** Files the C program reads, relative to the export folder (README.md describes them). */
export interface ExportFiles {
  module: string;
  /** The module's PTX extracted beside it ("" when the image holds none). */
  ptx: string;
  params: string;
  before: string;
  after: string;
}

/**
 * capture.h: the tables of the driver-API program (templates/export/repro.c), one C definition
 * per fact of the capture, in the order the program uses them; `digests`: the data files'
 * checksum tables (./digests.ts digestTables), last. Every name is written as a C
 * string literal (cString) and never inside a comment.
 */
export function captureHeader(p: ExportPlan, f: ExportFiles, digests = ""): string {
  const extents: string[] = [];
  const rangeRow = (r: PlanRange) => {
    const at = (xs: Stored["extents"]) => {
      const first = extents.length;
      for (const [c, n, off] of xs) extents.push(`  {${c}ull, ${n}ull, ${off}ull},`);
      return `${first}, ${xs.length}`;
    };
    return `  {${cString(r.name)}, 0x${r.va.toString(16)}ull, ${r.size}ull, ${r.changed ? 1 : 0}, ${COMPARE_KIND[r.dtype] ?? "DT_BYTES_EXACT"}, ${cString(r.dtype)}, ${r.multiset ? 1 : 0}, ${ELEMENT_BYTES[r.dtype]}, ${at(r.before)}, ${at(r.after)}},`;
  };
  const regions = p.regions.map(rangeRow);
  const globals = p.globals.map(rangeRow);
  // a C double literal: 1.0, 1e-07, 1e+21 (an integer written with an exponent takes no ".0": adversary 34, 1e+21.0 did not compile)
  const num = (x: number) => {
    // never Infinity or NaN into C (the manifest and judging readers refuse them: nonFinite; this is the last guard)
    if (!Number.isFinite(x))
      throw new KerncapError("E_MANIFEST", `a number to export is ${x}: not a number kerncap writes`, {
        hint: "Capture again: the capture was damaged or crafted.",
      });
    return /[.e]/.test(String(x)) ? String(x) : `${x}.0`;
  };
  return `/* capture.h: written by kerncap export from data/kerncap.json; the tables repro.c reads. */
#ifndef KERNCAP_CAPTURE_H
#define KERNCAP_CAPTURE_H

/* The kernel: its mangled name (cuModuleGetFunction) and the name people read. */
#define KERNEL_NAME ${cString(p.kernel)}
#define KERNEL_DEMANGLED ${cString(p.demangled)}
#define CAPTURED_DEVICE ${cString(p.capturedDevice)}
#define CAPTURED_ARCH ${cString(p.capturedArch)}

${p.hsa ? hsaFacts(p.hsa, f) : cudaModule(p, f)}#define PARAMS_FILE ${cString(f.params)}
#define PARAMS_BYTES ${p.paramsBytes}
#define BEFORE_FILE ${cString(f.before)}
#define AFTER_FILE ${cString(f.after)}

/* The launch (grid and block in threads per dimension, dynamic shared memory in bytes). */
static const unsigned GRID[3] = {${p.grid.join(", ")}};
static const unsigned BLOCK[3] = {${p.block.join(", ")}};
#define SHARED_MEM_BYTES ${p.sharedMemBytes}u
/* The kernel's time in the app (us; -1: not measured). */
#define APP_LAUNCH_US ${num(p.appLaunchUs)}
/* 1: before each timed launch, L2 is written back by a read of twice its size (or 256 MiB), as
 * kerncap replay times by default (src/replay/timing-setup.ts DEFAULT_TIMING, l2=${DEFAULT_TIMING.l2}); 0: L2 as the
 * restore leaves it (the kernel's output in its before state as dirty lines). */
#define L2_WRITE_BACK ${DEFAULT_TIMING.l2 === "restored" ? 0 : 1}

${p.hsa ? "" : cudaLaunch(p)}
/* Judging (the capture's judging settings in force at the export, under the export's options):
 * elements of a float type within ATOL + RTOL * |expected|, others bit for bit; a range with
 * multiset 1 as a multiset of its elements of \`width\` bytes (the same elements in any order).
 * JUDGED_AS: how the final line names it. */
#define ATOL ${num(p.tolerance.atol)}
#define RTOL ${num(p.tolerance.rtol)}
#define JUDGED_AS ${cString(judgedAs(p))}
enum { DT_BYTES_EXACT, DT_F32, DT_F64, DT_F16, DT_BF16 };

/* Memory images: a range of \`size\` bytes is cut into chunks of CHUNK_BYTES; before.bin holds its
 * non-zero chunks before the launch, after.bin the chunks the launch changed, each as runs of
 * chunks stored back to back: EXTENTS[i] = {first chunk, chunk count, byte offset in the file}. */
#define CHUNK_BYTES ${p.chunkBytes}ull
struct kc_extent { unsigned long long chunk, count, offset; };
/* A region (or a module global, by name): before = index of its first before extent, n_before
 * how many; after, n_after the same for the after state; changed: the launch changed it;
 * multiset: compared as a multiset of elements of width bytes. */
struct kc_range {
  const char *name;
  unsigned long long va, size;
  int changed, dtype;
  const char *type;
  int multiset, width;
  int before, n_before, after, n_after;
};
static const struct kc_extent EXTENTS[] = {
${extents.join("\n") || "  {0, 0, 0}, /* none */"}
};
#define N_REGIONS ${regions.length}
static const struct kc_range REGIONS[] = {
${regions.join("\n") || '  {"", 0, 0, 0, 0, "", 0, 0, 0, 0, 0, 0}, /* none */'}
};
#define N_GLOBALS ${globals.length}
static const struct kc_range GLOBALS[] = {
${globals.join("\n") || '  {"", 0, 0, 0, 0, "", 0, 0, 0, 0, 0, 0}, /* none */'}
};

${digests}#endif
`;
}

/**
 * How the programs' final line names the judging: " (bit for bit)", " (within tolerance)", and the
 * regions compared as multisets by VA (more than 4: their count), e.g. " (bit for bit; as multisets: 0x600000400000)".
 */
export function judgedAs(p: Pick<ExportPlan, "tolerance" | "regions">): string {
  const ms = p.regions.filter((r) => r.multiset).map((r) => `0x${r.va.toString(16)}`);
  const tol = p.tolerance.atol > 0 || p.tolerance.rtol > 0 ? "within tolerance" : "bit for bit";
  const named = ms.length > 4 ? `${ms.length} regions (README.md)` : ms.join(", ");
  return ` (${tol}${ms.length ? `; as multisets: ${named}` : ""})`;
}

/** capture.h's module part for the CUDA program: the image, its machine code and PTX. */
function cudaModule(p: ExportPlan, f: ExportFiles): string {
  return `/* Files, relative to the export folder (-d). MODULE_SASS: the architectures the image has machine
 * code for; MODULE_PTX: its PTX ("" when none), extracted to MODULE_PTX_FILE. */
#define MODULE_FILE ${cString(f.module)}
#define MODULE_SASS ${cString(p.sass.join(" "))}
#define MODULE_PTX ${cString(p.ptx)}
#define MODULE_PTX_FILE ${cString(f.ptx)}
`;
}

/** capture.h's module part for the HSA program: the code object and the dispatch packet's facts. */
function hsaFacts(h: HsaDispatch, f: ExportFiles): string {
  return `/* Files, relative to the export folder (-d): the code object for CAPTURED_ARCH (an AMDGPU ELF). */
#define MODULE_FILE ${cString(f.module)}
/* The dispatch packet: the kernel descriptor symbol, the kernarg, group (LDS) and private segment
 * bytes, the GPU agent's ordinal among GPU agents (-g). */
#define KERNEL_SYMBOL ${cString(h.symbol)}
#define KERNARG_SEGMENT_BYTES ${h.kernargBytes}u
#define GROUP_SEGMENT_BYTES ${h.groupBytes}u
#define PRIVATE_SEGMENT_BYTES ${h.privateBytes}u
#define CAPTURED_ORDINAL ${h.ordinal}
`;
}

/** capture.h's CUDA launch part: the fault, the function and launch attributes. */
function cudaLaunch(p: ExportPlan): string {
  const bytes = (v: Uint8Array) => [...v].map((b) => `0x${b.toString(16).padStart(2, "0")}`).join(", ");
  return `/* The app's launch faulted with this CUresult (0: it did not): then the same fault is the match. */
#define FAULT_CODE ${p.fault?.code ?? 0}
#define FAULT_NAME ${cString(p.fault?.name ?? "")}

/* cuFuncSetAttribute(CUfunction_attribute id, value), as the app's function had them. */
#define N_FUNC_ATTRS ${p.functionAttributes.length}
static const struct { int id; int value; } FUNC_ATTRS[] = {
${p.functionAttributes.map((a) => `  {${a.id}, ${a.value}},`).join("\n") || "  {0, 0}, /* none */"}
};

/* CUlaunchAttribute id and its CUlaunchAttributeValue bytes, as the app launched with them. */
#define N_LAUNCH_ATTRS ${p.launchAttributes.length}
static const struct { int id; unsigned char value[64]; } LAUNCH_ATTRS[] = {
${p.launchAttributes.map((a) => `  {${a.id}, {${bytes(a.value)}}},`).join("\n") || "  {0, {0}}, /* none */"}
};
`;
}

/** One kernel argument of the Triton script: a tensor over a captured region, or a scalar's value. */
export type TritonArg =
  | { name: string; kind: "tensor"; dtype: string; region: number; offset: number; numel: number }
  | { name: string; kind: "scalar"; type: string; value: number | string | null }
  | { name: string; kind: "pointer-outside"; type: string; va: string };

/**
 * The Triton script's arguments from the captured parameter bytes: the kernel's non-constexpr
 * parameters in launch order (the signature of manifest.source, src/frontends/triton/numerics.ts
 * tritonParamTypes), each pointer as a flat tensor of its element type from the pointer to the
 * end of the region it points into (the capture records the pointer, not the tensor's shape), each
 * scalar as the value in its parameter slot. Shapes: `region` indexes ExportPlan.regions.
 */
export function tritonArgs(m: Manifest, params: Uint8Array, regions: PlanRange[]): TritonArg[] {
  const sig = (m.source?.signature ?? {}) as Record<string, unknown>;
  const names = Object.entries(sig)
    .filter(([, t]) => t !== "constexpr")
    .map(([n]) => n);
  const types = tritonParamTypes(sig);
  const dv = new DataView(params.buffer, params.byteOffset, params.byteLength);
  return names.map((name, i) => {
    const ty = types[i] ?? "";
    const slot = m.params.layout[i];
    if (!slot || slot.offset + slot.size > params.byteLength) return { name, kind: "scalar", type: ty, value: null };
    if (ty.startsWith("*")) {
      const p = dv.getBigUint64(slot.offset, true);
      const ri = regions.findIndex((r) => p >= r.va && p < r.va + BigInt(r.size));
      const dtype = ty.replace(/^\*k?/, "");
      if (ri < 0) return { name, kind: "pointer-outside", type: ty, va: `0x${p.toString(16)}` };
      const offset = Number(p - regions[ri]!.va);
      const size = ELEMENT_SIZE[dtype] ?? 1;
      return { name, kind: "tensor", dtype, region: ri, offset, numel: Math.floor((regions[ri]!.size - offset) / size) };
    }
    return { name, kind: "scalar", type: ty, value: scalarValue(dv, slot.offset, slot.size, ty) };
  });
}

const ELEMENT_SIZE: Record<string, number> = { fp64: 8, fp32: 4, fp16: 2, bf16: 2, i64: 8, u64: 8, i32: 4, u32: 4, i16: 2, u16: 2, i8: 1, u8: 1, i1: 1 };

/** A scalar parameter's value from its slot (Triton's scalar types; 64-bit integers as decimal text, past 2^53 JSON numbers lose digits). */
function scalarValue(dv: DataView, off: number, size: number, ty: string): number | string | null {
  if (ty === "fp32" && size === 4) return dv.getFloat32(off, true);
  if (ty === "fp64" && size === 8) return dv.getFloat64(off, true);
  if ((ty === "fp16" || ty === "bf16") && size === 2) return null; // Triton passes these as fp32 today
  if (size === 8) return (ty.startsWith("u") ? dv.getBigUint64(off, true) : dv.getBigInt64(off, true)).toString();
  if (size === 4) return ty.startsWith("u") ? dv.getUint32(off, true) : dv.getInt32(off, true);
  if (size === 2) return ty.startsWith("u") ? dv.getUint16(off, true) : dv.getInt16(off, true);
  if (size === 1) return ty.startsWith("u") || ty === "i1" ? dv.getUint8(off) : dv.getInt8(off);
  return null;
}

/**
 * Whether the kernel may reach memory through pointers stored in memory: some 8-byte word of a
 * region's before state (a view per region, from the capture's memory image) holds a VA inside a
 * captured region. Then only a replay at the captured VAs (the driver-API program) gives the kernel
 * the memory it reads; the Triton script, whose tensors live at new addresses, says so.
 * @returns the first such word: the region holding it, its offset, the VA it holds
 */
export function storedPointer(
  regions: PlanRange[],
  words: (ri: number) => Iterable<{ offset: number; bytes: Uint8Array }>,
): { region: number; offset: number; va: string } | undefined {
  const inside = (v: bigint) => regions.some((r) => v >= r.va && v < r.va + BigInt(r.size));
  for (let ri = 0; ri < regions.length; ri++) {
    for (const { offset, bytes } of words(ri)) {
      const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let k = 0; k + 8 <= bytes.byteLength; k += 8) {
        const v = dv.getBigUint64(k, true);
        if (v !== 0n && inside(v)) return { region: ri, offset: offset + k, va: `0x${v.toString(16)}` };
      }
    }
  }
  return undefined;
}
