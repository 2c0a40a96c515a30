/**
 * What `kerncap unpack --force` loses of the capture it replaces, said before the replacement
 * (src/format/unpack.ts): the user's files and edits the archive does not hold, and a capture made
 * here that becomes a received one.
 */
import { createHash } from "node:crypto";
import { lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { log } from "../log.ts";
import { shellPath } from "../util/shell-quote.ts";
import type { PackIndex } from "./archive-common.ts";
import { JUDGE_FILE, RECEIVED_MARK } from "./file-names.ts";
import { filesNotIn, someFiles } from "./files-not-in.ts";
import { MANIFEST_FILE } from "./manifest.ts";
import { readInCapture } from "./paths.ts";
import { differingFiles, sourceDigests, type FileDigest } from "./source-digests.ts";

/** The files of a capture a user edits, besides those under src/: what --force over one loses when the archive's differ. */
const EDITED_FILES = ["build.sh", JUDGE_FILE];

/**
 * Before --force replaces the capture at `dest` with the archive unpacked at `tmp`: one warning for
 * each thing lost (log only: --force is the user's word; `--json` gives them as `warnings`):
 *  - the files the archive does not hold (RECEIVED_MARK aside: it is written again; build/ aside: kerncap's outputs, made again);
 *  - the files under src/ (and build.sh, the judging settings) whose bytes the archive's differ
 *    from: the user's edits (nu10 #8: an edited src/saxpy.cu went without a word);
 *  - a capture that was not itself unpacked (no RECEIVED_MARK): the user's own, made here, which
 *    the archive's copy replaces as a received capture (its build then needs --trust, its judging
 *    settings an acceptance).
 * `shown`: the name the messages give the capture (default `dest`; the path kerncap reads it by may be its holder's);
 * `generated`: the files kerncap generates in it (capture-relative), made again, so not edits.
 */
export function sayWhatForceLoses(dest: string, tmp: string, idx: Pick<PackIndex, "files">, shown = dest, generated: string[] = []): void {
  // build/ is kerncap's outputs (modules, logs, locks), made again by the next verb that needs them: no loss (nu16 #9)
  const gone = filesNotIn(dest, new Set([...idx.files.map((f) => f.path), RECEIVED_MARK])).filter((p) => !p.startsWith("build/"));
  if (gone.length) log.warn(`--force: replacing ${shown} removes ${someFiles(gone).replace(/^(\d+ files?):/, "$1 the archive does not hold:")}`);
  const archived: FileDigest[] = sourceDigests(tmp, "src");
  for (const path of EDITED_FILES) {
    const b = readInCapture(tmp, path, 64 << 20);
    if (b) archived.push({ path, sha256: createHash("sha256").update(new Uint8Array(b)).digest("hex") });
  }
  // a file kerncap generates (the CUDA slice) is made again from its source: never "your edits" (nu16 #9)
  const made = new Set(generated);
  const edited = differingFiles(dest, archived, { under: "src" }).edited.filter((p) => !made.has(p));
  if (edited.length)
    log.warn(`--force: replacing ${shown} loses your edits: the archive holds other bytes for ${someFiles(edited)} (unpack it with -o OTHER to keep both)`);
  const capture = [MANIFEST_FILE, "kerncap-captures.json"].some((f) => lstatSync(join(dest, f), { throwIfNoEntry: false }));
  if (capture && !lstatSync(join(dest, RECEIVED_MARK), { throwIfNoEntry: false }))
    log.warn(
      `--force: ${shown} was not unpacked from an archive (a capture made here) and is replaced by the archive's copy, a received capture: its build then runs only after --trust and its judging settings only once accepted`,
    );
}

/**
 * unpack's E_EXISTS hint for `dest`, which exists (`archive` as the user gave it, `name` the folder
 * asked for or the archive's root): another name first, for a copy beside it, then what --force
 * does; undefined for an empty folder (nothing to keep: the plain hint).
 */
export function keepBesideHint(dest: string, archive: string, name: string): string | undefined {
  try {
    if (readdirSync(dest).length === 0) return undefined;
  } catch {
    return undefined; // no folder: assertReplaceable says what it is
  }
  // a name that is free (nu13: cap-copy already held the copy of an earlier unpack, so the suggested command failed too)
  let suffix = "-copy";
  for (let i = 2; lstatSync(`${dest}${suffix}`, { throwIfNoEntry: false }) && i < 1000; i++) suffix = `-copy${i}`;
  // a folder unpacked before is received already: that it becomes one is no news (nu16 #9)
  const received = lstatSync(join(dest, RECEIVED_MARK), { throwIfNoEntry: false }) !== undefined;
  return `To keep it and unpack a copy beside it, give another name: kerncap unpack ${shellPath(archive)} -o ${shellPath(`${name}${suffix}`)}. --force replaces ${dest} itself: its own files and edits are lost${received ? "" : ", and the folder then counts as received (unpacked from an archive)"}.`;
}
