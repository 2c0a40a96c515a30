/**
 * A capture's judging settings (`kerncap judge DIR …`): how its replays are compared with the
 * app's after state — tolerance, element types (all regions or one), regions compared as
 * multisets, whether the kernel is expected to be nondeterministic. Stored in the capture folder
 * (JUDGE_FILE, written with writeInCapture: a temp file and a rename, no link followed) with its
 * own SHA-256 over the settings, so that `pack`/`unpack` carry it like any file of the folder and
 * a damaged file is refused. Every replay of the folder uses them (the engine reads them at
 * openReplay: replay, validate, check's workers, tune, the MCP tools); an option given on the
 * command line overrides its setting for that run only (mergeJudging).
 *
 * A received capture's settings are the sender's: they are shown by `inspect` with the rest.
 */
import { createHash } from "node:crypto";
import { rmSync } from "node:fs";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { JUDGE_FILE } from "../format/file-names.ts";
import { readInCapture, resolveInCapture, writeInCapture } from "../format/paths.ts";
import { elementType } from "./tolerance.ts";

export const JUDGE_SCHEMA = "kerncap.judge-settings/1";

/** Region names as --multiset takes them (src/replay/tolerance-plan.ts multisetRegions): N, 0x…, param:N, changed, all. */
const REGION_NAME = /^(all|changed|\d+|0x[0-9a-fA-F]+|param:\d+)$/;

const Settings = v.strictObject({
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

const JudgeFile = v.strictObject({ schema: v.literal(JUDGE_SCHEMA), settings: Settings, sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)) });

/** The settings as stored and hashed: keys in a fixed order, absent ones left out. */
function canonical(s: JudgeSettings): JudgeSettings {
  const out: JudgeSettings = {};
  if (s.atol !== undefined) out.atol = s.atol;
  if (s.rtol !== undefined) out.rtol = s.rtol;
  if (s.dtype !== undefined) out.dtype = s.dtype;
  if (s.dtypes && Object.keys(s.dtypes).length) out.dtypes = Object.fromEntries(Object.entries(s.dtypes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (s.multiset?.length) out.multiset = [...s.multiset];
  if (s.nondeterministic !== undefined) out.nondeterministic = s.nondeterministic;
  return out;
}

const digest = (s: JudgeSettings) =>
  createHash("sha256")
    .update(JSON.stringify(canonical(s)))
    .digest("hex");

/** Every element type named is one kerncap knows. @throws KerncapError E_USAGE naming the bad one */
export function checkSettings(s: JudgeSettings): JudgeSettings {
  const types = [...(s.dtype !== undefined ? [["dtype", s.dtype]] : []), ...Object.entries(s.dtypes ?? {}).map(([r, t]) => [`dtype ${r}=`, t])];
  for (const [what, t] of types) {
    if (!elementType(t!))
      throw new KerncapError("E_USAGE", `--${what}${t}: ${JSON.stringify(t)} is not a known element type`, {
        hint: "Use fp32, fp16, bf16, fp64, i8/i16/i32/i64 or u8/u16/u32/u64.",
      });
  }
  return s;
}

/**
 * The capture's stored settings, or undefined when it has none (no JUDGE_FILE).
 * @throws KerncapError E_JUDGE (not JSON, not the schema, a link or other non-file),
 *   E_CHECKSUM (the settings do not hash as the file says: altered or damaged)
 */
export function readJudging(dir: string): JudgeSettings | undefined {
  const hint = `Replace them: \`kerncap judge ${dir} --clear\` followed by the settings you want (--clear alone removes them), or remove ${JUDGE_FILE}.`;
  let bytes: Buffer | undefined;
  try {
    bytes = readInCapture(dir, JUDGE_FILE, 1 << 20);
  } catch (e) {
    throw new KerncapError("E_JUDGE", `${JUDGE_FILE} in ${dir} cannot be read: ${(e as Error).message}`, { hint });
  }
  if (!bytes) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw new KerncapError("E_JUDGE", `${JUDGE_FILE} in ${dir} is not valid JSON: ${(e as Error).message}`, { hint });
  }
  const r = v.safeParse(JudgeFile, json);
  if (!r.success)
    throw new KerncapError(
      "E_JUDGE",
      `${JUDGE_FILE} in ${dir} is not kerncap's judging settings: ${v.getDotPath(r.issues[0]) ?? "(top level)"}: ${r.issues[0].message}`,
      { hint },
    );
  if (digest(r.output.settings) !== r.output.sha256)
    throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${JUDGE_FILE}: the judging settings were changed after \`kerncap judge\` wrote them`, { hint });
  return checkSettings(r.output.settings);
}

/**
 * Store `s` as the capture's settings (replacing any), or remove the file when `s` is empty.
 * @returns the file's path, or undefined when none is left
 * @throws KerncapError E_USAGE (checkSettings), E_UNSAFE_PATH / E_IO (writeInCapture)
 */
export function writeJudging(dir: string, s: JudgeSettings): string | undefined {
  const c = canonical(checkSettings(s));
  if (!Object.keys(c).length) {
    // an empty setting is no file: the capture is judged as captured (resolved inside the folder, never through a link)
    const { path, stats } = resolveInCapture(dir, JUDGE_FILE);
    if (stats) rmSync(path);
    return undefined;
  }
  return writeInCapture(dir, JUDGE_FILE, JSON.stringify({ schema: JUDGE_SCHEMA, settings: c, sha256: digest(c) }, null, 1) + "\n");
}

/** Options of one run as the engine takes them (ReplayOptions' tolerance fields). */
export interface JudgingOptions {
  atol?: number;
  rtol?: number;
  dtype?: string;
  dtypes?: Record<string, string>;
  multiset?: string[];
  nondeterministic?: boolean;
}

/**
 * One run's judging: each option given for the run (`run`) over the stored setting (`stored`);
 * per-region types merged, the run's winning for a region both name.
 * @returns the merged options and the names of the stored settings in effect (for the verdict's "judged with the capture's settings: …")
 */
export function mergeJudging(stored: JudgeSettings | undefined, run: JudgingOptions): { options: JudgingOptions; fromCapture: string[] } {
  const s = stored ?? {};
  const fromCapture: string[] = [];
  const pick = <K extends keyof JudgingOptions>(k: K): JudgingOptions[K] => {
    if (run[k] !== undefined) return run[k];
    if (s[k] !== undefined) fromCapture.push(k);
    return s[k] as JudgingOptions[K];
  };
  const options: JudgingOptions = {
    atol: pick("atol"),
    rtol: pick("rtol"),
    dtype: pick("dtype"),
    multiset: pick("multiset"),
    nondeterministic: pick("nondeterministic"),
  };
  if (s.dtypes && Object.keys(s.dtypes).some((r) => !run.dtypes?.[r])) fromCapture.push("dtypes");
  const dtypes = { ...(s.dtypes ?? {}), ...(run.dtypes ?? {}) };
  if (Object.keys(dtypes).length) options.dtypes = dtypes;
  for (const k of Object.keys(options) as (keyof JudgingOptions)[]) if (options[k] === undefined) delete options[k];
  return { options, fromCapture };
}

/** "rtol 0.001, multiset 2, dtype 3=bf16, nondeterministic": the settings in one line. */
export function describeJudging(s: JudgeSettings): string {
  const parts: string[] = [];
  if (s.atol !== undefined) parts.push(`atol ${s.atol}`);
  if (s.rtol !== undefined) parts.push(`rtol ${s.rtol}`);
  if (s.dtype !== undefined) parts.push(`dtype ${s.dtype}`);
  for (const [r, t] of Object.entries(s.dtypes ?? {})) parts.push(`dtype ${r}=${t}`);
  if (s.multiset?.length) parts.push(`multiset ${s.multiset.join(",")}`);
  if (s.nondeterministic !== undefined) parts.push(s.nondeterministic ? "nondeterministic" : "deterministic");
  return parts.join(", ") || "none (bit-exact, types from the signature or fp32)";
}
