/**
 * The element types a CUDA kernel's declaration gives its regions, read from the demangled name
 * (`scale(float*, int)`) and the captured parameter bytes: each pointer parameter's pointee type,
 * for the region its value points into. For checking a type the user names (kerncap judge
 * --dtype REGION=T: src/replay/dtype-check.ts), never for judging: the replay of a CUDA capture
 * keeps its fp32 default.
 */
import type { Manifest } from "../../format/manifest.ts";
import type { ElementType } from "../../replay/tolerance.ts";

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
 * Each region's declared element type (manifest order; undefined where none): for each pointer
 * parameter of the layout whose demangled type points to a scalar (cudaPointee), the region its
 * captured value points into; a region two parameters of different types point into gets none,
 * and a demangled list whose length is not the layout's says nothing.
 */
export function cudaDeclaredRegionTypes(
  m: Pick<Manifest, "regions" | "params" | "kernel">,
  params: Uint8Array,
): ({ type: ElementType; why: string } | undefined)[] {
  const out: ({ type: ElementType; why: string } | undefined)[] = m.regions.map(() => undefined);
  const types = demangledParams(m.kernel.demangled);
  if (types.length !== m.params.layout.length) return out;
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
    if (s.size > 1) out[i] = undefined; // two parameters of different types: no one type
  });
  return out;
}
