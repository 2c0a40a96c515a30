/**
 * The timing baseline of `kerncap check`: each capture's timed launches at a check, keyed by its
 * identity (src/check/discover.ts), on which GPU. One JSON file, never inside a capture folder
 * (a received capture may be read-only): RESULTS/baseline.json by default, where the first check
 * of a capture records it, or a file given with --baseline (read only) and written with
 * --write-baseline. Shape: `{schema: "kerncap.check-baseline/1", captures: {ID: {kernel, device:
 * {name, arch}, samplesUs: [µs…], medianUs, l2?: "flushed", at}}}` (l2: timed with --flush-l2).
 */
import { jsonText, oneLine } from "../escape.ts";
import { lstatSync, type Stats } from "node:fs";
import { writeFileAtomic } from "../util/write-file.ts";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { readInputFile } from "../format/paths.ts";
import type { CheckRecord } from "../format/check-record.ts";

export const BASELINE_SCHEMA = "kerncap.check-baseline/1";
export const BASELINE_FILE = "baseline.json";

const Entry = v.object({
  kernel: v.string(),
  device: v.object({ name: v.string(), arch: v.string() }),
  samplesUs: v.array(v.number()),
  medianUs: v.number(),
  /** "flushed": timed with L2 flushed before each launch (check --flush-l2); absent: warm. */
  l2: v.optional(v.literal("flushed")),
  at: v.string(),
});
export const Baseline = v.object({ schema: v.literal(BASELINE_SCHEMA), captures: v.record(v.string(), Entry) });
export type Baseline = v.InferOutput<typeof Baseline>;
export type BaselineEntry = v.InferOutput<typeof Entry>;

/**
 * The baseline at path, or an empty one when nothing is there (a link, even one to nothing, is
 * something: readInputFile refuses it).
 * `check`: given the fd's fstat, may refuse the file (check --merge: another user's, src/check/check.ts).
 * @throws KerncapError E_BASELINE (a link, not a regular file, not JSON, not the schema); what `check` throws
 */
export function readBaseline(path: string, check?: (st: Stats) => void): Baseline {
  if (!somethingAt(path)) return { schema: BASELINE_SCHEMA, captures: emptyCaptures() };
  const hint = "Give the baseline.json a `kerncap check` wrote (--write-baseline), or another --baseline.";
  let json: unknown;
  try {
    json = JSON.parse(readInputFile(path, "baseline", "E_BASELINE", undefined, check));
  } catch (e) {
    if (e instanceof KerncapError) throw e;
    throw new KerncapError("E_BASELINE", `${path} is not valid JSON: ${(e as Error).message}`, { hint });
  }
  const bad = (where: string, why: string) => new KerncapError("E_BASELINE", `${path} is not a kerncap check baseline: ${where}: ${why}`, { hint });
  const top = v.safeParse(
    v.object({
      schema: v.literal(BASELINE_SCHEMA),
      captures: v.custom<Record<string, unknown>>((x) => typeof x === "object" && x !== null && !Array.isArray(x), "must be an object"),
    }),
    json,
  );
  if (!top.success) throw bad(oneLine(v.getDotPath(top.issues[0]) ?? "(top level)"), oneLine(top.issues[0].message));
  // each capture by itself, from JSON.parse's own keys: valibot's record drops keys such as __proto__
  // and constructor without a word, and an id is any string (src/check/discover.ts)
  const captures = emptyCaptures();
  for (const [id, entry] of Object.entries((json as { captures: Record<string, unknown> }).captures)) {
    const r = v.safeParse(Entry, entry, { abortEarly: true });
    if (!r.success)
      throw bad(oneLine(`captures[${JSON.stringify(id)}]${v.getDotPath(r.issues[0]) ? `.${v.getDotPath(r.issues[0])}` : ""}`), oneLine(r.issues[0].message));
    captures[id] = r.output;
  }
  return { schema: BASELINE_SCHEMA, captures };
}

/**
 * Refuse a --baseline FILE with nothing at its path (a typo in a CI job's path): read as an empty
 * baseline, no capture could ever be slower. Said before anything runs; what is there is read by
 * readBaseline (a link or a FIFO refused there, another user's file by check's refuseSharedResults).
 * @throws KerncapError E_BASELINE (exit 2) naming the path
 */
export function requireBaselineFile(path: string): void {
  if (somethingAt(path)) return;
  throw new KerncapError("E_BASELINE", `no baseline file at ${path}; --write-baseline FILE makes one`, {
    hint: "Nothing was checked. Correct the --baseline path, or leave --baseline out: the results folder's baseline.json is then read, and each capture's first check recorded in it.",
  });
}

/** Whether anything (a file, a folder, a link even to nothing) is at path; a path through a file or a missing folder: nothing. Other errors (no permission): something, for the read to say. */
function somethingAt(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code !== "ENOENT" && code !== "ENOTDIR";
  }
}

/** A captures table keyed by capture id with no prototype: an id such as `__proto__` or `constructor` is a key like any other. */
function emptyCaptures(): Record<string, BaselineEntry> {
  return Object.create(null) as Record<string, BaselineEntry>;
}

/** The baseline entry of capture `id`, or undefined (own keys only). */
export function baselineEntry(b: Baseline, id: string): BaselineEntry | undefined {
  return Object.hasOwn(b.captures, id) ? b.captures[id] : undefined;
}

/** Write a baseline through a temp file and a rename (a reader never sees half of it). */
export function writeBaseline(path: string, b: Baseline): void {
  writeFileAtomic(path, jsonText(b, 1) + "\n", { mode: 0o644 & ~process.umask() }); // no group write whatever the umask: check refuses a baseline others can write
}

/**
 * --write-baseline FILE: `over` with the timings of every matching capture of `records` (withTimings,
 * replace), written to `path`, and said on stderr with how many of the run's captures it holds
 * ("baseline FILE: 5 of 6 captures of this run"). A baseline that would hold no capture (no capture
 * timed: no GPU, every one an error) is not written, FILE left as it is, and said: committed, it
 * would make every later run "no baseline", never slower.
 * @returns whether FILE was written
 */
export function writeRunBaseline(path: string, over: Baseline, records: CheckRecord[], say: { info: (l: string) => void; warn: (l: string) => void }): boolean {
  const b = withTimings(over, records, { replace: true });
  const timed = records.filter((r) => Object.hasOwn(b.captures, r.id) && b.captures[r.id]!.at === r.at).length;
  const all = Object.keys(b.captures).length;
  if (!all) {
    say.warn(
      `--write-baseline ${path} not written: no capture of this run was timed (${records.length} ${records.length === 1 ? "capture" : "captures"}, none a timed match): a baseline of none would make every later run "no baseline", never slower`,
    );
    return false;
  }
  writeBaseline(path, b);
  const n = (k: number) => `${k} ${k === 1 ? "capture" : "captures"}`;
  say.info(
    `baseline ${path}: ${timed} of ${n(records.length)} of this run${all > timed ? `, ${n(all - timed)} kept from the baseline it was written over` : ""}`,
  );
  return true;
}

/**
 * `prior` with the timings of `records` that matched: every one (replace) or only those `prior`
 * lacks (the first check of a capture records it). Mismatching captures never set a baseline.
 */
export function withTimings(prior: Baseline, records: CheckRecord[], o: { replace: boolean }): Baseline {
  const captures = Object.assign(emptyCaptures(), prior.captures);
  for (const r of records) {
    if (r.verdict !== "match" || !r.timing?.samplesUs.length || !r.device || !r.kernel) continue;
    if (!o.replace && Object.hasOwn(captures, r.id)) continue;
    captures[r.id] = {
      kernel: r.kernel,
      device: r.device,
      samplesUs: r.timing.samplesUs,
      medianUs: r.timing.medianUs,
      ...(r.timing.l2 ? { l2: r.timing.l2 } : {}),
      at: r.at,
    };
  }
  return { schema: BASELINE_SCHEMA, captures };
}
