/**
 * The seal of what a build keeps in the capture's build/ for the next process and takes back as
 * it stands: the CUDA fast build's plan (src/frontends/cuda/fast-plan.ts plan.json), whose lines
 * run through the shell as written; its incremental preprocessing's base
 * (src/frontends/cuda/fast-build.ts), compiled in place of the sources it was made from; the
 * pruner's analysis (prune-state.bin); and validate's check of the pruned build against build.sh's
 * (src/rebuild/pruned-check.ts check.json), which decides whether the pruned build stands for
 * build.sh's. A folder handed over with tar, cp -a or rsync keeps build/ and the file times these
 * are keyed by, and is then the receiver's by its owner and its manifest; so each is taken back
 * only when a kerncap holding this user's results key (./record-auth.ts resultsKey: the state
 * folder's key, or KERNCAP_RESULTS_KEY) wrote it for this folder (adversaries 56 and 57: a planted
 * plan line ran; a planted check made validate judge the pruned build of other code). Without a
 * key nothing is kept: each process makes its plan, base, analysis and check anew.
 */
import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { authenticatorOf, type ResultsKey, resultsKey } from "./record-auth.ts";

/** The user's results key, undefined when there is none (or a weak KERNCAP_RESULTS_KEY, which the verbs that need one say). */
export function userResultsKey(): ResultsKey | undefined {
  try {
    const k = resultsKey();
    return typeof k === "string" ? undefined : k;
  } catch {
    return undefined;
  }
}

/** The work folder as its seal names it: resolved, links followed where it exists. */
function workPath(work: string): string {
  try {
    return realpathSync(work);
  } catch {
    return resolve(work);
  }
}

/**
 * The authenticator ("hmac-sha256:KEYID:MAC") of the files `parts` (their bytes, in a fixed order)
 * kept in `work` under document id `schema`, with the user's key: sha256 of each part and the work
 * folder's real path, so a copy elsewhere is not sealed for its new folder.
 */
export function stateSeal(schema: string, work: string, parts: readonly Uint8Array[], key: ResultsKey): string {
  const files = parts.map((p) => createHash("sha256").update(p).digest("hex"));
  return authenticatorOf(schema, { work: workPath(work), files }, key);
}
