/**
 * A candidate's files read as kerncap reads what another user may own: the candidate itself no
 * link, each file opened with no link followed and checked to be the file the walk saw, read once;
 * and read again when its private copy is made, held to the digest it was given with (what is
 * built is what was identified: src/eval/candidates.ts parseCandidate, materialise).
 */
import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, type Stats } from "node:fs";
import { basename, join, relative, sep } from "node:path";
import { KerncapError, systemError, whileReading } from "../errors.ts";
import { escapedForMessage, unportableName } from "../format/archive-common.ts";
import { openFileWalk } from "../format/paths.ts";
import type { Candidate, CandidateKind } from "./candidates.ts";

/** The largest candidate file or tree read (bytes): sources, not data. */
export const CANDIDATE_MAX_BYTES = 64 << 20;

/** The regular files of a folder (relative paths, sorted); links and other kinds refused by name. @throws KerncapError E_CANDIDATE (the candidate's own fault: its record's error) */
export function treeFiles(root: string): string[] {
  return treeEntries(root).map((e) => e.rel);
}

/** treeFiles with each file's lstat (its device and inode: readCandidateFile checks the file it opens is that one). @throws KerncapError E_CANDIDATE */
export function treeEntries(root: string): { rel: string; st: Stats }[] {
  const out: { rel: string; st: Stats }[] = [];
  let bytes = 0;
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = lstatSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        bytes += st.size;
        out.push({ rel: relative(root, p), st });
      } else
        throw new KerncapError("E_CANDIDATE", `candidate ${root}: ${relative(root, p)} is ${st.isSymbolicLink() ? "a symbolic link" : "not a regular file"}`, {
          hint: "A candidate tree holds regular files and folders only (it replaces src/ in a private copy): copy the file in instead of linking it.",
        });
    }
  };
  walk(root);
  if (bytes > CANDIDATE_MAX_BYTES)
    throw new KerncapError("E_CANDIDATE", `candidate ${root} holds ${bytes} bytes of files; a source tree is expected (at most 64 MiB)`, {
      hint: "Give the kernel's source folder (a copy of src/ with the edit), not a build or data folder.",
    });
  return out;
}

/**
 * The bytes of a candidate's file, read once with no link followed: opened O_NOFOLLOW|O_NONBLOCK
 * and checked after the open to be a regular file, and the one `seen` (the walk's lstat: same
 * device and inode), so that a file swapped for a link, or a folder above it swapped for one,
 * between the walk and the read is refused, not read (another user may own the candidate's folder).
 * @throws KerncapError E_CANDIDATE naming the candidate and the file
 */
export function readCandidateFile(root: string, rel: string, seen: Stats): Buffer {
  const path = rel ? join(root, rel) : root;
  const refuse = (why: string) =>
    new KerncapError("E_CANDIDATE", `candidate ${root}${rel ? `: ${rel}` : ""} ${why}`, {
      hint: "A candidate is read with no link followed; give it as regular files in a folder no one else changes while kerncap eval reads it.",
    });
  let fd: number | undefined;
  try {
    // a file of a tree through its folders opened one by one, no link followed (src/format/paths.ts openFileWalk): a
    // folder swapped for a link after the walk listed it is refused, never read through (adversary 68's lead)
    fd = rel ? openFileWalk(root, rel) : openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ELOOP") throw refuse("is a symbolic link");
    if (e instanceof KerncapError && e.code === "E_UNSAFE_PATH")
      throw refuse("changed while kerncap read it (it, or a folder on its way, is a symbolic link now)");
    throw systemError(whileReading(e, path)) ?? e;
  }
  if (fd === undefined) throw refuse("is gone (removed while kerncap read the candidate)");
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw refuse("is not a regular file");
    if (st.dev !== seen.dev || st.ino !== seen.ino) throw refuse("changed while kerncap read it (another file is at its name now)");
    // a hard link names a file of someone's elsewhere (a file of yours another user linked into their folder), as a capture's sources may not
    if (st.nlink > 1) throw refuse(`has ${st.nlink} names (a hard link): a candidate's files are its own, with one name`);
    if (st.size > CANDIDATE_MAX_BYTES) throw refuse(`has ${st.size} bytes; at most 64 MiB`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * A tree (or overlay) candidate's files and their bytes, each read once (readCandidateFile); every
 * name portable (unportableName: no hidden name, no tool's file), as patches', overlays' and
 * edit_file's are: pack and export leave such files out, so a candidate built from one would be
 * judged on code no archive or export of it holds (adversary 54: `.fast.cuh`, `.git/`).
 * @throws KerncapError E_PACK_NAME (a name that is not portable), E_CANDIDATE (a file readCandidateFile refuses)
 */
export function readTree(root: string): { files: string[]; bytes: Buffer[] } {
  const entries = treeEntries(root);
  for (const { rel } of entries) {
    const why = unportableName(rel.split(sep).join("/"));
    if (why)
      // E_PACK_NAME, as kerncap mcp's evaluate says of the same name (a new user's finding: E_CANDIDATE here, E_PACK_NAME there)
      throw new KerncapError("E_PACK_NAME", `candidate ${root}: ${escapedForMessage(rel)} ${why}`, {
        hint: "A tree candidate holds the sources of src/ under portable names (letters, digits and ._+-, none hidden): copy the sources alone into a folder of their own, without editor backups, .git or tools' files.",
      });
  }
  return { files: entries.map((e) => e.rel), bytes: entries.map((e) => readCandidateFile(root, e.rel, e.st)) };
}

/** A file or patch candidate's bytes, the candidate itself no link (lstat, then readCandidateFile). @throws KerncapError E_CANDIDATE */
export function readOneFile(path: string): Buffer {
  const st = lstatSync(path);
  if (st.isSymbolicLink())
    throw new KerncapError("E_CANDIDATE", `candidate ${path} is a symbolic link`, {
      hint: "A candidate is read with no link followed: give the file it points to, or a copy of it.",
    });
  return readCandidateFile(path, "", st);
}

/**
 * The bytes of a candidate as it was given (tree, overlay, file, patch), read again with no link followed
 * and checked against its digest: what is built is what was identified.
 * @throws KerncapError E_CANDIDATE when the candidate changed since it was given, or readCandidateFile's
 */
export function readGiven(c: Candidate): { files: string[]; bytes: Buffer[] } {
  const tree = c.kind === "tree" || c.kind === "overlay";
  const read = tree ? readTree(c.path!) : { files: [""], bytes: [readOneFile(c.path!)] };
  const digest = tree
    ? digestOf(
        c.kind,
        read.files.flatMap((f, i) => [f, read.bytes[i]!]),
      )
    : digestOf(c.kind, [c.kind === "file" ? basename(c.path!) : "", read.bytes[0]!]);
  if (c.digest !== undefined && digest !== c.digest)
    throw new KerncapError("E_CANDIDATE", `candidate ${c.kind === "overlay" ? c.label : c.path} changed after kerncap eval read it`, {
      hint: "Leave the candidates as they are while kerncap eval runs (copy them to a folder of your own first); run the eval again.",
    });
  return read;
}

export function digestOf(kind: CandidateKind, parts: (string | Uint8Array)[]): string {
  const h = createHash("sha256").update(kind);
  for (const p of parts)
    h.update(String(typeof p === "string" ? p.length : p.byteLength))
      .update(":")
      .update(p);
  return h.digest("hex");
}
