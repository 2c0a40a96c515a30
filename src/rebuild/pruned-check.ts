/**
 * validate's record of the side-by-side check of the fast build against build.sh's
 * (DIR/build/pruned/check.json: PrunedCheck, read and written here) and the choice of a builder by
 * measured cost: validate's strategy (chooseStrategy: the race where the machine has the cores for
 * it, else the cheaper build alone), the watch's margin before it leaves the fast build, and the
 * averaging of a cost with each new build's. The policy that uses them: ./rebuilder.ts.
 *
 * validate (one process per edit) keeps the check in DIR/build/pruned/check.json: the first
 * validate (or the first after the plan of build.sh's compile changed, or after another kerncap
 * version) runs build.sh and the fast build side by side on the same source and records whether
 * they gave the kernel the same machine code; it reports build.sh's module. The later validates
 * run both again, side by side, and replay the first that builds (the fast one, from an
 * incremental preprocessing: src/frontends/cuda/incremental-pp.ts; never later than build.sh's),
 * stopping the other — where the machine has the cores for both (RACE_MIN_CPUS). On a smaller
 * one two builds side by side slow each other, so validate runs only the cheaper of the two by
 * their measured costs (the record's `costs`: the check's times, then an average with each later
 * build's, per capture and machine: chooseStrategy); a 2-core machine is then never slower than
 * build.sh alone. A fast build that fails leaves build.sh's outcome (a real compile error is
 * its message); when build.sh then succeeds, the record says the fast build is off, and build.sh
 * rebuilds from then on. build.sh failing where the fast build does not (an error in host code,
 * which the pruned TU does not compile) is said, and the fast build's verdict stands.
 * `--full-build` always uses build.sh and leaves the record as it is.
 *
 * The watch (one process, many saves) keeps the check in memory and its fast builds' files in a
 * temporary folder: the check runs beside the cycles after the first build by build.sh, and a
 * fast build that fails where build.sh does not turns the fast build off for the rest of the watch.
 * Its saves are rebuilt by the fast build while its measured cost (an average over the saves: the
 * first, cold, build of the check is not one) stays below build.sh's (by WATCH_MARGIN, after
 * WATCH_MIN_SAVES saves); past it, by build.sh.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { MANIFEST_MAX_BYTES, readInCapture, resolveInCapture, writeInCapture } from "../format/paths.ts";
import { canonicalJson, type ResultsKey } from "../format/record-auth.ts";
import { stateSeal, userResultsKey } from "../format/state-seal.ts";
import { TOOL_VERSION } from "../version.ts";
import { jsonText } from "../escape.ts";

/** validate's work folder for the fast build, under the capture folder. */
export const PRUNED_DIR = "build/pruned";
/** The record's file in PRUNED_DIR. */
export const CHECK_FILE = "check.json";

/** DIR/build/pruned/check.json: the outcome of the side-by-side build. */
export interface PrunedCheck {
  schema: "kerncap.pruned-check/1";
  /** The kerncap that made it (another version prunes differently: checked again). */
  kerncap: string;
  /** The kernel (mangled) whose machine code was compared. */
  kernel: string;
  /** The plan hash of the compile it holds for (FastBuilt.plan). */
  plan: string;
  /** The fast build gave the kernel build.sh's machine code (and has not failed where build.sh built since). */
  same: boolean;
  /** Why not, when not. */
  reason: string | null;
  /** When it was made (ISO 8601), and the two build times then (s). */
  at: string;
  buildShSeconds: number;
  prunedSeconds: number | null;
  /** The measured cost of each build on this machine (s): the check's times, then each later build's averaged in (BuildCosts); absent in a record of an older kerncap (the check's times are used). */
  costs?: BuildCosts;
}

/** What each build costs on one machine (s, wall time of a build of an edit), and the CPU count it was measured with. */
export interface BuildCosts {
  cpus: number;
  buildSh: number;
  pruned: number;
}

/**
 * How validate rebuilds once the check found the fast build's machine code build.sh's: both
 * side by side, the first that builds replayed (race); or one alone, the cheaper by its measured cost.
 */
export type Strategy = "race" | "pruned" | "build.sh";

/** The fewest CPUs on which build.sh and the fast build run side by side without slowing each other (each is a gcc -E, cicc and ptxas, and the fast build verifies its incremental preprocessing with a second gcc -E). */
export const RACE_MIN_CPUS = 4;

/**
 * How much cheaper the fast build's measured cost must be than build.sh's before it builds alone
 * (chooseStrategy): a cost is one or a few builds' wall time, whose spread on a loaded 2-core
 * machine is a few % (a second-hand ~5% difference is noise), and build.sh is the reference build,
 * so a near tie keeps it: the choice is then never more than this much slower than the better one.
 */
export const PRUNED_ALONE_MARGIN = 1.1;

/**
 * The strategy for a machine of `cpus` CPUs from the measured costs: the race where there are
 * the cores for it (the first to build wins: never later than the cheaper); else the cheaper
 * build alone, the fast build only when it costs less than build.sh's by PRUNED_ALONE_MARGIN
 * (build.sh on a near tie).
 */
export function chooseStrategy(costs: BuildCosts, cpus: number): Strategy {
  if (cpus >= RACE_MIN_CPUS) return "race";
  return costs.pruned * PRUNED_ALONE_MARGIN < costs.buildSh ? "pruned" : "build.sh";
}

/** The watch leaves the fast build for build.sh once its saves (at least WATCH_MIN_SAVES of them) cost more than WATCH_MARGIN × build.sh's: a measure, not a single slow save. */
export const WATCH_MIN_SAVES = 2;
export const WATCH_MARGIN = 1.2;

/** A cost averaged with a new measure (the last builds weigh most: an incremental preprocessing, a warm cache, change the cost). */
export const averaged = (old: number, now: number) => (old + now) / 2;

/** The seal of check record `doc` (its fields but `auth`, canonical) for the capture folder `dir` under the user's key (src/format/state-seal.ts). */
function checkSeal(dir: string, doc: object, key: ResultsKey): string {
  const { auth: _, ...body } = doc as Record<string, unknown>;
  return stateSeal("kerncap.pruned-check/1", join(dir, PRUNED_DIR), [Buffer.from(canonicalJson(body))], key);
}

/**
 * DIR/build/pruned/check.json as written by this or another kerncap for this folder with this
 * user's results key (its `auth`: src/format/state-seal.ts); undefined when absent, unreadable, of
 * another schema, or not sealed so (a copy's, a hand-off's: adversary 57, a planted "same" made
 * validate judge the pruned build of other code; the check is then made again).
 */
export function readPrunedCheck(dir: string): PrunedCheck | undefined {
  try {
    const c = JSON.parse(readInCapture(dir, `${PRUNED_DIR}/${CHECK_FILE}`, MANIFEST_MAX_BYTES)?.toString("utf8") ?? "null");
    const key = userResultsKey();
    if (c?.schema !== "kerncap.pruned-check/1" || !key || typeof c.auth !== "string" || c.auth !== checkSeal(dir, c, key)) return undefined;
    const { auth: _, ...check } = c;
    return check as PrunedCheck;
  } catch {
    return undefined;
  }
}

/** A record's own fields: what writePrunedCheck is given (schema and kerncap are this one's; at: now unless given). */
export type PrunedCheckFields = Omit<PrunedCheck, "schema" | "kerncap" | "at"> & { schema?: string; kerncap?: string; at?: string };

/** Write DIR/build/pruned/check.json (PRUNED_DIR must exist), stamped with this kerncap's version. @throws KerncapError E_UNSAFE_PATH, E_IO */
export function writePrunedCheck(dir: string, c: PrunedCheckFields): void {
  const doc: PrunedCheck = { ...c, schema: "kerncap.pruned-check/1", kerncap: TOOL_VERSION, at: c.at ?? new Date().toISOString() };
  const key = userResultsKey();
  // as it reads back (JSON drops undefined members), sealed for this folder; with no key of the user's, no record (made again each time)
  const body = JSON.parse(JSON.stringify(doc)) as object;
  if (!key) return void rmSync(resolveInCapture(dir, `${PRUNED_DIR}/${CHECK_FILE}`).path, { force: true });
  writeInCapture(dir, `${PRUNED_DIR}/${CHECK_FILE}`, jsonText({ ...body, auth: checkSeal(dir, body, key) }, 2) + "\n");
}
