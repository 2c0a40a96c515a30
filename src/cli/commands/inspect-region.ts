/** `kerncap inspect DIR --region R`: one region's values before and after the launch (src/replay/region-dump.ts), as text or the `region` document. */
import { resolve } from "node:path";
import { verifyFiles } from "../../format/capture-dir.ts";
import type { Manifest } from "../../format/manifest.ts";
import { readInCapture } from "../../format/paths.ts";
import { regionTypesOf } from "../../frontends/index.ts";
import { KerncapError } from "../../errors.ts";
import { regionAt, regionDump, type DumpValue, type RegionDump } from "../../replay/region-dump.ts";
import { ELEMENT_BYTES, elementType, unknownElementType } from "../../replay/tolerance.ts";
import { formatBytes } from "../../util/format.ts";
import { printJson, printText } from "../args.ts";

/** inspect's options for a region dump. */
export const regionArgs = {
  region: {
    type: "string",
    description:
      "Print one region's values before and after the launch: its index as inspect lists it ([2]), a device address inside it (0x7f31e7e80010) or param:N (where kernel parameter N points)",
    valueHint: "N|0xADDR|param:N",
  },
  dtype: {
    type: "string",
    description: `Element type of --region (${Object.keys(ELEMENT_BYTES).join(", ")}, as --dtype of replay and judge takes them; default: the kernel's signature where known, else fp32)`,
    valueHint: "TYPE",
  },
  offset: { type: "string", description: "--region: the first byte shown, from the region's start (default 0, or the address given)", valueHint: "BYTES" },
  count: { type: "string", description: "--region: how many elements (default 16, at most 4096)", valueHint: "N" },
} as const;

const count = (v: unknown, what: string): number | undefined => {
  if (v === undefined) return undefined;
  const s = String(v).trim();
  if (!/^\d+$/.test(s))
    throw new KerncapError("E_USAGE", `${what} ${JSON.stringify(s)} is not a whole number`, { hint: `Give ${what} as digits, e.g. ${what} 64.` });
  return Number(s);
};

/**
 * Print region `args.region` of the capture in `dir` (manifest `m`): a table of index, before, after
 * (a `*` where the bytes differ), or with `json` the `region` document. The capture's files are
 * checked first (verifyFiles: sizes and small files' SHA-256).
 * @throws KerncapError E_USAGE for a region, offset, count or type that does not fit; what verifyFiles throws
 */
export function inspectRegion(dir: string, m: Manifest, args: Record<string, unknown>, json: boolean): number {
  const given = args.dtype === undefined ? undefined : String(args.dtype);
  // the names replay and judge take, and their one error (src/replay/tolerance.ts)
  const dtype = given === undefined ? undefined : elementType(given);
  if (given !== undefined && !dtype) throw unknownElementType(`--dtype ${given}`, given);
  const params = readInCapture(dir, m.params.file, m.params.size);
  const at = regionAt(m, String(args.region), params ? new Uint8Array(params) : undefined);
  verifyFiles(dir, m);
  const frontendType = params ? regionTypesOf(m)?.(new Uint8Array(params))[at.index] : undefined;
  const d = regionDump(dir, m, at.index, {
    offset: count(args.offset, "--offset") ?? at.offset,
    ...(args.count !== undefined ? { count: count(args.count, "--count")! } : {}),
    ...(dtype ? { dtype } : {}),
    ...(frontendType ? { frontendType } : {}),
  });
  if (json)
    printJson("region", { dir: resolve(dir), ...d }); // absolute, as every document gives it
  else printText(describeDump(d, m.regions));
  return 0;
}

const shown = (x: DumpValue) => (typeof x === "number" ? String(x) : x);

/**
 * A u64 element as the text shows it: hex, and where it points into a captured region, that region
 * and the offset, as inspect's params line says a pointer (`0x600000200000 → [1] + 0 B`; nu12 #9: a
 * struct of device pointers read as decimals). --json keeps the decimal string.
 */
function pointerShown(x: DumpValue, regions: readonly { va: string; size: number }[]): string {
  const v = BigInt(x);
  const at = regions.findIndex((r) => v >= BigInt(r.va) && v < BigInt(r.va) + BigInt(r.size));
  return `0x${v.toString(16)}${at >= 0 ? ` → [${at}] + ${formatBytes(Number(v - BigInt(regions[at]!.va)))}` : ""}`;
}

/** The dump as text: a heading line, then `index  before  after` rows, `*` where they differ; u64 elements in hex, a pointer into a region said (pointerShown). */
export function describeDump(d: RegionDump, regions: readonly { va: string; size: number }[] = []): string {
  const show = d.dtype === "u64" ? (x: DumpValue) => pointerShown(x, regions) : shown;
  const eb = ELEMENT_BYTES[d.dtype];
  const first = d.offset / eb;
  // an offset inside an element is shown from that element's first byte: said, not silently
  const note =
    d.offsetAsked !== d.offset
      ? `note: byte ${d.offsetAsked} lies inside element ${first} (${d.dtype}, ${eb} bytes): shown from its first byte, ${d.offset}\n`
      : "";
  const head = `region [${d.region}] ${d.va}, ${formatBytes(d.size)}, ${d.changed ? "written by the launch" : "not changed by the launch"}; ${d.dtype}${d.dtypeFrom === "default" ? " (the default: --dtype sets it; --dtype u64 shows device pointers)" : d.dtypeFrom === "frontend" ? " (the kernel's signature)" : ""}; elements ${first}–${first + d.count - 1} of ${first + d.elements} (from byte ${d.offset})`;
  const rows = d.before.map((b, i) => [String(first + i), show(b), show(d.after[i]!), d.differing.includes(i) ? "*" : ""]);
  const w = [5, 6, 5].map((min, c) => Math.max(min, ...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) => `  ${r[0]!.padStart(w[0]!)}  ${r[1]!.padStart(w[1]!)}  ${r[2]!.padStart(w[2]!)}  ${r[3]}`.trimEnd();
  const more = first + d.count < first + d.elements ? `\n  … ${d.elements - d.count} more (--offset, --count)` : "";
  return `${note}${head}\n${line(["index", "before", "after", ""])}\n${rows.map(line).join("\n")}${more}\n${d.differing.length} of ${d.count} shown differ\n`;
}
