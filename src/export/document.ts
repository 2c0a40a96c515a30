/**
 * kerncap-export.json, what an export's Triton script (repro.py, kcdata.py) reads: the data files and
 * their checksums, the regions, the tolerance, and for a Triton kernel the launch (src/export/export.ts
 * writes it). What the script imports and evaluates comes from the reproducer's pinned.json, the
 * file a received capture's trust gate showed and hashed, never from the manifest.
 */
import type { Manifest } from "../format/manifest.ts";
import { readInCapture, relativePathProblem } from "../format/paths.ts";
import { parsePinned, PINNED_FILE, type Pinned } from "../frontends/triton/pinned.ts";
import type { dataDigests } from "./digests.ts";
import type { ExportFiles, ExportPlan } from "./plan.ts";
import type { TritonPart } from "./export.ts";

/** The `format` of kerncap-export.json. */
export const EXPORT_FORMAT = "kerncap-export";

/**
 * kerncap-export.json: the export's marker and what the Triton script reads (kcdata.py): `dataFiles`
 * [{path, bytes}] and `dataDigests` [[file index, byte offset, length, kc64 hex]] are capture.h's
 * checksum tables, which repro.py checks before it reads a byte (kcdata.Export.verify).
 */
export function exportDocument(
  m: Manifest,
  p: ExportPlan,
  f: ExportFiles,
  t: TritonPart | null,
  d: ReturnType<typeof dataDigests>,
  pinned?: Pinned,
  ownManifest = false,
): Record<string, unknown> {
  const s = (m.source ?? {}) as Record<string, any>;
  // what repro.py imports and evaluates comes from pinned.json, the file the trust gate showed and hashed, never from the
  // manifest (adversary 53: a received manifest's constexpr expression and fnName ran code no prompt showed); a value stays data
  // (the user's own capture without a pinned.json: its own manifest)
  const from = pinned ?? (ownManifest ? { fnName: s.fnName, constexprs: s.constexprs ?? [] } : undefined);
  const exprOf = new Map<string, string | null>((from?.constexprs ?? []).map((c: { name: string; expr?: string }) => [c.name, c.expr ?? null]));
  const fnName: string | undefined = typeof from?.fnName === "string" ? from.fnName : undefined;
  // the kernel file is the one pinned.json names, which the trust gate showed and hashed; a name made from fnName only for the
  // user's own capture (adversary 79 #21: a received pinned.json without kernelFile ran src/<fnName>.py, never shown)
  const kernelFile = pinned?.kernelFile ?? (ownManifest && fnName ? `${fnName}.py` : undefined);
  return {
    format: EXPORT_FORMAT,
    version: 1,
    kernel: p.kernel,
    demangled: p.demangled,
    frontend: m.kernel.frontend,
    files: f,
    chunkBytes: p.chunkBytes,
    tolerance: p.tolerance,
    regions: p.regions.map((r) => ({
      va: `0x${r.va.toString(16)}`,
      size: r.size,
      kind: r.name,
      changed: r.changed,
      dtype: r.dtype,
      multiset: r.multiset,
      before: r.before,
      after: r.after,
    })),
    dataFiles: d.files,
    dataDigests: d.pieces.map((x) => [x.file, x.offset, x.length, x.kc64]),
    ...(t
      ? {
          triton: {
            fnName: fnName ?? null,
            kernelFile: kernelFile && !relativePathProblem(kernelFile) ? `src/${kernelFile}` : null,
            tritonVersion: s.tritonVersion ?? null,
            grid: p.grid,
            args: t.args,
            constexprs: (s.constexprs ?? []).map((c: { name: string; value?: unknown }) => ({
              name: c.name,
              expr: exprOf.get(c.name) ?? null,
              value: c.value ?? null,
            })),
            options: Object.fromEntries(
              ["num_warps", "num_stages", "num_ctas", "maxnreg"]
                .filter((k) => s.options?.[k] !== undefined && s.options?.[k] !== null)
                .map((k) => [k, s.options[k]]),
            ),
            storedPointer: t.storedPointer,
          },
        }
      : {}),
  };
}

/**
 * The Triton reproducer's pinned.json: the bytes the trust gate read and hashed (`trusted`, a
 * received capture's), else the capture's own; undefined where there is none or it is not kerncap's.
 */
export function pinnedOf(capDir: string, trusted?: readonly { name: string; bytes: Buffer }[]): Pinned | undefined {
  try {
    const bytes = trusted?.find((f) => f.name === PINNED_FILE)?.bytes ?? readInCapture(capDir, PINNED_FILE, 16 << 20);
    return bytes ? parsePinned(capDir, bytes) : undefined;
  } catch {
    return undefined; // not kerncap's record: no kernel file, no expression from it
  }
}
