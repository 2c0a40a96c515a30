/**
 * Whether an element type named for a region (`kerncap judge --dtype REGION=T`) fits what the
 * capture says of that region: its size a whole number of elements, and the type the kernel's
 * signature gives it, where it gives one (a Triton signature's pointer type, src/frontends'
 * regionTypes; a CUDA kernel's demangled parameter list, `float*`, for a pointer parameter that
 * points into the region). A type that does not fit changes what "within tolerance" means, so it is
 * said; it is stored all the same (reading a float buffer as u32 bit patterns is a choice). Pure:
 * manifest and parameter bytes in, sentences out.
 */
import type { Manifest } from "../format/manifest.ts";
import { multisetRegions, type RegionTypes } from "./tolerance-plan.ts";
import { ELEMENT_BYTES, elementType, type ElementType } from "./tolerance.ts";

/** A CUDA pointee type as the demangler writes it (qualifiers removed) → its element type. */
const CUDA_TYPES: Record<string, ElementType> = {
  double: "fp64",
  float: "fp32",
  __half: "fp16",
  half: "fp16",
  __nv_bfloat16: "bf16",
  long: "i64",
  "long long": "i64",
  "unsigned long": "u64",
  "unsigned long long": "u64",
  int: "i32",
  "unsigned int": "u32",
  unsigned: "u32",
  short: "i16",
  "unsigned short": "u16",
  char: "i8",
  "signed char": "i8",
  "unsigned char": "u8",
  bool: "u8",
};

/**
 * The parameter types of a demangled CUDA kernel name (`scale(float*, int)`, `void k<4>(float const*, int)`):
 * the last top-level parenthesised list, split at top-level commas; [] when there is none.
 */
export function demangledParams(demangled: string): string[] {
  const end = demangled.lastIndexOf(")");
  if (end < 0) return [];
  let depth = 0;
  let start = -1;
  for (let i = end; i >= 0; i--) {
    const c = demangled[i];
    if (c === ")") depth++;
    else if (c === "(" && --depth === 0) {
      start = i;
      break;
    }
  }
  if (start < 0) return [];
  const inner = demangled.slice(start + 1, end);
  const out: string[] = [];
  let level = 0;
  let from = 0;
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if (c === "<" || c === "(" || c === "[") level++;
    else if (c === ">" || c === ")" || c === "]") level--;
    else if (c === "," && level === 0) out.push(inner.slice(from, i).trim()), (from = i + 1);
  }
  const last = inner.slice(from).trim();
  if (last && last !== "void") out.push(last);
  return out;
}

/** The element type a CUDA parameter type points to (`float const*` → fp32), undefined for anything else (a struct, a pointer to pointer, a value). */
export function cudaPointee(type: string): ElementType | undefined {
  const t = type
    .replace(/\b(const|volatile|__restrict__|__restrict)\b/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  const m = /^([\w ]+?) ?\*$/.exec(t);
  return m ? CUDA_TYPES[m[1]!.trim()] : undefined;
}

/**
 * The element type the kernel's signature gives each region (manifest order; undefined where it
 * gives none): the frontend's (`regionTypes`: Triton's), else for a CUDA kernel each pointer
 * parameter's pointee type, for the region its captured value points into (a region two parameters
 * of different types point into: none). `why` says where each came from.
 */
export function signatureRegionTypes(
  m: Pick<Manifest, "regions" | "params" | "kernel">,
  params: Uint8Array,
  regionTypes?: RegionTypes,
): ({ type: ElementType; why: string } | undefined)[] {
  const out: ({ type: ElementType; why: string } | undefined)[] = m.regions.map(() => undefined);
  const fromFrontend = regionTypes?.(params);
  if (fromFrontend?.some(Boolean)) {
    fromFrontend.forEach((t, i) => {
      if (t) out[i] = { type: t, why: "the kernel's signature" };
    });
    return out;
  }
  if (m.kernel.frontend !== "cuda") return out;
  const types = demangledParams(m.kernel.demangled);
  if (types.length !== m.params.layout.length) return out; // a list that does not match the layout says nothing
  const dv = new DataView(params.buffer, params.byteOffset, params.byteLength);
  const seen = m.regions.map(() => new Set<string>());
  m.params.layout.forEach((slot, k) => {
    if (slot.size !== 8 || slot.offset + 8 > params.byteLength) return;
    const va = dv.getBigUint64(slot.offset, true);
    const i = m.regions.findIndex((r) => va >= BigInt(r.va) && va < BigInt(r.va) + BigInt(r.size));
    if (i < 0) return;
    const t = cudaPointee(types[k]!);
    seen[i]!.add(t ?? "?");
    if (t) out[i] = { type: t, why: `parameter ${slot.index}, ${types[k]}, points into it` };
  });
  seen.forEach((s, i) => {
    if (s.size > 1) out[i] = undefined; // two parameters of different types: the signature says no one type
  });
  return out;
}

/**
 * What does not fit in each `REGION=T` of `dtypes` (the names --dtype takes, already checked by
 * multisetRegions and elementType): one sentence per region and misfit, naming the option.
 */
export function regionDtypeWarnings(
  m: Pick<Manifest, "regions" | "params" | "kernel">,
  params: Uint8Array,
  dtypes: Record<string, string>,
  regionTypes?: RegionTypes,
): string[] {
  const sig = signatureRegionTypes(m, params, regionTypes);
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
