/**
 * A confined build (kerncap mcp's validate, tune and profile's build: `--confine`) is confined before
 * anything runs: it runs only the build kerncap rendered for the capture, never a build.sh someone
 * else wrote. At capture, finalize records the SHA-256 of every file a rebuild runs that the
 * reproducer's templates wrote (runFiles(): build.sh; Triton's pinned.json, which names the
 * interpreter, and repro.py) in manifest.rendered. Before a confined build, each of those files must
 * have its recorded bytes, or the user must have trusted the folder's current ones on the command
 * line (`kerncap validate DIR --trust`: the trust record of src/format/trust.ts, kept outside every
 * capture). An agent can write none of these files (edit_file writes sources only), and a folder
 * nested in a capture is never opened as one (capture-dir.ts assertNotNested), so no build.sh of an
 * agent's making runs.
 *
 * What this does not decide: whether a received capture's build runs at all (its manifest, and so
 * its record, is the sender's: requireTrustedBuild asks for --trust as before).
 */
import { shellPath } from "../util/shell-quote.ts";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "./manifest.ts";
import { readInCapture } from "./paths.ts";
import { frontendRunFiles } from "./run-files.ts";
import { trustOwnBuild, trustRecorded } from "./trust.ts";

/** The files of a reproducer that a rebuild runs or reads its commands from, relative to the capture folder: build.sh and every frontend's (src/format/run-files.ts; Triton's pinned.json and repro.py). */
const runFiles = () => ["build.sh", ...frontendRunFiles()];
/** The largest such file read (bytes): build.sh and pinned.json are small. */
const RUN_FILE_MAX = 1 << 20;

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/**
 * The SHA-256 of each of runFiles() the folder holds, for manifest.rendered (finalize, once the
 * templates were rendered into the capture's temporary folder).
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO …: src/format/paths.ts)
 */
export function renderedDigests(dir: string): { path: string; sha256: string }[] {
  const out: { path: string; sha256: string }[] = [];
  for (const path of runFiles()) {
    const b = readInCapture(dir, path, RUN_FILE_MAX);
    if (b) out.push({ path, sha256: sha256(b) });
  }
  return out;
}

/**
 * Each of runFiles() whose bytes in the folder are not those manifest.rendered records (a phrase
 * naming it and both digests), empty when all are: one that is there but not recorded, recorded but
 * gone, or changed.
 */
export function notRendered(dir: string, m: Pick<Manifest, "rendered">): string[] {
  const rec = new Map((m.rendered ?? []).map((r) => [r.path, r.sha256]));
  const out: string[] = [];
  for (const path of runFiles()) {
    let b: Buffer | undefined;
    try {
      b = readInCapture(dir, path, RUN_FILE_MAX);
    } catch (e) {
      out.push(`${path} is not a regular file of its own (${(e as Error).message})`);
      continue;
    }
    const want = rec.get(path);
    if (!b) {
      if (want) out.push(`${path} is gone (kerncap.json records sha256 ${want} of it)`);
      continue;
    }
    const have = sha256(b);
    if (!want)
      out.push(
        `${path} (sha256 ${have}) is not one kerncap wrote: kerncap.json records no digest of it${m.rendered ? "" : " (a capture made before kerncap recorded them)"}`,
      );
    else if (want !== have) out.push(`${path} was changed since kerncap wrote it (sha256 ${have}; kerncap.json records ${want})`);
  }
  return out;
}

/**
 * The gate of every confined build, before anything of the capture runs: what would run is what
 * kerncap rendered (notRendered is empty), or bytes the user trusted on the command line for this
 * folder (trustRecorded). `command`: the verb to name in the hint. `staged`: the private copy a
 * build will execute (StagedBuild): judged instead of the folder, so a file swapped back after
 * the copy was made cannot pass.
 * @throws KerncapError E_NOT_RENDERED naming each file and its digests
 */
export function requireRenderedBuild(dir: string, m: Manifest, command = "validate", staged?: { folder: string; digest: string }): void {
  // a build's private copy (src/format/staged-build.ts stageTrustedBuild): its bytes are the ones judged, not the folder's read again
  const changed = notRendered(staged?.folder ?? dir, m);
  if (!changed.length || trustRecorded(dir, m, staged?.digest)) return;
  throw new KerncapError(
    "E_NOT_RENDERED",
    `a confined ${command} (kerncap mcp) runs only the build kerncap wrote for ${dir}, and ${changed.join("; ")}: nothing was run`,
    {
      hint: `Show the file to the user. An agent can never change or write build.sh, pinned.json or repro.py; if the user changed them and trusts them, they run kerncap validate ${shellPath(dir)} --trust once on the command line (recorded for these bytes, which kerncap mcp then runs).`,
    },
  );
}

/**
 * `--trust` on the command line (not confined) of a capture whose runFiles() are not the ones kerncap
 * wrote: record the folder's current bytes as the user's trusted build (trustOwnBuild), so that a
 * confined build of kerncap mcp runs them too. Nothing when they are kerncap's own.
 */
export function trustChangedBuild(dir: string, m: Manifest): void {
  if (notRendered(dir, m).length) trustOwnBuild(dir, m);
}
