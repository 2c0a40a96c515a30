/**
 * The reproducer's sources as kerncap wrote them: the SHA-256 of every regular file under a
 * capture's src/, recorded at capture in manifest.sources (src/capture/finalize.ts; `kerncap demo`
 * records its own), and which files of a folder differ from such a record (edited, added, gone).
 * `kerncap inspect` says whether src/ is still what produced kernel/module.*; `kerncap demo --force`
 * names the files of the user's that it replaces. A received capture's record is the sender's: it
 * says what the sender's capture wrote, informational only (nothing is trusted by it).
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { filesNotIn } from "./files-not-in.ts";
import { readInCapture } from "./paths.ts";

/** A file of a folder and the SHA-256 of its bytes (hex); path relative to the folder, `/`-separated. */
export interface FileDigest {
  path: string;
  sha256: string;
}

/** The largest source file digested (bytes): larger ones count as differing. */
const SOURCE_MAX = 64 << 20;

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** The SHA-256 of file `rel` of `dir` (read inside it, no link followed), undefined when it is no regular file or too large. */
export function digestOf(dir: string, rel: string): string | undefined {
  try {
    const b = readInCapture(dir, rel, SOURCE_MAX);
    return b ? sha256(b) : undefined;
  } catch {
    return undefined;
  }
}

/** Every file under `dir`/`under` (default src/), sorted, relative to `dir`, with its digest: manifest.sources. Links and files that do not read are left out. */
export function sourceDigests(dir: string, under = "src"): FileDigest[] {
  const out: FileDigest[] = [];
  for (const f of filesNotIn(join(dir, under), new Set())) {
    const path = `${under}/${f}`;
    const d = digestOf(dir, path);
    if (d) out.push({ path, sha256: d });
  }
  return out;
}

/** Which files of a folder differ from a record: edited (other bytes, or no longer a regular file), added (not in the record), gone. Paths relative to the folder. */
export interface DifferingFiles {
  edited: string[];
  added: string[];
  gone: string[];
}

/**
 * The files of `dir` that differ from `recorded` (digests as sourceDigests gives them), looking at
 * the files under `under` (default src/: every file there not recorded is added; "" for the whole
 * folder) and the recorded ones; `ignore(path)`: files left out of all three lists (kerncap's own,
 * e.g. the CUDA slice it regenerates).
 */
export function differingFiles(dir: string, recorded: readonly FileDigest[], o: { under?: string; ignore?: (path: string) => boolean } = {}): DifferingFiles {
  const under = o.under ?? "src";
  const ignore = o.ignore ?? (() => false);
  const rec = new Map(recorded.map((r) => [r.path, r.sha256]));
  const out: DifferingFiles = { edited: [], added: [], gone: [] };
  // what the folder holds, by a walk that follows no link: a recorded path is looked up here, never stat'ed by its name
  // (a received manifest's sources[] named ../../etc/shadow, and inspect said whether it existed: adversary 77)
  const present = filesNotIn(under ? join(dir, under) : dir, new Set()).map((f) => (under ? `${under}/${f}` : f));
  const held = new Set(present);
  const there = (path: string) => path.split("/").some((_, i, parts) => held.has(parts.slice(0, i + 1).join("/")));
  for (const [path, want] of rec) {
    if (ignore(path)) continue;
    const have = digestOf(dir, path);
    if (have === undefined) {
      // a file that is there but does not read as a regular file of its own (a link now, or under one) counts as edited
      if (there(path)) out.edited.push(path);
      else out.gone.push(path);
    } else if (have !== want) out.edited.push(path);
  }
  for (const path of present) if (!rec.has(path) && !ignore(path)) out.added.push(path);
  return out;
}
