/**
 * Whether an element type named for a region (`kerncap judge --dtype REGION=T`) fits what the
 * capture says of that region: its size a whole number of elements, and the type the kernel's
 * signature gives it, where it gives one (the frontend's: Triton's signature pointer types, a CUDA
 * kernel's pointer parameter `float*` pointing into the region; src/frontends/index.ts
 * declaredRegionTypesOf binds it). A type that does not fit changes what "within tolerance" means,
 * so it is said; it is stored all the same (reading a float buffer as u32 bit patterns is a
 * choice). Pure: manifest and parameter bytes in, sentences out.
 */
import type { Manifest } from "../format/manifest.ts";
import { multisetRegions } from "./tolerance-plan.ts";
import { ELEMENT_BYTES, elementType, type ElementType } from "./tolerance.ts";

/** The element type the kernel's declaration gives each region (manifest order; undefined where it gives none), with where it comes from (`why`). */
export type DeclaredRegionTypes = (params: Uint8Array) => ({ type: ElementType; why: string } | undefined)[];

/**
 * What does not fit in each `REGION=T` of `dtypes` (the names --dtype takes, already checked by
 * multisetRegions and elementType): one sentence per region and misfit, naming the option.
 * `declared`: the types the kernel's declaration gives the regions (none: sizes only).
 */
export function regionDtypeWarnings(
  m: Pick<Manifest, "regions" | "params">,
  params: Uint8Array,
  dtypes: Record<string, string>,
  declared?: DeclaredRegionTypes,
): string[] {
  const sig = declared?.(params) ?? [];
  const out: string[] = [];
  for (const [name, t] of Object.entries(dtypes)) {
    const et = elementType(t);
    if (!et) continue;
    const eb = ELEMENT_BYTES[et];
    for (const i of multisetRegions(m, params, [name], "dtype")) {
      const r = m.regions[i]!;
      if (r.size % eb)
        out.push(`--dtype ${name}=${t}: region [${i}] is ${r.size} bytes, not a whole number of ${et} elements (${eb} bytes each): is ${et} its element type?`);
      const s = sig[i];
      if (s && s.type !== et)
        out.push(
          `--dtype ${name}=${t}: the kernel's signature gives region [${i}] ${s.type} elements (${s.why}); its elements are read as ${et}, which changes what the tolerance allows`,
        );
    }
  }
  return out;
}
