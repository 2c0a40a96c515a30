/**
 * The schema of a capture's judging settings file (kerncap-judge.json, written by `kerncap judge`;
 * read and written by src/replay/judge-settings.ts): valibot, so that `kerncap schema
 * judge-settings` prints its JSON Schema like every other document's (src/format/documents.ts).
 */
import * as v from "valibot";

export const JUDGE_SCHEMA = "kerncap.judge-settings/1";

/** Region names as --multiset takes them (src/replay/tolerance-plan.ts multisetRegions): N, 0x…, param:N, changed, all. */
const REGION_NAME = /^(all|changed|\d+|0x[0-9a-fA-F]+|param:\d+)$/;

export const Settings = v.strictObject({
  /** |got − exp| ≤ atol + rtol·|exp| per element. */
  atol: v.optional(v.pipe(v.number(), v.minValue(0))),
  rtol: v.optional(v.pipe(v.number(), v.minValue(0))),
  /** Element type of every region whose type the kernel signature does not give. */
  dtype: v.optional(v.string()),
  /** Element type per region (its name → type): overrides the signature's and `dtype`. */
  dtypes: v.optional(v.record(v.pipe(v.string(), v.regex(REGION_NAME)), v.string())),
  /** Regions compared as multisets of elements. */
  multiset: v.optional(v.array(v.pipe(v.string(), v.regex(REGION_NAME)))),
  /** Expected nondeterministic (8 checked runs from the start) or deterministic (runs that differ are a mismatch). */
  nondeterministic: v.optional(v.boolean()),
});
export type JudgeSettings = v.InferOutput<typeof Settings>;

/** kerncap-judge.json: the schema id, the settings, the SHA-256 of their canonical JSON (src/replay/judge-settings.ts). */
export const JudgeFile = v.strictObject({ schema: v.literal(JUDGE_SCHEMA), settings: Settings, sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)) });
