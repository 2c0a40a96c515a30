/**
 * Which element type and tolerance each region of a capture is compared with: what the capture's
 * frontend knows (Frontend.regionTypes: Triton's signature pointer types, via the parameter
 * buffer), else --dtype, else float32. Pure: manifest + parameter bytes in, plan out.
 */
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { elementType, type ElementType, type RegionNumerics, type Tolerance } from "./tolerance.ts";

export type NumericsPlan = { dtype: ElementType; source: RegionNumerics["dtypeSource"] }[] & { tol: Tolerance };

/** @throws KerncapError E_USAGE for a negative/non-numeric tolerance or an unknown --dtype. */
export function regionNumericsPlan(
  m: Manifest,
  params: Uint8Array,
  o: { atol?: number; rtol?: number; dtype?: string },
  written?: (ri: number, offset: number) => boolean,
): NumericsPlan {
  const atol = o.atol ?? 0;
  const rtol = o.rtol ?? 0;
  for (const [k, v] of [["atol", atol], ["rtol", rtol]] as const) {
    if (!Number.isFinite(v) || v < 0) throw new KerncapError("E_USAGE", `--${k} must be a non-negative number, got ${v}`, { hint: `For example --${k} 1e-5 (0, the default, asks for bit-exact).` });
  }
  let fallback: ElementType = "fp32";
  let fallbackSource: RegionNumerics["dtypeSource"] = "default";
  if (o.dtype) {
    const t = elementType(o.dtype);
    if (!t) throw new KerncapError("E_USAGE", `--dtype ${o.dtype} is not a known element type`, { hint: "Use fp32, fp16, bf16, fp64, i8/i16/i32/i64 or u8/u16/u32/u64." });
    fallback = t;
    fallbackSource = "option";
  }
  const fromSig = frontendOf(m).regionTypes?.(m, params, written) ?? m.regions.map(() => undefined);
  const plan = m.regions.map((_, i) => (fromSig[i] ? { dtype: fromSig[i]!, source: "signature" as const } : { dtype: fallback, source: fallbackSource })) as NumericsPlan;
  plan.tol = { atol, rtol };
  return plan;
}

/** Parse a --atol/--rtol value; undefined when not given. @throws KerncapError E_USAGE */
export function floatArg(name: string, v: unknown): number | undefined {
  if (v === undefined || v === "" || v === null) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new KerncapError("E_USAGE", `--${name} must be a non-negative number, got ${JSON.stringify(v)}`, { hint: `For example --${name} 1e-5 (0, the default, asks for bit-exact).` });
  return n;
}
