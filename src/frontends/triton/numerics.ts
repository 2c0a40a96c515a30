/**
 * Element types of a Triton capture's regions from the kernel's signature (manifest.source,
 * written by the shim): each pointer parameter's type names the element type of the region it
 * points into (src/replay/tolerance.ts regionTypesFromParams). Pure.
 */
import type { Manifest } from "../../format/manifest.ts";
import type { TritonSource } from "./join.ts";
import { regionTypesFromParams, type ElementType } from "../../replay/tolerance.ts";

/**
 * Kernel parameter types in launch order from a Triton signature: every entry but constexprs
 * (which Triton removes from the launched kernel's parameters).
 */
export function tritonParamTypes(signature: Record<string, unknown>): string[] {
  return Object.values(signature)
    .filter((t) => t !== "constexpr")
    .map((t) => (typeof t === "string" ? t : ""));
}

/** One entry per region: its element type from the signature, or undefined (no signature, not a pointer's region). */
export function regionTypesFromSignature(m: Manifest, params: Uint8Array, written?: (ri: number, offset: number) => boolean): (ElementType | undefined)[] {
  const sig = m.source && m.source.frontend === "triton" ? (m.source.signature as Record<string, unknown> | undefined) : undefined;
  return sig ? regionTypesFromParams(params, m.params.layout, tritonParamTypes(sig), m.regions, written) : m.regions.map(() => undefined);
}

/** manifest.source as the Triton shim recorded it (./join.ts TritonSource), or undefined for another frontend's capture. */
export function tritonSourceOf(m: Manifest): TritonSource | undefined {
  return m.source && m.source.frontend === "triton" ? (m.source as unknown as TritonSource) : undefined;
}
