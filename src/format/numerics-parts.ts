/**
 * How a run's outputs differ from the app's after state, as validate's document says it
 * (src/replay/result.ts ReplayResult `mismatches` and `numerics`): the schemas of those two fields,
 * shared by validate's and replay's documents (./document-parts.ts ReplayFields) and by an eval
 * record's `judgement` (./eval-record.ts), so that "how wrong" reads the same in both. Nested
 * objects stay open (looseObject): added fields do not bump a document's version.
 */
import * as v from "valibot";

const U = v.pipe(v.number(), v.integer(), v.minValue(0));
const N = v.number();

/** Regions that differ from the app's after state (or, unchanged in the app, from the before state): address, kind, size, first differing byte, bytes differing. */
export const RegionMismatches = v.array(
  v.looseObject({ va: v.string(), kind: v.string(), size: U, changedInApp: v.boolean(), firstDiffOffset: v.number(), bytesDiffering: U }),
);

/**
 * Element-wise report: bit-exact, within-tolerance, within-spread (nondeterministic runs),
 * multiset-equal, or mismatch; the tolerances; the regions that are not bit-exact (each one's
 * element type, elements over tolerance, largest absolute and relative error: null where not a
 * finite number, byte offset of the first difference); the capture's judging settings used.
 */
export const NumericsReport = v.looseObject({
  verdict: v.string(),
  atol: N,
  rtol: N,
  regions: v.array(
    v.looseObject({
      va: v.string(),
      verdict: v.string(),
      dtype: v.string(),
      elements: N,
      bytesDiffering: N,
      overTolerance: N,
      maxAbsError: v.nullable(N),
      maxRelError: v.nullable(N),
      firstDiffOffset: N,
      // a region whose replays agree but differ from the app's, judged against the kernel's own noise (src/replay/tolerance.ts RegionNumerics.kernelNoise)
      kernelNoise: v.optional(v.looseObject({ region: U, ulp: N, regions: v.array(U), appUlp: N, elementsDiffering: U, outside: U, runs: U })),
    }),
  ),
  /** The capture's judging settings used (kerncap judge's file, the names of those this run's options did not override). */
  settings: v.optional(v.looseObject({ file: v.string(), used: v.array(v.string()) })),
});
