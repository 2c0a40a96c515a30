/**
 * Which element type and tolerance each region of a capture is compared with: what the capture's
 * frontend knows (Frontend.regionTypes: Triton's signature pointer types, via the parameter
 * buffer; the caller passes it, bound to the capture by src/frontends/index.ts regionTypesOf),
 * else --dtype, else float32. Pure: manifest + parameter bytes in, plan out.
 */
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { readInCapture } from "../format/paths.ts";
import { elementType, unknownElementType, type ElementType, type RegionNumerics, type Tolerance } from "./tolerance.ts";

/**
 * The element type of each region (manifest order) that a capture's frontend knows from the
 * parameter bytes; undefined entries fall back to --dtype / fp32. `written(region, offset)`:
 * whether the app changed the 64 bytes at offset.
 */
export type RegionTypes = (params: Uint8Array, written?: (ri: number, offset: number) => boolean) => (ElementType | undefined)[];

export type NumericsPlan = { dtype: ElementType; source: RegionNumerics["dtypeSource"] }[] & { tol: Tolerance };

/** @throws KerncapError E_USAGE for a negative/non-numeric tolerance or an unknown --dtype. */
export function regionNumericsPlan(
  m: Manifest,
  params: Uint8Array,
  o: { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; regionTypes?: RegionTypes },
  written?: (ri: number, offset: number) => boolean,
): NumericsPlan {
  const atol = o.atol ?? 0;
  const rtol = o.rtol ?? 0;
  for (const [k, v] of [
    ["atol", atol],
    ["rtol", rtol],
  ] as const) {
    if (!Number.isFinite(v) || v < 0)
      throw new KerncapError("E_USAGE", `--${k} must be a non-negative number, got ${v}`, {
        hint: `For example --${k} 1e-5 (0, the default, asks for bit-exact).`,
      });
  }
  let fallback: ElementType = "fp32";
  let fallbackSource: RegionNumerics["dtypeSource"] = "default";
  if (o.dtype) {
    const t = elementType(o.dtype);
    if (!t) throw unknownElementType(`--dtype ${o.dtype}`, o.dtype);
    fallback = t;
    fallbackSource = "option";
  }
  const fromSig = o.regionTypes?.(params, written) ?? m.regions.map(() => undefined);
  // a type named for a region (`--dtype 2=bf16`, `kerncap judge`) wins over the signature's
  const named = new Map<number, ElementType>();
  for (const [name, t] of Object.entries(o.dtypes ?? {})) {
    const et = elementType(t);
    if (!et) throw unknownElementType(`--dtype ${name}=${t}`, t, true);
    for (const i of multisetRegions(m, params, [name], "dtype")) named.set(i, et);
  }
  const plan = m.regions.map((_, i) =>
    named.has(i)
      ? { dtype: named.get(i)!, source: "option" as const }
      : fromSig[i]
        ? { dtype: fromSig[i]!, source: "signature" as const }
        : { dtype: fallback, source: fallbackSource },
  ) as NumericsPlan;
  plan.tol = { atol, rtol };
  return plan;
}

/**
 * Parse a non-negative number option (--atol/--rtol; `example`: the hint's example for another, e.g.
 * check's --slower); undefined when not given. @throws KerncapError E_USAGE
 */
export function floatArg(name: string, v: unknown, example = `For example --${name} 1e-5 (0, the default, asks for bit-exact).`): number | undefined {
  if (v === undefined || v === "" || v === null) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new KerncapError("E_USAGE", `--${name} must be a non-negative number, got ${JSON.stringify(v)}`, { hint: example });
  return n;
}

/**
 * Regions to compare as multisets of elements (replay/validate --multiset), from the option's
 * values (repeatable, each a comma-separated list; also the regions of `--dtype REGION=T`, `option`
 * naming the option in errors). A value names regions as `kerncap inspect`
 * shows them: `N` (the Nth region, 0-based, inspect's order = the manifest's), a VA `0x…` (the
 * region holding it: its start or any byte inside), `param:N` (the region kernel parameter N
 * points into, read from the captured parameter buffer), `changed` (every region the app's
 * launch wrote) or `all`. Module globals are never compared as multisets.
 * @returns region indices, ascending, without repeats.
 * @throws KerncapError E_USAGE for a value that names no region.
 */
export function multisetRegions(m: Pick<Manifest, "regions" | "params">, params: Uint8Array, values: string[], option = "multiset"): number[] {
  const out = new Set<number>();
  const spans = m.regions.map((r) => ({ start: BigInt(r.va), end: BigInt(r.va) + BigInt(r.size) }));
  const holding = (va: bigint) => spans.findIndex((s) => va >= s.start && va < s.end);
  const hint = `Name a region by its index (0–${m.regions.length - 1}, in \`kerncap inspect\`'s order), a VA inside it (0x…), param:N (the region kernel parameter N points into), changed or all.`;
  for (const v of values
    .flatMap((x) => x.split(","))
    .map((x) => x.trim())
    .filter(Boolean)) {
    const bad = (why: string) => new KerncapError("E_USAGE", `--${option} ${v}: ${why}`, { hint });
    if (v === "all") m.regions.forEach((_, i) => out.add(i));
    else if (v === "changed") m.regions.forEach((r, i) => r.changed && out.add(i));
    else if (/^\d+$/.test(v)) {
      const i = Number(v);
      if (i >= m.regions.length)
        throw bad(
          m.regions.length
            ? `the capture has ${m.regions.length} region${m.regions.length === 1 ? "" : "s"} (0–${m.regions.length - 1})`
            : "the capture has no regions",
        );
      out.add(i);
    } else if (/^0x[0-9a-f]+$/i.test(v)) {
      const i = holding(BigInt(v));
      if (i < 0) throw bad("no region of the capture holds that VA");
      out.add(i);
    } else if (/^param:\d+$/.test(v)) {
      const n = Number(v.slice(6));
      const slot = m.params.layout.find((s) => s.index === n);
      if (!slot) throw bad(`the kernel has no parameter ${n} (${m.params.layout.length} parameter${m.params.layout.length === 1 ? "" : "s"})`);
      if (slot.size !== 8 || slot.offset + 8 > params.byteLength) throw bad(`parameter ${n} is ${slot.size} bytes, not a pointer`);
      const p = new DataView(params.buffer, params.byteOffset, params.byteLength).getBigUint64(slot.offset, true);
      const i = holding(p);
      if (i < 0) throw bad(`parameter ${n} (0x${p.toString(16)}) points into no captured region`);
      out.add(i);
    } else throw bad("not a region name");
  }
  return [...out].sort((a, b) => a - b);
}

/**
 * --multiset's region names resolved against the capture folder's manifest and parameter buffer
 * (DIR/<params.file>), before any GPU work: a name that names no region is a usage error on a
 * machine without a GPU too. The replay resolves them again (the same function) once it runs.
 * @throws KerncapError E_USAGE (multisetRegions), E_NOT_CAPTURE/E_MANIFEST (readManifest)
 */
export function checkMultiset(dir: string, m: Pick<Manifest, "regions" | "params">, values: string[] | undefined): void {
  if (!values?.length) return;
  const params = readInCapture(dir, m.params.file, m.params.size);
  multisetRegions(m, params ? new Uint8Array(params) : new Uint8Array(m.params.size), values);
}
